// The warning tier's diagnostic report: the implementation (the contract is in
// control/alerting/diag_report.h).
#include "control/alerting/diag_report.h"

#include <fmt/core.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

namespace pagoda::control {

using nlohmann::json;

namespace {

void engine_sections(const engine::EngineStats& st, json& kv, json& queue) {
    const auto& b = st.blocks;
    kv = {{"block_size", st.block_size},
          {"blocks_total", b.total},
          {"blocks_used", b.used},
          {"blocks_free", b.free},
          {"blocks_cached", b.cached},
          {"usage", b.usage},
          {"peak_usage", st.peak_kv_usage},
          {"internal_waste", b.internal_waste},
          {"prefix_cache_queries", b.prefix_queries},
          {"prefix_cache_hits", b.prefix_hits},
          {"prefix_cache_hit_rate",
           b.prefix_queries > 0 ? double(b.prefix_hits) / double(b.prefix_queries) : 0.0}};
    json why = json::object();
    for (int r = 0; r < scheduler::kNumWaitReasons; ++r) {
        why[scheduler::wait_reason_name(scheduler::WaitReason(r))] = st.queue.by_reason[r];
    }
    queue = {{"running", st.queue.running},
             {"waiting", st.queue.waiting},
             {"waiting_tokens", st.queue.waiting_tokens},
             {"waiting_by_reason", why},
             {"preemptions_total", st.preemptions},
             {"max_num_seqs", st.knobs.max_num_seqs},
             {"max_num_batched_tokens", st.knobs.max_num_batched_tokens},
             {"steps_total", st.steps}};
}

std::string utc_stamp(int64_t unix_ms) {
    const std::time_t t = std::time_t(unix_ms / 1000);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
    return fmt::format("{}{:03d}", buf, int(unix_ms % 1000));
}

std::string safe_name(const std::string& s) {
    std::string out;
    for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
    return out.substr(0, 64);
}

}  // namespace

const std::vector<std::string>& report_sections() {
    static const std::vector<std::string> s = {
        "alert",           "metric_snapshot",  "series_window", "kv_cache",
        "scheduler_queue", "slowest_requests", "config",        "host"};
    return s;
}

json host_facts() {
    utsname u{};
    uname(&u);
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return {{"hostname", host},
            {"kernel", fmt::format("{} {}", u.sysname, u.release)},
            {"machine", u.machine},
            {"cpus", std::thread::hardware_concurrency()},
            {"memory_bytes", int64_t(pages) * page},
            {"pid", int64_t(getpid())}};
}

json build_report(const ReportInputs& in) {
    json kv = json::object(), queue = json::object();
    if (in.engine) engine_sections(*in.engine, kv, queue);
    json changes = json::array();
    for (const ConfigVersion& v : in.recent_changes) {
        changes.push_back({{"id", v.id},
                           {"created_at_ms", v.created_at_ms},
                           {"source", v.source},
                           {"reason", v.reason},
                           {"diff", v.diff}});
    }
    json config = {{"version", in.config ? json(in.config->id) : json()},
                   {"value", in.config ? in.config->value.to_json() : json()},
                   {"recent_changes", changes}};
    return {{"generated_at_ms", in.now_unix_ms},
            {"alert", in.alert},
            {"metric_snapshot", in.metric_snapshot},
            {"series_window", in.series_window},
            {"kv_cache", kv},
            {"scheduler_queue", queue},
            {"slowest_requests", in.slowest_requests},
            {"config", config},
            {"host", host_facts()}};
}

std::string report_markdown(const json& r) {
    const json& a = r["alert"];
    std::string md =
        fmt::format("# Alert {} ({})\n\n", a.value("rule", "?"), a.value("severity", "?"));
    md += fmt::format("{}\n\n- state: {}\n- value: {}\n- expression: `{}`\n\n",
                      a.value("summary", ""), a.value("state", ""),
                      a.contains("value") ? a["value"].dump() : "null", a.value("expr", ""));
    md += "## Metric snapshot\n\n| series | value |\n|---|---|\n";
    for (const auto& [k, v] : r["metric_snapshot"].items())
        md += fmt::format("| `{}` | {} |\n", k, v.dump());
    md += "\n## Series window\n\n";
    for (const auto& s : r["series_window"]) {
        md += fmt::format("- `{}`: {} points\n", s.value("series", ""), s["points"].size());
    }
    md += "\n## KV cache\n\n";
    for (const auto& [k, v] : r["kv_cache"].items()) md += fmt::format("- {}: {}\n", k, v.dump());
    md += "\n## Scheduler queue\n\n";
    for (const auto& [k, v] : r["scheduler_queue"].items())
        md += fmt::format("- {}: {}\n", k, v.dump());
    md +=
        "\n## Slowest requests\n\n| id | e2e s | ttft s | tokens | stages (s) "
        "|\n|---|---|---|---|---|\n";
    const json& slow =
        r["slowest_requests"].is_object() ? r["slowest_requests"]["data"] : json::array();
    for (const auto& q : slow) {
        std::string stages;
        for (const auto& [k, v] : q["stages_seconds"].items()) {
            stages += fmt::format("{}={:.4f} ", k, v.get<double>());
        }
        md += fmt::format("| {} | {:.3f} | {} | {}+{} | {} |\n", q.value("id", ""),
                          q.value("e2e_seconds", 0.0), q["ttft_seconds"].dump(),
                          q.value("prompt_tokens", 0), q.value("completion_tokens", 0), stages);
    }
    md += fmt::format("\n## Config\n\n- version: {}\n- value: `{}`\n",
                      r["config"]["version"].dump(), r["config"]["value"].dump());
    for (const auto& c : r["config"]["recent_changes"]) {
        md += fmt::format("- change {} by {}: {} `{}`\n", c["id"].dump(), c.value("source", ""),
                          c.value("reason", ""), c["diff"].dump());
    }
    md += "\n## Host\n\n";
    for (const auto& [k, v] : r["host"].items()) md += fmt::format("- {}: {}\n", k, v.dump());
    return md;
}

Result<ReportPaths> write_report(const std::string& dir, const json& report) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
        return make_error(ErrorCode::kIo, "cannot create the report directory {}: {}", dir,
                          ec.message());
    }
    const std::string base =
        fmt::format("{}/{}-{}", dir, utc_stamp(report.value("generated_at_ms", int64_t(0))),
                    safe_name(report["alert"].value("rule", "alert")));
    ReportPaths p{base + ".json", base + ".md"};
    for (const auto& [path, text] :
         {std::pair{p.json_path, report.dump(2)}, {p.markdown_path, report_markdown(report)}}) {
        std::ofstream f(path);
        f << text;
        if (!f) {
            return make_error(ErrorCode::kIo, "cannot write the report {}: {}", path,
                              std::strerror(errno));
        }
    }
    return p;
}

}  // namespace pagoda::control
