//===- coda-runtime-check.cpp - validate launch arguments without a GPU ---===//
//
//   coda-runtime-check <manifest.json> <kernel> <argument>...
//   coda-runtime-check <manifest.json> --function <name> [--workspace=<tensor>]
//                      [--callbacks=<name>,...] <argument>...
//
// Each argument is a scalar (`1.5`) or a tensor `<dtype>[<sizes>]` with
// optional `:<strides>` (elements; default contiguous), `@<address>` (default
// a 256-byte aligned one) and `#<device>` (default 0; `#host` for host
// memory), e.g. `bf16[200,256]:264,1@0x1008#0`. Prints the launch's sizes and
// grid, or the runtime's error (exit 1).
//
// With --function, checks a call of the function's program as
// launch_function does before it enqueues anything: the arguments, the
// callbacks its calls need (--callbacks lists those registered; without it,
// every one is), the workspace (--workspace, a tensor as above; without it,
// the module's own, here at 0x10000000) and each step's launch with the
// operands the program gives it. Prints the program as the runtime read it:
// its arguments, temporaries, and steps with their operands (each view with
// its address) and launch configurations.
// Used by the lit tests of the runtime's validation.
//
//===----------------------------------------------------------------------===//

#include "coda/Runtime/Manifest.h"
#include "coda/Runtime/Validate.h"

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

using namespace coda::runtime;

/// The grid printed for persistent kernels, and the variant of a GEMM
/// dispatched by waves, assume an H100 SXM (132 SMs, every cluster
/// resident); the runtime uses the SM count of the device it launches on.
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
  // The launch as the runtime checks it before launching (with sm_90's
  // limits here, the device's there).
  checkLaunchGeometry(kernel.name, kernel.block, grid, LaunchLimits{});
  std::cout << "grid=(" << grid[0] << ", " << grid[1] << ", " << grid[2]
            << ") block=(" << kernel.block[0] << ", " << kernel.block[1] << ", "
            << kernel.block[2] << ") shared=" << kernel.sharedMemoryBytes
            << " kernel=" << kernel.name << "\n";
}

static std::string hex(uint64_t value) {
  std::ostringstream os;
  os << "0x" << std::hex << value;
  return os.str();
}

/// One operand of a step: where it comes from, and for a view what the
/// kernel gets.
static std::string describeOperand(const StepOperand &operand,
                                   const Argument &value) {
  if (operand.kind == StepOperand::Kind::value) {
    std::ostringstream os;
    os << "value " << std::setprecision(9) << operand.value;
    return os.str();
  }
  std::string text =
      (operand.kind == StepOperand::Kind::argument ? "argument " : "temporary ") +
      std::to_string(operand.index);
  if (!operand.view)
    return text;
  const TensorRef &t = std::get<TensorRef>(value);
  return text + " view offset " + std::to_string(operand.offset) + " sizes " +
         listString(operand.sizes) + " strides " +
         listString(operand.strides) + ": " + dtypeName(t.dtype) + " at " +
         hex(t.data);
}

/// --function [--workspace=...] [--callbacks=...]: a call of a function's
/// program, checked as launch_function checks it, and the program printed.
static int checkFunction(const Manifest &manifest, int argc, char **argv) {
  if (argc < 4)
    throw Error("--function needs a function name");
  const FunctionSpec &f = manifest.function(argv[3]);
  int first = 4;
  std::optional<TensorRef> workspace;
  std::optional<std::vector<std::string>> callbacks;
  for (; first < argc && std::string(argv[first]).rfind("--", 0) == 0;
       ++first) {
    std::string option = argv[first];
    if (option.rfind("--workspace=", 0) == 0) {
      Argument w = parseArgument(option.substr(12), 0);
      if (!std::holds_alternative<TensorRef>(w))
        throw Error("--workspace needs a tensor, e.g. i8[4096]@0x10000000");
      workspace = std::get<TensorRef>(w);
    } else if (option.rfind("--callbacks=", 0) == 0) {
      callbacks.emplace();
      std::string names = option.substr(12);
      for (size_t pos = 0; pos < names.size();) {
        size_t end = std::min(names.find(',', pos), names.size());
        callbacks->push_back(names.substr(pos, end - pos));
        pos = end + 1;
      }
    } else {
      throw Error("unknown option '" + option +
                  "' (--workspace=<tensor> or --callbacks=<names>)");
    }
  }
  std::vector<Argument> args;
  for (int i = first; i < argc; ++i)
    args.push_back(parseArgument(argv[i], i - first));
  validateFunctionLaunch(
      f, args, workspace ? &*workspace : nullptr,
      [&](const std::string &name) {
        return !callbacks || std::find(callbacks->begin(), callbacks->end(),
                                       name) != callbacks->end();
      });
  // The module's own workspace, where none is given.
  uint64_t base = workspace ? workspace->data : 0x10000000;
  std::vector<std::vector<Argument>> operands(f.steps.size());
  for (size_t i = 0; i < f.steps.size(); ++i)
    for (const StepOperand &operand : f.steps[i].args)
      operands[i].push_back(stepOperand(operand, f, args, base, 0));
  std::map<std::string, KernelSpec> own;
  for (const Step &step : f.steps)
    if (step.kind == Step::Kind::launch && !own.count(step.target))
      own.emplace(step.target, withOwnParameters(manifest.kernel(step.target)));
  std::vector<GemmSizes> sizes = validateSteps(
      f, operands, [&](const std::string &kernel) -> const KernelSpec & {
        return own.at(kernel);
      });

  std::cout << "ok: function " << f.name << ": " << f.steps.size() << " steps, "
            << f.temporaries.size() << " temporaries, workspace "
            << f.workspaceBytes << " bytes at " << hex(base) << "\n";
  for (size_t i = 0; i < f.arguments.size(); ++i) {
    const ArgumentSpec &a = f.arguments[i];
    std::cout << "  argument " << i << ": " << dtypeName(a.dtype)
              << (a.tensor ? listString(a.shape) : std::string(" scalar"))
              << (a.output ? " output" : "") << "\n";
  }
  for (size_t i = 0; i < f.temporaries.size(); ++i) {
    const TemporarySpec &t = f.temporaries[i];
    std::cout << "  temporary " << i << ": " << dtypeName(t.dtype)
              << listString(t.shape) << ", " << t.bytes << " bytes at offset "
              << t.offset << "\n";
  }
  for (size_t i = 0; i < f.steps.size(); ++i) {
    const Step &step = f.steps[i];
    std::cout << "  step " << i << ": ";
    if (step.kind == Step::Kind::call) {
      std::cout << "call " << step.target << "\n";
    } else {
      const KernelSpec &kernel = own.at(step.target);
      std::cout << "launch " << step.target << " ("
                << coda::abi::name(kernel.kind) << ")";
      if (kernel.kind == KernelSpec::Kind::gemm)
        std::cout << " M=" << sizes[i].m << " N=" << sizes[i].n
                  << " K=" << sizes[i].k;
      if (kernel.batched)
        std::cout << " B=" << sizes[i].b;
      else if (kernel.kind == KernelSpec::Kind::reducePartials)
        std::cout << " R=" << sizes[i].m;
      std::cout << " ";
      printLaunch(manifest.variantFor(kernel, sizes[i], kH100Multiprocessors),
                  sizes[i]);
    }
    for (size_t j = 0; j < step.args.size(); ++j)
      std::cout << "    operand " << j << ": "
                << describeOperand(step.args[j], operands[i][j]) << "\n";
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
    // As Module::launch: a GEMM dispatched by K or by waves launches its
    // variant for these sizes (on an H100's SMs).
    checkArgumentCount(named, args);
    GemmSizes sizes = validate(named, args);
    const KernelSpec &kernel =
        manifest.variantFor(named, sizes, kH100Multiprocessors);
    std::cout << "ok: M=" << sizes.m << " N=" << sizes.n << " K=" << sizes.k
              << " ";
    if (named.batched)
      std::cout << "B=" << sizes.b << " ";
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
