//===- Manifest.cpp - read manifest.json ----------------------------------===//

#include "coda/Runtime/Manifest.h"

#include "Json.h"

#include <algorithm>
#include <fstream>
#include <sstream>

using namespace coda::runtime;

DType coda::runtime::parseDType(const std::string &name) {
  static const std::pair<const char *, DType> names[] = {
      {"bf16", DType::bf16}, {"f16", DType::f16}, {"f32", DType::f32},
      {"f64", DType::f64},   {"i32", DType::i32}, {"i64", DType::i64},
      {"i8", DType::i8},     {"i1", DType::i1}};
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
  case DType::i1: return 1;
  }
  return 1;
}

static std::vector<int64_t> intList(const json::Value &v,
                                    const std::string &context) {
  if (v.type != json::Value::Type::array)
    throw Error("manifest: " + context + " must be a list");
  std::vector<int64_t> out;
  for (const json::Value &e : v.array)
    out.push_back(e.asInt(context));
  return out;
}

/// Whether two kernels take the same arguments: parameters of the same
/// kinds, names, roles, sources, types and shapes (their TMA boxes may
/// differ).
static bool sameArguments(const KernelSpec &a, const KernelSpec &b) {
  if (a.params.size() != b.params.size())
    return false;
  for (size_t i = 0; i < a.params.size(); ++i) {
    const ParamSpec &p = a.params[i], &q = b.params[i];
    if (p.kind != q.kind || p.name != q.name || p.operand != q.operand ||
        p.role != q.role || p.store != q.store || p.dtype != q.dtype ||
        p.rank != q.rank || p.shape != q.shape ||
        p.partialTile != q.partialTile || p.source != q.source)
      return false;
  }
  return true;
}

Manifest Manifest::parse(const std::string &text) {
  json::Value root = json::parse(text);
  Manifest manifest;
  if (root.at("format", "the manifest").asString("format") != "coda-kernels")
    throw Error("manifest: not a coda kernel manifest (format is not "
                "\"coda-kernels\")");
  if (root.at("version", "the manifest").asInt("version") != 1)
    throw Error("manifest: unsupported version (this runtime reads version 1)");
  manifest.chip = root.at("chip", "the manifest").asString("chip");
  for (const json::Value &k : root.at("kernels", "the manifest").array) {
    KernelSpec kernel;
    kernel.name = k.at("name", "a kernel").asString("kernel name");
    std::string ctx = "kernel " + kernel.name;
    kernel.module = k.at("module", ctx).asString(ctx + " module");
    kernel.function = k.at("function", ctx).asString(ctx + " function");
    const std::string &kind = k.at("kind", ctx).asString(ctx + " kind");
    if (kind == "reduce_partials") {
      kernel.kind = KernelSpec::Kind::reducePartials;
      kernel.axis = k.at("axis", ctx).asString(ctx + " axis");
      if (kernel.axis != "row" && kernel.axis != "col")
        throw Error("manifest: " + ctx + " axis must be row or col");
    } else if (kind == "gemm") {
      std::vector<int64_t> tile = intList(k.at("tile", ctx), ctx + " tile");
      if (tile.size() != 3)
        throw Error("manifest: " + ctx + " tile must have 3 entries");
      kernel.tileM = tile[0];
      kernel.tileN = tile[1];
      kernel.tileK = tile[2];
      kernel.stages = k.at("stages", ctx).asInt(ctx + " stages");
      kernel.transposeB = k.at("transpose_b", ctx).boolean;
      if (const json::Value *transposeA = k.find("transpose_a"))
        kernel.transposeA = transposeA->boolean;
      if (const json::Value *persistent = k.find("persistent"))
        kernel.persistent = persistent->boolean;
      if (const json::Value *cluster = k.find("cluster")) {
        std::vector<int64_t> dims = intList(*cluster, ctx + " cluster");
        if (dims.size() != 3 || dims[0] < 1 || dims[1] != 1 || dims[2] != 1)
          throw Error("manifest: " + ctx +
                      " cluster must be [n, 1, 1] with n >= 1");
        kernel.cluster[0] = dims[0];
      }
    } else {
      throw Error("manifest: " + ctx + " has unknown kind '" + kind + "'");
    }
    std::vector<int64_t> block = intList(k.at("block", ctx), ctx + " block");
    if (block.size() != 3)
      throw Error("manifest: " + ctx + " block must have 3 entries");
    for (int i = 0; i < 3; ++i)
      kernel.block[i] = block[i];
    kernel.sharedMemoryBytes =
        k.at("shared_memory_bytes", ctx).asInt(ctx + " shared_memory_bytes");
    if (const json::Value *v = k.find("variant_of"))
      kernel.variantOf = v->asString(ctx + " variant_of");
    if (const json::Value *v = k.find("max_k"))
      kernel.maxK = v->asInt(ctx + " max_k");
    if (kernel.maxK < 0 || (kernel.maxK > 0 && kernel.variantOf.empty()))
      throw Error("manifest: " + ctx +
                  " max_k must be positive and come with variant_of");
    for (const json::Value &p : k.at("params", ctx).array) {
      ParamSpec param;
      param.name = p.at("name", ctx + " parameter").asString("name");
      std::string pctx = ctx + " parameter " + param.name;
      const std::string &kind = p.at("kind", pctx).asString(pctx + " kind");
      if (kind == "tensormap")
        param.kind = ParamSpec::Kind::tensormap;
      else if (kind == "index")
        param.kind = ParamSpec::Kind::index;
      else if (kind == "memref")
        param.kind = ParamSpec::Kind::memref;
      else if (kind == "scalar")
        param.kind = ParamSpec::Kind::scalar;
      else
        throw Error("manifest: " + pctx + " has unknown kind '" + kind + "'");
      if (const json::Value *v = p.find("operand"))
        param.operand = v->asString(pctx + " operand");
      if (const json::Value *v = p.find("role"))
        param.role = v->asString(pctx + " role");
      if (const json::Value *v = p.find("access")) {
        const std::string &access = v->asString(pctx + " access");
        if (access != "load" && access != "store")
          throw Error("manifest: " + pctx + " has unknown access '" + access +
                      "'");
        param.store = access == "store";
      }
      if (const json::Value *v = p.find("dtype"))
        param.dtype = parseDType(v->asString(pctx + " dtype"));
      if (const json::Value *v = p.find("rank"))
        param.rank = v->asInt(pctx + " rank");
      if (const json::Value *v = p.find("shape"))
        param.shape = intList(*v, pctx + " shape");
      if (const json::Value *v = p.find("partial_tile"))
        param.partialTile = v->asInt(pctx + " partial_tile");
      if (const json::Value *v = p.find("box"))
        param.box = intList(*v, pctx + " box");
      if (const json::Value *v = p.find("source"))
        param.source = v->type == json::Value::Type::number
                           ? v->asInt(pctx + " source")
                           : -1;
      kernel.params.push_back(std::move(param));
    }
    manifest.kernels.push_back(std::move(kernel));
  }
  // Every variant names its function's unbounded variant, which takes the
  // same arguments (a launch validates them once, against the kernel named)
  // and lists its bounded variants by max_k.
  for (size_t i = 0; i < manifest.kernels.size(); ++i) {
    const KernelSpec &k = manifest.kernels[i];
    if (k.variantOf.empty() || k.variantOf == k.name)
      continue;
    (void)manifest.kernel(k.variantOf); // absent: throws its error
    auto target = std::find_if(
        manifest.kernels.begin(), manifest.kernels.end(),
        [&](const KernelSpec &t) { return t.name == k.variantOf; });
    if (!k.isBoundedVariant() || target->maxK != 0 ||
        target->variantOf != target->name || target->function != k.function ||
        !sameArguments(*target, k))
      throw Error("manifest: kernel " + k.name + " is a variant of " +
                  k.variantOf +
                  ", which is not its function's unbounded "
                  "variant with the same parameters");
    target->variants.push_back(i);
  }
  for (KernelSpec &k : manifest.kernels)
    std::sort(k.variants.begin(), k.variants.end(), [&](size_t a, size_t b) {
      return manifest.kernels[a].maxK < manifest.kernels[b].maxK;
    });
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

const KernelSpec &Manifest::variantFor(const KernelSpec &kernel,
                                       int64_t k) const {
  for (size_t i : kernel.variants)
    if (k <= kernels[i].maxK)
      return kernels[i];
  return kernel;
}
