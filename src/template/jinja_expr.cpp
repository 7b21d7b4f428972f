// Jinja expressions, parsed by recursive descent with Jinja2's precedence into closures:
// conditional > or > and > not > comparisons (chained) and `in` > + - > ~ > * / // % > ** >
// unary - + > primary with postfix (. [] ()) and then filters (|) and tests (is).
#include <algorithm>

#include "template/jinja_internal.h"

namespace pagoda::jinja {

namespace {

// The value of `a`, read in place when `base` points at it (a variable, or an item or
// attribute of one): `messages[i]` and `messages | length` do not copy the conversation.
const json& value_of(const Expr& a, const Ref& base, Scope& s, json& tmp) {
    if (base) {
        if (const json* p = base(s)) return *p;
    }
    tmp = a(s);
    return tmp;
}

}  // namespace

struct ExprParser::Depth {  // bounds recursion on hostile input (templates come from files)
    ExprParser& p;
    explicit Depth(ExprParser& q) : p(q) {
        if (++p.depth_ > 64) fail(p.line_, "expression nested too deeply (limit 64)");
    }
    ~Depth() { --p.depth_; }
};

void ExprParser::expect_op(const char* op) {
    if (!is_op(op)) {
        fail(line_, fmt::format("expected '{}' but found '{}'", op,
                                at_end() ? "the end of the tag" : peek().text));
    }
    ++p_;
}

void ExprParser::expect_end(const char* what) {
    if (!at_end()) fail(line_, fmt::format("unexpected '{}' in {}", peek().text, what));
}

std::string ExprParser::name() {
    if (peek().kind != Tok::kName) {
        fail(line_, fmt::format("expected a name but found '{}'",
                                at_end() ? "the end of the tag" : peek().text));
    }
    return t_[p_++].text;
}

Expr ExprParser::parse_all() {
    Expr e = tuple_or_expr();
    expect_end("expression");
    return e;
}

Expr ExprParser::tuple_or_expr(bool with_condexpr) {
    Expr first = with_condexpr ? expr() : or_();
    if (!is_op(",")) return first;
    std::vector<Expr> items{first};
    while (is_op(",")) {
        ++p_;
        if (at_end() || is_op(")")) break;
        items.push_back(with_condexpr ? expr() : or_());
    }
    return [items](Scope& s) {
        json out = json::array();
        for (const auto& e : items) out.push_back(e(s));
        return out;
    };
}

Expr ExprParser::expr() {
    Depth d(*this);
    Expr a = or_();
    while (is_name("if")) {
        ++p_;
        Expr c = or_();
        Expr b = [](Scope&) { return undefined(); };
        if (is_name("else")) {
            ++p_;
            b = expr();
        }
        a = [a, c, b](Scope& s) { return truthy(c(s)) ? a(s) : b(s); };
    }
    return a;
}

Expr ExprParser::or_() {
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

Expr ExprParser::and_() {
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

Expr ExprParser::not_() {
    Depth d(*this);
    if (is_name("not")) {
        ++p_;
        Expr a = not_();
        return [a](Scope& s) { return json(!truthy(a(s))); };
    }
    return compare();
}

namespace {

bool compare_op(const std::string& op, const json& l, const json& r, int line) {
    if (op == "==") return py_equal(l, r);
    if (op == "!=") return !py_equal(l, r);
    if (op == "<") return py_less(l, r, line);
    if (op == ">") return py_less(r, l, line);
    if (op == "<=") return !py_less(r, l, line);
    if (op == ">=") return !py_less(l, r, line);
    const bool in = contains(r, l, line);
    return op == "in" ? in : !in;
}

}  // namespace

// a < b <= c is (a < b) and (b <= c), each operand evaluated once.
Expr ExprParser::compare() {
    Expr first = math1();
    std::vector<std::pair<std::string, Expr>> ops;
    for (;;) {
        std::string op;
        if (peek().kind == Tok::kOp && (is_op("==") || is_op("!=") || is_op("<") || is_op(">") ||
                                        is_op("<=") || is_op(">="))) {
            op = t_[p_++].text;
        } else if (is_name("in")) {
            ++p_;
            op = "in";
        } else if (is_name("not") && is_name("in", 1)) {
            p_ += 2;
            op = "not in";
        } else {
            break;
        }
        ops.emplace_back(op, math1());
    }
    if (ops.empty()) return first;
    const int line = line_;
    return [first, ops, line](Scope& s) {
        json l = first(s);
        for (const auto& [op, e] : ops) {
            json r = e(s);
            if (!compare_op(op, l, r, line)) return json(false);
            l = std::move(r);
        }
        return json(true);
    };
}

Expr ExprParser::math1() {
    Expr a = concat();
    const int line = line_;
    while (is_op("+") || is_op("-")) {
        const std::string op = t_[p_++].text;
        Expr b = concat();
        a = [a, b, op, line](Scope& s) { return arith(op, a(s), b(s), line); };
    }
    return a;
}

Expr ExprParser::concat() {
    Expr a = math2();
    while (is_op("~")) {
        ++p_;
        Expr b = math2();
        const int line = line_;
        a = [a, b, line](Scope& s) {
            std::string l = to_str(a(s));
            const std::string r = to_str(b(s));
            check_size(l.size() + r.size(), line);
            return json(l + r);
        };
    }
    return a;
}

Expr ExprParser::math2() {
    Expr a = power();
    const int line = line_;
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
        const std::string op = t_[p_++].text;
        Expr b = power();
        a = [a, b, op, line](Scope& s) { return arith(op, a(s), b(s), line); };
    }
    return a;
}

Expr ExprParser::power() {
    Expr a = unary(true);
    const int line = line_;
    while (is_op("**")) {
        ++p_;
        Expr b = unary(true);
        a = [a, b, line](Scope& s) { return arith("**", a(s), b(s), line); };
    }
    return a;
}

Expr ExprParser::unary(bool with_filters) {
    Depth d(*this);
    const int line = line_;
    Expr a;
    if (is_op("-") || is_op("+")) {
        const bool neg = t_[p_++].text == "-";
        Expr x = unary(false);
        a = [x, neg, line](Scope& s) {
            const json v = x(s);
            return neg ? arith("-", json(0), v, line) : arith("+", json(0), v, line);
        };
        last_ref_ = nullptr;  // -x | f filters -x, not x
    } else {
        a = primary();
    }
    a = postfix(a);
    return with_filters ? filters_and_tests(a) : a;
}

std::function<Args(Scope&)> ExprParser::call_args() {
    expect_op("(");
    std::vector<Expr> pos;
    std::vector<std::pair<std::string, Expr>> kw;
    while (!is_op(")")) {
        if (at_end()) fail(line_, "unclosed '(' in a call");
        if (peek().kind == Tok::kName && is_op("=", 1)) {
            const std::string k = name();
            ++p_;
            kw.emplace_back(k, expr());
        } else {
            if (!kw.empty()) fail(line_, "positional argument follows keyword argument");
            pos.push_back(expr());
        }
        if (!is_op(")")) expect_op(",");
    }
    ++p_;
    return [pos, kw](Scope& s) {
        Args a;
        for (const auto& e : pos) a.pos.push_back(e(s));
        for (const auto& [k, e] : kw) a.kw[k] = e(s);
        return a;
    };
}

Expr ExprParser::postfix(Expr a) {
    for (;;) {
        if (is_op(".")) {
            ++p_;
            a = attribute(a);
        } else if (is_op("[")) {
            ++p_;
            a = subscript(a);     // sets last_ref_ to the item, where it has one
        } else if (is_op("(")) {  // calling a value: a macro held in a variable
            auto args = call_args();
            const int line = line_;
            a = [a, args, line](Scope& s) { return call_macro(s, a(s), args(s), line); };
            last_ref_ = nullptr;
        } else {
            return a;
        }
    }
}

// a.name or a.name(args): a method call, with the object by reference where it is a
// variable or attribute (so list.append changes it in place).
Expr ExprParser::attribute(Expr a) {
    const int line = line_;
    const std::string attr = name();
    Ref parent = last_ref_;
    if (is_op("(")) {
        auto args = call_args();
        last_ref_ = nullptr;
        return [a, parent, attr, args, line](Scope& s) {
            json* target = parent ? parent(s) : nullptr;
            const json obj = target ? *target : a(s);
            return call_method(s, target, obj, attr, args(s), line);
        };
    }
    last_ref_ = parent ? Ref([parent, attr](Scope& s) -> json* {
        json* p = parent(s);
        if (p == nullptr || !p->is_object()) return nullptr;
        auto it = p->find(attr);
        return it != p->end() ? &*it : nullptr;
    })
                       : Ref();
    return [a, parent, attr, line](Scope& s) {
        json tmp;
        return attr_of(value_of(a, parent, s, tmp), attr, line);
    };
}

Expr ExprParser::subscript(Expr a) {
    const Ref base = last_ref_;
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
    const int line = line_;
    if (!slice) {
        last_ref_ = base ? Ref([base, lo](Scope& s) -> json* {  // for the next postfix
            const json k = lo(s);
            json* p = base(s);
            if (p != nullptr && p->is_array() && k.is_number_integer()) {
                int64_t i = k.get<int64_t>();
                if (i < 0) i += int64_t(p->size());
                return i >= 0 && i < int64_t(p->size()) ? &(*p)[size_t(i)] : nullptr;
            }
            if (p != nullptr && p->is_object() && k.is_string() && !is_markup(*p)) {
                auto it = p->find(k.get<std::string>());
                return it != p->end() ? &*it : nullptr;
            }
            return nullptr;
        })
                         : Ref();
        return [a, base, lo, line](Scope& s) {
            const json k = lo(s);
            json tmp;
            return item_of(value_of(a, base, s, tmp), k, line);
        };
    }
    last_ref_ = nullptr;
    return [a, base, lo, hi, step, line](Scope& s) {
        auto bound = [&](const Expr& e) -> std::optional<int64_t> {
            if (!e) return std::nullopt;
            const json v = e(s);
            if (v.is_null() || is_undef(v)) return std::nullopt;
            if (!v.is_number_integer()) fail(line, "slice indices must be integers or None");
            return v.get<int64_t>();
        };
        const auto b = bound(lo), e = bound(hi), st = bound(step);  // Python's order
        json tmp;
        return slice_of(value_of(a, base, s, tmp), b, e, st, line);
    };
}

Expr ExprParser::filters_and_tests(Expr a) {
    for (;;) {
        if (is_op("|")) {
            ++p_;
            a = filter(a);
        } else if (is_name("is")) {
            ++p_;
            a = test(a);
        } else {
            return a;
        }
        last_ref_ = nullptr;
    }
}

Expr ExprParser::filter(Expr a) {
    const Ref base = last_ref_;
    const int line = line_;
    std::string f = name();
    while (is_op(".")) {  // dotted filter names
        ++p_;
        f += "." + name();
    }
    std::function<Args(Scope&)> args = [](Scope&) { return Args{}; };
    if (is_op("(")) args = call_args();
    return [a, base, f, args, line](Scope& s) {
        const Args evaluated = args(s);
        json tmp;
        return apply_filter(s, f, value_of(a, base, s, tmp), evaluated, line);
    };
}

Expr ExprParser::test(Expr a) {
    const int line = line_;
    bool neg = false;
    if (is_name("not")) {
        ++p_;
        neg = true;
    }
    const std::string t = name();
    if (!has_test(t)) fail(line, fmt::format("no test named '{}'", t));
    std::function<Args(Scope&)> args = [](Scope&) { return Args{}; };
    const Tok& n = peek();
    if (is_op("(")) {
        args = call_args();
    } else if ((n.kind == Tok::kName || n.kind == Tok::kStr || n.kind == Tok::kNum || is_op("[") ||
                is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if")) {
        if (is_name("is")) fail(line, "You cannot chain multiple tests with is");
        Expr x = postfix(primary());
        args = [x](Scope& s) { return Args{{x(s)}, json::object()}; };
    }
    return [a, t, args, neg, line](Scope& s) {
        return json(apply_test(s, t, a(s), args(s), line) != neg);
    };
}

Expr ExprParser::primary() {
    const Tok tok = peek();
    last_ref_ = nullptr;
    if (tok.kind == Tok::kNum) {
        ++p_;
        json v = tok.num;
        return [v](Scope&) { return v; };
    }
    if (tok.kind == Tok::kStr) {
        std::string v;
        while (peek().kind == Tok::kStr) v += t_[p_++].text;  // 'a' 'b' is 'ab'
        return [v](Scope&) { return json(v); };
    }
    if (is_op("(") || is_op("[") || is_op("{")) {  // values of their own: no reference
        Expr e = is_op("(") ? paren() : is_op("[") ? list_literal() : dict_literal();
        last_ref_ = nullptr;
        return e;
    }
    if (tok.kind != Tok::kName) {
        fail(line_,
             fmt::format("unexpected '{}' in expression", at_end() ? "end of the tag" : tok.text));
    }
    ++p_;
    const std::string n = tok.text;
    if (n == "true" || n == "True") return [](Scope&) { return json(true); };
    if (n == "false" || n == "False") return [](Scope&) { return json(false); };
    if (n == "none" || n == "None") return [](Scope&) { return json(nullptr); };
    if (is_op("(")) {
        Expr e = call(n);
        last_ref_ = nullptr;
        return e;
    }
    last_ref_ = [n](Scope& s) { return s.find(n); };
    return [n](Scope& s) {
        json* v = s.find(n);
        return v ? *v : global_value(n);
    };
}

// ( expr ) or a tuple ( a, b ) (a list here), after checking the '('.
Expr ExprParser::paren() {
    ++p_;
    if (is_op(")")) {
        ++p_;
        return [](Scope&) { return json::array(); };
    }
    Expr e = expr();
    if (is_op(")")) {
        ++p_;
        return e;
    }
    std::vector<Expr> items{e};
    while (is_op(",")) {
        ++p_;
        if (is_op(")")) break;
        items.push_back(expr());
    }
    expect_op(")");
    return [items](Scope& s) {
        json out = json::array();
        for (const auto& x : items) out.push_back(x(s));
        return out;
    };
}

Expr ExprParser::list_literal() {
    ++p_;
    std::vector<Expr> items;
    while (!is_op("]")) {
        if (at_end()) fail(line_, "unclosed '['");
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

Expr ExprParser::dict_literal() {
    ++p_;
    std::vector<std::pair<Expr, Expr>> items;
    while (!is_op("}")) {
        if (at_end()) fail(line_, "unclosed '{'");
        Expr k = expr();
        expect_op(":");
        items.emplace_back(k, expr());
        if (!is_op("}")) expect_op(",");
    }
    ++p_;
    const int line = line_;
    return [items, line](Scope& s) {
        json out = json::object();
        for (const auto& [k, v] : items) {
            const json key = k(s);
            if (!key.is_string()) fail(line, "dict keys must be strings here");
            out[key.get<std::string>()] = v(s);
        }
        return out;
    };
}

// name(args): a macro or variable holding one, else a global function.
Expr ExprParser::call(const std::string& fname) {
    const int line = line_;
    auto args = call_args();
    return [fname, args, line](Scope& s) -> json {
        const json* v = s.find(fname);
        if (v != nullptr && is_macro(*v)) return call_macro(s, *v, args(s), line);
        if (auto r = call_global(s, fname, args(s), line)) return *r;
        fail(line, fmt::format("'{}' is undefined", fname));
    };
}

Expr ExprParser::filter_chain(Expr input) {
    Expr a = filter(input);
    while (is_op("|")) {
        ++p_;
        a = filter(a);
    }
    return a;
}

std::vector<std::pair<std::string, Expr>> ExprParser::params() {
    std::vector<std::pair<std::string, Expr>> out;
    if (!is_op("(")) return out;
    ++p_;
    while (!is_op(")")) {
        const std::string n = name();
        Expr def;
        if (is_op("=")) {
            ++p_;
            def = expr();
        }
        out.emplace_back(n, def);
        if (!is_op(")")) expect_op(",");
    }
    ++p_;
    return out;
}

Expr compile_expr(const std::string& s, int line) {
    return ExprParser(lex_expr(s, line), line).parse_all();
}

}  // namespace pagoda::jinja
