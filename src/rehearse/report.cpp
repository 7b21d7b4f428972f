// A rehearsal's terminal table and HTML report (rehearse.h).
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "rehearse/rehearse.h"

namespace pagoda::rehearse {

namespace {

double safe_ratio(double a, double b) { return b > 0 ? a / b : 0; }

// One SVG line chart of a per-quarter-hour series for each arm.
std::string chart(const Rehearsal& r, const std::string& title, const std::string& unit,
                  double (*value)(const Bucket&)) {
    const char* colours[] = {"#c0392b", "#2471a3", "#229954"};
    const double w = 860, h = 200, pad = 40;
    double top = 0;
    size_t n = 0;
    for (const ArmResult& a : r.arms) {
        n = std::max(n, a.curve.size());
        for (const Bucket& b : a.curve) top = std::max(top, value(b));
    }
    if (top <= 0) top = 1;
    std::string svg = fmt::format(
        "<h3>{}</h3><svg width='{}' height='{}' style='font:11px sans-serif'>"
        "<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='#888'/>"
        "<text x='2' y='{}'>{:.3g} {}</text><text x='2' y='{}'>0</text>",
        title, w, h + 20, pad, h, w, h, pad / 2 + 4, top, unit, h);
    for (int hr = 0; hr <= 24; hr += 3) {
        const double x = pad + (w - pad) * hr / 24.0;
        svg += fmt::format("<text x='{:.0f}' y='{}'>{:02d}:00</text>", x - 12, h + 15, hr % 24);
    }
    for (size_t k = 0; k < r.arms.size(); ++k) {
        std::string pts;
        const auto& c = r.arms[k].curve;
        for (size_t i = 0; i < c.size(); ++i) {
            const double x = pad + (w - pad) * (double(i) + 0.5) / double(std::max<size_t>(1, n));
            const double y = h - (h - pad / 2) * value(c[i]) / top;
            pts += fmt::format("{:.1f},{:.1f} ", x, y);
        }
        svg += fmt::format("<polyline fill='none' stroke='{}' stroke-width='1.5' points='{}'/>",
                           colours[k % 3], pts);
        svg += fmt::format("<text x='{}' y='{}' fill='{}'>{}</text>", w - 110, 14 + 13 * k,
                           colours[k % 3], r.arms[k].name);
    }
    return svg + "</svg>\n";
}

}  // namespace

std::string text_report(const Rehearsal& r, const RehearseOptions& o) {
    std::string s = fmt::format(
        "rehearsal of {} ({:.0f} h compressed {:g}x: {} requests, peak hour {:.1f} req/s) on "
        "{} / {}, SLO p99 TTFT < {:.0f} ms and TPOT < {:.0f} ms for {:.1f}% of requests\n\n",
        r.day.name, r.day.shape.day_s / 3600, r.day.shape.compress, r.day.arrivals.size(),
        r.day.peak_hour_rps, o.gpu, o.model, o.slo.ttft_s * 1000, o.slo.tpot_s * 1000,
        o.slo.attainment * 100);
    s += fmt::format("{:<12} {:<34} {:>9} {:>9} {:>10} {:>12} {:>8} {:>8} {:>7} {:>7} {:>5}\n",
                     "arm", "config", "goodput", "SLO met", "replica-h", "good/rep-h", "replicas",
                     "p99 TTFT", "preempt", "actions", "lost");
    for (const ArmResult& a : r.arms) {
        s += fmt::format(
            "{:<12} {:<34} {:>7.2f}/s {:>8.2f}% {:>10.1f} {:>12.0f} {:>8} {:>6.0f}ms {:>7} {:>7} "
            "{:>5}\n",
            a.name, a.replica.label(), a.goodput_rps, 100 * a.slo_attainment, a.replica_hours,
            a.goodput_per_replica_hour,
            a.name == "control" ? fmt::format("<={}", a.max_replicas)
                                : fmt::format("{}", a.max_replicas),
            a.p99_ttft_s * 1000, a.preemptions, a.actions, a.lost);
    }
    if (r.arms.size() == 3) {
        const ArmResult &d = r.arms[0], &b = r.arms[1], &c = r.arms[2];
        s += fmt::format(
            "\ngoodput per replica-hour: control / best_static = {:.2f}x, control / defaults = "
            "{:.2f}x, best_static / defaults = {:.2f}x\nSLO attainment: control {:.2f}% vs "
            "best_static {:.2f}%; accepted requests lost: {} / {} / {}\n",
            safe_ratio(c.goodput_per_replica_hour, b.goodput_per_replica_hour),
            safe_ratio(c.goodput_per_replica_hour, d.goodput_per_replica_hour),
            safe_ratio(b.goodput_per_replica_hour, d.goodput_per_replica_hour),
            100 * c.slo_attainment, 100 * b.slo_attainment, d.lost, b.lost, c.lost);
    }
    s += "\nper hour (goodput req/s, SLO met %, replicas):\nhour ";
    for (const ArmResult& a : r.arms) s += fmt::format(" {:>26}", a.name);
    s += "\n";
    const size_t hours = r.arms.empty() ? 0 : r.arms[0].hours.size();
    for (size_t h = 0; h < hours; ++h) {
        s += fmt::format("{:02d}:00", h);
        for (const ArmResult& a : r.arms) {
            const Bucket& b = a.hours[h];
            s += fmt::format(" {:>9.2f} {:>7.1f}% {:>7.1f}", b.goodput_rps,
                             b.requests ? 100.0 * double(b.good) / double(b.requests) : 100.0,
                             b.mean_replicas);
        }
        s += "\n";
    }
    return s;
}

std::string html_report(const Rehearsal& r, const RehearseOptions& o) {
    std::string h =
        "<!doctype html><html><head><meta charset='utf-8'><title>pagoda rehearse</title>"
        "<style>body{font:14px sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}</style></head><body>";
    h += "<h1>pagoda rehearse</h1><pre>" + text_report(r, o) + "</pre>";
    h += chart(r, "Arrival rate", "req/s", [](const Bucket& b) { return b.rate_rps; });
    h += chart(r, "Replicas", "", [](const Bucket& b) { return b.mean_replicas; });
    h += chart(r, "Goodput", "req/s", [](const Bucket& b) { return b.goodput_rps; });
    h += chart(r, "p99 TTFT", "s", [](const Bucket& b) { return b.p99_ttft_s; });
    h += "<p>Block size: every arm runs 16 (the simulated card's step time does not depend on "
         "it; see docs/performance.md). Warm level: replicas the control arm starts are ready "
         "after the cold start, which includes their full warmup.</p><h3>Control "
         "events</h3><pre>";
    for (const ArmResult& a : r.arms) {
        for (const std::string& e : a.events) h += a.name + " " + e + "\n";
    }
    return h + "</pre></body></html>\n";
}

}  // namespace pagoda::rehearse
