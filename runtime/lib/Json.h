//===- Json.h - a small JSON reader for manifests ---------------*- C++ -*-===//
//
// Enough JSON for manifest.json, so that the runtime depends on nothing but
// the C++ library and libcuda.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_RUNTIME_LIB_JSON_H
#define CODA_RUNTIME_LIB_JSON_H

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace coda::runtime::json {

struct Value {
  enum class Type { null, boolean, number, string, array, object } type =
      Type::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;

  /// Member `key` of an object; throws Error naming `context` when absent.
  const Value &at(const std::string &key, const std::string &context) const;
  const Value *find(const std::string &key) const;
  int64_t asInt(const std::string &context) const;
  const std::string &asString(const std::string &context) const;
};

/// Parses `text`; throws Error with the byte offset of a syntax error.
Value parse(const std::string &text);

} // namespace coda::runtime::json

#endif // CODA_RUNTIME_LIB_JSON_H
