#pragma once
// Alert rule expressions: a small language over the replica's own metrics, evaluated in
// process from SeriesHistory and translated one-to-one into PromQL for users who run
// Prometheus (`pagoda rules export`).
//
//   expr     := or;  or := and ("or" and)*;  and := cmp ("and" cmp)*
//   cmp      := sum ((">"|"<"|">="|"<="|"=="|"!=") sum)?
//   sum      := product (("+"|"-") product)*;  product := unary (("*"|"/") unary)*
//   unary    := "-" unary | NUMBER | "(" expr ")" | FUNC "(" args ")" | selector
//   selector := NAME ("{" KEY ("="|"!=") "VALUE" ("," ...)* "}")? ("[" DURATION "]")?
//
// Functions over a window: rate, increase (counters), avg, max, min (per series, summed),
// quantile(q, histogram[w]), ratio(a[w], b[w]) = increase(a) / increase(b). A selector
// without a window is its current value summed over matching series. Names are the
// exported ones; without the `pagoda_` prefix it is added, and `ttft_seconds`,
// `itl_seconds`, `e2e_seconds`, `queue_seconds` and `error_ratio[w]` are shorthands
// (metric_catalog()). A comparison keeps its left value when true and is empty otherwise,
// as in PromQL; a rule fires while its expression is non-empty. Thread-safe (immutable).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/units.h"
#include "control/alerting/series_history.h"

namespace pagoda::control {

enum class MetricType { kCounter, kGauge, kHistogram };

struct MetricInfo {
    std::string name;
    MetricType type;
};

// Every series the rules may name (native and vllm: names), with its type.
const std::vector<MetricInfo>& metric_catalog();
const MetricInfo* find_metric(std::string_view name);

struct Expr {
    enum class Kind { kNumber, kInstant, kFunc, kBinary, kNeg };
    Kind kind = Kind::kNumber;
    double number = 0;
    Selector sel;          // kInstant; kFunc's first selector
    Selector sel2;         // ratio's denominator
    int64_t range_ms = 0;  // kFunc: the window
    std::string func;      // kFunc: rate | increase | avg | max | min | quantile | ratio
    std::string op;        // kBinary: + - * / > < >= <= == != and or
    double q = 0;          // quantile
    std::shared_ptr<const Expr> lhs, rhs;  // kBinary, kNeg (lhs)
};

using ExprPtr = std::shared_ptr<const Expr>;

// Parses and checks names, types and windows. Errors say what was wrong and where
// (the column in the expression) and what is allowed.
Result<ExprPtr> parse_expr(std::string_view text);

using ::pagoda::format_duration;    // base/units.h
using ::pagoda::parse_duration_ms;  // base/units.h

// nullopt: empty (no data, or a comparison that does not hold).
std::optional<double> evaluate(const Expr& e, const SeriesHistory& h, int64_t now_ms);
std::string to_promql(const Expr& e);
// Every metric name the expression reads (histograms by base name) and its longest window.
void referenced(const Expr& e, std::vector<std::string>& names, int64_t& max_range_ms);

}  // namespace pagoda::control
