#include "server/jinja.h"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>
#include <stdexcept>
#include <vector>

namespace pagoda::server::jinja {

using json = nlohmann::json;

namespace {

// Errors travel as exceptions inside this file only; the public API returns Result.
struct JinjaError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(int line, const std::string& what) {
    throw JinjaError(fmt::format("chat template line {}: {}", line, what));
}

const json& undefined() {
    static const json u(json::value_t::discarded);
    return u;
}
bool is_undef(const json& v) { return v.is_discarded(); }

bool truthy(const json& v) {
    if (is_undef(v) || v.is_null()) return false;
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number_integer()) return v.get<int64_t>() != 0;
    if (v.is_number()) return v.get<double>() != 0.0;
    if (v.is_string()) return !v.get_ref<const std::string&>().empty();
    if (v.is_array() || v.is_object()) return !v.empty();
    return true;
}

void py_json(const json& v, std::string& out) {  // Python json.dumps style: ", " and ": "
    if (v.is_object()) {
        out += "{";
        bool first = true;
        for (const auto& [k, x] : v.items()) {
            if (!first) out += ", ";
            first = false;
            out += json(k).dump(-1, ' ', false, json::error_handler_t::replace) + ": ";
            py_json(x, out);
        }
        out += "}";
    } else if (v.is_array()) {
        out += "[";
        for (size_t i = 0; i < v.size(); ++i) {
            if (i) out += ", ";
            py_json(v[i], out);
        }
        out += "]";
    } else if (is_undef(v)) {
        out += "null";
    } else {
        out += v.dump(-1, ' ', false, json::error_handler_t::replace);
    }
}

std::string to_str(const json& v) {
    if (is_undef(v)) return "";
    if (v.is_string()) return v.get<std::string>();
    if (v.is_null()) return "None";
    if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
    if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
    if (v.is_number()) return fmt::format("{}", v.get<double>());
    std::string s;
    py_json(v, s);
    return s;
}

// ---------------------------------------------------------------------------------------
// Scopes

struct Scope {
    std::vector<std::map<std::string, json>> frames;
    int64_t iterations = 0;  // loop iterations so far (bounded per render)
    json* find(const std::string& name) {
        for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
            auto f = it->find(name);
            if (f != it->end()) return &f->second;
        }
        return nullptr;
    }
};

using Expr = std::function<json(Scope&)>;

// ---------------------------------------------------------------------------------------
// Expression tokens and parser

struct Tok {
    enum Kind { kName, kNum, kStr, kOp, kEnd } kind = kEnd;
    std::string text;
    json num;
};

std::vector<Tok> lex_expr(const std::string& s, int line) {
    std::vector<Tok> out;
    size_t i = 0;
    while (i < s.size()) {
        const char c = s[i];
        if (std::isspace(static_cast<unsigned char>(c))) {
            ++i;
        } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            size_t j = i;
            while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_'))
                ++j;
            out.push_back({Tok::kName, s.substr(i, j - i), {}});
            i = j;
        } else if (std::isdigit(static_cast<unsigned char>(c))) {
            size_t j = i;
            bool real = false;
            while (j < s.size() &&
                   (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.')) {
                if (s[j] == '.') {
                    if (j + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[j + 1])))
                        break;
                    real = true;
                }
                ++j;
            }
            const std::string t = s.substr(i, j - i);
            errno = 0;
            char* end = nullptr;
            const json v = real ? json(std::strtod(t.c_str(), &end))
                                : json(int64_t(std::strtoll(t.c_str(), &end, 10)));
            if (errno == ERANGE) fail(line, fmt::format("number {} is out of range", t));
            out.push_back({Tok::kNum, t, v});
            i = j;
        } else if (c == '\'' || c == '"') {
            std::string v;
            size_t j = i + 1;
            while (j < s.size() && s[j] != c) {
                if (s[j] == '\\' && j + 1 < s.size()) {
                    const char e = s[++j];
                    v += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
                } else {
                    v += s[j];
                }
                ++j;
            }
            if (j >= s.size()) fail(line, "unterminated string");
            out.push_back({Tok::kStr, v, {}});
            i = j + 1;
        } else {
            static const char* ops[] = {"==", "!=", "<=", ">=", "//", "**", "(", ")", "[",
                                        "]",  "{",  "}",  ",",  ":",  ".",  "|", "~", "+",
                                        "-",  "*",  "/",  "%",  "<",  ">",  "="};
            bool matched = false;
            for (const char* op : ops) {
                const size_t n = std::char_traits<char>::length(op);
                if (s.compare(i, n, op) == 0) {
                    out.push_back({Tok::kOp, op, {}});
                    i += n;
                    matched = true;
                    break;
                }
            }
            if (!matched) fail(line, fmt::format("unexpected character '{}'", c));
        }
    }
    out.push_back({Tok::kEnd, "", {}});
    return out;
}

json call_method(const json& obj, const std::string& m, const std::vector<json>& a, int line) {
    if (obj.is_string()) {
        const std::string& s = obj.get_ref<const std::string&>();
        auto ws = [](char ch) { return std::isspace(static_cast<unsigned char>(ch)) != 0; };
        auto chars = [&](size_t k) {
            return a.size() > k && a[k].is_string() ? a[k].get<std::string>() : std::string();
        };
        auto strip_l = [&](std::string x, const std::string& set) {
            size_t p = 0;
            while (p < x.size() && (set.empty() ? ws(x[p]) : set.find(x[p]) != std::string::npos))
                ++p;
            return x.substr(p);
        };
        auto strip_r = [&](std::string x, const std::string& set) {
            size_t p = x.size();
            while (p > 0 && (set.empty() ? ws(x[p - 1]) : set.find(x[p - 1]) != std::string::npos))
                --p;
            return x.substr(0, p);
        };
        if (m == "strip") return strip_r(strip_l(s, chars(0)), chars(0));
        if (m == "lstrip") return strip_l(s, chars(0));
        if (m == "rstrip") return strip_r(s, chars(0));
        if (m == "upper" || m == "lower" || m == "title" || m == "capitalize") {
            std::string r = s;
            bool start = true;
            for (size_t k = 0; k < r.size(); ++k) {
                const unsigned char ch = static_cast<unsigned char>(r[k]);
                if (m == "upper")
                    r[k] = char(std::toupper(ch));
                else if (m == "lower")
                    r[k] = char(std::tolower(ch));
                else if (m == "capitalize")
                    r[k] = char(k == 0 ? std::toupper(ch) : std::tolower(ch));
                else {
                    r[k] = char(start ? std::toupper(ch) : std::tolower(ch));
                    start = !std::isalpha(ch);
                }
            }
            return r;
        }
        if (m == "startswith" && !a.empty()) return s.rfind(to_str(a[0]), 0) == 0;
        if (m == "endswith" && !a.empty()) {
            const std::string t = to_str(a[0]);
            return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
        }
        if (m == "replace" && a.size() >= 2) {
            const std::string from = to_str(a[0]), to = to_str(a[1]);
            if (from.empty()) return s;
            std::string r;
            size_t p = 0, q;
            while ((q = s.find(from, p)) != std::string::npos) {
                r += s.substr(p, q - p) + to;
                p = q + from.size();
            }
            return r + s.substr(p);
        }
        if (m == "split") {
            json out = json::array();
            if (a.empty() || a[0].is_null()) {
                size_t p = 0;
                while (p < s.size()) {
                    while (p < s.size() && ws(s[p])) ++p;
                    size_t q = p;
                    while (q < s.size() && !ws(s[q])) ++q;
                    if (q > p) out.push_back(s.substr(p, q - p));
                    p = q;
                }
                return out;
            }
            const std::string sep = to_str(a[0]);
            if (sep.empty()) fail(line, "split() with an empty separator");
            size_t p = 0, q;
            while ((q = s.find(sep, p)) != std::string::npos) {
                out.push_back(s.substr(p, q - p));
                p = q + sep.size();
            }
            out.push_back(s.substr(p));
            return out;
        }
    }
    if (obj.is_object()) {
        if (m == "items") {
            json out = json::array();
            for (const auto& [k, v] : obj.items()) out.push_back(json::array({k, v}));
            return out;
        }
        if (m == "keys") {
            json out = json::array();
            for (const auto& [k, v] : obj.items()) out.push_back(k);
            return out;
        }
        if (m == "values") {
            json out = json::array();
            for (const auto& [k, v] : obj.items()) out.push_back(v);
            return out;
        }
        if (m == "get" && !a.empty()) {
            auto it = obj.find(to_str(a[0]));
            return it != obj.end() ? *it : (a.size() > 1 ? a[1] : json(nullptr));
        }
    }
    fail(line, fmt::format("unknown method '{}' on a {}", m,
                           is_undef(obj) ? "undefined value" : obj.type_name()));
}

json apply_filter(const std::string& f, const json& v, const std::vector<json>& a, int line) {
    if (f == "trim") return call_method(json(to_str(v)), "strip", {}, line);
    if (f == "length" || f == "count") {
        if (v.is_string()) return json(v.get_ref<const std::string&>().size());
        if (v.is_array() || v.is_object()) return json(v.size());
        return json(0);
    }
    if (f == "tojson") {
        std::string s;
        py_json(v, s);
        return s;
    }
    if (f == "upper" || f == "lower" || f == "capitalize" || f == "title")
        return call_method(json(to_str(v)), f, {}, line);
    if (f == "string") return to_str(v);
    if (f == "safe") return v;
    if (f == "int") {
        if (v.is_number()) return json(int64_t(v.get<double>()));
        try {
            return json(std::stoll(to_str(v)));
        } catch (...) {
            return json(0);
        }
    }
    if (f == "first") return v.is_array() && !v.empty() ? v.front() : undefined();
    if (f == "last") return v.is_array() && !v.empty() ? v.back() : undefined();
    if (f == "default" || f == "d") {
        const bool use = is_undef(v) || (a.size() > 1 && truthy(a[1]) && !truthy(v));
        return use ? (a.empty() ? json("") : a[0]) : v;
    }
    if (f == "join") {
        std::string s;
        const std::string sep = a.empty() ? "" : to_str(a[0]);
        if (v.is_array()) {
            for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + to_str(v[i]);
        }
        return s;
    }
    if (f == "items") return call_method(v, "items", {}, line);
    if (f == "list") return v.is_array() ? v : json::array();
    fail(line, fmt::format("unknown filter '{}'", f));
}

bool apply_test(const std::string& t, const json& v, const std::vector<json>& a, int line) {
    if (t == "defined") return !is_undef(v);
    if (t == "undefined") return is_undef(v);
    if (t == "none") return v.is_null();
    if (t == "string") return v.is_string();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.is_number_integer();
    if (t == "boolean") return v.is_boolean();
    if (t == "mapping") return v.is_object();
    if (t == "sequence" || t == "iterable") return v.is_array() || v.is_string() || v.is_object();
    if (t == "true") return v.is_boolean() && v.get<bool>();
    if (t == "false") return v.is_boolean() && !v.get<bool>();
    if ((t == "equalto" || t == "eq" || t == "sameas") && !a.empty()) return v == a[0];
    if (t == "odd" && v.is_number_integer()) return v.get<int64_t>() % 2 != 0;
    if (t == "even" && v.is_number_integer()) return v.get<int64_t>() % 2 == 0;
    fail(line, fmt::format("unknown test '{}'", t));
}

json arith(const std::string& op, const json& l, const json& r, int line) {
    if (op == "+" && l.is_string() && r.is_string())
        return l.get<std::string>() + r.get<std::string>();
    if (op == "+" && l.is_array() && r.is_array()) {
        json out = l;
        for (const auto& x : r) out.push_back(x);
        return out;
    }
    if (!l.is_number() || !r.is_number()) {
        fail(line, fmt::format("'{}' needs numbers (or two strings / lists for +), got {} and {}",
                               op, is_undef(l) ? "undefined" : l.type_name(),
                               is_undef(r) ? "undefined" : r.type_name()));
    }
    const bool ints = l.is_number_integer() && r.is_number_integer();
    if (ints && op != "/") {
        const int64_t a = l.get<int64_t>(), b = r.get<int64_t>();
        if (op == "+") return a + b;
        if (op == "-") return a - b;
        if (op == "*") return a * b;
        if (b == 0) fail(line, "division by zero");
        if (op == "//") return a / b;
        if (op == "%") return ((a % b) + b) % b;
    }
    const double a = l.get<double>(), b = r.get<double>();
    if (op == "+") return a + b;
    if (op == "-") return a - b;
    if (op == "*") return a * b;
    if (b == 0) fail(line, "division by zero");
    if (op == "/") return a / b;
    if (op == "//") return std::floor(a / b);
    return std::fmod(a, b);
}

bool less(const json& l, const json& r, int line) {
    if (l.is_number() && r.is_number()) return l.get<double>() < r.get<double>();
    if (l.is_string() && r.is_string()) return l.get<std::string>() < r.get<std::string>();
    fail(line, "comparison needs two numbers or two strings");
}

class ExprParser {
  public:
    ExprParser(std::vector<Tok> toks, int line) : t_(std::move(toks)), line_(line) {}
    Expr parse_all() {
        Expr e = expr();
        if (!at_end()) fail(line_, fmt::format("unexpected '{}' in expression", peek().text));
        return e;
    }
    Expr expr() { return ternary(); }
    bool at_end() const { return t_[p_].kind == Tok::kEnd; }
    const Tok& peek(size_t k = 0) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
    bool is_op(const char* op, size_t k = 0) const {
        return peek(k).kind == Tok::kOp && peek(k).text == op;
    }
    bool is_name(const char* n, size_t k = 0) const {
        return peek(k).kind == Tok::kName && peek(k).text == n;
    }
    void expect_op(const char* op) {
        if (!is_op(op)) fail(line_, fmt::format("expected '{}' but found '{}'", op, peek().text));
        ++p_;
    }
    std::string name() {
        if (peek().kind != Tok::kName)
            fail(line_, fmt::format("expected a name but found '{}'", peek().text));
        return t_[p_++].text;
    }

  private:
    struct Depth {  // bounds recursion on hostile input (templates come from model files)
        ExprParser& p;
        explicit Depth(ExprParser& q) : p(q) {
            if (++p.depth_ > 64) fail(p.line_, "expression nested too deeply (limit 64)");
        }
        ~Depth() { --p.depth_; }
    };
    Expr ternary() {
        Depth d(*this);
        Expr a = or_();
        if (is_name("if")) {
            ++p_;
            Expr c = or_();
            Expr b = [](Scope&) { return undefined(); };
            if (is_name("else")) {
                ++p_;
                b = ternary();
            }
            return [a, c, b](Scope& s) { return truthy(c(s)) ? a(s) : b(s); };
        }
        return a;
    }
    Expr or_() {
        Expr a = and_();
        while (is_name("or")) {
            ++p_;
            Expr b = and_();
            a = [a, b](Scope& s) {
                json x = a(s);
                return truthy(x) ? x : b(s);
            };
        }
        return a;
    }
    Expr and_() {
        Expr a = not_();
        while (is_name("and")) {
            ++p_;
            Expr b = not_();
            a = [a, b](Scope& s) {
                json x = a(s);
                return !truthy(x) ? x : b(s);
            };
        }
        return a;
    }
    Expr not_() {
        Depth d(*this);
        if (is_name("not")) {
            ++p_;
            Expr a = not_();
            return [a](Scope& s) { return json(!truthy(a(s))); };
        }
        return compare();
    }
    Expr compare() {
        Expr a = concat();
        const int line = line_;
        for (;;) {
            std::string op;
            if (peek().kind == Tok::kOp && (is_op("==") || is_op("!=") || is_op("<") ||
                                            is_op(">") || is_op("<=") || is_op(">="))) {
                op = t_[p_++].text;
            } else if (is_name("in")) {
                ++p_;
                op = "in";
            } else if (is_name("not") && is_name("in", 1)) {
                p_ += 2;
                op = "not in";
            } else if (is_name("is")) {
                ++p_;
                bool neg = false;
                if (is_name("not")) {
                    ++p_;
                    neg = true;
                }
                const std::string test = name();
                std::vector<Expr> args;
                if (is_op("(")) {
                    args = call_args();
                } else if (!at_end() && (peek().kind == Tok::kStr || peek().kind == Tok::kNum)) {
                    args.push_back(primary());
                }
                a = [a, neg, test, args, line](Scope& s) {
                    std::vector<json> av;
                    for (const auto& e : args) av.push_back(e(s));
                    return json(apply_test(test, a(s), av, line) != neg);
                };
                continue;
            } else {
                break;
            }
            Expr b = concat();
            a = [a, b, op, line](Scope& s) -> json {
                const json l = a(s), r = b(s);
                if (op == "==") return l == r;
                if (op == "!=") return l != r;
                if (op == "<") return less(l, r, line);
                if (op == ">") return less(r, l, line);
                if (op == "<=") return !less(r, l, line);
                if (op == ">=") return !less(l, r, line);
                bool in = false;
                if (r.is_string())
                    in = r.get<std::string>().find(to_str(l)) != std::string::npos;
                else if (r.is_array())
                    in = std::find(r.begin(), r.end(), l) != r.end();
                else if (r.is_object())
                    in = l.is_string() && r.contains(l.get<std::string>());
                return op == "in" ? in : !in;
            };
        }
        return a;
    }
    Expr concat() {
        Expr a = additive();
        while (is_op("~")) {
            ++p_;
            Expr b = additive();
            a = [a, b](Scope& s) { return json(to_str(a(s)) + to_str(b(s))); };
        }
        return a;
    }
    Expr additive() {
        Expr a = mult();
        const int line = line_;
        while (is_op("+") || is_op("-")) {
            const std::string op = t_[p_++].text;
            Expr b = mult();
            a = [a, b, op, line](Scope& s) { return arith(op, a(s), b(s), line); };
        }
        return a;
    }
    Expr mult() {
        Expr a = unary();
        const int line = line_;
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const std::string op = t_[p_++].text;
            Expr b = unary();
            a = [a, b, op, line](Scope& s) { return arith(op, a(s), b(s), line); };
        }
        return a;
    }
    Expr unary() {
        Depth d(*this);
        if (is_op("-")) {
            ++p_;
            Expr a = unary();
            const int line = line_;
            return [a, line](Scope& s) { return arith("-", json(0), a(s), line); };
        }
        return postfix();
    }
    std::vector<Expr> call_args(std::vector<std::pair<std::string, Expr>>* kwargs = nullptr) {
        expect_op("(");
        std::vector<Expr> args;
        while (!is_op(")")) {
            if (peek().kind == Tok::kName && is_op("=", 1)) {
                const std::string k = name();
                ++p_;
                Expr v = expr();
                if (kwargs == nullptr)
                    fail(line_, "keyword arguments are only supported by namespace()");
                kwargs->emplace_back(k, v);
            } else {
                args.push_back(expr());
            }
            if (!is_op(")")) expect_op(",");
        }
        ++p_;
        return args;
    }
    Expr postfix() {
        Expr a = primary();
        const int line = line_;
        for (;;) {
            if (is_op(".")) {
                ++p_;
                const std::string attr = name();
                if (is_op("(")) {
                    auto args = call_args();
                    a = [a, attr, args, line](Scope& s) {
                        std::vector<json> av;
                        for (const auto& e : args) av.push_back(e(s));
                        return call_method(a(s), attr, av, line);
                    };
                } else {
                    a = [a, attr](Scope& s) {
                        const json o = a(s);
                        if (o.is_object()) {
                            auto it = o.find(attr);
                            if (it != o.end()) return *it;
                        }
                        return undefined();
                    };
                }
            } else if (is_op("[")) {
                ++p_;
                Expr lo, hi;
                bool slice = false;
                if (!is_op(":")) lo = expr();
                if (is_op(":")) {
                    slice = true;
                    ++p_;
                    if (!is_op("]")) hi = expr();
                }
                expect_op("]");
                if (slice) {
                    a = [a, lo, hi](Scope& s) {
                        const json o = a(s);
                        const int64_t n = o.is_array() ? int64_t(o.size())
                                          : o.is_string()
                                              ? int64_t(o.get_ref<const std::string&>().size())
                                              : 0;
                        auto norm = [n](int64_t i) {
                            return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n);
                        };
                        const int64_t b = lo ? norm(lo(s).get<int64_t>()) : 0,
                                      e = hi ? norm(hi(s).get<int64_t>()) : n;
                        if (o.is_string())
                            return json(
                                e > b ? o.get<std::string>().substr(size_t(b), size_t(e - b)) : "");
                        json out = json::array();
                        for (int64_t i = b; i < e; ++i) out.push_back(o[size_t(i)]);
                        return out;
                    };
                } else {
                    a = [a, lo](Scope& s) {
                        const json o = a(s), k = lo(s);
                        if (o.is_object() && k.is_string()) {
                            auto it = o.find(k.get<std::string>());
                            return it != o.end() ? *it : undefined();
                        }
                        if ((o.is_array() || o.is_string()) && k.is_number_integer()) {
                            const int64_t n = o.is_array()
                                                  ? int64_t(o.size())
                                                  : int64_t(o.get_ref<const std::string&>().size());
                            int64_t i = k.get<int64_t>();
                            if (i < 0) i += n;
                            if (i < 0 || i >= n) return undefined();
                            return o.is_array()
                                       ? o[size_t(i)]
                                       : json(std::string(
                                             1, o.get_ref<const std::string&>()[size_t(i)]));
                        }
                        return undefined();
                    };
                }
            } else if (is_op("|")) {
                ++p_;
                const std::string f = name();
                std::vector<Expr> args;
                if (is_op("(")) args = call_args();
                a = [a, f, args, line](Scope& s) {
                    std::vector<json> av;
                    for (const auto& e : args) av.push_back(e(s));
                    return apply_filter(f, a(s), av, line);
                };
            } else {
                break;
            }
        }
        return a;
    }
    Expr primary() {
        const Tok t = peek();
        const int line = line_;
        if (t.kind == Tok::kNum) {
            ++p_;
            json v = t.num;
            return [v](Scope&) { return v; };
        }
        if (t.kind == Tok::kStr) {
            ++p_;
            json v = t.text;
            return [v](Scope&) { return v; };
        }
        if (is_op("(")) {
            ++p_;
            Expr e = expr();
            expect_op(")");
            return e;
        }
        if (is_op("[")) {
            ++p_;
            std::vector<Expr> items;
            while (!is_op("]")) {
                items.push_back(expr());
                if (!is_op("]")) expect_op(",");
            }
            ++p_;
            return [items](Scope& s) {
                json out = json::array();
                for (const auto& e : items) out.push_back(e(s));
                return out;
            };
        }
        if (is_op("{")) {
            ++p_;
            std::vector<std::pair<Expr, Expr>> items;
            while (!is_op("}")) {
                Expr k = expr();
                expect_op(":");
                items.emplace_back(k, expr());
                if (!is_op("}")) expect_op(",");
            }
            ++p_;
            return [items](Scope& s) {
                json out = json::object();
                for (const auto& [k, v] : items) out[to_str(k(s))] = v(s);
                return out;
            };
        }
        if (t.kind == Tok::kName) {
            ++p_;
            const std::string n = t.text;
            if (n == "true" || n == "True") return [](Scope&) { return json(true); };
            if (n == "false" || n == "False") return [](Scope&) { return json(false); };
            if (n == "none" || n == "None") return [](Scope&) { return json(nullptr); };
            if (is_op("(")) {
                std::vector<std::pair<std::string, Expr>> kwargs;
                auto args = call_args(n == "namespace" ? &kwargs : nullptr);
                if (n == "raise_exception") {
                    return [args, line](Scope& s) -> json {
                        fail(line, "the template raised: " +
                                       (args.empty() ? std::string() : to_str(args[0](s))));
                    };
                }
                if (n == "namespace") {
                    return [kwargs](Scope& s) {
                        json o = json::object();
                        for (const auto& [k, v] : kwargs) o[k] = v(s);
                        return o;
                    };
                }
                if (n == "range") {
                    return [args, line](Scope& s) {
                        int64_t b = 0, e = 0;
                        if (args.size() == 1)
                            e = args[0](s).get<int64_t>();
                        else if (args.size() >= 2)
                            b = args[0](s).get<int64_t>(), e = args[1](s).get<int64_t>();
                        else
                            fail(line, "range() needs 1 or 2 arguments");
                        if (e - b > 100000) fail(line, "range() of more than 100000 numbers");
                        json out = json::array();
                        for (int64_t i = b; i < e; ++i) out.push_back(i);
                        return out;
                    };
                }
                fail(line, fmt::format("unknown function '{}'", n));
            }
            return [n](Scope& s) {
                json* v = s.find(n);
                return v ? *v : undefined();
            };
        }
        fail(line, fmt::format("unexpected '{}' in expression", t.text));
    }

    std::vector<Tok> t_;
    size_t p_ = 0;
    int line_;
    int depth_ = 0;
};

}  // namespace

// ---------------------------------------------------------------------------------------
// Statements

struct Template::Node {
    enum Kind { kText, kOutput, kIf, kFor, kSet, kBlock } kind = kBlock;
    std::string text;  // kText
    Expr expr;         // kOutput, kSet value, kFor iterable
    std::vector<std::pair<Expr, std::vector<Node>>>
        branches;                       // kIf: (condition or empty = else, body)
    std::vector<std::string> vars;      // kFor targets
    std::string set_name, set_attr;     // kSet
    std::vector<Node> body, else_body;  // kFor / kBlock
    int line = 0;
};

namespace {

struct Piece {
    enum Kind { kText, kExpr, kStmt } kind;
    std::string s;
    int line;
};

std::vector<Piece> split(const std::string& src) {
    std::vector<Piece> out;
    size_t i = 0;
    int line = 1;
    bool trim_next =
        false;  // strip leading whitespace of the next text ('-' or trim_blocks newline)
    bool trim_newline = false;
    auto count_lines = [&](size_t a, size_t b) {
        for (size_t k = a; k < b && k < src.size(); ++k) line += src[k] == '\n';
    };
    while (i < src.size()) {
        size_t open = std::string::npos;
        for (const char* o : {"{{", "{%", "{#"}) open = std::min(open, src.find(o, i));
        std::string text = src.substr(i, open == std::string::npos ? std::string::npos : open - i);
        const bool began_line = i == 0 || src[i - 1] == '\n' || (!text.empty() && text[0] == '\n');
        if (trim_next) {
            size_t p = 0;
            while (p < text.size() && std::isspace(static_cast<unsigned char>(text[p]))) ++p;
            text = text.substr(p);
        } else if (trim_newline && !text.empty() && text[0] == '\n') {
            text = text.substr(1);
        }
        trim_next = trim_newline = false;
        if (open == std::string::npos) {
            if (!text.empty()) out.push_back({Piece::kText, text, line});
            break;
        }
        const char kind = src[open + 1];
        const bool minus_open = open + 2 < src.size() && src[open + 2] == '-';
        const bool plus_open = open + 2 < src.size() && src[open + 2] == '+';
        if (minus_open) {
            size_t e = text.size();
            while (e > 0 && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
            text.resize(e);
        } else if (kind != '{' &&
                   !plus_open) {  // lstrip_blocks: only spaces before a block tag on its line
            const size_t nl = text.rfind('\n');
            const size_t from = nl == std::string::npos ? 0 : nl + 1;
            bool only_ws = true;
            for (size_t k = from; k < text.size(); ++k)
                only_ws = only_ws && (text[k] == ' ' || text[k] == '\t');
            const bool line_start = nl != std::string::npos || began_line;
            if (only_ws && line_start) text.resize(from);
        }
        if (!text.empty()) out.push_back({Piece::kText, text, line});
        count_lines(i, open);
        const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
        const size_t end = src.find(close, open + 2);
        if (end == std::string::npos) fail(line, fmt::format("'{}{}' is never closed", '{', kind));
        size_t body_start = open + 2 + (minus_open || plus_open ? 1 : 0);
        size_t body_end = end;
        const bool minus_close = body_end > body_start && src[body_end - 1] == '-';
        if (minus_close || (body_end > body_start && src[body_end - 1] == '+')) --body_end;
        const std::string body = src.substr(body_start, body_end - body_start);
        if (kind == '{') out.push_back({Piece::kExpr, body, line});
        if (kind == '%') out.push_back({Piece::kStmt, body, line});
        count_lines(open, end + 2);
        i = end + 2;
        if (minus_close)
            trim_next = true;
        else if (kind != '{')
            trim_newline = true;  // trim_blocks
    }
    return out;
}

std::string trim(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
}

std::string first_word(const std::string& s) {
    size_t e = 0;
    while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_')) ++e;
    return s.substr(0, e);
}

Expr compile(const std::string& s, int line) {
    return ExprParser(lex_expr(s, line), line).parse_all();
}

// Parses pieces[pos..] until one of `stops` (a statement keyword); returns the stop found.
std::string parse_body(const std::vector<Piece>& pieces, size_t& pos,
                       std::vector<Template::Node>& out, const std::vector<std::string>& stops,
                       int depth = 0) {
    using Node = Template::Node;
    if (depth > 64)
        fail(pos < pieces.size() ? pieces[pos].line : 0, "statements nested too deeply (limit 64)");
    while (pos < pieces.size()) {
        const Piece& p = pieces[pos];
        if (p.kind == Piece::kText) {
            Node n;
            n.kind = Node::kText;
            n.text = p.s;
            out.push_back(std::move(n));
            ++pos;
            continue;
        }
        if (p.kind == Piece::kExpr) {
            Node n;
            n.kind = Node::kOutput;
            n.expr = compile(p.s, p.line);
            n.line = p.line;
            out.push_back(std::move(n));
            ++pos;
            continue;
        }
        const std::string st = trim(p.s);
        const std::string kw = first_word(st);
        const std::string rest = trim(st.substr(kw.size()));
        for (const auto& s : stops) {
            if (kw == s) return kw;
        }
        ++pos;
        if (kw == "if") {
            Node n;
            n.kind = Node::kIf;
            n.line = p.line;
            Expr cond = compile(rest, p.line);
            for (;;) {
                std::vector<Node> body;
                const std::string stop =
                    parse_body(pieces, pos, body, {"elif", "else", "endif"}, depth + 1);
                if (stop.empty()) fail(p.line, "'if' without 'endif'");
                n.branches.emplace_back(cond, std::move(body));
                const Piece& sp = pieces[pos];
                ++pos;
                if (stop == "endif") break;
                if (stop == "else") {
                    std::vector<Node> eb;
                    if (parse_body(pieces, pos, eb, {"endif"}, depth + 1).empty())
                        fail(p.line, "'if' without 'endif'");
                    ++pos;
                    n.branches.emplace_back(Expr{}, std::move(eb));
                    break;
                }
                const std::string s2 = trim(sp.s);
                cond = compile(trim(s2.substr(4)), sp.line);
            }
            out.push_back(std::move(n));
        } else if (kw == "for") {
            Node n;
            n.kind = Node::kFor;
            n.line = p.line;
            const size_t in = rest.find(" in ");
            if (in == std::string::npos) fail(p.line, "expected 'for x in ...'");
            std::string vars = rest.substr(0, in);
            size_t c;
            while ((c = vars.find(',')) != std::string::npos) {
                n.vars.push_back(trim(vars.substr(0, c)));
                vars = vars.substr(c + 1);
            }
            n.vars.push_back(trim(vars));
            std::string iter = trim(rest.substr(in + 4));
            if (iter.size() > 10 && iter.find(" recursive") == iter.size() - 10)
                fail(p.line, "recursive loops are not supported");
            n.expr = compile(iter, p.line);
            const std::string stop = parse_body(pieces, pos, n.body, {"else", "endfor"}, depth + 1);
            if (stop.empty()) fail(p.line, "'for' without 'endfor'");
            ++pos;
            if (stop == "else") {
                if (parse_body(pieces, pos, n.else_body, {"endfor"}, depth + 1).empty())
                    fail(p.line, "'for' without 'endfor'");
                ++pos;
            }
            out.push_back(std::move(n));
        } else if (kw == "set") {
            Node n;
            n.kind = Node::kSet;
            n.line = p.line;
            const size_t eq = rest.find('=');
            if (eq == std::string::npos)
                fail(p.line, "block 'set' is not supported; use 'set x = value'");
            const std::string target = trim(rest.substr(0, eq));
            const size_t dot = target.find('.');
            n.set_name = trim(target.substr(0, dot));
            if (dot != std::string::npos) n.set_attr = trim(target.substr(dot + 1));
            n.expr = compile(rest.substr(eq + 1), p.line);
            out.push_back(std::move(n));
        } else if (kw == "generation" || kw == "endgeneration") {
            // Hugging Face's assistant-mask markers: no output of their own.
        } else {
            fail(p.line, fmt::format("unsupported statement '{}'", kw.empty() ? st : kw));
        }
    }
    return "";
}

void run(const std::vector<Template::Node>& nodes, Scope& s, std::string& out) {
    using Node = Template::Node;
    for (const Node& n : nodes) {
        if (out.size() > (4u << 20)) fail(n.line, "the rendered prompt is larger than 4 MiB");
        switch (n.kind) {
            case Node::kText: out += n.text; break;
            case Node::kOutput: out += to_str(n.expr(s)); break;
            case Node::kIf:
                for (const auto& [cond, body] : n.branches) {
                    if (!cond || truthy(cond(s))) {
                        run(body, s, out);
                        break;
                    }
                }
                break;
            case Node::kSet: {
                json v = n.expr(s);
                if (n.set_attr.empty()) {
                    s.frames.back()[n.set_name] = std::move(v);
                } else {
                    json* ns = s.find(n.set_name);
                    if (ns == nullptr || !ns->is_object())
                        fail(n.line, fmt::format("'{}' is not a namespace", n.set_name));
                    (*ns)[n.set_attr] = std::move(v);
                }
                break;
            }
            case Node::kFor: {
                json it = n.expr(s);
                json items = json::array();
                if (it.is_array())
                    items = it;
                else if (it.is_object()) {
                    for (const auto& [k, v] : it.items()) items.push_back(k);
                } else if (it.is_string()) {
                    for (char c : it.get<std::string>()) items.push_back(std::string(1, c));
                } else if (!is_undef(it) && !it.is_null()) {
                    fail(n.line, fmt::format("cannot loop over a {}", it.type_name()));
                }
                if (items.empty()) {
                    run(n.else_body, s, out);
                    break;
                }
                const size_t len = items.size();
                for (size_t i = 0; i < len; ++i) {
                    if (++s.iterations > 1000000) fail(n.line, "more than 1000000 loop iterations");
                    s.frames.emplace_back();
                    auto& f = s.frames.back();
                    if (n.vars.size() == 1) {
                        f[n.vars[0]] = items[i];
                    } else {
                        for (size_t k = 0; k < n.vars.size(); ++k)
                            f[n.vars[k]] = items[i].is_array() && k < items[i].size() ? items[i][k]
                                                                                      : undefined();
                    }
                    f["loop"] = {{"index", i + 1},
                                 {"index0", i},
                                 {"first", i == 0},
                                 {"last", i + 1 == len},
                                 {"length", len},
                                 {"revindex", len - i},
                                 {"revindex0", len - i - 1},
                                 {"previtem", i > 0 ? items[i - 1] : undefined()},
                                 {"nextitem", i + 1 < len ? items[i + 1] : undefined()}};
                    run(n.body, s, out);
                    // Namespace changes made inside the loop live in outer frames already;
                    // plain `set` inside a loop stays local, as in Jinja.
                    s.frames.pop_back();
                }
                break;
            }
            case Node::kBlock: run(n.body, s, out); break;
        }
    }
}

}  // namespace

Template::Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;
Template::~Template() = default;

Result<Template> Template::parse(const std::string& source_in) {
    try {
        // As Jinja (keep_trailing_newline off): one trailing newline of the source is dropped.
        std::string source = source_in;
        if (!source.empty() && source.back() == '\n') source.pop_back();
        const auto pieces = split(source);
        auto root = std::make_shared<Node>();
        root->kind = Node::kBlock;
        size_t pos = 0;
        const std::string stop =
            parse_body(pieces, pos, root->body, {"endif", "endfor", "elif", "else"});
        if (!stop.empty())
            fail(pieces[pos].line, fmt::format("'{}' without its opening statement", stop));
        Template t;
        t.root_ = std::move(root);
        return t;
    } catch (const JinjaError& e) {
        return make_error(ErrorCode::kInvalidArgument, "{}", e.what());
    } catch (const std::exception& e) {  // json::exception and anything else: a template error
        return make_error(ErrorCode::kInvalidArgument, "chat template: {}", e.what());
    }
}

Result<std::string> Template::render(const json& context) const {
    try {
        Scope s;
        s.frames.emplace_back();
        if (context.is_object()) {
            for (const auto& [k, v] : context.items()) s.frames.back()[k] = v;
        }
        std::string out;
        run(root_->body, s, out);
        return out;
    } catch (const JinjaError& e) {
        return make_error(ErrorCode::kInvalidArgument, "{}", e.what());
    } catch (const std::exception& e) {
        return make_error(ErrorCode::kInvalidArgument, "chat template: {}", e.what());
    }
}

}  // namespace pagoda::server::jinja
