//===- Validate.cpp - check launch arguments against a kernel -------------===//

#include "coda/Runtime/Validate.h"

#include "coda/ABI/KernelAbi.h"

#include <algorithm>
#include <map>
#include <sstream>

using namespace coda::runtime;
namespace abi = coda::abi;

namespace {

/// Why TMA cannot address `t` as a matrix or a batch of matrices (none: it
/// can): 2-D or 3-D, contiguous rows, base, row stride and batch stride
/// 16-byte aligned, each dimension below 2^32.
std::vector<std::string> tmaProblems(const TensorRef &t) {
  std::vector<std::string> problems;
  size_t rank = t.sizes.size();
  if ((rank != 2 && rank != 3) || t.strides.size() != rank) {
    problems.push_back("must be a matrix (or a batch of them), got rank " +
                       std::to_string(rank));
    return problems;
  }
  int64_t bytes = dtypeBytes(t.dtype);
  if (t.strides[rank - 1] != 1)
    problems.push_back("must be contiguous along its last dimension for TMA "
                       "(stride 1), got stride " +
                       std::to_string(t.strides[rank - 1]));
  if ((t.strides[rank - 2] * bytes) % 16 != 0)
    problems.push_back("row stride is " +
                       std::to_string(t.strides[rank - 2] * bytes) +
                       " bytes; TMA needs a multiple of 16");
  if (rank == 3 && (t.strides[0] * bytes) % 16 != 0)
    problems.push_back("batch stride is " +
                       std::to_string(t.strides[0] * bytes) +
                       " bytes; TMA needs a multiple of 16");
  if (t.data % 16 != 0)
    problems.push_back("address is not 16-byte aligned, as TMA needs");
  for (int64_t size : t.sizes)
    if (size >= (int64_t(1) << 32))
      problems.push_back("is too large for a TMA descriptor (a dimension of "
                         "2^32 or more)");
  return problems;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") +
         (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return s + "]";
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// CUDA's largest grid dimension y.
constexpr int64_t kMaxGridY = 65535;

class Checker {
public:
  Checker(const KernelSpec &kernel, const std::vector<Argument> &args)
      : kernel(kernel), args(args) {}

  GemmSizes run() {
    if (kernel.kind == KernelSpec::Kind::reducePartials)
      checkFinish();
    else if (kernel.kind == KernelSpec::Kind::loop)
      checkLoop();
    else
      checkGemm();
    if (!problems.empty()) {
      std::string message = "cannot launch " + kernel.name + ":";
      for (const std::string &p : problems)
        message += "\n  - " + p;
      throw Error(message);
    }
    return sizes;
  }

private:
  /// partials (M x T or T x N) -> output (M or N); sizes.m is the output size.
  void checkFinish() {
    const TensorRef *in = nullptr, *out = nullptr;
    for (const ParamSpec &p : kernel.params) {
      const TensorRef *t = tensor(p);
      if (t)
        checkTensor(p, *t);
      (abi::parse<abi::ParamRole>(p.role) == abi::ParamRole::partials ? in
                                                                      : out) =
          t;
    }
    // Batched partials ([B x] M x T or [B x] T x N) reduce to [B x] M (N).
    if (!in || !out || in->sizes.size() < 2 || in->sizes.size() > 3 ||
        out->sizes.size() != in->sizes.size() - 1)
      return;
    size_t first = in->sizes.size() - 2;
    int64_t reduced =
        kernel.axis == abi::name(abi::Axis::row) ? in->sizes[first]
                                                  : in->sizes[first + 1];
    if (out->sizes.back() != reduced ||
        (first && out->sizes[0] != in->sizes[0]))
      problem("the output has shape " + shapeString(out->sizes) + " but the " +
              kernel.axis + " partials " + shapeString(in->sizes) +
              " reduce to " +
              (first ? shapeString({in->sizes[0], reduced})
                     : shapeString({reduced})));
    if (in->device != out->device)
      problem("partials and output are on different GPUs");
    sizes.m = reduced * (first ? in->sizes[0] : 1);
  }

  /// A loop kernel: each parameter's kind, dtype, rank and static sizes
  /// (its grid is fixed, compiled for those sizes).
  void checkLoop() {
    // Its parameters are the loop nest's, not the host function's
    // arguments (the manifest gives them no source): it runs as a step of
    // its function's program, or with its own parameters.
    if (std::any_of(kernel.params.begin(), kernel.params.end(),
                    [](const ParamSpec &p) { return p.source < 0; })) {
      problem(kernel.name + " is a loop kernel of function " +
              kernel.function +
              ": run the function whole (launch_function), or pass the "
              "kernel's own parameters (launch_kernel)");
      return;
    }
    for (const ParamSpec &p : kernel.params) {
      if (p.kind == ParamSpec::Kind::scalar) {
        scalar(p);
        continue;
      }
      if (const TensorRef *t = tensor(p)) {
        checkTensor(p, *t);
        if (!known) {
          device = t->device;
          known = true;
        }
      }
    }
  }

  void checkGemm() {
    const TensorRef *lhs = nullptr, *rhs = nullptr;
    for (const ParamSpec &p : kernel.params)
      if (p.kind == ParamSpec::Kind::tensormap && !p.store)
        (p.operand == abi::name(abi::Operand::lhs) ? lhs : rhs) = tensor(p);
    // A batched GEMM's lhs is B x M x K (or B x K x M), its rhs batched
    // or shared (the rank its descriptor was compiled for, checkTensor).
    size_t lhsRank = kernel.batched ? 3 : 2;
    if (lhs && rhs && lhs->sizes.size() == lhsRank &&
        (rhs->sizes.size() == 2 ||
         (kernel.batched && rhs->sizes.size() == 3))) {
      const int64_t *l = lhs->sizes.data() + lhsRank - 2;
      const int64_t *r = rhs->sizes.data() + rhs->sizes.size() - 2;
      sizes.m = l[kernel.transposeA ? 1 : 0];
      sizes.k = l[kernel.transposeA ? 0 : 1];
      int64_t rhsK = kernel.transposeB ? r[1] : r[0];
      sizes.n = kernel.transposeB ? r[0] : r[1];
      if (kernel.batched) {
        sizes.b = lhs->sizes[0];
        if (rhs->sizes.size() == 3 && rhs->sizes[0] != sizes.b)
          problem("lhs has " + std::to_string(sizes.b) +
                  " batches but rhs has " + std::to_string(rhs->sizes[0]));
      }
      if (rhsK != sizes.k)
        problem("lhs is " + shapeString(lhs->sizes) +
                (kernel.transposeA ? " (K x M)" : "") + " but rhs is " +
                shapeString(rhs->sizes) +
                (kernel.transposeB ? " (N x K): K differs"
                                   : " (K x N): K differs"));
      if (sizes.k <= 0)
        problem("K must be positive, got " + std::to_string(sizes.k));
      // A kernel of one tile per CTA runs every batch's tile rows along the
      // grid's y, which CUDA bounds.
      int64_t tileRows = ceilDiv(sizes.m, kernel.tileM) * sizes.b;
      if (!kernel.persistent && tileRows > kMaxGridY)
        problem(std::to_string(tileRows) + " tile rows (" +
                (kernel.batched ? "B x " : "") + "ceildiv(M, " +
                std::to_string(kernel.tileM) + ")) exceed the grid's " +
                std::to_string(kMaxGridY) +
                "; split the GEMM or compile it persistent");
      device = lhs->device;
      known = true;
    }
    for (const ParamSpec &p : kernel.params) {
      switch (p.kind) {
      case ParamSpec::Kind::index:
        break;
      case ParamSpec::Kind::scalar:
        scalar(p);
        break;
      case ParamSpec::Kind::tensormap:
        // A store descriptor's tensor is its output's, checked there; an
        // output TMA cannot address is written without it.
        if (p.store)
          break;
        [[fallthrough]];
      case ParamSpec::Kind::memref:
        if (const TensorRef *t = tensor(p))
          checkTensor(p, *t);
        break;
      }
    }
  }

  void problem(const std::string &text) { problems.push_back(text); }

  std::string describe(const ParamSpec &p) const {
    std::string what = p.kind == ParamSpec::Kind::tensormap ? p.operand : p.name;
    if (!p.role.empty() && p.kind != ParamSpec::Kind::tensormap)
      what += " (" + p.role + ")";
    if (p.source >= 0)
      what += ", argument " + std::to_string(p.source);
    return what;
  }

  const Argument *argument(const ParamSpec &p) {
    if (p.source < 0) {
      problem(describe(p) +
              " is a buffer the compiled function allocates; launch the "
              "whole function instead of this kernel");
      return nullptr;
    }
    if (p.source >= static_cast<int64_t>(args.size())) {
      problem(describe(p) + ": only " + std::to_string(args.size()) +
              " arguments were given");
      return nullptr;
    }
    return &args[p.source];
  }

  const TensorRef *tensor(const ParamSpec &p) {
    const Argument *arg = argument(p);
    if (!arg)
      return nullptr;
    if (!std::holds_alternative<TensorRef>(*arg)) {
      problem(describe(p) + " must be a tensor, got a scalar");
      return nullptr;
    }
    return &std::get<TensorRef>(*arg);
  }

  void scalar(const ParamSpec &p) {
    const Argument *arg = argument(p);
    if (arg && !std::holds_alternative<double>(*arg))
      problem(describe(p) + " must be a scalar (" + dtypeName(p.dtype) +
              "), got a tensor");
    // What a launch can pass by value (Module::launchSpec).
    if (p.dtype != DType::f32 && p.dtype != DType::f64 &&
        p.dtype != DType::i32 && p.dtype != DType::i64)
      problem(describe(p) + " is a scalar of type " + dtypeName(p.dtype) +
              ", which the runtime cannot pass (f32, f64, i32 or i64)");
  }

  /// The shape the parameter's role implies, once M, N, K (and B) are
  /// known: a batched GEMM's have the batch first, but column inputs.
  std::vector<int64_t> expectedShape(const ParamSpec &p) const {
    std::vector<int64_t> shape = unbatchedShape(p);
    if (kernel.batched && !shape.empty() &&
        abi::parse<abi::ParamRole>(p.role) != abi::ParamRole::col)
      shape.insert(shape.begin(), sizes.b);
    return shape;
  }
  std::vector<int64_t> unbatchedShape(const ParamSpec &p) const {
    int64_t m = sizes.m, n = sizes.n;
    if (p.kind == ParamSpec::Kind::tensormap)
      return {};
    std::optional<abi::ParamRole> role = abi::parse<abi::ParamRole>(p.role);
    if (!role)
      return {};
    switch (*role) {
    case abi::ParamRole::tile:
      return {m, n};
    case abi::ParamRole::row:
    case abi::ParamRole::rowSelect:
      return {m};
    case abi::ParamRole::col:
      return {n};
    case abi::ParamRole::periodic:
      return {m, -1};
    case abi::ParamRole::pair:
      return {m, n / 2};
    case abi::ParamRole::interleaved:
      return {m, 2 * n};
    case abi::ParamRole::rowPartials:
      return {m, ceilDiv(n, p.partialTile ? p.partialTile : kernel.tileN)};
    case abi::ParamRole::colPartials:
      return {ceilDiv(m, p.partialTile ? p.partialTile : kernel.tileM), n};
    case abi::ParamRole::grouped:
      return {m, ceilDiv(n, p.partialTile)};
    case abi::ParamRole::colGrouped:
      return {ceilDiv(m, p.partialTile), n};
    case abi::ParamRole::transposed:
      return {n, m};
    case abi::ParamRole::scalar:
      return {};
    }
    return {};
  }

  void checkTensor(const ParamSpec &p, const TensorRef &t) {
    // Named only when something is wrong: a valid launch builds no string.
    auto what = [&] { return describe(p); };
    if (t.dtype != p.dtype)
      problem(what() + " must be " + dtypeName(p.dtype) + ", got " +
              dtypeName(t.dtype));
    // A descriptor is compiled for its operand's rank (its shape's).
    int64_t rank = p.kind == ParamSpec::Kind::tensormap
                       ? static_cast<int64_t>(p.shape.size())
                       : p.rank;
    if (static_cast<int64_t>(t.sizes.size()) != rank &&
        (p.kind == ParamSpec::Kind::memref ||
         (p.kind == ParamSpec::Kind::tensormap && rank > 0))) {
      problem(what() + " must have rank " + std::to_string(rank) + ", got " +
              std::to_string(t.sizes.size()));
      return;
    }
    if (t.strides.size() != t.sizes.size()) {
      problem(what() + " has " + std::to_string(t.sizes.size()) +
              " sizes but " + std::to_string(t.strides.size()) + " strides");
      return;
    }
    if (t.device < 0)
      problem(what() + " is in host memory; coda kernels read GPU memory");
    else if (known && t.device != device)
      problem(what() + " is on GPU " + std::to_string(t.device) +
              " but lhs is on GPU " + std::to_string(device));
    int64_t bytes = dtypeBytes(t.dtype);
    if (t.data % bytes != 0)
      problem(what() + " address is not aligned to its " +
              std::to_string(bytes) + "-byte elements");
    for (size_t d = 0; d < p.shape.size() && d < t.sizes.size(); ++d)
      if (p.shape[d] >= 0 && p.shape[d] != t.sizes[d])
        problem(what() + " must have shape " + shapeString(p.shape) + ", got " +
                shapeString(t.sizes));

    if (p.kind == ParamSpec::Kind::tensormap) {
      for (const std::string &why : tmaProblems(t))
        problem(what() + " " + why);
      return;
    }
    if (!known)
      return;
    std::vector<int64_t> expected = expectedShape(p);
    if (expected.empty())
      return;
    bool matches = expected.size() == t.sizes.size();
    for (size_t d = 0; matches && d < expected.size(); ++d)
      matches = expected[d] < 0 || expected[d] == t.sizes[d];
    if (!matches)
      problem(what() + " must have shape " + shapeString(expected) +
              (kernel.batched ? " for B=" + std::to_string(sizes.b) + ", M="
                              : std::string(" for M=")) +
              std::to_string(sizes.m) + ", N=" + std::to_string(sizes.n) +
              ", got " + shapeString(t.sizes));
    std::optional<abi::ParamRole> role = abi::parse<abi::ParamRole>(p.role);
    if (role == abi::ParamRole::pair && sizes.n % 2 != 0)
      problem("a pair output needs an even N, got N=" +
              std::to_string(sizes.n));
    int64_t period = t.sizes.empty() ? 0 : t.sizes.back();
    if (role == abi::ParamRole::periodic && (period <= 0 || sizes.n % period != 0))
      problem(what() + " period " + std::to_string(period) +
              " must divide N=" + std::to_string(sizes.n));
  }

  const KernelSpec &kernel;
  const std::vector<Argument> &args;
  GemmSizes sizes;
  bool known = false;
  int device = 0;
  std::vector<std::string> problems;
};

} // namespace

bool coda::runtime::tmaAddressable(const TensorRef &t) {
  return tmaProblems(t).empty();
}

GemmSizes coda::runtime::validate(const KernelSpec &kernel,
                                  const std::vector<Argument> &args) {
  return Checker(kernel, args).run();
}

void coda::runtime::gridFor(const KernelSpec &kernel, const GemmSizes &sizes,
                            int64_t residentCtas, int64_t grid[3]) {
  if (kernel.kind == KernelSpec::Kind::loop) {
    std::copy(kernel.grid, kernel.grid + 3, grid);
    return;
  }
  if (kernel.kind == KernelSpec::Kind::reducePartials) {
    grid[0] = ceilDiv(sizes.m, kernel.block[0]);
    grid[1] = grid[2] = 1;
    return;
  }
  // A batched GEMM's tile rows batch after batch (the kernel splits them).
  grid[0] = ceilDiv(sizes.n, kernel.tileN);
  grid[1] = ceilDiv(sizes.m, kernel.tileM) * sizes.b;
  grid[2] = 1;
  if (kernel.persistent) {
    int64_t cluster = kernel.cluster[0];
    int64_t clusterTiles =
        grid[0] * ceilDiv(sizes.m, kernel.tileM * cluster) * sizes.b;
    grid[0] = std::min(clusterTiles, residentCtas / cluster) * cluster;
    grid[1] = grid[0] ? 1 : 0;
  }
}

KernelSpec coda::runtime::withOwnParameters(const KernelSpec &kernel) {
  // An output's store descriptor describes the tensor given for that
  // output: it takes the output's position, not one of its own.
  KernelSpec own = kernel;
  int64_t position = 0;
  std::map<std::string, int64_t> positions;
  for (ParamSpec &p : own.params) {
    if (p.kind == ParamSpec::Kind::index || p.store)
      continue;
    p.source = position++;
    positions[p.name] = p.source;
  }
  for (ParamSpec &p : own.params) {
    if (p.kind == ParamSpec::Kind::index)
      p.source = -1;
    else if (p.store)
      p.source = positions.count(p.operand) ? positions[p.operand] : -1;
  }
  return own;
}

/// Why `args` do not fit function `f`'s arguments (none: they do).
static std::vector<std::string>
functionArgumentProblems(const FunctionSpec &f,
                         const std::vector<Argument> &args) {
  std::vector<std::string> problems;
  if (args.size() != f.arguments.size())
    problems.push_back(std::to_string(f.arguments.size()) +
                       " arguments expected (outputs last), got " +
                       std::to_string(args.size()));
  for (size_t i = 0; i < args.size() && i < f.arguments.size(); ++i) {
    const ArgumentSpec &spec = f.arguments[i];
    auto what = [&] { return "argument " + std::to_string(i); };
    if (!spec.tensor) {
      if (!std::holds_alternative<double>(args[i]))
        problems.push_back(what() + " must be a scalar (" +
                           dtypeName(spec.dtype) + "), got a tensor");
      continue;
    }
    if (!std::holds_alternative<TensorRef>(args[i])) {
      problems.push_back(what() + " must be a tensor, got a scalar");
      continue;
    }
    const TensorRef &t = std::get<TensorRef>(args[i]);
    if (t.dtype != spec.dtype)
      problems.push_back(what() + " must be " + dtypeName(spec.dtype) +
                         ", got " + dtypeName(t.dtype));
    bool shapeMatches = t.sizes.size() == spec.shape.size() &&
                        t.strides.size() == t.sizes.size();
    for (size_t d = 0; shapeMatches && d < t.sizes.size(); ++d)
      shapeMatches = spec.shape[d] < 0 || spec.shape[d] == t.sizes[d];
    if (!shapeMatches) {
      problems.push_back(what() + " must have shape " +
                         shapeString(spec.shape) + ", got " +
                         shapeString(t.sizes));
      continue;
    }
    int64_t expected = 1;
    for (size_t d = t.sizes.size(); d-- > 0;) {
      if (t.sizes[d] != 1 && t.strides[d] != expected) {
        problems.push_back(what() + " must be contiguous (row-major), got "
                                    "strides " +
                           shapeString(t.strides) + " for shape " +
                           shapeString(t.sizes));
        break;
      }
      expected *= t.sizes[d];
    }
    if (t.device < 0)
      problems.push_back(what() + " is in host memory; coda kernels read GPU "
                                  "memory");
    if (t.data % dtypeBytes(t.dtype) != 0)
      problems.push_back(what() + " address is not aligned to its elements");
  }
  return problems;
}

[[noreturn]] static void refuse(const FunctionSpec &f,
                                const std::vector<std::string> &problems) {
  std::string message = "cannot launch function " + f.name + ":";
  for (const std::string &p : problems)
    message += "\n  - " + p;
  throw Error(message);
}

void coda::runtime::validateFunctionArguments(
    const FunctionSpec &f, const std::vector<Argument> &args) {
  std::vector<std::string> problems = functionArgumentProblems(f, args);
  if (!problems.empty())
    refuse(f, problems);
}

void coda::runtime::validateFunctionLaunch(
    const FunctionSpec &f, const std::vector<Argument> &args,
    const TensorRef *workspace,
    const std::function<bool(const std::string &)> &hasCallback) {
  std::vector<std::string> problems = functionArgumentProblems(f, args);
  std::vector<std::string> called;
  for (const Step &step : f.steps)
    if (step.kind == Step::Kind::call && !hasCallback(step.target) &&
        std::find(called.begin(), called.end(), step.target) == called.end()) {
      called.push_back(step.target);
      problems.push_back("it calls '" + step.target +
                         "': register a callback for it (set_callback) first");
    }
  if (workspace && f.workspaceBytes > 0) {
    int64_t bytes = dtypeBytes(workspace->dtype);
    for (int64_t size : workspace->sizes)
      bytes *= size;
    if (bytes < f.workspaceBytes)
      problems.push_back("it needs a workspace of " +
                         std::to_string(f.workspaceBytes) + " bytes, got " +
                         std::to_string(bytes));
    int64_t expected = 1;
    for (size_t d = workspace->sizes.size(); d-- > 0;) {
      if (workspace->sizes[d] != 1 &&
          (d >= workspace->strides.size() ||
           workspace->strides[d] != expected)) {
        problems.push_back("the workspace must be contiguous");
        break;
      }
      expected *= workspace->sizes[d];
    }
    if (workspace->data % kWorkspaceAlignment != 0)
      problems.push_back("the workspace must be " +
                         std::to_string(kWorkspaceAlignment) +
                         "-byte aligned");
    int device = workspace->device;
    for (const Argument &arg : args)
      if (std::holds_alternative<TensorRef>(arg)) {
        device = std::get<TensorRef>(arg).device;
        break;
      }
    if (workspace->device < 0)
      problems.push_back("the workspace is in host memory; temporaries live "
                         "in GPU memory");
    else if (device >= 0 && workspace->device != device)
      problems.push_back("the workspace is on GPU " +
                         std::to_string(workspace->device) +
                         " but the arguments are on GPU " +
                         std::to_string(device));
  }
  if (!problems.empty())
    refuse(f, problems);
}

std::vector<GemmSizes> coda::runtime::validateSteps(
    const FunctionSpec &f, const std::vector<std::vector<Argument>> &operands,
    const std::function<const KernelSpec &(const std::string &)> &kernelOf) {
  std::vector<GemmSizes> sizes(f.steps.size());
  std::vector<std::string> problems;
  for (size_t i = 0; i < f.steps.size(); ++i) {
    if (f.steps[i].kind != Step::Kind::launch)
      continue;
    try {
      sizes[i] = validate(kernelOf(f.steps[i].target), operands[i]);
    } catch (const Error &e) {
      // The kernel's own list, one level deeper.
      std::string why = e.what();
      for (size_t at = why.find('\n'); at != std::string::npos;
           at = why.find('\n', at + 1))
        why.insert(at + 1, "  ");
      problems.push_back("step " + std::to_string(i) + ": " + why);
    }
  }
  if (!problems.empty())
    refuse(f, problems);
  return sizes;
}

Argument coda::runtime::stepOperand(const StepOperand &operand,
                                    const FunctionSpec &f,
                                    const std::vector<Argument> &args,
                                    uint64_t workspace, int device) {
  if (operand.kind == StepOperand::Kind::value)
    return operand.value;
  TensorRef view;
  if (operand.kind == StepOperand::Kind::argument) {
    const Argument &arg = args[operand.index];
    if (!operand.view)
      return arg;
    const TensorRef &t = std::get<TensorRef>(arg);
    view.data = t.data;
    view.dtype = t.dtype;
    view.device = t.device;
  } else {
    const TemporarySpec &t = f.temporaries[operand.index];
    view.data = workspace + uint64_t(t.offset);
    view.dtype = t.dtype;
    view.device = device;
  }
  view.data += uint64_t(operand.offset * dtypeBytes(view.dtype));
  view.offset = operand.offset;
  view.sizes = operand.sizes;
  view.strides = operand.strides;
  return view;
}

void coda::runtime::checkArgumentCount(const KernelSpec &kernel,
                                       const std::vector<Argument> &args) {
  int64_t takes = kernel.functionArguments;
  if (takes >= 0 && static_cast<int64_t>(args.size()) > takes)
    throw Error("cannot launch " + kernel.name + ":\n  - argument " +
                std::to_string(takes) + ": function " + kernel.function +
                " takes " + std::to_string(takes) + " arguments, got " +
                std::to_string(args.size()));
}
