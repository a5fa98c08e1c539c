//===- Json.cpp - a small JSON reader for manifests -----------------------===//

#include "Json.h"

#include "coda/Runtime/Manifest.h"

#include <cstdlib>

using namespace coda::runtime;
using namespace coda::runtime::json;

namespace {
class Parser {
public:
  explicit Parser(const std::string &text) : text(text) {}

  Value parseDocument() {
    Value v = parseValue();
    skipSpace();
    if (pos != text.size())
      fail("trailing characters");
    return v;
  }

private:
  [[noreturn]] void fail(const std::string &what) {
    throw Error("manifest is not valid JSON: " + what + " at byte " +
                std::to_string(pos));
  }
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n' ||
                                 text[pos] == '\r' || text[pos] == '\t'))
      ++pos;
  }
  bool consume(char c) {
    skipSpace();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c))
      fail(std::string("expected '") + c + "'");
  }
  Value parseValue() {
    skipSpace();
    if (pos >= text.size())
      fail("unexpected end");
    char c = text[pos];
    Value v;
    if (c == '{') {
      ++pos;
      v.type = Value::Type::object;
      if (consume('}'))
        return v;
      do {
        skipSpace();
        std::string key = parseString();
        expect(':');
        v.object[key] = parseValue();
      } while (consume(','));
      expect('}');
    } else if (c == '[') {
      ++pos;
      v.type = Value::Type::array;
      if (consume(']'))
        return v;
      do
        v.array.push_back(parseValue());
      while (consume(','));
      expect(']');
    } else if (c == '"') {
      v.type = Value::Type::string;
      v.string = parseString();
    } else if (text.compare(pos, 4, "true") == 0) {
      pos += 4;
      v.type = Value::Type::boolean;
      v.boolean = true;
    } else if (text.compare(pos, 5, "false") == 0) {
      pos += 5;
      v.type = Value::Type::boolean;
    } else if (text.compare(pos, 4, "null") == 0) {
      pos += 4;
    } else {
      const char *start = text.c_str() + pos;
      char *end = nullptr;
      v.number = std::strtod(start, &end);
      if (end == start)
        fail("unexpected character");
      pos += end - start;
      v.type = Value::Type::number;
    }
    return v;
  }
  std::string parseString() {
    if (pos >= text.size() || text[pos] != '"')
      fail("expected a string");
    ++pos;
    std::string out;
    while (pos < text.size() && text[pos] != '"') {
      char c = text[pos++];
      if (c == '\\') {
        if (pos >= text.size())
          fail("unterminated escape");
        char e = text[pos++];
        switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u':
          // Manifests are ASCII; keep the escape as written.
          out += "\\u";
          break;
        default: out += e; break;
        }
      } else {
        out += c;
      }
    }
    if (pos >= text.size())
      fail("unterminated string");
    ++pos;
    return out;
  }

  const std::string &text;
  size_t pos = 0;
};
} // namespace

const Value &Value::at(const std::string &key,
                       const std::string &context) const {
  const Value *v = find(key);
  if (!v)
    throw Error("manifest: " + context + " has no \"" + key + "\"");
  return *v;
}

const Value *Value::find(const std::string &key) const {
  if (type != Type::object)
    return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &it->second;
}

int64_t Value::asInt(const std::string &context) const {
  if (type != Type::number)
    throw Error("manifest: " + context + " must be a number");
  return static_cast<int64_t>(number);
}

const std::string &Value::asString(const std::string &context) const {
  if (type != Type::string)
    throw Error("manifest: " + context + " must be a string");
  return string;
}

Value coda::runtime::json::parse(const std::string &text) {
  return Parser(text).parseDocument();
}
