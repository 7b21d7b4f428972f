#pragma once
// Internals of the Jinja subset (jinja.h), shared by its files: values and scopes
// (jinja_value.cpp), the lexer (jinja_lexer.cpp), the expression parser (jinja_expr.cpp)
// and the statement parser and evaluator (jinja.cpp). Errors travel as JinjaError
// exceptions inside these files only; Template's public API returns Result.

#include <fmt/format.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace pagoda::server::jinja {

using json = nlohmann::json;

struct JinjaError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(int line, const std::string& what);

// Values: JSON, with `discarded` standing for Jinja's undefined.
const json& undefined();
inline bool is_undef(const json& v) { return v.is_discarded(); }
bool truthy(const json& v);
// Python json.dumps: ", " and ": " separators, or with indent >= 0 newlines and "," items.
struct JsonStyle {
    int indent = -1;
    bool ensure_ascii = false;
};
void py_json(const json& v, std::string& out, const JsonStyle& st = {}, int depth = 0);
std::string to_str(const json& v);  // as Jinja prints a value

// Variables: a stack of frames, innermost last.
struct Scope {
    std::vector<std::map<std::string, json>> frames;
    int64_t iterations = 0;  // loop iterations so far (bounded per render)
    json* find(const std::string& name);
};

using Expr = std::function<json(Scope&)>;

// Operations on values (jinja_value.cpp).
json call_method(const json& obj, const std::string& m, const std::vector<json>& a, int line);
json apply_filter(const std::string& f, const json& v, const std::vector<json>& a, int line,
                  const json& kwargs = json::object());
bool apply_test(const std::string& t, const json& v, const std::vector<json>& a, int line);
json arith(const std::string& op, const json& l, const json& r, int line);
bool less(const json& l, const json& r, int line);

// Lexing (jinja_lexer.cpp): expression tokens, and the template split into text,
// {{ expression }} and {% statement %} pieces with whitespace control applied.
struct Tok {
    enum Kind { kName, kNum, kStr, kOp, kEnd } kind = kEnd;
    std::string text;
    json num;
};
std::vector<Tok> lex_expr(const std::string& s, int line);

struct Piece {
    enum Kind { kText, kExpr, kStmt } kind;
    std::string s;
    int line;
};
std::vector<Piece> split_template(const std::string& src);

// Expressions (jinja_expr.cpp).
Expr compile_expr(const std::string& s, int line);

}  // namespace pagoda::server::jinja
