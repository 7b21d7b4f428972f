#include <algorithm>

#include "server/jinja_internal.h"

namespace pagoda::server::jinja {

namespace {

std::vector<json> eval_all(const std::vector<Expr>& exprs, Scope& s) {
    std::vector<json> out;
    out.reserve(exprs.size());
    for (const auto& e : exprs) out.push_back(e(s));
    return out;
}

int64_t length_of(const json& o) {
    return o.is_array()    ? int64_t(o.size())
           : o.is_string() ? int64_t(o.get_ref<const std::string&>().size())
                           : 0;
}

// o[lo:hi:step] with Python's rules (negative indices, clamping, negative steps), for lists
// and strings (strings by byte, as the templates' ASCII slicing needs).
json slice_of(const json& o, const Expr& lo, const Expr& hi, const Expr& step_e, Scope& s,
              int line) {
    const int64_t n = length_of(o);
    const int64_t step = step_e ? step_e(s).get<int64_t>() : 1;
    if (step == 0) fail(line, "slice step cannot be zero");
    auto norm = [n, step](int64_t i) {
        if (i < 0) i += n;
        return step > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t b = lo ? norm(lo(s).get<int64_t>()) : (step > 0 ? 0 : n - 1);
    const int64_t e = hi ? norm(hi(s).get<int64_t>()) : (step > 0 ? n : -1);
    std::vector<size_t> idx;
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step) idx.push_back(size_t(i));
    if (o.is_string()) {
        const std::string& str = o.get_ref<const std::string&>();
        std::string out;
        for (size_t i : idx) out += str[i];
        return json(out);
    }
    json out = json::array();
    for (size_t i : idx) out.push_back(o[i]);
    return out;
}

// o[k]: a dict key, or a list/string index (negative from the end); undefined otherwise.
json item_of(const json& o, const json& k) {
    if (o.is_object() && k.is_string()) {
        auto it = o.find(k.get<std::string>());
        return it != o.end() ? *it : undefined();
    }
    if ((o.is_array() || o.is_string()) && k.is_number_integer()) {
        const int64_t n = length_of(o);
        int64_t i = k.get<int64_t>();
        if (i < 0) i += n;
        if (i < 0 || i >= n) return undefined();
        return o.is_array() ? o[size_t(i)]
                            : json(std::string(1, o.get_ref<const std::string&>()[size_t(i)]));
    }
    return undefined();
}

json range(const std::vector<json>& args, int line) {
    int64_t b = 0, e = 0;
    if (args.size() == 1) {
        e = args[0].get<int64_t>();
    } else if (args.size() >= 2) {
        b = args[0].get<int64_t>();
        e = args[1].get<int64_t>();
    } else {
        fail(line, "range() needs 1 or 2 arguments");
    }
    if (e - b > 100000) fail(line, "range() of more than 100000 numbers");
    json out = json::array();
    for (int64_t i = b; i < e; ++i) out.push_back(i);
    return out;
}

// Recursive descent over the tokens, building closures: ternary > or > and > not >
// comparisons and tests > ~ > + - > * / // % > unary - > postfix (. [] |) > primary.
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
                    return json(apply_test(test, a(s), eval_all(args, s), line) != neg);
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
                if (kwargs == nullptr) {
                    fail(line_, "keyword arguments are only supported by namespace() and filters");
                }
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
        for (;;) {
            if (is_op(".")) {
                ++p_;
                a = attribute(a);
            } else if (is_op("[")) {
                ++p_;
                a = subscript(a);
            } else if (is_op("|")) {
                ++p_;
                a = filter(a);
            } else {
                break;
            }
        }
        return a;
    }
    // a.attr or a.method(args)
    Expr attribute(Expr a) {
        const int line = line_;
        const std::string attr = name();
        if (is_op("(")) {
            auto args = call_args();
            return [a, attr, args, line](Scope& s) {
                return call_method(a(s), attr, eval_all(args, s), line);
            };
        }
        return [a, attr](Scope& s) {
            const json o = a(s);
            if (o.is_object()) {
                auto it = o.find(attr);
                if (it != o.end()) return *it;
            }
            return undefined();
        };
    }
    // a[k] or a[lo:hi], after the '['
    Expr subscript(Expr a) {
        Expr lo, hi, step;
        bool slice = false;
        if (!is_op(":")) lo = expr();
        if (is_op(":")) {
            slice = true;
            ++p_;
            if (!is_op("]") && !is_op(":")) hi = expr();
            if (is_op(":")) {
                ++p_;
                if (!is_op("]")) step = expr();
            }
        }
        expect_op("]");
        if (slice) {
            const int line = line_;
            return
                [a, lo, hi, step, line](Scope& s) { return slice_of(a(s), lo, hi, step, s, line); };
        }
        return [a, lo](Scope& s) { return item_of(a(s), lo(s)); };
    }
    // a | f or a | f(args), after the '|'
    Expr filter(Expr a) {
        const int line = line_;
        const std::string f = name();
        std::vector<Expr> args;
        std::vector<std::pair<std::string, Expr>> kwargs;
        if (is_op("(")) args = call_args(&kwargs);
        return [a, f, args, kwargs, line](Scope& s) {
            json kw = json::object();
            for (const auto& [k, v] : kwargs) kw[k] = v(s);
            return apply_filter(f, a(s), eval_all(args, s), line, kw);
        };
    }
    Expr primary() {
        const Tok t = peek();
        if (t.kind == Tok::kNum || t.kind == Tok::kStr) {
            ++p_;
            json v = t.kind == Tok::kNum ? t.num : json(t.text);
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
            return list_literal();
        }
        if (is_op("{")) {
            ++p_;
            return dict_literal();
        }
        if (t.kind == Tok::kName) {
            ++p_;
            const std::string n = t.text;
            if (n == "true" || n == "True") return [](Scope&) { return json(true); };
            if (n == "false" || n == "False") return [](Scope&) { return json(false); };
            if (n == "none" || n == "None") return [](Scope&) { return json(nullptr); };
            if (is_op("(")) return function_call(n);
            return [n](Scope& s) {
                json* v = s.find(n);
                return v ? *v : undefined();
            };
        }
        fail(line_, fmt::format("unexpected '{}' in expression", t.text));
    }
    Expr list_literal() {
        std::vector<Expr> items;
        while (!is_op("]")) {
            items.push_back(expr());
            if (!is_op("]")) expect_op(",");
        }
        ++p_;
        return [items](Scope& s) { return json(eval_all(items, s)); };
    }
    Expr dict_literal() {
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
    // The global functions: raise_exception(msg), namespace(k=v, ...), range([b,] e).
    Expr function_call(const std::string& n) {
        const int line = line_;
        std::vector<std::pair<std::string, Expr>> kwargs;
        auto args = call_args(n == "namespace" ? &kwargs : nullptr);
        if (n == "raise_exception") {
            return [args, line](Scope& s) -> json {
                fail(line,
                     "the template raised: " + (args.empty() ? std::string() : to_str(args[0](s))));
            };
        }
        if (n == "namespace") {
            return [kwargs](Scope& s) {
                json o = json::object();
                for (const auto& [k, v] : kwargs) o[k] = v(s);
                return o;
            };
        }
        if (n == "range") return [args, line](Scope& s) { return range(eval_all(args, s), line); };
        fail(line, fmt::format("unknown function '{}'", n));
    }

    std::vector<Tok> t_;
    size_t p_ = 0;
    int line_;
    int depth_ = 0;
};

}  // namespace

Expr compile_expr(const std::string& s, int line) {
    return ExprParser(lex_expr(s, line), line).parse_all();
}

}  // namespace pagoda::server::jinja
