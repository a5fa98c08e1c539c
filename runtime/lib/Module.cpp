//===- Module.cpp - load and launch coda kernels --------------------------===//

#include "coda/Runtime/Runtime.h"

#include "CudaDriver.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace coda::runtime;
namespace abi = coda::abi;
using namespace coda::runtime::cuda;

namespace {
/// The driver's value of each of the manifest's encoding values, in the
/// order coda/ABI/KernelAbi.h declares them.
constexpr int kSwizzles[] = {
    CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_SWIZZLE_32B,
    CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_SWIZZLE_128B};
constexpr int kL2Promotions[] = {
    CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
    CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B};
constexpr int kOobFills[] = {CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA};
constexpr int kInterleaves[] = {CU_TENSOR_MAP_INTERLEAVE_NONE,
                                CU_TENSOR_MAP_INTERLEAVE_16B,
                                CU_TENSOR_MAP_INTERLEAVE_32B};
template <typename E, size_t N>
int driverValue(E value, const int (&values)[N]) {
  static_assert(N == std::size(abi::Vocabulary<E>::names),
                "one driver value per manifest value");
  return values[static_cast<size_t>(value)];
}

int tensorMapType(DType dtype) {
  switch (dtype) {
  case DType::bf16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  case DType::f16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  case DType::f32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  // TMA moves 8-bit floats as bytes (the driver has no FP8 data type).
  case DType::f8e4m3fn:
  case DType::f8e5m2: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  default: throw Error(std::string("no TMA data type for ") + dtypeName(dtype));
  }
}

/// The TMA descriptor of `t` for parameter `p`, encoded on the host: the
/// kernel takes its 128 bytes as a parameter.
/// The size an index parameter passes (the manifest names no other:
/// Manifest.cpp).
int64_t sizeOf(const ParamSpec &p, const GemmSizes &sizes) {
  switch (abi::parse<abi::Size>(p.name).value_or(abi::Size::k)) {
  case abi::Size::m: return sizes.m;
  case abi::Size::n: return sizes.n;
  case abi::Size::k: return sizes.k;
  case abi::Size::b: return sizes.b;
  }
  return sizes.k;
}

CUtensorMap descriptor(const ParamSpec &p, const TensorRef &t) {
  CUtensorMap map{};
  // A store descriptor of an output whose rows are not 16-byte aligned
  // cannot be encoded; the kernel never uses it then (its interior tiles
  // need aligned outputs) and gets zeros.
  if (p.store && !tmaAddressable(t))
    return map;
  // Dimensions innermost first; strides in bytes for dimensions 1..r-1
  // (a matrix, or a batch of them: validated to match the box's rank).
  size_t rank = t.sizes.size();
  if (rank < 2 || rank > 3 || p.box.size() != rank)
    throw Error("the " + p.operand + " TMA descriptor takes a rank-" +
                std::to_string(p.box.size()) + " box, got a rank-" +
                std::to_string(rank) + " tensor");
  uint64_t dims[3], strides[2];
  uint32_t box[3], elementStrides[3] = {1, 1, 1};
  for (size_t d = 0; d < rank; ++d) {
    dims[d] = uint64_t(t.sizes[rank - 1 - d]);
    box[d] = uint32_t(p.box[d]);
    if (d > 0)
      strides[d - 1] = uint64_t(t.strides[rank - 1 - d] * dtypeBytes(t.dtype));
  }
  check(driver().cuTensorMapEncodeTiled(
            &map, tensorMapType(t.dtype), uint32_t(rank),
            reinterpret_cast<void *>(t.data), dims, strides, box,
            elementStrides, driverValue(p.interleave, kInterleaves),
            driverValue(p.swizzle, kSwizzles),
            driverValue(p.l2Promotion, kL2Promotions),
            driverValue(p.oobFill, kOobFills)),
        [&] { return "encoding the " + p.operand + " TMA descriptor"; });
  return map;
}

/// Kernel parameter bytes, and the pointers cuLaunchKernelEx wants, in
/// storage of fixed size: a launch allocates nothing. Each value is placed
/// at its alignment (a TMA descriptor's is 64 bytes); cuLaunchKernelEx copies
/// each parameter from its pointer into the kernel's parameter space.
class ParamBuffer {
public:
  /// Hopper takes up to 32764 bytes of kernel parameters; coda's kernels
  /// take a few hundred.
  static constexpr size_t kBytes = 4096, kCount = 256;

  template <typename T> void add(const T &value) {
    size_t offset = (used + alignof(T) - 1) / alignof(T) * alignof(T);
    if (offset + sizeof(T) > kBytes || count == kCount)
      throw Error("kernel parameters exceed " + std::to_string(kBytes) +
                  " bytes or " + std::to_string(kCount) + " values");
    std::memcpy(bytes + offset, &value, sizeof(T));
    pointers[count++] = bytes + offset;
    used = offset + sizeof(T);
  }
  void **data() { return pointers; }

private:
  alignas(64) uint8_t bytes[kBytes];
  void *pointers[kCount];
  size_t used = 0, count = 0;
};

/// Makes `context` current on the calling thread for a scope. A thread that
/// has made no CUDA call yet has none (PyTorch's autograd thread, which runs
/// custom ops' backward, may not): the driver would refuse the launch. A
/// different current context is restored afterwards; none stays none only
/// if there was one.
class CurrentContext {
public:
  explicit CurrentContext(CUcontext context) {
    const Driver &d = driver();
    check(d.cuCtxGetCurrent(&previous), "cuCtxGetCurrent");
    if (previous == context)
      return;
    check(d.cuCtxSetCurrent(context), "cuCtxSetCurrent");
    restore = previous != nullptr;
  }
  ~CurrentContext() {
    if (restore)
      driver().cuCtxSetCurrent(previous);
  }
  CurrentContext(const CurrentContext &) = delete;
  CurrentContext &operator=(const CurrentContext &) = delete;

private:
  CUcontext previous = nullptr;
  bool restore = false;
};
} // namespace

struct Module::Impl {
  /// The context the module was loaded in; launches run in it.
  CUcontext context = nullptr;
  std::map<std::string, CUmodule> modules;
  std::map<std::string, CUfunction> functions;
  /// Per kernel: the CTAs a persistent launch runs at once (one per SM, or
  /// for cluster kernels the clusters that can be resident together times
  /// their size: not every SM can host a CTA of a cluster).
  std::map<std::string, int64_t> residentCtas;
  /// Of the module's device: persistent kernels launch one CTA per SM.
  int64_t multiprocessors = 1;
  /// Of the module's device: every launch is checked against them.
  LaunchLimits limits;
  /// Kernels as launchKernel reads them (sources renumbered to the kernel's
  /// own parameter order), made at load so launches only read the map.
  std::map<std::string, KernelSpec> ownParameters;
  /// The host functions programs call, by name.
  std::map<std::string, Callback> callbacks;
  /// The workspace launchFunction uses when given none (allocated at the
  /// first such call, for the largest of the module's functions).
  CUdeviceptr workspace = 0;
  /// Whether kernels marked dependent_launch are launched with programmatic
  /// stream serialization (setDependentLaunch; on unless turned off).
  bool dependentLaunch = true;
};

std::unique_ptr<Module> Module::load(const std::string &directory,
                                     int device) {
  std::unique_ptr<Module> module(new Module());
  module->manifest_ = Manifest::load(directory + "/manifest.json");
  module->impl_ = std::make_unique<Impl>();
  const Driver &d = driver();
  check(d.cuInit(0), "cuInit");
  CUcontext context = nullptr;
  check(d.cuCtxGetCurrent(&context), "cuCtxGetCurrent");
  if (!context) {
    CUdevice dev;
    check(d.cuDeviceGet(&dev, device), "cuDeviceGet");
    check(d.cuDevicePrimaryCtxRetain(&context, dev), "cuDevicePrimaryCtxRetain");
    check(d.cuCtxSetCurrent(context), "cuCtxSetCurrent");
  }
  module->impl_->context = context;
  CUdevice current;
  check(d.cuCtxGetDevice(&current), "cuCtxGetDevice");
  int multiprocessors = 0;
  check(d.cuDeviceGetAttribute(&multiprocessors,
                               CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                               current),
        "cuDeviceGetAttribute");
  module->impl_->multiprocessors = multiprocessors;
  auto attribute = [&](int which) {
    int value = 0;
    check(d.cuDeviceGetAttribute(&value, which, current),
          "cuDeviceGetAttribute");
    return int64_t(value);
  };
  LaunchLimits &limits = module->impl_->limits;
  limits.block[0] = attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
  limits.block[1] = attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
  limits.block[2] = attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
  limits.threadsPerBlock = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  limits.grid[0] = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  limits.grid[1] = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  limits.grid[2] = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  for (const KernelSpec &kernel : module->manifest_.kernels) {
    module->impl_->ownParameters.emplace(kernel.name,
                                         withOwnParameters(kernel));
    if (module->impl_->modules.count(kernel.module))
      continue;
    std::string path = directory + "/" + kernel.module + ".cubin";
    std::ifstream in(path, std::ios::binary);
    if (!in)
      throw Error("cannot read " + path);
    std::stringstream bytes;
    bytes << in.rdbuf();
    std::string image = bytes.str();
    CUmodule handle = nullptr;
    check(d.cuModuleLoadData(&handle, image.data()), "loading " + path);
    module->impl_->modules[kernel.module] = handle;
  }
  return module;
}

Module::~Module() {
  if (!impl_)
    return;
  try {
    const Driver &d = driver();
    CurrentContext scope(impl_->context);
    for (auto &[name, handle] : impl_->modules)
      d.cuModuleUnload(handle);
    if (impl_->workspace)
      d.cuMemFree(impl_->workspace);
  } catch (const Error &) {
    // The driver is gone (process teardown): nothing left to free.
  }
}

void Module::launch(const std::string &name, const std::vector<Argument> &args,
                    uint64_t stream) {
  const KernelSpec &kernel = manifest_.kernel(name);
  checkArgumentCount(kernel, args);
  // A GEMM dispatched by K or by waves: its variants take the same
  // arguments, checked once here (Manifest::parse ensures it).
  GemmSizes sizes = validate(kernel, args);
  launchSpec(manifest_.variantFor(kernel, sizes, impl_->multiprocessors), sizes,
             args, stream);
}

void Module::launchKernel(const std::string &name,
                          const std::vector<Argument> &args, uint64_t stream) {
  auto it = impl_->ownParameters.find(name);
  if (it == impl_->ownParameters.end())
    (void)manifest_.kernel(name); // not in the manifest: throws its error
  // The kernel's own parameters are all its arguments: more is a mistake
  // (fewer is named by validate, parameter by parameter).
  int64_t takes = 0;
  for (const ParamSpec &p : it->second.params)
    takes = std::max(takes, p.source + 1);
  if (int64_t(args.size()) > takes)
    throw Error("cannot launch " + name + ": it takes " +
                std::to_string(takes) + " arguments, got " +
                std::to_string(args.size()));
  GemmSizes sizes = validate(it->second, args);
  const KernelSpec &variant =
      manifest_.variantFor(it->second, sizes, impl_->multiprocessors);
  launchSpec(impl_->ownParameters.at(variant.name), sizes, args, stream);
}

void Module::launchSpec(const KernelSpec &kernel, const GemmSizes &sizes,
                        const std::vector<Argument> &args, uint64_t stream) {
  const std::string &name = kernel.name;
  bool dynamicShared = kernel.sharedMemoryBytes > 48 * 1024;
  const Driver &d = driver();
  CurrentContext scope(impl_->context);
  CUfunction function = impl_->functions[name];
  if (!function) {
    check(d.cuModuleGetFunction(&function, impl_->modules.at(kernel.module),
                                kernel.symbol.c_str()),
          "finding kernel " + name);
    if (dynamicShared)
      check(d.cuFuncSetAttribute(
                function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                int(kernel.sharedMemoryBytes)),
            "allowing " + std::to_string(kernel.sharedMemoryBytes) +
                " bytes of shared memory for " + name);
    int64_t resident = impl_->multiprocessors;
    if (kernel.cluster[0] > 1) {
      CUlaunchConfig config{unsigned(kernel.cluster[0]), 1, 1,
                            unsigned(kernel.block[0]), unsigned(kernel.block[1]),
                            unsigned(kernel.block[2]),
                            unsigned(kernel.sharedMemoryBytes), nullptr,
                            nullptr, 0};
      int clusters = 0;
      check(d.cuOccupancyMaxActiveClusters(&clusters, function, &config),
            "counting the resident clusters of " + name);
      if (clusters < 1)
        throw Error("no cluster of " + std::to_string(kernel.cluster[0]) +
                    " CTAs of " + name + " fits on this device");
      resident = int64_t(clusters) * kernel.cluster[0];
    }
    impl_->residentCtas[name] = resident;
    impl_->functions[name] = function;
  }
  int64_t grid[3];
  gridFor(kernel, sizes, impl_->residentCtas.at(name), grid);
  checkLaunchGeometry(name, kernel.block, grid, impl_->limits);
  if (grid[0] == 0 || grid[1] == 0)
    return;

  ParamBuffer params;
  for (const ParamSpec &p : kernel.params) {
    switch (p.kind) {
    case ParamSpec::Kind::tensormap:
      params.add(descriptor(p, std::get<TensorRef>(args[p.source])));
      break;
    case ParamSpec::Kind::index:
      params.add<int64_t>(sizeOf(p, sizes));
      break;
    case ParamSpec::Kind::scalar: {
      double v = std::get<double>(args[p.source]);
      switch (p.dtype) {
      case DType::f32: params.add<float>(float(v)); break;
      case DType::f64: params.add<double>(v); break;
      case DType::i32: params.add<int32_t>(int32_t(v)); break;
      case DType::i64: params.add<int64_t>(int64_t(v)); break;
      default:
        throw Error("scalar " + p.name + " of type " + dtypeName(p.dtype) +
                    " cannot be passed");
      }
      break;
    }
    case ParamSpec::Kind::memref: {
      // MLIR's memref descriptor: allocated, aligned, offset, sizes, strides.
      const TensorRef &t = std::get<TensorRef>(args[p.source]);
      uint64_t base = t.data - uint64_t(t.offset * dtypeBytes(t.dtype));
      params.add<uint64_t>(base);
      params.add<uint64_t>(base);
      params.add<int64_t>(t.offset);
      for (int64_t size : t.sizes)
        params.add<int64_t>(size);
      for (int64_t stride : t.strides)
        params.add<int64_t>(stride);
      break;
    }
    }
  }
  // A kernel that waits for the grid before it (griddepcontrol.wait) may be
  // scheduled as that grid exits, where the module asks for it.
  CUlaunchAttribute dependent{};
  dependent.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  dependent.value.programmaticStreamSerializationAllowed = 1;
  bool isDependent = kernel.dependentLaunch && impl_->dependentLaunch;
  CUlaunchConfig config{unsigned(grid[0]),
                        unsigned(grid[1]),
                        unsigned(grid[2]),
                        unsigned(kernel.block[0]),
                        unsigned(kernel.block[1]),
                        unsigned(kernel.block[2]),
                        unsigned(kernel.sharedMemoryBytes),
                        reinterpret_cast<CUstream>(stream),
                        isDependent ? &dependent : nullptr,
                        isDependent ? 1u : 0u};
  check(d.cuLaunchKernelEx(&config, function, params.data(), nullptr),
        [&] { return "launching " + name; });
}

void Module::setDependentLaunch(bool enabled) {
  impl_->dependentLaunch = enabled;
}

bool Module::dependentLaunch() const { return impl_->dependentLaunch; }

void Module::setCallback(const std::string &name, Callback callback) {
  impl_->callbacks[name] = std::move(callback);
}

int64_t Module::workspaceBytes(const std::string &function) const {
  return manifest_.function(function).workspaceBytes;
}

void Module::launchFunction(const std::string &name,
                            const std::vector<Argument> &args, uint64_t stream,
                            const TensorRef *workspace) {
  const FunctionSpec &f = manifest_.function(name);
  validateFunctionLaunch(f, args, workspace, [&](const std::string &callee) {
    return impl_->callbacks.count(callee) > 0;
  });
  int device = 0;
  for (const Argument &arg : args)
    if (std::holds_alternative<TensorRef>(arg)) {
      device = std::get<TensorRef>(arg).device;
      break;
    }
  uint64_t base = 0;
  if (f.workspaceBytes > 0 && workspace) {
    base = workspace->data;
  } else if (f.workspaceBytes > 0) {
    if (!impl_->workspace) {
      int64_t largest = 0;
      for (const FunctionSpec &other : manifest_.functions)
        largest = std::max(largest, other.workspaceBytes);
      CurrentContext scope(impl_->context);
      check(driver().cuMemAlloc(&impl_->workspace, size_t(largest)), [&] {
        return "allocating the module's workspace of " +
               std::to_string(largest) + " bytes";
      });
    }
    base = impl_->workspace;
  }
  // Every launch is checked before the first step is enqueued: a refused
  // call runs nothing.
  std::vector<std::vector<Argument>> operands(f.steps.size());
  for (size_t i = 0; i < f.steps.size(); ++i)
    for (const StepOperand &operand : f.steps[i].args)
      operands[i].push_back(stepOperand(operand, f, args, base, device));
  std::vector<GemmSizes> sizes =
      validateSteps(f, operands,
                    [&](const std::string &kernel) -> const KernelSpec & {
                      return impl_->ownParameters.at(kernel);
                    });
  for (size_t i = 0; i < f.steps.size(); ++i) {
    const Step &step = f.steps[i];
    if (step.kind == Step::Kind::call) {
      impl_->callbacks.at(step.target)(operands[i], stream);
      continue;
    }
    const KernelSpec &own = impl_->ownParameters.at(step.target);
    const KernelSpec &variant =
        manifest_.variantFor(own, sizes[i], impl_->multiprocessors);
    launchSpec(impl_->ownParameters.at(variant.name), sizes[i], operands[i],
               stream);
  }
}
