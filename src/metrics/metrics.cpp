// Metric primitives for /metrics: the implementation (the contract is in metrics/metrics.h).
#include "metrics/metrics.h"

#include <fmt/format.h>

#include <cmath>

namespace pagoda::metrics {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1) {}

void Histogram::observe(double v) {
    if (!(v >= 0.0))
        v = 0.0;  // NaN and negatives count as 0 (all our observations are durations or counts)
    size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i]) ++i;
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_micro_.fetch_add(uint64_t(std::llround(v * 1e6)), std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
    Snapshot s;
    uint64_t acc = 0;
    for (const auto& c : counts_) {
        acc += c.load(std::memory_order_relaxed);
        s.cumulative.push_back(acc);
    }
    s.count = acc;  // consistent with the buckets even while others observe
    s.sum = double(sum_micro_.load(std::memory_order_relaxed)) * 1e-6;
    return s;
}

std::string escape_label(std::string_view v) {
    std::string out;
    for (char c : v) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '"') {
            out += "\\\"";
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

namespace {
std::string label_text(const Labels& labels, std::string_view extra_key = {},
                       std::string_view extra_value = {}) {
    if (labels.empty() && extra_key.empty()) return "";
    std::string s = "{";
    bool first = true;
    for (const auto& [k, v] : labels) {
        if (!first) s += ",";
        first = false;
        s += k + "=\"" + escape_label(v) + "\"";
    }
    if (!extra_key.empty()) {
        if (!first) s += ",";
        s += std::string(extra_key) + "=\"" + std::string(extra_value) + "\"";
    }
    return s + "}";
}

std::string number(double v) {
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    if (std::isnan(v)) return "NaN";
    if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", int64_t(v));
    return fmt::format("{}", v);
}
}  // namespace

void TextWriter::family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void TextWriter::sample(std::string_view name, const Labels& labels, double value) {
    out_ += fmt::format("{}{} {}\n", name, label_text(labels), number(value));
}

void TextWriter::histogram(std::string_view name, const Labels& labels, const Histogram& h) {
    const auto s = h.snapshot();
    for (size_t i = 0; i < h.bounds().size(); ++i) {
        out_ += fmt::format("{}_bucket{} {}\n", name,
                            label_text(labels, "le", number(h.bounds()[i])), s.cumulative[i]);
    }
    out_ += fmt::format("{}_bucket{} {}\n", name, label_text(labels, "le", "+Inf"),
                        s.cumulative.back());
    out_ += fmt::format("{}_sum{} {}\n", name, label_text(labels), number(s.sum));
    out_ += fmt::format("{}_count{} {}\n", name, label_text(labels), s.count);
}

}  // namespace pagoda::metrics
