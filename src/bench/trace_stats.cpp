// `pagoda bench trace-stats`: the implementation (the contract is in bench/trace_stats.h).
#include "bench/trace_stats.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace pagoda::bench {

namespace {

using json = nlohmann::json;

json percentiles(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    auto at = [&](double q) {
        return v[size_t(std::min<double>(double(v.size()) - 1, q * double(v.size())))];
    };
    double sum = 0;
    for (double x : v) sum += x;
    return {{"mean", sum / double(v.size())},
            {"p50", at(0.5)},
            {"p90", at(0.9)},
            {"p99", at(0.99)},
            {"max", v.back()}};
}

// Blocks in all prompts, distinct blocks, and requests whose first block an earlier
// request already sent.
json prefix_sharing(const Trace& t) {
    std::set<int64_t> seen;
    int64_t blocks = 0, reused = 0, sharing = 0;
    for (const TraceRecord& r : t.records) {
        if (!r.hash_ids.empty() && seen.count(r.hash_ids.front()) > 0) ++sharing;
        for (int64_t h : r.hash_ids) {
            ++blocks;
            if (!seen.insert(h).second) ++reused;
        }
    }
    return {{"block_tokens", t.block_tokens},
            {"blocks", blocks},
            {"distinct_blocks", int64_t(seen.size())},
            {"reused_block_ratio", blocks > 0 ? double(reused) / double(blocks) : 0.0},
            {"requests_sharing_a_prefix", sharing}};
}

}  // namespace

json trace_stats(const Trace& t) {
    const auto& rs = t.records;
    const double t0 = rs.front().ts_s, span = rs.back().ts_s - t0;
    // Per-minute rates for spans up to about two years (longer ones: none, said so).
    constexpr double kMaxMinutes = 1'000'000;
    const bool per_minute_ok = span / 60 < kMaxMinutes;
    std::vector<double> per_minute(per_minute_ok ? size_t(span / 60) + 1 : 1, 0.0), in, out, gaps;
    for (size_t i = 0; i < rs.size(); ++i) {
        if (per_minute_ok) per_minute[size_t((rs[i].ts_s - t0) / 60)] += 1;
        if (rs[i].input_len > 0) in.push_back(double(rs[i].input_len));
        out.push_back(double(rs[i].output_len));
        if (i > 0) gaps.push_back(rs[i].ts_s - rs[i - 1].ts_s);
    }
    double gm = 0, gv = 0;
    for (double g : gaps) gm += g / double(gaps.size());
    for (double g : gaps) gv += (g - gm) * (g - gm) / double(gaps.size());
    json rate = json::array();
    for (double n : per_minute) rate.push_back(n / 60.0);
    json j = {
        {"format", trace_format_name(t.format)},
        {"requests", rs.size()},
        {"span_s", span},
        {"mean_rps", span > 0 ? double(rs.size() - 1) / span : 0.0},
        {"rps_per_minute", rate},
        {"rps_per_minute_summary", percentiles(std::vector<double>(rate.begin(), rate.end()))},
        {"output_tokens", percentiles(out)},
        {"gap_cv", gaps.size() > 1 && gm > 0 ? std::sqrt(gv) / gm : 0.0},
        {"skipped", {{"other_model", t.other_model}, {"zero_output", t.zero_output}}}};
    if (!per_minute_ok) j["rps_per_minute"] = "the span is too long for per-minute rates";
    if (!in.empty()) j["input_tokens"] = percentiles(in);
    if (t.format == TraceFormat::kMooncake) j["prefix_sharing"] = prefix_sharing(t);
    return j;
}

std::string trace_stats_text(const json& s) {
    auto pct = [](const json& p) {
        return fmt::format("mean {:.0f}  p50 {:.0f}  p90 {:.0f}  p99 {:.0f}  max {:.0f}",
                           p["mean"].get<double>(), p["p50"].get<double>(), p["p90"].get<double>(),
                           p["p99"].get<double>(), p["max"].get<double>());
    };
    const json& r = s["rps_per_minute_summary"];
    std::string o = fmt::format(
        "{} trace: {} requests over {:.0f} s ({:.3f} req/s)\n"
        "rate per minute (req/s): p50 {:.3f}  p90 {:.3f}  max {:.3f}\n"
        "burstiness (CV of gaps): {:.2f}  (1: Poisson; above: bursty)\n",
        s["format"].get<std::string>(), s["requests"].get<int64_t>(), s["span_s"].get<double>(),
        s["mean_rps"].get<double>(), r["p50"].get<double>(), r["p90"].get<double>(),
        r["max"].get<double>(), s["gap_cv"].get<double>());
    if (s.contains("input_tokens")) o += "input tokens:  " + pct(s["input_tokens"]) + "\n";
    o += "output tokens: " + pct(s["output_tokens"]) + "\n";
    if (s.contains("prefix_sharing")) {
        const json& p = s["prefix_sharing"];
        o += fmt::format(
            "prefix blocks ({} tokens): {} in prompts, {} distinct, {:.0f}% reused; {} requests "
            "start with a block sent before\n",
            p["block_tokens"].get<int64_t>(), p["blocks"].get<int64_t>(),
            p["distinct_blocks"].get<int64_t>(), 100 * p["reused_block_ratio"].get<double>(),
            p["requests_sharing_a_prefix"].get<int64_t>());
    }
    const json& sk = s["skipped"];
    if (sk["other_model"].get<int64_t>() + sk["zero_output"].get<int64_t>() > 0) {
        o += fmt::format("skipped: {} rows of other models, {} with 0 output tokens\n",
                         sk["other_model"].get<int64_t>(), sk["zero_output"].get<int64_t>());
    }
    return o;
}

}  // namespace pagoda::bench
