#pragma once
// Internals of the Jinja engine (jinja.h), shared by its files:
//   jinja_lexer.cpp    template text -> pieces (text, {{ }}, {% %}) and expression tokens
//   jinja_expr.cpp     expression parser -> closures (Expr)
//   jinja_parse.cpp    statement parser -> tree of Nodes
//   jinja.cpp          evaluator (statements, macros, loops) and the public Template API
//   jinja_value.cpp    values as Python sees them: truth, str(), repr(), json.dumps, arithmetic
//   jinja_filters.cpp  filters and tests
//   jinja_methods.cpp  methods of str, list and dict, and the global functions
// Values are insertion-ordered JSON (Python dicts keep their order, and tojson of a tool's
// parameters must too); `discarded` stands for Jinja's Undefined and a binary value for a
// macro. Errors travel as JinjaError exceptions inside these files only.

#include <fmt/format.h>

#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace pagoda::jinja {

using json = nlohmann::ordered_json;

struct JinjaError : std::runtime_error {
    JinjaError(int l, std::string d, const std::string& full)
        : std::runtime_error(full), line(l), detail(std::move(d)) {}
    int line;
    std::string detail;  // the message without its position
};
// Raised by raise_exception(): the template's own message, without a position.
struct TemplateRaised : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(int line, const std::string& what);
// Values grow only so far (a template could double a string in a loop): 16 MiB / items.
void check_size(size_t n, int line);

// --- Values (jinja_value.cpp) -----------------------------------------------------------
const json& undefined();
inline bool is_undef(const json& v) { return v.is_discarded(); }
inline bool is_macro(const json& v) { return v.is_binary(); }
// Markup (a string marked safe by |safe or |escape): Python's str subclass whose `+`
// HTML-escapes the other operand. Held as {"\x01markup": text}; plain() gives the text as
// a str for everything else.
json make_markup(std::string text);
bool is_markup(const json& v);
inline const json& plain(const json& v, json& tmp) {
    if (!is_markup(v)) return v;
    tmp = v.begin().value();
    return tmp;
}
std::string html_escape(const std::string& s);
const char* type_name(const json& v);  // Python's name: str, int, list, dict, NoneType, ...
bool truthy(const json& v);
std::string to_str(const json& v);   // str(v)
std::string py_repr(const json& v);  // repr(v)
std::string py_float(double d);      // repr(float)
struct JsonStyle {                   // json.dumps options
    int indent = -1;                 // < 0: one line
    bool ensure_ascii = false;
    bool sort_keys = false;
    std::string item_sep = ", ", key_sep = ": ";  // Python: "," when indented
};
void py_json(const json& v, std::string& out, const JsonStyle& st, int depth, int line);
bool py_equal(const json& l, const json& r);
bool py_less(const json& l, const json& r, int line);
json arith(const std::string& op, const json& l, const json& r, int line);
bool contains(const json& container, const json& item, int line);
// Strings are UTF-8; lengths, indices and slices count code points, as Python's do.
std::vector<std::string> code_points(const std::string& s);
int64_t py_len(const json& v, int line);
json item_of(const json& o, const json& key, int line);          // o[key]
json attr_of(const json& o, const std::string& name, int line);  // o.name
json slice_of(const json& o, std::optional<int64_t> lo, std::optional<int64_t> hi,
              std::optional<int64_t> step, int line);
json iterate(const json& v, int line);  // what `for` walks: items, keys or characters

// --- Scopes -------------------------------------------------------------------------------
struct Macro;
struct Scope {
    std::vector<std::map<std::string, json>> frames;  // innermost last
    size_t barrier = 0;      // inside a macro: frames below this are hidden (except the globals)
    size_t macro_base = 1;   // ...and of the globals only frames[0, macro_base) are visible
    int64_t iterations = 0;  // loop iterations so far (bounded per render)
    int calls = 0;           // macro call depth (bounded)
    std::vector<std::shared_ptr<const Macro>> macros;  // a macro value indexes this table
    std::optional<std::time_t> now;                    // strftime_now's clock; unset: real time
    json* find(const std::string& name);
    json& set(const std::string& name) { return frames.back()[name]; }
};

using Expr = std::function<json(Scope&)>;
using Ref = std::function<json*(Scope&)>;  // a variable or attribute, for in-place methods
struct Args {                              // evaluated call arguments
    std::vector<json> pos;
    json kw = json::object();
};
// Binds call arguments to parameter names (Python's rules); missing ones are undefined.
std::vector<json> bind_args(const Args& a, const std::vector<std::string>& names,
                            const std::string& what, int line);

// Calling a macro value; set by the evaluator (jinja.cpp).
json call_macro(Scope& s, const json& macro, const Args& a, int line);

// --- Built-ins (jinja_filters.cpp, jinja_methods.cpp) -------------------------------------
json apply_filter(Scope& s, const std::string& f, const json& v, const Args& a, int line);
bool apply_test(Scope& s, const std::string& t, const json& v, const Args& a, int line);
bool has_test(const std::string& t);
json call_method(Scope& s, json* target, const json& obj, const std::string& m, const Args& a,
                 int line);
// Global functions (raise_exception, strftime_now, range, namespace, dict); nullopt when
// `name` is not one.
std::optional<json> call_global(Scope& s, const std::string& name, const Args& a, int line);
// A global function as a value (`strftime_now is defined`, passing it around): a callable
// like a macro, with a subtype above the macro table's range; undefined for other names.
json global_value(const std::string& name);
std::optional<std::string> global_name(const json& v);

// --- Lexing (jinja_lexer.cpp) ----------------------------------------------------------------
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
    int column = 0;  // of the tag's '{', from 1
};
std::vector<Piece> split_template(const std::string& src);

// --- Expressions (jinja_expr.cpp) ------------------------------------------------------------
class ExprParser {
  public:
    ExprParser(std::vector<Tok> toks, int line) : t_(std::move(toks)), line_(line) {}
    Expr expr();  // a full expression (conditional)
    // `a, b` (a list) or one expression; a for loop's iterable has no `x if c else y`
    // (its `if` filters the loop).
    Expr tuple_or_expr(bool with_condexpr = true);
    Expr parse_all();               // an expression that must use every token
    Expr filter_chain(Expr input);  // `f(args) | g` after a statement's name
    Ref ref_of_last() const { return last_ref_; }
    std::vector<std::pair<std::string, Expr>> params();  // (a, b=1) of a macro
    bool at_end() const { return peek().kind == Tok::kEnd; }
    const Tok& peek(size_t k = 0) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
    bool is_op(const char* op, size_t k = 0) const {
        return peek(k).kind == Tok::kOp && peek(k).text == op;
    }
    bool is_name(const char* n, size_t k = 0) const {
        return peek(k).kind == Tok::kName && peek(k).text == n;
    }
    void expect_op(const char* op);
    void expect_end(const char* what);
    std::string name();
    int line() const { return line_; }

  private:
    struct Depth;
    Expr or_();
    Expr and_();
    Expr not_();
    Expr compare();
    Expr math1();
    Expr concat();
    Expr math2();
    Expr power();
    Expr unary(bool with_filters);
    Expr postfix(Expr a);
    Expr filters_and_tests(Expr a);
    Expr filter(Expr a);
    Expr test(Expr a);
    Expr primary();
    Expr subscript(Expr a);
    Expr attribute(Expr a);
    Expr paren();
    Expr list_literal();
    Expr dict_literal();
    Expr call(const std::string& fname);
    std::function<Args(Scope&)> call_args();

    std::vector<Tok> t_;
    size_t p_ = 0;
    int line_;
    int depth_ = 0;
    Ref last_ref_;  // set when the last primary/postfix chain is a variable or attribute
};
Expr compile_expr(const std::string& s, int line);

// --- Statements (jinja_parse.cpp) -------------------------------------------------------
struct Node {
    enum Kind {
        kText,
        kOutput,
        kIf,
        kFor,
        kSet,
        kSetBlock,
        kMacro,
        kCall,
        kFilter,
        kBreak,
        kContinue,
        kBlock
    } kind = kBlock;
    int line = 0;
    std::string text;                                          // kText; kMacro name
    Expr expr;                                                 // output, set value, iterable
    Expr cond;                                                 // kFor: `if` filter
    std::vector<std::pair<Expr, std::vector<Node>>> branches;  // kIf: (condition or none, body)
    std::vector<std::string> targets;                          // kFor / kSet names
    std::string attr;                                          // kSet ns.attr
    std::vector<std::pair<std::string, Expr>> params;          // kMacro, kCall (caller's)
    std::function<json(Scope&, const json&)> filter;           // kFilter, kSetBlock
    std::vector<Node> body, else_body;
};
std::vector<Node> parse_statements(const std::vector<Piece>& pieces);

struct Macro {
    std::string name;
    const Node* node;            // kMacro or kCall (the caller body)
    size_t visible = 1;          // frames visible from the body besides its own
    std::optional<json> caller;  // for a macro called from {% call %}
};

}  // namespace pagoda::jinja
