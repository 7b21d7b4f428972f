// Alert rule expressions: the implementation (the contract is in control/alerting/rule_expr.h).
#include "control/alerting/rule_expr.h"

#include <fmt/core.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace pagoda::control {

namespace {

constexpr int64_t kMaxRangeMs = 86'400'000;  // one day

bool ident_char(char c, bool first) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
           (!first && std::isdigit(static_cast<unsigned char>(c)));
}

struct Alias {
    const char* from;
    const char* to;
};
constexpr Alias kAliases[] = {
    {"ttft_seconds", "pagoda_time_to_first_token_seconds"},
    {"itl_seconds", "pagoda_inter_token_latency_seconds"},
    {"e2e_seconds", "pagoda_e2e_request_latency_seconds"},
    {"queue_seconds", "pagoda_request_queue_time_seconds"},
};

class Parser {
  public:
    explicit Parser(std::string_view s) : s_(s) {}

    Result<ExprPtr> run() {
        auto e = parse_or();
        if (!err_ && (skip(), pos_ < s_.size())) fail("unexpected '{}'", s_.substr(pos_, 12));
        if (err_) return *err_;
        return e;
    }

  private:
    template <typename... A>
    ExprPtr fail(fmt::format_string<A...> f, A&&... a) {
        if (!err_) {
            err_ = make_error(ErrorCode::kInvalidArgument, "column {}: {}", pos_ + 1,
                              fmt::format(f, std::forward<A>(a)...));
        }
        return nullptr;
    }
    void skip() {
        while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    bool eat(std::string_view tok) {
        skip();
        if (s_.substr(pos_, tok.size()) != tok) return false;
        // Keywords must end at a word boundary.
        if (std::isalpha(static_cast<unsigned char>(tok[0])) && pos_ + tok.size() < s_.size() &&
            ident_char(s_[pos_ + tok.size()], false)) {
            return false;
        }
        pos_ += tok.size();
        return true;
    }
    std::string ident() {
        skip();
        const size_t p0 = pos_;
        while (pos_ < s_.size() && ident_char(s_[pos_], pos_ == p0)) ++pos_;
        return std::string(s_.substr(p0, pos_ - p0));
    }
    static ExprPtr binary(std::string op, ExprPtr l, ExprPtr r) {
        auto e = std::make_shared<Expr>();
        e->kind = Expr::Kind::kBinary;
        e->op = std::move(op);
        e->lhs = std::move(l);
        e->rhs = std::move(r);
        return e;
    }

    ExprPtr parse_or() {
        ExprPtr l = parse_and();
        while (!err_ && eat("or")) l = binary("or", l, parse_and());
        return l;
    }
    ExprPtr parse_and() {
        ExprPtr l = parse_cmp();
        while (!err_ && eat("and")) l = binary("and", l, parse_cmp());
        return l;
    }
    ExprPtr parse_cmp() {
        ExprPtr l = parse_sum();
        for (const char* op : {">=", "<=", "==", "!=", ">", "<"}) {
            if (err_ || !eat(op)) continue;
            ExprPtr r = parse_sum();
            if (!err_ && l->kind == Expr::Kind::kNumber && r->kind == Expr::Kind::kNumber) {
                return fail("a comparison needs a metric on one side");
            }
            return binary(op, l, r);
        }
        return l;
    }
    ExprPtr parse_sum() {
        ExprPtr l = parse_product();
        while (!err_) {
            if (eat("+"))
                l = binary("+", l, parse_product());
            else if (eat("-"))
                l = binary("-", l, parse_product());
            else
                break;
        }
        return l;
    }
    ExprPtr parse_product() {
        ExprPtr l = parse_unary();
        while (!err_) {
            if (eat("*"))
                l = binary("*", l, parse_unary());
            else if (eat("/"))
                l = binary("/", l, parse_unary());
            else
                break;
        }
        return l;
    }
    ExprPtr parse_unary();
    ExprPtr parse_number();
    ExprPtr parse_call(const std::string& f);
    // A selector with its optional window; `name` already read.
    bool parse_selector(std::string name, Selector& sel, int64_t& range_ms);
    bool parse_matchers(Selector& sel);

    static constexpr int kMaxDepth = 64;
    std::string_view s_;
    size_t pos_ = 0;
    int depth_ = 0;
    std::optional<Error> err_;
};

ExprPtr Parser::parse_unary() {
    if (err_) return nullptr;
    // Parentheses and signs recurse: bound the depth (a hostile file must not overflow the
    // stack; evaluation and translation recurse over the same tree).
    struct Depth {
        int& d;
        explicit Depth(int& x) : d(++x) {}
        ~Depth() { --d; }
    } depth(depth_);
    if (depth_ > kMaxDepth) return fail("expression nested deeper than {} levels", kMaxDepth);
    if (eat("-")) {
        auto e = std::make_shared<Expr>();
        e->kind = Expr::Kind::kNeg;
        e->lhs = parse_unary();
        return err_ ? nullptr : e;
    }
    if (eat("(")) {
        ExprPtr e = parse_or();
        if (!err_ && !eat(")")) return fail("expected ')'");
        return e;
    }
    skip();
    if (pos_ >= s_.size()) return fail("expected a number, a metric or a function");
    const char c = s_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return parse_number();
    if (!ident_char(c, true)) return fail("unexpected '{}'", c);
    const std::string name = ident();
    if (eat("(")) return parse_call(name);
    auto e = std::make_shared<Expr>();
    int64_t range = 0;
    if (!parse_selector(name, e->sel, range)) return nullptr;
    if (e->sel.name == "error_ratio") {  // shorthand: ratio of failed requests
        if (range == 0) return fail("error_ratio needs a window, e.g. error_ratio[5m]");
        e->kind = Expr::Kind::kFunc;
        e->func = "ratio";
        e->range_ms = range;
        e->sel = Selector{"pagoda_request_errors_total", {}};
        e->sel2 = Selector{"pagoda_requests_total", {}};
        return e;
    }
    if (range != 0) {
        return fail(
            "'{}[...]' needs a function around it: rate, increase, avg, max, min, "
            "quantile or ratio",
            name);
    }
    const MetricInfo* m = find_metric(e->sel.name);
    if (m->type == MetricType::kHistogram) {
        return fail("'{}' is a histogram: use quantile(q, {}[window])", name, name);
    }
    e->kind = Expr::Kind::kInstant;
    return e;
}

ExprPtr Parser::parse_number() {
    skip();
    const std::string rest(s_.substr(pos_, 40));
    char* end = nullptr;
    const double v = std::strtod(rest.c_str(), &end);
    if (end == rest.c_str() || !std::isfinite(v)) return fail("bad number");
    pos_ += size_t(end - rest.c_str());
    auto e = std::make_shared<Expr>();
    e->number = v;
    return e;
}

bool Parser::parse_matchers(Selector& sel) {
    while (!err_) {
        if (eat("}")) return true;
        LabelMatcher m;
        m.key = ident();
        if (m.key.empty()) return fail("expected a label name"), false;
        if (eat("!="))
            m.equal = false;
        else if (!eat("="))
            return fail("expected '=' or '!=' after label '{}'", m.key), false;
        skip();
        if (pos_ >= s_.size() || s_[pos_] != '"')
            return fail("expected a quoted label value"), false;
        const size_t end = s_.find('"', pos_ + 1);
        if (end == std::string_view::npos) return fail("unterminated label value"), false;
        m.value = std::string(s_.substr(pos_ + 1, end - pos_ - 1));
        pos_ = end + 1;
        sel.matchers.push_back(std::move(m));
        if (!eat(",") && (skip(), pos_ >= s_.size() || s_[pos_] != '}')) {
            return fail("expected ',' or '}}' in the label set"), false;
        }
    }
    return false;
}

bool Parser::parse_selector(std::string name, Selector& sel, int64_t& range_ms) {
    for (const Alias& a : kAliases) {
        if (name == a.from) name = a.to;
    }
    if (name != "error_ratio" && name.rfind("pagoda_", 0) != 0 && name.rfind("vllm:", 0) != 0) {
        name = "pagoda_" + name;
    }
    if (name != "error_ratio" && !find_metric(name)) {
        return fail("unknown metric '{}' (docs/metrics.md lists them)", name), false;
    }
    sel.name = name;
    if (eat("{") && !parse_matchers(sel)) return false;
    range_ms = 0;
    if (eat("[")) {
        skip();
        const size_t end = s_.find(']', pos_);
        if (end == std::string_view::npos) return fail("expected ']'"), false;
        auto d = parse_duration_ms(s_.substr(pos_, end - pos_));
        if (!d) return fail("{}", d.error().message), false;
        if (*d <= 0 || *d > kMaxRangeMs) return fail("a window must be in (0, 1d]"), false;
        range_ms = *d;
        pos_ = end + 1;
    }
    return true;
}

ExprPtr Parser::parse_call(const std::string& f) {
    static const char* kFuncs[] = {"rate", "increase", "avg", "max", "min", "quantile", "ratio"};
    if (std::find(std::begin(kFuncs), std::end(kFuncs), f) == std::end(kFuncs)) {
        return fail(
            "unknown function '{}' (allowed: rate, increase, avg, max, min, quantile, "
            "ratio)",
            f);
    }
    auto e = std::make_shared<Expr>();
    e->kind = Expr::Kind::kFunc;
    e->func = f;
    if (f == "quantile") {
        ExprPtr q = parse_number();
        if (err_) return nullptr;
        if (q->number < 0 || q->number > 1) return fail("a quantile must be in [0, 1]");
        e->q = q->number;
        if (!eat(",")) return fail("expected ',' after the quantile");
    }
    if (!parse_selector(ident(), e->sel, e->range_ms)) return nullptr;
    if (e->range_ms == 0) return fail("{}() needs a window, e.g. {}[5m]", f, e->sel.name);
    if (e->sel.name == "error_ratio")
        return fail("error_ratio[w] is already a ratio; use it alone");
    const MetricType t = find_metric(e->sel.name)->type;
    if (f == "ratio") {
        int64_t r2 = 0;
        if (!eat(",")) return fail("ratio() takes two counters: ratio(a[w], b[w])");
        if (!parse_selector(ident(), e->sel2, r2)) return nullptr;
        if (r2 != e->range_ms) return fail("ratio()'s two windows must be equal");
        if (find_metric(e->sel2.name)->type != MetricType::kCounter) {
            return fail("ratio() needs counters; '{}' is not one", e->sel2.name);
        }
    }
    if ((f == "rate" || f == "increase" || f == "ratio") && t != MetricType::kCounter) {
        return fail("{}() needs a counter; '{}' is not one", f, e->sel.name);
    }
    if (f == "quantile" && t != MetricType::kHistogram) {
        return fail("quantile() needs a histogram; '{}' is not one", e->sel.name);
    }
    if ((f == "avg" || f == "max" || f == "min") && t == MetricType::kHistogram) {
        return fail("{}() needs a gauge or counter; '{}' is a histogram (use quantile)", f,
                    e->sel.name);
    }
    if (!eat(")")) return fail("expected ')' after {}(...)", f);
    return e;
}

std::string selector_text(const Selector& s, const std::string& suffix = "") {
    std::string out = s.name + suffix;
    if (s.matchers.empty()) return out;
    out += "{";
    for (size_t i = 0; i < s.matchers.size(); ++i) {
        const auto& m = s.matchers[i];
        out += fmt::format("{}{}{}\"{}\"", i ? "," : "", m.key, m.equal ? "=" : "!=", m.value);
    }
    return out + "}";
}

std::optional<double> apply(const std::string& op, std::optional<double> l,
                            std::optional<double> r) {
    if (op == "and") return l && r ? l : std::nullopt;
    if (op == "or") return l ? l : r;
    if (!l || !r) return std::nullopt;
    const double a = *l, b = *r;
    if (op == "+") return a + b;
    if (op == "-") return a - b;
    if (op == "*") return a * b;
    if (op == "/") return b == 0 ? std::nullopt : std::optional(a / b);
    bool holds = false;
    if (op == ">") holds = a > b;
    if (op == "<") holds = a < b;
    if (op == ">=") holds = a >= b;
    if (op == "<=") holds = a <= b;
    if (op == "==") holds = a == b;
    if (op == "!=") holds = a != b;
    return holds ? l : std::nullopt;
}

}  // namespace

Result<ExprPtr> parse_expr(std::string_view text) {
    if (text.size() > 4096) {
        return make_error(ErrorCode::kInvalidArgument, "expression longer than 4096 characters");
    }
    return Parser(text).run();
}

std::optional<double> evaluate(const Expr& e, const SeriesHistory& h, int64_t now_ms) {
    switch (e.kind) {
        case Expr::Kind::kNumber: return e.number;
        case Expr::Kind::kInstant: return h.latest(e.sel);
        case Expr::Kind::kNeg: {
            auto v = evaluate(*e.lhs, h, now_ms);
            return v ? std::optional(-*v) : std::nullopt;
        }
        case Expr::Kind::kBinary:
            return apply(e.op, evaluate(*e.lhs, h, now_ms), evaluate(*e.rhs, h, now_ms));
        case Expr::Kind::kFunc: break;
    }
    const int64_t w = e.range_ms;
    if (e.func == "rate") return h.rate(e.sel, w, now_ms);
    if (e.func == "increase") return h.increase(e.sel, w, now_ms);
    if (e.func == "avg") return h.over_time(e.sel, Over::kAvg, w, now_ms);
    if (e.func == "max") return h.over_time(e.sel, Over::kMax, w, now_ms);
    if (e.func == "min") return h.over_time(e.sel, Over::kMin, w, now_ms);
    if (e.func == "quantile") return histogram_quantile(e.q, h.bucket_increases(e.sel, w, now_ms));
    // ratio
    auto num = h.increase(e.sel, w, now_ms);
    auto den = h.increase(e.sel2, w, now_ms);
    if (!den || *den <= 0) return std::nullopt;
    return num.value_or(0) / *den;
}

// Every aggregation keeps the labels that say which replica an alert is about: Prometheus's
// `instance` and the `pool` a scrape config gives (docs/operations.md, "Running a fleet").
constexpr const char* kBy = "sum by (instance, pool) ";

std::string to_promql(const Expr& e) {
    switch (e.kind) {
        case Expr::Kind::kNumber: return fmt::format("{}", e.number);
        case Expr::Kind::kInstant: return kBy + ("(" + selector_text(e.sel) + ")");
        case Expr::Kind::kNeg: return "-(" + to_promql(*e.lhs) + ")";
        case Expr::Kind::kBinary: {
            const std::string l = to_promql(*e.lhs), r = to_promql(*e.rhs);
            const bool arith = e.op == "+" || e.op == "-" || e.op == "*" || e.op == "/";
            return arith ? "(" + l + " " + e.op + " " + r + ")" : l + " " + e.op + " " + r;
        }
        case Expr::Kind::kFunc: break;
    }
    const std::string w = "[" + format_duration(e.range_ms) + "]";
    if (e.func == "rate" || e.func == "increase") {
        return kBy + ("(" + e.func + "(" + selector_text(e.sel) + w + "))");
    }
    if (e.func == "avg" || e.func == "max" || e.func == "min") {
        return kBy + ("(" + e.func + "_over_time(" + selector_text(e.sel) + w + "))");
    }
    if (e.func == "quantile") {
        return fmt::format("histogram_quantile({}, sum by (instance, pool, le) (rate({}{})))", e.q,
                           selector_text(e.sel, "_bucket"), w);
    }
    return "(" + (kBy + ("(increase(" + selector_text(e.sel) + w + "))")) + " / " +
           (kBy + ("(increase(" + selector_text(e.sel2) + w + "))")) + ")";
}

void referenced(const Expr& e, std::vector<std::string>& names, int64_t& max_range_ms) {
    if (e.kind == Expr::Kind::kInstant || e.kind == Expr::Kind::kFunc) {
        names.push_back(e.sel.name);
        if (!e.sel2.name.empty()) names.push_back(e.sel2.name);
        max_range_ms = std::max(max_range_ms, e.range_ms);
    }
    if (e.lhs) referenced(*e.lhs, names, max_range_ms);
    if (e.rhs) referenced(*e.rhs, names, max_range_ms);
}

}  // namespace pagoda::control
