// RequestLog: the implementation (the contract is in server/request_log.h).
#include "server/request_log.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/log.h"

namespace pagoda::server {

namespace {

double secs(engine::Clock::time_point a, engine::Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

// Stage durations of a record, in RequestLog::kStages order.
std::array<double, 9> stages_of(const RequestRecord& r) {
    const auto& t = r.timings;
    const double prefill = t.has_token ? secs(t.first_scheduled, t.first_token) : 0;
    const double decode = t.has_token ? secs(t.first_token, t.finished) : 0;
    return {t.scheduled ? t.queue_seconds() : t.e2e_seconds(),
            prefill,
            decode,
            t.schedule_s,
            t.forward_s,
            t.sample_s,
            t.output_s,
            r.http_output_s,
            r.network_write_s};
}

std::vector<std::unique_ptr<metrics::Histogram>> histograms(size_t n) {
    std::vector<std::unique_ptr<metrics::Histogram>> out;
    for (size_t i = 0; i < n; ++i)
        out.push_back(std::make_unique<metrics::Histogram>(latency_buckets()));
    return out;
}

}  // namespace

std::vector<double> latency_buckets() {
    return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
            0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
}

std::string LengthClasses::classify(int64_t tokens) const {
    const auto n = names();
    size_t i = 0;
    while (i < boundaries.size() && tokens >= boundaries[i]) ++i;
    return n[i];
}

std::vector<std::string> LengthClasses::names() const {
    if (boundaries.size() >= 2) return {"short", "medium", "long"};
    return {"short", "long"};
}

const char* error_kind_name(ErrorKind k) {
    switch (k) {
        case ErrorKind::kRejected: return "rejected";
        case ErrorKind::kTimeout: return "timeout";
        case ErrorKind::kInternal: return "internal";
    }
    return "internal";
}

nlohmann::json RequestRecord::to_json() const {
    const auto s = stages_of(*this);
    nlohmann::json stages = nlohmann::json::object();
    for (size_t i = 0; i < s.size(); ++i) stages[RequestLog::kStages[i]] = s[i];
    const auto& t = timings;
    return {{"id", id},
            {"endpoint", endpoint},
            {"status", status},
            {"finish_reason", finish_reason},
            {"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"length_class", length_class},
            {"finished_unix_ms", finished_unix_ms},
            {"e2e_seconds", t.e2e_seconds()},
            {"ttft_seconds", t.has_token ? nlohmann::json(t.ttft_seconds()) : nlohmann::json()},
            {"engine_steps", t.steps},
            {"preemptions", t.num_preemptions},
            {"stages_seconds", stages}};
}

RequestLog::RequestLog(LengthClasses classes)
    : classes_(std::move(classes)),
      stage_(histograms(kStages.size())),
      ttft_(histograms(classes_.names().size())),
      itl_(histograms(classes_.names().size())),
      e2e_(histograms(classes_.names().size())) {}

void RequestLog::set_access_log(bool on, std::string replica) {
    access_log_ = on;
    replica_ = std::move(replica);
}

void RequestLog::add(RequestRecord r, const std::vector<double>& itl) {
    if (access_log_) {
        log_info(
            "access id={} route={} status={} prompt_tokens={} completion_tokens={} ttft_ms={} "
            "total_ms={:.1f} finish_reason={} replica={}",
            r.request_id.empty() ? r.id : r.request_id, r.route, r.status, r.prompt_tokens,
            r.completion_tokens,
            r.timings.has_token ? fmt::format("{:.1f}", r.timings.ttft_seconds() * 1e3) : "-",
            r.timings.e2e_seconds() * 1e3, r.finish_reason.empty() ? "-" : r.finish_reason,
            replica_);
    }
    r.length_class = classes_.classify(r.prompt_tokens + r.completion_tokens);
    const auto names = classes_.names();
    const size_t c = size_t(std::find(names.begin(), names.end(), r.length_class) - names.begin());
    const auto s = stages_of(r);
    for (size_t i = 0; i < s.size(); ++i) {
        if (i == 0 && !r.timings.scheduled) continue;  // never scheduled: no queue stage
        if ((i == 1 || i == 2) && !r.timings.has_token) continue;
        stage_[i]->observe(s[i]);
    }
    if (r.timings.has_token) ttft_[c]->observe(r.timings.ttft_seconds());
    itl_[c]->observe_all(itl);
    e2e_[c]->observe(r.timings.e2e_seconds());
    std::lock_guard<std::mutex> lock(mu_);
    if (recent_.size() >= kCapacity) recent_.pop_front();
    recent_.push_back(std::move(r));
}

nlohmann::json RequestLog::slowest(int n) const {
    std::vector<const RequestRecord*> v;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& r : recent_) v.push_back(&r);
    const size_t k = std::min(v.size(), size_t(std::max(n, 0)));
    std::partial_sort(v.begin(), v.begin() + std::ptrdiff_t(k), v.end(),
                      [](const RequestRecord* a, const RequestRecord* b) {
                          return a->timings.e2e_seconds() > b->timings.e2e_seconds();
                      });
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < k; ++i) out.push_back(v[i]->to_json());
    return {{"object", "list"}, {"recent", recent_.size()}, {"data", out}};
}

void RequestLog::write(metrics::TextWriter& w, const metrics::Labels& model) const {
    auto with = [&](const char* k, const std::string& v) {
        metrics::Labels l = model;
        l.emplace_back(k, v);
        return l;
    };
    w.family("pagoda_request_stage_seconds", "histogram",
             "Per-request time in each stage of the chain (see docs/metrics.md).");
    for (size_t i = 0; i < kStages.size(); ++i) {
        w.histogram("pagoda_request_stage_seconds", with("stage", kStages[i]), *stage_[i]);
    }
    const auto names = classes_.names();
    const std::pair<const char*, const std::vector<std::unique_ptr<metrics::Histogram>>*> fams[] = {
        {"pagoda_time_to_first_token_by_length_seconds", &ttft_},
        {"pagoda_inter_token_latency_by_length_seconds", &itl_},
        {"pagoda_e2e_request_latency_by_length_seconds", &e2e_}};
    for (const auto& [name, hs] : fams) {
        w.family(name, "histogram", "Latency by request length class (prompt + output tokens).");
        for (size_t c = 0; c < names.size(); ++c) {
            w.histogram(name, with("length_class", names[c]), *(*hs)[c]);
        }
    }
    w.family("pagoda_requests_total", "counter",
             "Generation requests accepted for processing (valid bodies), rejected ones included.");
    w.sample("pagoda_requests_total", model, double(requests_.load()));
    w.family("pagoda_request_errors_total", "counter",
             "Generation requests that failed, by kind: rejected (queue full), timeout (queued "
             "past the deadline), internal.");
    for (int k = 0; k < kNumErrorKinds; ++k) {
        w.sample("pagoda_request_errors_total", with("kind", error_kind_name(ErrorKind(k))),
                 double(errors_[k].load()));
    }
}

}  // namespace pagoda::server
