//===- coda-runtime-check.cpp - validate launch arguments without a GPU ---===//
//
//   coda-runtime-check <manifest.json> <kernel> <argument>...
//   coda-runtime-check <manifest.json> --function <name> <argument>...
//
// Each argument is a scalar (`1.5`) or a tensor `<dtype>[<sizes>]` with
// optional `:<strides>` (elements; default contiguous), `@<address>` (default
// a 256-byte aligned one) and `#<device>` (default 0; `#host` for host
// memory), e.g. `bf16[200,256]:264,1@0x1008#0`. Prints the launch's sizes and
// grid, or the runtime's error (exit 1). With --function, checks the
// arguments of a function's program and then each step as launch_function
// makes it (temporaries at a workspace at 0x10000000), printing the steps.
// Used by the lit tests of the runtime's validation.
//
//===----------------------------------------------------------------------===//

#include "coda/Runtime/Manifest.h"
#include "coda/Runtime/Validate.h"

#include <cstdlib>
#include <iostream>

using namespace coda::runtime;

/// The grid printed for persistent kernels assumes an H100 SXM (132 SMs,
/// every cluster resident);
/// the runtime uses the SM count of the device it launches on.
static constexpr int64_t kH100Multiprocessors = 132;

static std::vector<int64_t> parseList(const std::string &text) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos)
      end = text.size();
    out.push_back(std::stoll(text.substr(pos, end - pos)));
    pos = end + 1;
  }
  return out;
}

static Argument parseArgument(const std::string &text, size_t position) {
  size_t open = text.find('[');
  if (open == std::string::npos)
    return std::stod(text);
  size_t close = text.find(']', open);
  if (close == std::string::npos)
    throw Error("bad tensor argument '" + text + "'");
  TensorRef t;
  t.dtype = parseDType(text.substr(0, open));
  t.sizes = parseList(text.substr(open + 1, close - open - 1));
  t.data = 0x100000 * (position + 1);
  std::string rest = text.substr(close + 1);
  auto field = [&](char tag) -> std::string {
    size_t at = rest.find(tag);
    if (at == std::string::npos)
      return "";
    size_t end = rest.find_first_of(":@#", at + 1);
    return rest.substr(at + 1, end == std::string::npos ? end : end - at - 1);
  };
  if (std::string s = field(':'); !s.empty())
    t.strides = parseList(s);
  else {
    t.strides.assign(t.sizes.size(), 1);
    for (int d = int(t.sizes.size()) - 2; d >= 0; --d)
      t.strides[d] = t.strides[d + 1] * t.sizes[d + 1];
  }
  if (std::string s = field('@'); !s.empty())
    t.data = std::stoull(s, nullptr, 0);
  if (std::string s = field('#'); !s.empty())
    t.device = s == "host" ? -1 : std::stoi(s);
  return t;
}

static void printLaunch(const KernelSpec &kernel, const GemmSizes &sizes) {
  int64_t grid[3];
  gridFor(kernel, sizes, kH100Multiprocessors, grid);
  std::cout << "grid=(" << grid[0] << ", " << grid[1] << ", " << grid[2]
            << ") block=(" << kernel.block[0] << ", " << kernel.block[1] << ", "
            << kernel.block[2] << ") shared=" << kernel.sharedMemoryBytes
            << " kernel=" << kernel.name << "\n";
}

/// --function: the arguments of a function's program, then each step.
static int checkFunction(const Manifest &manifest, int argc, char **argv) {
  if (argc < 4)
    throw Error("--function needs a function name");
  const FunctionSpec &f = manifest.function(argv[3]);
  std::vector<Argument> args;
  for (int i = 4; i < argc; ++i)
    args.push_back(parseArgument(argv[i], i - 4));
  validateFunctionArguments(f, args);
  constexpr uint64_t kWorkspace = 0x10000000;
  std::cout << "ok: function " << f.name << ": " << f.steps.size() << " steps, "
            << f.temporaries.size() << " temporaries, workspace "
            << f.workspaceBytes << " bytes\n";
  for (size_t i = 0; i < f.steps.size(); ++i) {
    const Step &step = f.steps[i];
    std::vector<Argument> operands;
    for (const StepOperand &operand : step.args)
      operands.push_back(stepOperand(operand, f, args, kWorkspace, 0));
    std::cout << "  step " << i << ": ";
    if (step.kind == Step::Kind::call) {
      std::cout << "call " << step.target << " (" << operands.size()
                << " operands)\n";
      continue;
    }
    KernelSpec own = withOwnParameters(manifest.kernel(step.target));
    GemmSizes sizes = validate(own, operands);
    printLaunch(manifest.variantFor(own, sizes.k), sizes);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    std::cerr << "usage: coda-runtime-check <manifest.json> <kernel> "
                 "<argument>...\n";
    return 2;
  }
  try {
    Manifest manifest = Manifest::load(argv[1]);
    if (std::string(argv[2]) == "--function")
      return checkFunction(manifest, argc, argv);
    const KernelSpec &named = manifest.kernel(argv[2]);
    std::vector<Argument> args;
    for (int i = 3; i < argc; ++i)
      args.push_back(parseArgument(argv[i], i - 3));
    // As Module::launch: a GEMM dispatched by K launches its variant for K.
    GemmSizes sizes = validate(named, args);
    const KernelSpec &kernel = manifest.variantFor(named, sizes.k);
    std::cout << "ok: M=" << sizes.m << " N=" << sizes.n << " K=" << sizes.k
              << " ";
    printLaunch(kernel, sizes);
    return 0;
  } catch (const Error &e) {
    std::cout << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception &e) {
    std::cout << "error: bad argument syntax (" << e.what() << ")\n";
    return 1;
  }
}
