// Report output: the implementation (the contract is in bench/output.h).
#include "bench/output.h"

#include <algorithm>
#include <cmath>

namespace pagoda::bench {

using json = nlohmann::json;

namespace {

json num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json summary_json(const Summary& s) {
    return json{{"n", s.n},          {"mean", num(s.mean)}, {"stddev", num(s.stddev)},
                {"p50", num(s.p50)}, {"p90", num(s.p90)},   {"p95", num(s.p95)},
                {"p99", num(s.p99)}, {"p999", num(s.p999)}, {"max", num(s.max)}};
}

std::string ms(double v) { return std::isfinite(v) ? fmt::format("{:.1f}", v) : "-"; }

std::string html_escape(std::string_view s) {
    std::string o;
    for (char c : s) {
        switch (c) {
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '&': o += "&amp;"; break;
            case '"': o += "&quot;"; break;
            default: o += c;
        }
    }
    return o;
}

struct Series {
    std::string name;
    std::vector<std::pair<double, double>> pts;
};

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

// Tick step for a range: 1, 2, 2.5 or 5 times a power of ten, about `n` ticks.
double nice_step(double range, int n) {
    const double raw = range / n;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 2.5, 5.0}) {
        if (raw <= m * mag) return m * mag;
    }
    return 10 * mag;
}

// A tick label with as many decimals as the step needs (0.25: two), "k" for thousands.
std::string tick_label(double v, double step) {
    if (std::fabs(v) < step * 1e-9) v = 0;
    if (std::fabs(v) >= 10000 && step >= 1000) return fmt::format("{:g}k", v / 1000);
    int decimals = 0;
    for (double m = step; decimals < 4 && std::fabs(m - std::round(m)) > 1e-6 * std::max(1.0, m);
         m *= 10) {
        ++decimals;
    }
    return fmt::format("{:.{}f}", v, decimals);
}

// A line chart: axes on rounded ticks (x from 0 for time and CDF charts), the units in the
// axis titles, the legend under the plot (never over the data); series after the first are
// dashed so that one drawn over another still shows.
std::string svg_chart(const std::string& title, const std::string& xlabel,
                      const std::string& ylabel, const std::vector<Series>& series) {
    const double W = 640, L = 64, R = 20, T = 30, B = 44, PH = 230;
    const int per_row = 3;
    const double legend_h = 16.0 * std::ceil(double(series.size()) / per_row);
    const double H = T + PH + B + legend_h;
    double xmin = INFINITY, xmax = -INFINITY, ymin = 0, ymax = -INFINITY;
    for (const auto& s : series) {
        for (auto [x, y] : s.pts) {
            if (!std::isfinite(x) || !std::isfinite(y)) continue;
            xmin = std::min(xmin, x);
            xmax = std::max(xmax, x);
            ymax = std::max(ymax, y);
        }
    }
    std::string o = fmt::format(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' class='chart'>", W, H);
    o += fmt::format("<text x='{}' y='18' font-weight='bold'>{}</text>", L, html_escape(title));
    if (!std::isfinite(xmin) || !std::isfinite(ymax))
        return o + "<text x='60' y='150'>no data</text></svg>";
    if (xmin > 0) xmin = 0;  // time from the start, latencies from zero
    if (xmax <= xmin) xmax = xmin + 1;
    if (ymax <= ymin) ymax = ymin + 1;
    const double xs = nice_step(xmax - xmin, 5), ys = nice_step(ymax - ymin, 4);
    xmax = std::ceil(xmax / xs - 1e-9) * xs;
    ymax = std::ceil(ymax / ys - 1e-9) * ys;
    auto px = [&](double x) { return L + (x - xmin) / (xmax - xmin) * (W - L - R); };
    auto py = [&](double y) { return T + PH - (y - ymin) / (ymax - ymin) * PH; };
    o += fmt::format("<rect x='{}' y='{}' width='{}' height='{}' fill='none' stroke='#999'/>", L, T,
                     W - L - R, PH);
    for (double y = ymin; y <= ymax + ys * 1e-6; y += ys) {
        o += fmt::format("<line x1='{}' x2='{}' y1='{:.1f}' y2='{:.1f}' stroke='#eee'/>", L + 1,
                         W - R - 1, py(y), py(y));
        o += fmt::format("<text x='{}' y='{:.1f}' font-size='10' text-anchor='end'>{}</text>",
                         L - 4, py(y) + 3, tick_label(y, ys));
    }
    for (double x = xmin; x <= xmax + xs * 1e-6; x += xs) {
        o += fmt::format("<text x='{:.1f}' y='{}' font-size='10' text-anchor='middle'>{}</text>",
                         px(x), T + PH + 14, tick_label(x, xs));
    }
    o += fmt::format("<text x='{}' y='{}' font-size='11' text-anchor='middle'>{}</text>",
                     (L + W - R) / 2, T + PH + 30, html_escape(xlabel));
    o += fmt::format(
        "<text x='12' y='{}' font-size='11' transform='rotate(-90 12 {})' "
        "text-anchor='middle'>{}</text>",
        T + PH / 2, T + PH / 2, html_escape(ylabel));
    static const char* const kDash[] = {"", "6 3", "2 2", "8 3 2 3"};
    for (size_t i = 0; i < series.size(); ++i) {
        const char* color = kColors[i % 6];
        std::string pts;
        for (auto [x, y] : series[i].pts) {
            if (std::isfinite(x) && std::isfinite(y))
                pts += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
        }
        o += fmt::format(
            "<polyline fill='none' stroke='{}' stroke-width='{}' stroke-dasharray='{}' "
            "points='{}'/>",
            color, i == 0 ? 2.5 : 1.5, kDash[i % 4], pts);
        const double lx = L + double(i % per_row) * 190,
                     ly = T + PH + B + 12 + 16 * std::floor(double(i) / per_row);
        o += fmt::format(
            "<line x1='{}' x2='{}' y1='{}' y2='{}' stroke='{}' stroke-width='2' "
            "stroke-dasharray='{}'/><text x='{}' y='{}' font-size='11'>{}</text>",
            lx, lx + 22, ly - 4, ly - 4, color, kDash[i % 4], lx + 27, ly,
            html_escape(series[i].name));
    }
    return o + "</svg>";
}

Series cdf(const std::string& name, std::vector<double> v) {
    Series s{name, {}};
    v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }),
            v.end());
    std::sort(v.begin(), v.end());
    size_t step = std::max<size_t>(1, v.size() / 400);
    for (size_t i = 0; i < v.size(); i += step)
        s.pts.emplace_back(v[i], double(i + 1) / double(v.size()));
    if (!v.empty()) s.pts.emplace_back(v.back(), 1.0);
    return s;
}

}  // namespace

namespace {
// What the server's counters named `a` (or `b`) rose by over the run (NaN when its /metrics
// did not say).
double server_delta(const Report& r, std::string_view a, std::string_view b = {}) {
    json sm = json::parse(r.server_metrics_json, nullptr, false);
    if (!sm.is_object()) return NAN;
    double sum = NAN;
    for (auto it = sm.begin(); it != sm.end(); ++it) {
        const std::string name = it.key().substr(0, it.key().find('{'));
        if ((name == a || (!b.empty() && name == b)) && it.value().is_number())
            sum = (std::isfinite(sum) ? sum : 0.0) + it.value().get<double>();
    }
    return sum;
}
double server_cpu_seconds(const Report& r) {
    return server_delta(r, "pagoda_process_cpu_seconds_total", "process_cpu_seconds_total");
}
int64_t output_tokens(const Report& r) {
    int64_t tokens = 0;
    for (const SecondBucket& b : r.series) tokens += b.output_tokens;
    return tokens;
}
}  // namespace

double server_cpu_ms_per_request(const Report& r) {
    int64_t sent = 0;
    for (const SecondBucket& b : r.series) sent += b.sent;
    return sent > 0 ? server_cpu_seconds(r) * 1000 / double(sent) : NAN;
}

double server_cpu_us_per_token(const Report& r) {
    const int64_t tokens = output_tokens(r);
    return tokens > 0 ? server_cpu_seconds(r) * 1e6 / double(tokens) : NAN;
}

double server_writes_per_token(const Report& r) {
    const int64_t tokens = output_tokens(r);
    return tokens > 0 ? server_delta(r, "pagoda_http_stream_writes_total") / double(tokens) : NAN;
}

json stats_json(const Stats& s) {
    json errors = json::object();
    for (const auto& [k, v] : s.errors) errors[k] = v;
    return json{{"name", s.name},
                {"requests", {{"sent", s.sent}, {"completed", s.completed}, {"failed", s.failed}}},
                {"ttft_ms", summary_json(s.ttft)},
                {"itl_ms", summary_json(s.itl)},
                {"tpot_ms", summary_json(s.tpot)},
                {"e2e_ms", summary_json(s.e2e)},
                {"span_s", s.span_s},
                {"requests_per_s", s.requests_per_s},
                {"output_tokens_per_s", s.output_tokens_per_s},
                {"input_tokens_per_s", s.input_tokens_per_s},
                {"output_tokens", s.output_tokens},
                {"input_tokens", s.input_tokens},
                {"goodput_rps", s.goodput_rps},
                {"goodput_ratio", s.goodput_ratio},
                {"error_rate", s.error_rate},
                {"latency_fluctuation", s.latency_fluctuation},
                {"errors", errors}};
}

json report_json(const Report& r) {
    json j = stats_json(r.overall);
    j.erase("name");
    j["schema"] = "pagoda-bench-report/1";
    j["scenario"] = r.scenario;
    j["scenario_hash"] = r.scenario_hash;
    j["url"] = r.url;
    j["model"] = r.model;
    j["started_at"] = r.started_at;
    j["duration_s"] = r.duration_s;
    j["window"] = {{"begin_s", r.window_begin_s}, {"end_s", r.window_end_s}};
    j["classes"] = json::array();
    for (const auto& c : r.classes) j["classes"].push_back(stats_json(c));
    json series = json::array();
    for (size_t i = 0; i < r.series.size(); ++i) {
        const auto& b = r.series[i];
        series.push_back({{"t", i},
                          {"sent", b.sent},
                          {"completed", b.completed},
                          {"in_flight", b.in_flight},
                          {"errors", b.errors},
                          {"output_tokens", b.output_tokens},
                          {"ttft_mean_ms", b.ttft_mean_ms}});
    }
    j["series"] = series;
    json server = json::array();
    for (const ServerSample& smp : r.server) {
        json e = {{"t", std::round(smp.t_s * 1000) / 1000}};
        for (const auto& [k, v] : smp.v) e[k] = v;
        server.push_back(e);
    }
    j["server_timeline"] = server;
    j["verdict"] = r.verdict;
    j["criteria"] = json::array();
    for (const auto& c : r.criteria) {
        j["criteria"].push_back(
            {{"name", c.criterion.text},
             {"class", c.criterion.klass.empty() ? json(nullptr) : json(c.criterion.klass)},
             {"metric", c.criterion.metric},
             {"op", c.criterion.op},
             {"threshold", c.criterion.threshold},
             {"value", num(c.value)},
             {"pass", c.pass}});
    }
    j["client"] = {{"send_lag_p50_ms", r.send_lag_p50_ms},  {"send_lag_p99_ms", r.send_lag_p99_ms},
                   {"send_lag_max_ms", r.send_lag_max_ms},  {"late_sends", r.late_sends},
                   {"stale_connection_retries", r.retries}, {"saturated", r.client_saturated}};
    j["prompts"] = {{"synthesised", r.prompts_synthesised}, {"exact_length", r.prompts_exact}};
    j["usage_mismatches"] = r.usage_mismatches;
    j["aborted"] = r.aborted.empty() ? json(nullptr) : json(r.aborted);
    j["server_metrics"] = json::parse(r.server_metrics_json, nullptr, false);
    j["server"] = json::parse(r.server_info_json, nullptr, false);
    const double cpu = server_cpu_ms_per_request(r);
    j["server_cpu_ms_per_request"] = std::isfinite(cpu) ? json(cpu) : json(nullptr);
    const double cpu_tok = server_cpu_us_per_token(r);
    j["server_cpu_us_per_token"] = std::isfinite(cpu_tok) ? json(cpu_tok) : json(nullptr);
    const double writes = server_writes_per_token(r);
    j["server_stream_writes_per_token"] = std::isfinite(writes) ? json(writes) : json(nullptr);
    return j;
}

// Server-side stage means from the target's /metrics, beside the client's view.
std::string server_side_lines(const Report& r) {
    std::string o;
    json sm = json::parse(r.server_metrics_json, nullptr, false);
    if (sm.is_object()) {
        auto mean_ms = [&](const std::string& base) {
            double n = 0, sum = 0;
            for (auto it = sm.begin(); it != sm.end(); ++it) {
                if (it.key().substr(0, it.key().find('{')) != base || !it.value().is_object() ||
                    !it.value().contains("mean_ms"))
                    continue;
                double c = it.value()["count"].get<double>();
                n += c;
                sum += c * it.value()["mean_ms"].get<double>();
            }
            return n > 0 ? sum / n : NAN;
        };
        // vLLM's names first (vLLM and Pagoda by default), else Pagoda's native ones.
        auto server_ms = [&](const std::string& suffix) {
            const double v = mean_ms("vllm:" + suffix);
            return std::isfinite(v) ? v : mean_ms("pagoda_" + suffix);
        };
        double q = server_ms("request_queue_time_seconds"),
               pf = server_ms("request_prefill_time_seconds"),
               dc = server_ms("request_decode_time_seconds"),
               tt = server_ms("time_to_first_token_seconds");
        if (std::isfinite(q) || std::isfinite(tt)) {
            o += fmt::format(
                "server (/metrics, means over the run): queue {} ms, prefill {} ms, decode {} ms, "
                "TTFT {} ms "
                "(client TTFT mean {} ms)\n",
                ms(q), ms(pf), ms(dc), ms(tt), ms(r.overall.ttft.mean));
        }
        const double cpu = server_cpu_ms_per_request(r);
        if (std::isfinite(cpu)) {
            o += fmt::format(
                "server CPU: {:.3f} ms per request sent, {:.1f} us per streamed token (process "
                "CPU seconds over the run; with --backend sim the forward pass only sleeps, so "
                "this is the serving overhead)\n",
                cpu, server_cpu_us_per_token(r));
        }
        const double writes = server_writes_per_token(r);
        if (std::isfinite(writes)) {
            o += fmt::format(
                "server socket writes: {:.3f} per streamed token (--stream-interval "
                "N gathers N tokens a write)\n",
                writes);
        }
    }
    return o;
}

std::string terminal_summary(const Report& r) {
    std::string o;
    o += fmt::format("scenario {}  ({:.1f} s, counted window {:.0f}-{:.0f} s)\n", r.scenario,
                     r.duration_s, r.window_begin_s, r.window_end_s);
    o += fmt::format(
        "{:<12} {:>6} {:>6} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>8}\n", "class",
        "sent", "ok", "failed", "ttft p50", "ttft p99", "tpot p50", "tpot p99", "e2e p50",
        "e2e p99", "req/s", "out tok/s", "goodput");
    auto row = [&](const Stats& s) {
        o += fmt::format(
            "{:<12} {:>6} {:>6} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8.2f} {:>9.1f} "
            "{:>7.0f}%\n",
            s.name.substr(0, 12), s.sent, s.completed, s.failed, ms(s.ttft.p50), ms(s.ttft.p99),
            ms(s.tpot.p50), ms(s.tpot.p99), ms(s.e2e.p50), ms(s.e2e.p99), s.requests_per_s,
            s.output_tokens_per_s, s.goodput_ratio * 100);
    };
    for (const auto& c : r.classes) {
        if (r.classes.size() > 1) row(c);
    }
    row(r.overall);
    o += "(latencies in ms; goodput = share of requests meeting every SLO of their class)\n";
    for (const auto& [k, v] : r.overall.errors) o += fmt::format("errors: {} x {}\n", v, k);
    if (r.retries > 0) {
        o += fmt::format(
            "retries: {} requests met a keep-alive connection the server had closed and were "
            "sent again on a fresh one (not errors)\n",
            r.retries);
    }
    if (r.client_saturated) {
        o += fmt::format(
            "WARNING: the client fell behind its schedule ({} sends over 10 ms late, p99 {:.1f} "
            "ms): "
            "the offered load was lower than asked\n",
            r.late_sends, r.send_lag_p99_ms);
    }
    o += server_side_lines(r);
    if (!r.aborted.empty()) o += fmt::format("ABORTED: {}\n", r.aborted);
    if (!r.criteria.empty()) {
        o += "criteria:\n";
        for (const auto& c : r.criteria) {
            o +=
                fmt::format("  {:<4} {:<40} value {}\n", c.pass ? "PASS" : "FAIL", c.criterion.text,
                            std::isfinite(c.value) ? fmt::format("{:.4g}", c.value) : "(no data)");
        }
    }
    o += fmt::format("verdict: {}\n", r.verdict);
    return o;
}

std::string deltas_table(const std::vector<MetricDelta>& deltas) {
    std::string o = fmt::format("{:<22} {:>12} {:>10} {:>12} {:>10} {:>9} {:>8}  {}\n", "metric",
                                "baseline", "±95%", "current", "±95%", "delta", "noise", "verdict");
    for (const auto& d : deltas) {
        bool abs = d.metric == "error_rate";
        o += fmt::format(
            "{:<22} {:>12.4g} {:>10.3g} {:>12.4g} {:>10.3g} {:>8.1f}{} {:>7.1f}{}  {}\n", d.metric,
            d.base_mean, d.base_ci, d.cur_mean, d.cur_ci, d.delta_rel * 100, abs ? "pp" : "%",
            d.noise_band * 100, abs ? "pp" : "%", d.verdict);
    }
    return o;
}

json deltas_json(const std::vector<MetricDelta>& deltas) {
    json a = json::array();
    for (const auto& d : deltas) {
        a.push_back({{"metric", d.metric},
                     {"baseline_mean", d.base_mean},
                     {"baseline_ci95", d.base_ci},
                     {"current_mean", d.cur_mean},
                     {"current_ci95", d.cur_ci},
                     {"delta_rel", d.delta_rel},
                     {"noise_band", d.noise_band},
                     {"verdict", d.verdict}});
    }
    return a;
}

namespace {

// The server timeline: offered rate against the forecast, queue depth and warm level.
std::string timeline_charts(const Report& r, const Scenario& s,
                            const std::vector<RequestRecord>& records) {
    if (r.server.empty()) return "";
    auto gauge = [&](const char* key, const char* name, double scale) {
        Series out{name, {}};
        for (const ServerSample& smp : r.server) {
            auto it = smp.v.find(key);
            if (it != smp.v.end()) out.pts.emplace_back(smp.t_s, it->second * scale);
        }
        return out;
    };
    // Offered: what the plan scheduled each second; in a trace replay, in trace time (real
    // rate / --speed), the forecast clock's units when it runs at the same speed.
    const bool trace = s.arrival.kind == Arrival::Kind::kTrace;
    const double k = trace ? s.arrival.trace_speed : 1.0;
    Series offered{trace && k != 1 ? "offered (trace req/s)" : "offered req/s", {}};
    std::vector<double> per_s;
    for (const RequestRecord& rec : records) {
        if (rec.target != 0 || rec.scheduled_s < 0) continue;
        const size_t i = size_t(rec.scheduled_s);
        if (per_s.size() <= i) per_s.resize(i + 1, 0.0);
        per_s[i] += 1;
    }
    // A moving average over 10 s: Poisson arrivals at a few per second are spiky.
    for (size_t i = 0; i < per_s.size(); ++i) {
        double sum = 0;
        const size_t lo = i >= 9 ? i - 9 : 0;
        for (size_t j = lo; j <= i; ++j) sum += per_s[j];
        offered.pts.emplace_back(double(i), sum / double(i - lo + 1) / k);
    }
    std::string o = "<h2>Server timeline</h2>";
    Series f15 = gauge("forecast_15m", "forecast 15 min ahead", 1.0);
    Series obs = gauge("observed_rps", "forecaster's observed rate", 1.0);
    // The forecaster counts whole minutes: before its first minute closes it has seen
    // nothing, and a zero line under real traffic would read as a fault.
    const auto all_zero = [](const Series& x) {
        return std::all_of(x.pts.begin(), x.pts.end(), [](auto p) { return p.second == 0; });
    };
    std::vector<Series> rate = {offered};
    if (!obs.pts.empty() && !all_zero(obs)) rate.push_back(obs);
    if (!f15.pts.empty() && !all_zero(f15)) rate.push_back(f15);
    o += svg_chart(rate.size() > 1 ? "Offered rate and forecast" : "Offered rate", "seconds",
                   "requests/s", rate);
    if (rate.size() == 1 && (!obs.pts.empty() || !f15.pts.empty())) {
        o += "<p>The server's forecaster had not closed a whole minute of traffic (or had no "
             "forecast yet): its observed rate and forecast appear in runs longer than its "
             "history needs.</p>";
    }
    o += svg_chart("Queue and warm level", "seconds", "requests / level",
                   {gauge("waiting", "waiting", 1.0), gauge("running", "running", 1.0),
                    gauge("warm_level", "warm level (0 off - 4 full)", 1.0)});
    return o;
}

}  // namespace

// The latency CDFs per class and the request rates over time.
std::string latency_and_rate_charts(const Report& r, const Scenario& s,
                                    const std::vector<RequestRecord>& records) {
    std::string o = "<h2>Latency distributions</h2>";
    std::vector<Series> ttft, e2e;
    for (size_t c = 0; c < s.classes.size(); ++c) {
        std::vector<double> t, e;
        for (const auto& rec : records) {
            if (rec.klass == int(c) && rec.ok() && rec.target == 0) {
                t.push_back(rec.ttft_ms());
                e.push_back(rec.e2e_ms());
            }
        }
        ttft.push_back(cdf(s.classes[c].name, t));
        e2e.push_back(cdf(s.classes[c].name, e));
    }
    o += svg_chart("TTFT CDF", "ms", "fraction", ttft);
    o += svg_chart("End-to-end latency CDF", "ms", "fraction", e2e);
    o += "<h2>Over time</h2>";
    Series sent{"sent/s", {}}, done{"completed/s", {}}, infl{"in flight", {}},
        tt{"mean TTFT (ms)", {}};
    for (size_t i = 0; i < r.series.size(); ++i) {
        sent.pts.emplace_back(double(i), double(r.series[i].sent));
        done.pts.emplace_back(double(i), double(r.series[i].completed));
        infl.pts.emplace_back(double(i), double(r.series[i].in_flight));
        if (r.series[i].ttft_mean_ms > 0) tt.pts.emplace_back(double(i), r.series[i].ttft_mean_ms);
    }
    o += svg_chart("Throughput", "seconds", "requests", {sent, done, infl});
    o += svg_chart("TTFT over time", "seconds", "ms", {tt});
    return o;
}

std::string html_report(const Report& r, const Scenario& s,
                        const std::vector<RequestRecord>& records) {
    std::string o = "<!DOCTYPE html><html><head><meta charset='utf-8'><title>pagoda bench: " +
                    html_escape(r.scenario) +
                    "</"
                    "title><style>body{font-family:sans-serif;margin:2em;color:#222}table{border-"
                    "collapse:collapse;"
                    "margin:1em 0}td,th{border:1px solid #ccc;padding:3px "
                    "8px;text-align:right}th{background:#f3f3f3}"
                    ".pass{color:#080;font-weight:bold}.fail{color:#b00;font-weight:bold}"
                    ".none{color:#666;font-weight:bold}.chart{"
                    "margin:0.5em}</style>"
                    "</head><body>";
    o += fmt::format(
        "<h1>pagoda bench: {}</h1><p>target {} &middot; model {} &middot; started {} &middot; "
        "{:.1f} s &middot; "
        "counted window {:.0f}&ndash;{:.0f} s</p>",
        html_escape(r.scenario), html_escape(r.url), html_escape(r.model),
        html_escape(r.started_at), r.duration_s, r.window_begin_s, r.window_end_s);
    o +=
        fmt::format("<h2>Verdict: <span class='{}'>{}</span></h2>",
                    r.verdict == "fail"   ? "fail"
                    : r.verdict == "pass" ? "pass"
                                          : "none",
                    r.verdict == "none" ? "none (no criteria given: --slo or a scenario's criteria)"
                                        : r.verdict);
    if (r.trace_skipped > 0 || r.trace_clamped > 0) {
        o += fmt::format(
            "<p>Trace: {} request{} over the server's max_model_len left out (--on-overlong "
            "skip), {} shortened (clamp).</p>",
            r.trace_skipped, r.trace_skipped == 1 ? "" : "s", r.trace_clamped);
    }
    if (!r.criteria.empty()) {
        o += "<table><tr><th>criterion</th><th>value</th><th>result</th></tr>";
        for (const auto& c : r.criteria) {
            o += fmt::format(
                "<tr><td style='text-align:left'>{}</td><td>{}</td><td class='{}'>{}</td></tr>",
                html_escape(c.criterion.text),
                std::isfinite(c.value) ? fmt::format("{:.4g}", c.value) : "no data",
                c.pass ? "pass" : "fail", c.pass ? "PASS" : "FAIL");
        }
        o += "</table>";
    }
    if (!r.aborted.empty()) o += "<p class='fail'>Aborted: " + html_escape(r.aborted) + "</p>";
    if (r.client_saturated)
        o += "<p class='fail'>The client fell behind its schedule; the offered load was lower than "
             "asked.</p>";
    o +=
        "<h2>Statistics "
        "(ms)</h2><table><tr><th>class</th><th>sent</th><th>ok</th><th>failed</th><th>TTFT p50</th>"
        "<th>TTFT p90</th><th>TTFT p99</th><th>TPOT p50</th><th>TPOT p99</th><th>ITL "
        "p99</th><th>E2E p50</th><th>E2E p99</th>"
        "<th>req/s</th><th>out tok/s</th><th>goodput</th></tr>";
    std::vector<const Stats*> rows;
    for (const auto& c : r.classes) rows.push_back(&c);
    rows.push_back(&r.overall);
    for (const Stats* st : rows) {
        o += fmt::format(
            "<tr><td "
            "style='text-align:left'>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</"
            "td><td>{}</td>"
            "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2f}</td><td>{:.1f}</"
            "td><td>{:.0f}%</td></tr>",
            html_escape(st->name), st->sent, st->completed, st->failed, ms(st->ttft.p50),
            ms(st->ttft.p90), ms(st->ttft.p99), ms(st->tpot.p50), ms(st->tpot.p99), ms(st->itl.p99),
            ms(st->e2e.p50), ms(st->e2e.p99), st->requests_per_s, st->output_tokens_per_s,
            st->goodput_ratio * 100);
    }
    o += "</table>";
    o += latency_and_rate_charts(r, s, records);
    o += timeline_charts(r, s, records);
    o += "<p>Definitions: docs/metrics.md (pagoda bench). Generated by pagoda "
         "bench.</p></body></html>\n";
    return o;
}

}  // namespace pagoda::bench
