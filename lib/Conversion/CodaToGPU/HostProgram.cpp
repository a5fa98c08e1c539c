//===- HostProgram.cpp - a host function as the steps the runtime runs ----===//
//
// The manifest's "functions" (docs/KernelABI.md): for each host function,
// after its leftover linalg has been outlined into kernels, its arguments,
// the temporaries it allocates (placed in one workspace by their lifetimes),
// and its steps in order: kernel launches (coda's GEMMs and finishes, and
// the `loop` kernels outlined from the rest) and calls of external
// functions, which the runtime hands to callbacks the caller registers.
// Every operand of a step is an argument, a view of one, a view of a
// temporary or a constant. A function the runtime cannot run so is recorded
// with the reason.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

#include "coda/ABI/KernelAbi.h"
#include "coda/Conversion/CodaToGPU/CodaToGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;
namespace json = llvm::json;
namespace abi = ::coda::abi;
namespace key = ::coda::abi::key;

namespace {

/// Workspace offsets are multiples of this (what cudaMalloc guarantees, and
/// more than TMA's 16 bytes).
constexpr int64_t kWorkspaceAlignment = 256;

std::string typeName(Type type) {
  // The kernels take `index` as a 64-bit integer (index-bitwidth 64).
  if (type.isIndex())
    return "i64";
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

json::Array shapeOf(MemRefType type) {
  json::Array shape;
  for (int64_t size : type.getShape())
    shape.push_back(ShapedType::isDynamic(size) ? int64_t(-1) : size);
  return shape;
}

int64_t byteSize(MemRefType type) {
  return type.getNumElements() *
         int64_t(llvm::divideCeil(type.getElementTypeBitWidth(), 8));
}

/// The manifest's name of an ABI value (coda/ABI/KernelAbi.h).
template <typename E> StringRef abiName(E value) {
  std::string_view text = abi::name(value);
  return StringRef(text.data(), text.size());
}

/// A temporary: its allocation, the steps that first and last use it, and
/// its place in the workspace.
struct Temporary {
  memref::AllocOp alloc;
  int64_t first = -1, last = -1, offset = 0;
};

class ProgramBuilder {
public:
  ProgramBuilder(func::FuncOp function, json::Array &loopKernels)
      : function(function), loopKernels(loopKernels) {}

  json::Object build() {
    json::Object program{{key::name, function.getSymName().str()}};
    if (failed(collect())) {
      program[key::unsupported] = reason;
      return program;
    }
    for (json::Value &kernel : kernels)
      loopKernels.push_back(std::move(kernel));
    json::Array arguments;
    for (auto [i, type] : llvm::enumerate(function.getArgumentTypes())) {
      json::Object argument;
      if (auto memref = dyn_cast<MemRefType>(type)) {
        argument[key::kind] = (abiName(abi::ParamKind::memref));
        argument[key::dtype] = typeName(memref.getElementType());
        argument[key::shape] = shapeOf(memref);
      } else {
        argument[key::kind] = (abiName(abi::ParamKind::scalar));
        argument[key::dtype] = typeName(type);
      }
      // The out-parameters --coda-prepare-host-program made of results.
      argument[key::output] = bool(function.getArgAttr(i, "bufferize.result"));
      arguments.push_back(std::move(argument));
    }
    program[key::arguments] = std::move(arguments);
    program[key::workspace_bytes] = place();
    json::Array temporaries;
    for (Temporary &t : used) {
      MemRefType type = t.alloc.getType();
      temporaries.push_back(
          json::Object{{key::dtype, typeName(type.getElementType())},
                       {key::shape, shapeOf(type)},
                       {key::bytes, byteSize(type)},
                       {key::offset, t.offset}});
    }
    program[key::temporaries] = std::move(temporaries);
    program[key::steps] = std::move(steps);
    return program;
  }

private:
  LogicalResult fail(const Twine &why) {
    if (reason.empty())
      reason = why.str();
    return failure();
  }

  /// Walks the function's body into steps.
  LogicalResult collect() {
    if (function.isExternal())
      return fail("it is a declaration");
    if (!function.getBody().hasOneBlock())
      return fail("its body has control flow");
    if (function.getNumResults())
      return fail("it returns buffers (of dynamic shape; the runtime runs "
                  "functions that write their results into arguments)");
    for (Operation &op : function.getBody().front())
      if (failed(visit(&op)))
        return failure();
    return success();
  }

  /// Ops that compute what the steps take (sizes, views, TMA descriptors)
  /// and need no step of their own.
  static bool isPlumbing(Operation *op) {
    return isa_and_nonnull<arith::ArithDialect, LLVM::LLVMDialect,
                           nvgpu::NVGPUDialect>(op->getDialect()) ||
           isa<ViewLikeOpInterface, memref::DimOp, memref::DeallocOp,
               UnrealizedConversionCastOp, func::ReturnOp, scf::YieldOp>(op);
  }

  LogicalResult visit(Operation *op) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      if (!alloc.getType().hasStaticShape())
        return fail("it allocates a temporary of dynamic shape");
      temporaries[alloc] = Temporary{alloc};
      return success();
    }
    if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op))
      return launchStep(launch);
    if (auto call = dyn_cast<func::CallOp>(op))
      return callStep(call);
    if (auto branch = dyn_cast<scf::IfOp>(op))
      return variantsStep(branch);
    if (isPlumbing(op))
      return success();
    return fail("its host code has '" + op->getName().getStringRef() +
                "', which the runtime does not run");
  }

  /// A GEMM dispatched by K or by waves: an scf.if whose branches launch
  /// variants of one GEMM becomes one step launching it by name (the
  /// runtime picks the variant).
  LogicalResult variantsStep(scf::IfOp branch) {
    gpu::LaunchFuncOp first;
    std::string gemm;
    WalkResult walk = branch->walk([&](Operation *op) {
      if (op == branch.getOperation() || isPlumbing(op) || isa<scf::IfOp>(op))
        return WalkResult::advance();
      auto launch = dyn_cast<gpu::LaunchFuncOp>(op);
      DictionaryAttr abi = launch ? kernelAbi(launch) : DictionaryAttr();
      auto variantOf = abi ? abi.getAs<StringAttr>(key::variant_of) : nullptr;
      if (!variantOf || (!gemm.empty() && gemm != variantOf.getValue()))
        return WalkResult::interrupt();
      gemm = variantOf.str();
      if (!first)
        first = launch;
      return WalkResult::advance();
    });
    if (walk.wasInterrupted() || !first)
      return fail("its host code branches other than between the variants "
                  "of one GEMM");
    return launchStep(first, gemm);
  }

  gpu::GPUFuncOp kernelOf(gpu::LaunchFuncOp launch) {
    return symbols.lookupNearestSymbolFrom<gpu::GPUFuncOp>(launch,
                                                           launch.getKernel());
  }

  DictionaryAttr kernelAbi(gpu::LaunchFuncOp launch) {
    gpu::GPUFuncOp kernel = kernelOf(launch);
    return kernel ? kernel->getAttrOfType<DictionaryAttr>(kKernelAbiAttrName)
                  : DictionaryAttr();
  }

  /// A launch of one of coda's kernels (operands: the kernel's own tensor
  /// and scalar parameters in order, as the runtime's launch_kernel takes
  /// them) or of a kernel outlined from leftover linalg.
  LogicalResult launchStep(gpu::LaunchFuncOp launch, StringRef name = {}) {
    gpu::GPUFuncOp kernel = kernelOf(launch);
    if (!kernel)
      return fail("it launches '" + launch.getKernelName().getValue() +
                  "', which is not a GPU function of the module");
    json::Array args;
    DictionaryAttr abi =
        kernel->getAttrOfType<DictionaryAttr>(kKernelAbiAttrName);
    if (!abi)
      return loopStep(launch, kernel);
    auto params = abi.getAs<ArrayAttr>(key::params);
    if (params.size() != launch.getNumKernelOperands())
      return fail("kernel " + kernel.getName() + " is launched with " +
                  Twine(launch.getNumKernelOperands()) + " operands for " +
                  Twine(params.size()) + " parameters");
    for (auto [param, value] : llvm::zip(params.getAsRange<DictionaryAttr>(),
                                         launch.getKernelOperands())) {
      StringRef kind = param.getAs<StringAttr>(key::kind).getValue();
      if (kind == abiName(abi::ParamKind::index))
        continue;
      if (kind == abiName(abi::ParamKind::tensormap)) {
        if (param.getAs<StringAttr>(key::access).getValue() ==
            abiName(abi::Access::store))
          continue; // the runtime encodes it from its output
        value = descriptorSource(value);
        if (!value)
          return fail("the TMA descriptor of " + kernel.getName() +
                      " is not one emitGemmLaunch made");
      }
      FailureOr<json::Value> arg = operand(value);
      if (failed(arg))
        return failure();
      args.push_back(std::move(*arg));
    }
    addStep(json::Object{
        {key::launch, name.empty() ? kernel.getName().str() : name.str()},
        {key::args, std::move(args)}});
    return success();
  }

  /// A kernel outlined from leftover linalg: described here (it has no
  /// coda.kernel), launched with a constant grid and block.
  LogicalResult loopStep(gpu::LaunchFuncOp launch, gpu::GPUFuncOp kernel) {
    std::string name = launch.getKernelModuleName().str();
    auto constant = [&](Value v, int64_t &out) {
      std::optional<int64_t> c = getConstantIntValue(v);
      if (c)
        out = *c;
      return c.has_value();
    };
    int64_t grid[3], block[3];
    gpu::KernelDim3 g = launch.getGridSizeOperandValues(),
                    b = launch.getBlockSizeOperandValues();
    if (!constant(g.x, grid[0]) || !constant(g.y, grid[1]) ||
        !constant(g.z, grid[2]) || !constant(b.x, block[0]) ||
        !constant(b.y, block[1]) || !constant(b.z, block[2]))
      return fail("kernel " + name + " has a grid or block of dynamic size");
    if (launch.getDynamicSharedMemorySize() || launch.hasClusterSize())
      return fail("kernel " + name + " asks for shared memory or a cluster");
    json::Array params, args;
    for (auto [i, value] : llvm::enumerate(launch.getKernelOperands())) {
      json::Object param{{key::name, "arg" + std::to_string(i)}};
      if (auto memref = dyn_cast<MemRefType>(value.getType())) {
        param[key::kind] = (abiName(abi::ParamKind::memref));
        param[key::dtype] = typeName(memref.getElementType());
        param[key::rank] = memref.getRank();
        param[key::shape] = shapeOf(memref);
      } else {
        param[key::kind] = (abiName(abi::ParamKind::scalar));
        param[key::dtype] = typeName(value.getType());
      }
      params.push_back(std::move(param));
      FailureOr<json::Value> arg = operand(value);
      if (failed(arg))
        return failure();
      args.push_back(std::move(*arg));
    }
    json::Array gridJson, blockJson;
    for (int i = 0; i < 3; ++i) {
      gridJson.push_back(std::to_string(grid[i]));
      blockJson.push_back(block[i]);
    }
    json::Object entry{{key::kind, abiName(abi::KernelKind::loop)},
                       {key::name, name},
                       {key::symbol, kernel.getName().str()},
                       {key::module, name},
                       {key::function, function.getSymName().str()},
                       {key::grid, std::move(gridJson)},
                       {key::block, std::move(blockJson)},
                       {key::shared_memory_bytes, 0},
                       {key::params, std::move(params)}};
    if (kernel->hasAttr(kDependentLaunchAttrName))
      entry[key::dependent_launch] = true;
    kernels.push_back(std::move(entry));
    addStep(json::Object{{key::launch, name}, {key::args, std::move(args)}});
    return success();
  }

  /// A call of an external function: a host callback the caller registers,
  /// given the buffers (its results are out-parameters, allocated here).
  LogicalResult callStep(func::CallOp call) {
    auto callee = symbols.lookupNearestSymbolFrom<func::FuncOp>(
        call, call.getCalleeAttr());
    if (!callee || !callee.isExternal())
      return fail("it calls @" + call.getCallee() +
                  ", which has a body (the runtime calls only external "
                  "functions, as host callbacks)");
    if (call.getNumResults())
      return fail("its call of @" + call.getCallee() + " returns values");
    json::Array args;
    for (Value value : call.getArgOperands()) {
      FailureOr<json::Value> arg = operand(value);
      if (failed(arg))
        return failure();
      args.push_back(std::move(*arg));
    }
    addStep(json::Object{{key::call, call.getCallee().str()},
                         {key::args, std::move(args)}});
    return success();
  }

  void addStep(json::Object step) {
    steps.push_back(std::move(step));
    int64_t index = int64_t(steps.size()) - 1;
    for (memref::AllocOp alloc : stepTemporaries) {
      Temporary &t = temporaries[alloc];
      if (t.first < 0)
        t.first = index;
      t.last = index;
    }
    stepTemporaries.clear();
  }

  /// A step's operand: {"argument": i} (whole), a view of an argument or a
  /// temporary (element offset, sizes, strides), or {"value": constant}.
  FailureOr<json::Value> operand(Value value) {
    if (!isa<MemRefType>(value.getType())) {
      if (auto arg = dyn_cast<BlockArgument>(value);
          arg && arg.getOwner() == &function.getBody().front())
        return json::Value(json::Object{{key::argument, arg.getArgNumber()}});
      if (std::optional<int64_t> c = getConstantIntValue(value))
        return json::Value(json::Object{{key::value, *c}});
      FloatAttr f;
      if (matchPattern(value, m_Constant(&f)))
        return json::Value(
            json::Object{{key::value, f.getValue().convertToDouble()}});
      return fail("a kernel takes a scalar computed on the host");
    }
    // The buffer a view chain starts at; views keep the memory's base, so
    // the view's layout is relative to it.
    Value root = value;
    bool onlyCasts = true;
    while (auto view = root.getDefiningOp<ViewLikeOpInterface>()) {
      onlyCasts &= isa<memref::CastOp>(view.getOperation());
      root = view.getViewSource();
    }
    json::Object ref;
    if (auto arg = dyn_cast<BlockArgument>(root);
        arg && arg.getOwner() == &function.getBody().front()) {
      ref[key::argument] = arg.getArgNumber();
      if (onlyCasts)
        return json::Value(std::move(ref));
    } else if (auto alloc = root.getDefiningOp<memref::AllocOp>();
               alloc && temporaries.count(alloc)) {
      stepTemporaries.insert(alloc);
      auto *it = llvm::find(order, alloc);
      if (it == order.end()) {
        order.push_back(alloc);
        it = order.end() - 1;
      }
      ref[key::temporary] = int64_t(it - order.begin());
    } else {
      return fail("a step takes a buffer made by '" +
                  (root.getDefiningOp()
                       ? root.getDefiningOp()->getName().getStringRef()
                       : StringRef("a block argument")) +
                  "'");
    }
    auto type = cast<MemRefType>(value.getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if (!type.hasStaticShape() ||
        failed(type.getStridesAndOffset(strides, offset)) ||
        ShapedType::isDynamic(offset) ||
        llvm::any_of(strides, ShapedType::isDynamic))
      return fail("a step takes a view of dynamic shape or layout");
    ref[key::offset] = offset;
    ref[key::sizes] = json::Array(type.getShape());
    ref[key::strides] = json::Array(strides);
    return json::Value(std::move(ref));
  }

  /// Places the used temporaries in one workspace: largest first, each at
  /// the lowest aligned offset where no temporary alive at the same time
  /// lies. Returns the workspace's size.
  int64_t place() {
    for (memref::AllocOp alloc : order)
      used.push_back(temporaries[alloc]);
    SmallVector<Temporary *> bySize;
    for (Temporary &t : used)
      bySize.push_back(&t);
    // Largest first; equal sizes in the order the steps name them.
    llvm::sort(bySize, [](Temporary *a, Temporary *b) {
      int64_t sa = byteSize(a->alloc.getType()),
              sb = byteSize(b->alloc.getType());
      return sa != sb ? sa > sb : a->first < b->first;
    });
    int64_t total = 0;
    SmallVector<Temporary *> placed;
    for (Temporary *t : bySize) {
      int64_t bytes =
          llvm::alignTo(byteSize(t->alloc.getType()), kWorkspaceAlignment);
      SmallVector<Temporary *> live;
      for (Temporary *p : placed)
        if (p->first <= t->last && t->first <= p->last)
          live.push_back(p);
      llvm::sort(live, [](Temporary *a, Temporary *b) {
        return a->offset < b->offset;
      });
      int64_t offset = 0;
      for (Temporary *p : live) {
        if (offset + bytes <= p->offset)
          break;
        offset = std::max(offset, p->offset + int64_t(llvm::alignTo(
                                                  byteSize(p->alloc.getType()),
                                                  kWorkspaceAlignment)));
      }
      t->offset = offset;
      total = std::max(total, offset + bytes);
      placed.push_back(t);
    }
    return total;
  }

  func::FuncOp function;
  /// Where the loop kernels go once the whole function is a program.
  json::Array &loopKernels;
  /// The loop kernels the steps launch.
  json::Array kernels;
  SymbolTableCollection symbols;
  json::Array steps;
  std::string reason;
  llvm::DenseMap<memref::AllocOp, Temporary> temporaries;
  /// Temporaries in the order steps first name them (their manifest index).
  SmallVector<memref::AllocOp> order;
  SmallVector<Temporary> used;
  llvm::SmallSetVector<memref::AllocOp, 4> stepTemporaries;
};

} // namespace

json::Object
mlir::coda::gpu_lowering::buildHostProgram(func::FuncOp function,
                                           json::Array &loopKernels) {
  return ProgramBuilder(function, loopKernels).build();
}
