// Metric primitives for /metrics: the implementation (the contract is in metrics/metrics.h).
#include "metrics/metrics.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>

namespace pagoda::metrics {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1) {}

namespace {
// NaN and negatives count as 0 (all our observations are durations or counts).
double clamp_observed(double v) { return v >= 0.0 ? v : 0.0; }
}  // namespace

size_t Histogram::bucket(double v) const {
    size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i]) ++i;
    return i;
}

void Histogram::observe(double v) {
    v = clamp_observed(v);
    counts_[bucket(v)].fetch_add(1, std::memory_order_relaxed);
    sum_micro_.fetch_add(uint64_t(std::llround(v * 1e6)), std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
}

void Histogram::observe_all(std::span<const double> vs) {
    if (vs.empty()) return;
    std::vector<uint64_t> n(counts_.size(), 0);
    uint64_t sum = 0;
    for (double v : vs) {
        v = clamp_observed(v);
        ++n[bucket(v)];
        sum += uint64_t(std::llround(v * 1e6));
    }
    for (size_t i = 0; i < n.size(); ++i) {
        if (n[i] != 0) counts_[i].fetch_add(n[i], std::memory_order_relaxed);
    }
    sum_micro_.fetch_add(sum, std::memory_order_relaxed);
    count_.fetch_add(uint64_t(vs.size()), std::memory_order_relaxed);
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
// `{k="v",...` (no closing brace; empty when there are no labels).
void append_labels_open(std::string& out, const Labels& labels) {
    bool first = true;
    for (const auto& [k, v] : labels) {
        out += first ? '{' : ',';
        first = false;
        out += k;
        out += "=\"";
        out += escape_label(v);
        out += '"';
    }
}

void append_number(std::string& out, double v) {
    if (std::isinf(v)) {
        out += v > 0 ? "+Inf" : "-Inf";
    } else if (std::isnan(v)) {
        out += "NaN";
    } else if (v == std::floor(v) && std::fabs(v) < 1e15) {
        fmt::format_to(std::back_inserter(out), "{}", int64_t(v));
    } else {
        fmt::format_to(std::back_inserter(out), "{}", v);
    }
}

// `name{labels} value`, the labels' text given open (append_labels_open), closed here.
void append_line(std::string& out, std::string_view name, std::string_view suffix,
                 std::string_view open_labels, std::string_view extra_label, double value) {
    out += name;
    out += suffix;
    if (!open_labels.empty() || !extra_label.empty()) {
        out += open_labels.empty() ? "{" : open_labels;
        if (!extra_label.empty()) {
            if (!open_labels.empty()) out += ',';
            out += extra_label;
        }
        out += '}';
    }
    out += ' ';
    append_number(out, value);
    out += '\n';
}
}  // namespace

void TextWriter::family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
}

void TextWriter::sample(std::string_view name, const Labels& labels, double value) {
    std::string open;
    append_labels_open(open, labels);
    append_line(out_, name, "", open, "", value);
}

void TextWriter::histogram(std::string_view name, const Labels& labels, const Histogram& h) {
    const auto s = h.snapshot();
    std::string open, le;
    append_labels_open(open, labels);
    for (size_t i = 0; i < h.bounds().size(); ++i) {
        le = "le=\"";
        append_number(le, h.bounds()[i]);
        le += '"';
        append_line(out_, name, "_bucket", open, le, double(s.cumulative[i]));
    }
    append_line(out_, name, "_bucket", open, "le=\"+Inf\"", double(s.cumulative.back()));
    append_line(out_, name, "_sum", open, "", s.sum);
    append_line(out_, name, "_count", open, "", double(s.count));
}

}  // namespace pagoda::metrics
