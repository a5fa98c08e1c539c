//===- Manifest.cpp - read manifest.json ----------------------------------===//

#include "coda/Runtime/Manifest.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <fstream>
#include <sstream>

using namespace coda::runtime;
namespace abi = coda::abi;
namespace key = coda::abi::key;

DType coda::runtime::parseDType(const std::string &name) {
  static const std::pair<const char *, DType> names[] = {
      {"bf16", DType::bf16}, {"f16", DType::f16}, {"f32", DType::f32},
      {"f64", DType::f64},   {"i32", DType::i32}, {"i64", DType::i64},
      {"i8", DType::i8},     {"i1", DType::i1},
      {"f8E4M3FN", DType::f8e4m3fn}, {"f8E5M2", DType::f8e5m2}};
  for (auto &[n, d] : names)
    if (name == n)
      return d;
  throw Error("unsupported element type '" + name + "'");
}

const char *coda::runtime::dtypeName(DType dtype) {
  switch (dtype) {
  case DType::bf16: return "bf16";
  case DType::f16: return "f16";
  case DType::f32: return "f32";
  case DType::f64: return "f64";
  case DType::i32: return "i32";
  case DType::i64: return "i64";
  case DType::i8: return "i8";
  case DType::i1: return "i1";
  case DType::f8e4m3fn: return "f8E4M3FN";
  case DType::f8e5m2: return "f8E5M2";
  }
  return "?";
}

int64_t coda::runtime::dtypeBytes(DType dtype) {
  switch (dtype) {
  case DType::bf16:
  case DType::f16: return 2;
  case DType::f32:
  case DType::i32: return 4;
  case DType::f64:
  case DType::i64: return 8;
  case DType::i8:
  case DType::i1:
  case DType::f8e4m3fn:
  case DType::f8e5m2: return 1;
  }
  return 1;
}

using Json = nlohmann::json;

void coda::runtime::checkLaunchGeometry(const std::string &kernel,
                                        const int64_t block[3],
                                        const int64_t *grid,
                                        const LaunchLimits &limits) {
  static const char *axes[] = {"x", "y", "z"};
  auto triple = [](const int64_t v[3]) {
    return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ", " +
           std::to_string(v[2]) + ")";
  };
  auto refuse = [&](const std::string &what, const int64_t v[3],
                    const std::string &why) {
    throw Error("kernel " + kernel + ": " + what + " " + triple(v) +
                " is beyond the device's limits: " + why);
  };
  for (int i = 0; i < 3; ++i) {
    if (block[i] < 1 || block[i] > limits.block[i])
      refuse("block", block,
             std::string("threads along ") + axes[i] + " from 1 to " +
                 std::to_string(limits.block[i]));
    if (grid && (grid[i] < 1 || grid[i] > limits.grid[i]))
      refuse("grid", grid,
             std::string("blocks along ") + axes[i] + " from 1 to " +
                 std::to_string(limits.grid[i]));
  }
  if (block[0] * block[1] * block[2] > limits.threadsPerBlock)
    refuse("block", block,
           "at most " + std::to_string(limits.threadsPerBlock) +
               " threads per block");
}

namespace {

/// Member `key` of the object `object` (`context` names it in errors).
const Json &member(const Json &object, const char *key,
                   const std::string &context) {
  auto it = object.find(key);
  if (it == object.end())
    throw Error("manifest: " + context + " has no \"" + key + "\"");
  return *it;
}

/// Member `key` of `object`, or null where it has none.
const Json *optional(const Json &object, const char *key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string stringOf(const Json &value, const std::string &context) {
  if (!value.is_string())
    throw Error("manifest: " + context + " must be a string");
  return value.get<std::string>();
}

int64_t integer(const Json &value, const std::string &context) {
  if (!value.is_number_integer())
    throw Error("manifest: " + context + " must be an integer");
  return value.get<int64_t>();
}

bool boolean(const Json &value, const std::string &context) {
  if (!value.is_boolean())
    throw Error("manifest: " + context + " must be true or false");
  return value.get<bool>();
}

const Json &list(const Json &value, const std::string &context) {
  if (!value.is_array())
    throw Error("manifest: " + context + " must be a list");
  return value;
}

std::vector<int64_t> intList(const Json &value, const std::string &context) {
  std::vector<int64_t> out;
  for (const Json &e : list(value, context))
    out.push_back(integer(e, context));
  return out;
}

/// A field holding one of the names of `E` (coda/ABI/KernelAbi.h).
template <typename E> E vocabulary(const Json &v, const std::string &ctx) {
  const std::string text =
      stringOf(v, ctx + " " + std::string(abi::Vocabulary<E>::field));
  if (std::optional<E> value = abi::parse<E>(text))
    return *value;
  throw Error("manifest: " + ctx + " has unknown " +
              std::string(abi::Vocabulary<E>::field) + " '" + text +
              "' (one of " + abi::names<E>() + ")");
}

} // namespace

/// The elements a view reaches past its offset, plus one (0 for an empty
/// view).
static int64_t viewExtent(const std::vector<int64_t> &sizes,
                          const std::vector<int64_t> &strides) {
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0)
      return 0;
    last += (sizes[d] - 1) * strides[d];
  }
  return last + 1;
}

static int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t size : shape)
    n *= size;
  return n;
}

std::string coda::runtime::listString(const std::vector<int64_t> &values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i)
    s += (i ? ", " : "") +
         (values[i] < 0 ? std::string("?") : std::to_string(values[i]));
  return s + "]";
}

/// A dtype field of the manifest (`context` names its owner in errors).
static DType dtypeField(const Json &object, const std::string &context) {
  std::string text = stringOf(member(object, key::dtype, context),
                              context + " dtype");
  try {
    return parseDType(text);
  } catch (const Error &) {
    throw Error("manifest: " + context + " has unsupported dtype '" + text +
                "'");
  }
}

/// The parameters a step passes to `kernel`: its tensor and scalar
/// parameters, M, N, K and store descriptors excepted (withOwnParameters).
static size_t ownParameterCount(const KernelSpec &kernel) {
  return size_t(std::count_if(
      kernel.params.begin(), kernel.params.end(), [](const ParamSpec &p) {
        return p.kind != ParamSpec::Kind::index && !p.store;
      }));
}

/// One operand of a step: a constant, an argument (whole or a view) or a
/// view of a temporary, each view within its buffer.
static StepOperand parseOperand(const Json &o, const FunctionSpec &function,
                                const std::string &octx) {
  if (!o.is_object())
    throw Error("manifest: " + octx + " must be an object");
  StepOperand operand;
  if (const Json *v = optional(o, key::value)) {
    if (!v->is_number())
      throw Error("manifest: " + octx + " value must be a number");
    operand.value = v->get<double>();
    return operand;
  }
  std::vector<int64_t> bufferShape;
  DType bufferType = DType::f32;
  std::string buffer;
  // The index in `v` of one of the function's `count` `what`s.
  auto index = [&](const Json &v, const std::string &what, size_t count) {
    int64_t i = integer(v, octx + " " + what);
    if (i < 0 || i >= int64_t(count))
      throw Error("manifest: " + octx + " names " + what + " " +
                  std::to_string(i) + ", but the function has " +
                  std::to_string(count) + " " +
                  (what == "temporary" ? "temporaries" : what + "s"));
    return i;
  };
  if (const Json *v = optional(o, key::argument)) {
    operand.kind = StepOperand::Kind::argument;
    operand.index = index(*v, "argument", function.arguments.size());
    const ArgumentSpec &argument = function.arguments[operand.index];
    bufferShape = argument.shape;
    bufferType = argument.dtype;
    buffer = "argument " + std::to_string(operand.index);
    if (!argument.tensor && optional(o, key::offset))
      throw Error("manifest: " + octx + " is a view of " + buffer +
                  ", which is a scalar");
  } else if (const Json *v = optional(o, key::temporary)) {
    operand.kind = StepOperand::Kind::temporary;
    operand.index = index(*v, "temporary", function.temporaries.size());
    bufferShape = function.temporaries[operand.index].shape;
    bufferType = function.temporaries[operand.index].dtype;
    buffer = "temporary " + std::to_string(operand.index);
  } else {
    throw Error("manifest: " + octx +
                " must have \"argument\", \"temporary\" or \"value\"");
  }
  const Json *offset = optional(o, key::offset);
  if (!offset) {
    if (operand.kind == StepOperand::Kind::temporary)
      throw Error("manifest: " + octx +
                  " needs the view's offset, sizes and strides");
    return operand; // an argument, passed whole
  }
  operand.view = true;
  operand.offset = integer(*offset, octx + " offset");
  operand.sizes = intList(member(o, key::sizes, octx), octx + " sizes");
  operand.strides = intList(member(o, key::strides, octx), octx + " strides");
  if (operand.sizes.size() != operand.strides.size())
    throw Error("manifest: " + octx + " has " +
                std::to_string(operand.sizes.size()) + " sizes but " +
                std::to_string(operand.strides.size()) + " strides");
  auto negative = [](int64_t d) { return d < 0; };
  if (operand.offset < 0 ||
      std::any_of(operand.sizes.begin(), operand.sizes.end(), negative) ||
      std::any_of(operand.strides.begin(), operand.strides.end(), negative))
    throw Error("manifest: " + octx +
                " has a negative offset, size or stride");
  if (std::any_of(bufferShape.begin(), bufferShape.end(), negative))
    throw Error("manifest: " + octx + " is a view of " + buffer +
                ", whose shape " + listString(bufferShape) +
                " is dynamic (a view needs its buffer's static size)");
  int64_t extent = viewExtent(operand.sizes, operand.strides);
  int64_t elements = elementCount(bufferShape);
  if (extent > 0 && operand.offset + extent > elements)
    throw Error("manifest: " + octx + " views elements " +
                std::to_string(operand.offset) + " to " +
                std::to_string(operand.offset + extent - 1) + " of " + buffer +
                ", which has " + std::to_string(elements) + " (" +
                dtypeName(bufferType) + listString(bufferShape) + ")");
  return operand;
}

/// One function's program, each reference checked against the manifest:
/// kernels exist and get as many operands as they take, argument and
/// temporary positions are in range, temporaries lie in the workspace and
/// views within their buffers.
static FunctionSpec parseFunction(const Json &f, const Manifest &manifest) {
  if (!f.is_object())
    throw Error("manifest: a function must be an object");
  FunctionSpec function;
  function.name = stringOf(member(f, key::name, "a function"), "function name");
  std::string ctx = "function " + function.name;
  if (const Json *why = optional(f, key::unsupported)) {
    function.unsupported = stringOf(*why, ctx + " unsupported");
    return function;
  }
  for (const Json &a : list(member(f, key::arguments, ctx), ctx + " arguments")) {
    std::string actx =
        ctx + " argument " + std::to_string(function.arguments.size());
    if (!a.is_object())
      throw Error("manifest: " + actx + " must be an object");
    ArgumentSpec argument;
    abi::ParamKind kind =
        vocabulary<abi::ParamKind>(member(a, key::kind, actx), actx);
    if (kind != abi::ParamKind::memref && kind != abi::ParamKind::scalar)
      throw Error("manifest: " + actx + " kind must be " +
                  std::string(abi::name(abi::ParamKind::memref)) + " or " +
                  std::string(abi::name(abi::ParamKind::scalar)) + ", got '" +
                  std::string(abi::name(kind)) + "'");
    argument.tensor = kind == abi::ParamKind::memref;
    argument.dtype = dtypeField(a, actx);
    if (argument.tensor)
      argument.shape = intList(member(a, key::shape, actx), actx + " shape");
    if (const Json *v = optional(a, key::output))
      argument.output = boolean(*v, actx + " output");
    function.arguments.push_back(std::move(argument));
  }
  function.workspaceBytes =
      integer(member(f, key::workspace_bytes, ctx), ctx + " workspace_bytes");
  if (function.workspaceBytes < 0)
    throw Error("manifest: " + ctx + " workspace_bytes must not be negative");
  for (const Json &t :
       list(member(f, key::temporaries, ctx), ctx + " temporaries")) {
    std::string tctx =
        ctx + " temporary " + std::to_string(function.temporaries.size());
    if (!t.is_object())
      throw Error("manifest: " + tctx + " must be an object");
    TemporarySpec temporary;
    temporary.dtype = dtypeField(t, tctx);
    temporary.shape = intList(member(t, key::shape, tctx), tctx + " shape");
    temporary.bytes = integer(member(t, key::bytes, tctx), tctx + " bytes");
    temporary.offset = integer(member(t, key::offset, tctx), tctx + " offset");
    if (std::any_of(temporary.shape.begin(), temporary.shape.end(),
                    [](int64_t d) { return d < 0; }))
      throw Error("manifest: " + tctx + " shape " +
                  listString(temporary.shape) + " must be static");
    int64_t needed =
        elementCount(temporary.shape) * dtypeBytes(temporary.dtype);
    if (temporary.bytes != needed)
      throw Error("manifest: " + tctx + " has " +
                  std::to_string(temporary.bytes) + " bytes, but " +
                  dtypeName(temporary.dtype) + listString(temporary.shape) +
                  " takes " + std::to_string(needed));
    if (temporary.offset < 0 || temporary.offset % kWorkspaceAlignment != 0)
      throw Error("manifest: " + tctx + " offset " +
                  std::to_string(temporary.offset) +
                  " is not a multiple of " +
                  std::to_string(kWorkspaceAlignment) + " bytes");
    if (temporary.offset + temporary.bytes > function.workspaceBytes)
      throw Error("manifest: " + tctx + " (" + std::to_string(temporary.bytes) +
                  " bytes at offset " + std::to_string(temporary.offset) +
                  ") lies outside the workspace of " +
                  std::to_string(function.workspaceBytes) + " bytes");
    function.temporaries.push_back(std::move(temporary));
  }
  for (const Json &st : list(member(f, key::steps, ctx), ctx + " steps")) {
    std::string sctx = ctx + " step " + std::to_string(function.steps.size());
    const Json *launch = st.is_object() ? optional(st, key::launch) : nullptr;
    const Json *call = st.is_object() ? optional(st, key::call) : nullptr;
    if (!launch == !call)
      throw Error("manifest: " + sctx +
                  " must have either \"launch\" (a kernel) or \"call\" (a "
                  "host callback)");
    Step step;
    const KernelSpec *kernel = nullptr;
    if (launch) {
      step.target = stringOf(*launch, sctx + " launch");
      for (const KernelSpec &k : manifest.kernels)
        if (k.name == step.target)
          kernel = &k;
      if (!kernel)
        throw Error("manifest: " + sctx + " launches '" + step.target +
                    "', which is not a kernel of the manifest");
    } else {
      step.kind = Step::Kind::call;
      step.target = stringOf(*call, sctx + " call");
    }
    for (const Json &o : list(member(st, key::args, sctx), sctx + " args"))
      step.args.push_back(parseOperand(
          o, function, sctx + " operand " + std::to_string(step.args.size())));
    if (kernel && step.args.size() != ownParameterCount(*kernel))
      throw Error("manifest: " + sctx + " passes " + step.target + " " +
                  std::to_string(step.args.size()) + " operands, but it takes " +
                  std::to_string(ownParameterCount(*kernel)) +
                  " (its tensor and scalar parameters, M, N, K and store "
                  "descriptors excepted)");
    function.steps.push_back(std::move(step));
  }
  return function;
}

/// Whether two kernels take the same arguments: parameters of the same
/// kinds, names, roles, sources, types and shapes (their TMA boxes may
/// differ).
/// Whether kernels `a` and `b` take the same arguments: the same parameters
/// but for output store descriptors, which a variant may take where another
/// does not (a schedule that stores an output with TMA beside one that does
/// not): a store descriptor is made from its output's argument, which the
/// launch checks, and is encoded as null where that output's rows cannot
/// be stored with TMA.
static bool sameArguments(const KernelSpec &a, const KernelSpec &b) {
  auto argumentParams = [](const KernelSpec &k) {
    std::vector<const ParamSpec *> params;
    for (const ParamSpec &p : k.params)
      if (!p.store)
        params.push_back(&p);
    return params;
  };
  std::vector<const ParamSpec *> as = argumentParams(a), bs = argumentParams(b);
  if (as.size() != bs.size())
    return false;
  for (size_t i = 0; i < as.size(); ++i) {
    const ParamSpec &p = *as[i], &q = *bs[i];
    if (p.kind != q.kind || p.name != q.name || p.operand != q.operand ||
        p.role != q.role || p.dtype != q.dtype || p.rank != q.rank ||
        p.shape != q.shape || p.partialTile != q.partialTile ||
        p.source != q.source)
      return false;
  }
  return true;
}

Manifest Manifest::parse(const std::string &text) {
  Json root = Json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded())
    throw Error("manifest: not valid JSON");
  if (!root.is_object())
    throw Error("manifest: not a JSON object");
  Manifest manifest;
  if (stringOf(member(root, key::format, "the manifest"), "format") !=
      abi::kFormat)
    throw Error("manifest: not a coda kernel manifest (format is not "
                "\"coda-kernels\")");
  if (integer(member(root, key::version, "the manifest"), "version") !=
      abi::kVersion)
    throw Error("manifest: unsupported version (this runtime reads version " +
                std::to_string(abi::kVersion) + ")");
  manifest.chip = stringOf(member(root, key::chip, "the manifest"), "chip");
  for (const Json &k :
       list(member(root, key::kernels, "the manifest"), "kernels")) {
    if (!k.is_object())
      throw Error("manifest: a kernel must be an object");
    KernelSpec kernel;
    kernel.name = stringOf(member(k, key::name, "a kernel"), "kernel name");
    std::string ctx = "kernel " + kernel.name;
    kernel.module = stringOf(member(k, key::module, ctx), ctx + " module");
    kernel.function = stringOf(member(k, key::function, ctx), ctx + " function");
    kernel.kind = vocabulary<abi::KernelKind>(member(k, key::kind, ctx), ctx);
    if (const Json *v = optional(k, key::role))
      kernel.role = stringOf(*v, ctx + " role");
    kernel.symbol = kernel.name;
    if (const Json *v = optional(k, key::symbol))
      kernel.symbol = stringOf(*v, ctx + " symbol");
    if (kernel.kind == KernelSpec::Kind::loop) {
      // A loop kernel's grid is the constant its launch was compiled with.
      const Json &grid = list(member(k, key::grid, ctx), ctx + " grid");
      if (grid.size() != 3)
        throw Error("manifest: " + ctx + " grid must have 3 entries");
      for (int i = 0; i < 3; ++i) {
        std::string text = stringOf(grid[i], ctx + " grid");
        char *end = nullptr;
        kernel.grid[i] = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end || kernel.grid[i] < 1)
          throw Error("manifest: " + ctx +
                      " grid must be positive integers, got '" + text + "'");
      }
    } else if (kernel.kind == KernelSpec::Kind::reducePartials) {
      kernel.axis = std::string(
          abi::name(vocabulary<abi::Axis>(member(k, key::axis, ctx), ctx)));
    } else {
      std::vector<int64_t> tile =
          intList(member(k, key::tile, ctx), ctx + " tile");
      if (tile.size() != 3)
        throw Error("manifest: " + ctx + " tile must have 3 entries");
      kernel.tileM = tile[0];
      kernel.tileN = tile[1];
      kernel.tileK = tile[2];
      kernel.stages = integer(member(k, key::stages, ctx), ctx + " stages");
      kernel.transposeB =
          boolean(member(k, key::transpose_b, ctx), ctx + " transpose_b");
      if (const Json *transposeA = optional(k, key::transpose_a))
        kernel.transposeA = boolean(*transposeA, ctx + " transpose_a");
      if (const Json *persistent = optional(k, key::persistent))
        kernel.persistent = boolean(*persistent, ctx + " persistent");
      if (const Json *batched = optional(k, key::batched))
        kernel.batched = boolean(*batched, ctx + " batched");
      if (const Json *cluster = optional(k, key::cluster)) {
        std::vector<int64_t> dims = intList(*cluster, ctx + " cluster");
        if (dims.size() != 3 || dims[0] < 1 || dims[1] != 1 || dims[2] != 1)
          throw Error("manifest: " + ctx +
                      " cluster must be [n, 1, 1] with n >= 1");
        kernel.cluster[0] = dims[0];
      }
    }
    const std::string dependentLaunch(key::dependent_launch);
    if (const Json *dependent = optional(k, dependentLaunch.c_str()))
      kernel.dependentLaunch = boolean(*dependent, ctx + " " + dependentLaunch);
    std::vector<int64_t> block =
        intList(member(k, key::block, ctx), ctx + " block");
    if (block.size() != 3)
      throw Error("manifest: " + ctx + " block must have 3 entries");
    for (int i = 0; i < 3; ++i)
      kernel.block[i] = block[i];
    checkLaunchGeometry(kernel.name, kernel.block, nullptr, LaunchLimits{});
    kernel.sharedMemoryBytes = integer(member(k, key::shared_memory_bytes, ctx),
                                       ctx + " shared_memory_bytes");
    if (const Json *v = optional(k, key::variant_of))
      kernel.variantOf = stringOf(*v, ctx + " variant_of");
    if (const Json *v = optional(k, key::max_k))
      kernel.maxK = integer(*v, ctx + " max_k");
    if (kernel.maxK < 0 || (kernel.maxK > 0 && kernel.variantOf.empty()))
      throw Error("manifest: " + ctx +
                  " max_k must be positive and come with variant_of");
    if (const Json *v = optional(k, key::wave_cost))
      kernel.waveCost = integer(*v, ctx + " wave_cost");
    if (kernel.waveCost < 0 ||
        (kernel.waveCost > 0 && (kernel.variantOf.empty() || kernel.maxK)))
      throw Error("manifest: " + ctx +
                  " wave_cost must be positive and come with variant_of "
                  "and no max_k");
    for (const Json &p : list(member(k, key::params, ctx), ctx + " params")) {
      if (!p.is_object())
        throw Error("manifest: " + ctx +
                    " has a parameter that is not an "
                    "object");
      ParamSpec param;
      param.name = stringOf(member(p, key::name, ctx + " parameter"),
                            ctx + " parameter name");
      std::string pctx = ctx + " parameter " + param.name;
      param.kind = vocabulary<abi::ParamKind>(member(p, key::kind, pctx), pctx);
      if (const Json *v = optional(p, key::operand))
        param.operand = stringOf(*v, pctx + " operand");
      if (const Json *v = optional(p, key::role))
        param.role =
            std::string(abi::name(vocabulary<abi::ParamRole>(*v, pctx)));
      if (const Json *v = optional(p, key::access))
        param.store = vocabulary<abi::Access>(*v, pctx) == abi::Access::store;
      // A descriptor's encoding: every field, as the compiler wrote it.
      if (param.kind == ParamSpec::Kind::tensormap) {
        param.swizzle =
            vocabulary<abi::Swizzle>(member(p, key::swizzle, pctx), pctx);
        param.l2Promotion =
            vocabulary<abi::L2Promotion>(member(p, key::l2_promotion, pctx), pctx);
        param.oobFill =
            vocabulary<abi::OobFill>(member(p, key::oob_fill, pctx), pctx);
        param.interleave =
            vocabulary<abi::Interleave>(member(p, key::interleave, pctx), pctx);
      }
      if (optional(p, key::dtype))
        param.dtype = dtypeField(p, pctx);
      if (const Json *v = optional(p, key::rank))
        param.rank = integer(*v, pctx + " rank");
      if (const Json *v = optional(p, key::shape))
        param.shape = intList(*v, pctx + " shape");
      if (const Json *v = optional(p, key::partial_tile))
        param.partialTile = integer(*v, pctx + " partial_tile");
      // A grouped output's shape follows from its group width.
      if (abi::parse<abi::ParamRole>(param.role) == abi::ParamRole::grouped &&
          param.partialTile <= 0)
        throw Error("manifest: " + pctx +
                    " (grouped) needs a positive partial_tile, its group "
                    "width");
      if (const Json *v = optional(p, key::box))
        param.box = intList(*v, pctx + " box");
      // A host function argument's position, or "temporary".
      if (const Json *v = optional(p, key::source)) {
        if (v->is_string() && v->get<std::string>() == abi::kTemporarySource)
          param.source = -1;
        else
          param.source = integer(*v, pctx + " source (an argument position or "
                                            "\"temporary\")");
      }
      // The sizes a launch passes: M, N, K, and B for a batched GEMM.
      std::optional<abi::Size> size = abi::parse<abi::Size>(param.name);
      if (param.kind == ParamSpec::Kind::index &&
          (!size || (*size == abi::Size::b && !kernel.batched)))
        throw Error("manifest: " + pctx +
                    " is an index parameter other than M, N, K (or B of a "
                    "batched GEMM)");
      kernel.params.push_back(std::move(param));
    }
    manifest.kernels.push_back(std::move(kernel));
  }
  // Every variant names the kernel launched for it (its function's
  // unbounded variant, or the first weighed by waves), which takes the
  // same arguments (sameArguments; a launch validates them once, against the
  // kernel named), is dispatched the same way, and lists the others.
  for (size_t i = 0; i < manifest.kernels.size(); ++i) {
    const KernelSpec &k = manifest.kernels[i];
    if (!k.isDispatchedVariant())
      continue;
    (void)manifest.kernel(k.variantOf); // absent: throws its error
    auto target = std::find_if(
        manifest.kernels.begin(), manifest.kernels.end(),
        [&](const KernelSpec &t) { return t.name == k.variantOf; });
    bool byWaves = k.waveCost > 0;
    if ((byWaves ? target->waveCost == 0 : k.maxK == 0 || target->waveCost) ||
        target->maxK != 0 || target->variantOf != target->name ||
        target->function != k.function || !sameArguments(*target, k))
      throw Error("manifest: kernel " + k.name + " is a variant of " +
                  k.variantOf +
                  ", which is not its function's variant launched by name, "
                  "dispatched alike, with the same parameters");
    target->variants.push_back(i);
  }
  // A role names one kernel of its function (its variants share it).
  std::set<std::pair<std::string, std::string>> roles;
  for (const KernelSpec &k : manifest.kernels)
    if (!k.role.empty() && !k.isDispatchedVariant() &&
        !roles.insert({k.function, k.role}).second)
      throw Error("manifest: two kernels of " + k.function + " have the role '" +
                  k.role + "'");
  for (KernelSpec &k : manifest.kernels)
    std::stable_sort(k.variants.begin(), k.variants.end(),
                     [&](size_t a, size_t b) {
                       return manifest.kernels[a].maxK <
                              manifest.kernels[b].maxK;
                     });
  if (const Json *functions = optional(root, key::functions))
    for (const Json &f : list(*functions, "functions"))
      manifest.functions.push_back(parseFunction(f, manifest));
  for (const FunctionSpec &f : manifest.functions)
    for (KernelSpec &k : manifest.kernels)
      if (k.function == f.name)
        k.functionArguments = static_cast<int64_t>(f.arguments.size());
  return manifest;
}

Manifest Manifest::load(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    throw Error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str());
}

const KernelSpec &Manifest::kernelFor(const std::string &function,
                                      const std::string &role) const {
  std::string known;
  for (const KernelSpec &k : kernels) {
    if (k.function != function || k.isDispatchedVariant() || k.role.empty())
      continue;
    if (k.role == role)
      return k;
    known += (known.empty() ? "" : ", ") + k.role;
  }
  throw Error("no kernel of " + function + " has the role '" + role + "' (" +
              (known.empty() ? std::string("it names no roles")
                             : "its roles: " + known) +
              ")");
}

const KernelSpec &Manifest::kernel(const std::string &name) const {
  for (const KernelSpec &k : kernels)
    if (k.name == name)
      return k;
  std::string known;
  for (const KernelSpec &k : kernels)
    known += (known.empty() ? "" : ", ") + k.name;
  throw Error("no kernel '" + name + "' in the manifest (it has: " + known +
              ")");
}

const FunctionSpec &Manifest::function(const std::string &name) const {
  for (const FunctionSpec &f : functions) {
    if (f.name != name)
      continue;
    if (!f.unsupported.empty())
      throw Error("function '" + name + "' cannot run whole: " + f.unsupported +
                  "; launch its kernels one by one");
    return f;
  }
  std::string known;
  for (const FunctionSpec &f : functions)
    known += (known.empty() ? "" : ", ") + f.name;
  throw Error("no function '" + name + "' in the manifest (it has: " + known +
              ")");
}

const KernelSpec &Manifest::variantFor(const KernelSpec &kernel,
                                       const GemmSizes &sizes,
                                       int64_t multiprocessors) const {
  if (kernel.waveCost == 0) {
    for (size_t i : kernel.variants)
      if (sizes.k <= kernels[i].maxK)
        return kernels[i];
    return kernel;
  }
  auto weight = [&](const KernelSpec &v) {
    return abi::gemmWaves(sizes.m, sizes.n, sizes.b, v.tileM, v.tileN,
                          v.cluster[0], multiprocessors) *
           v.waveCost;
  };
  const KernelSpec *best = &kernel;
  int64_t least = weight(kernel);
  for (size_t i : kernel.variants)
    if (int64_t w = weight(kernels[i]); w < least) {
      best = &kernels[i];
      least = w;
    }
  return *best;
}
