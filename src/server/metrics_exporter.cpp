// ServerMetrics: the implementation (the contract is in server/metrics_exporter.h).
#include "server/metrics_exporter.h"

#include <fmt/core.h>

#include <algorithm>

#include "kernels/cpu/ops.h"
#include "server/process_stats.h"

namespace pagoda::server {

namespace {

std::vector<double> token_buckets() {
    return {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000};
}

metrics::Labels with(const metrics::Labels& base, const char* key, std::string value) {
    metrics::Labels l = base;
    l.emplace_back(key, std::move(value));
    return l;
}

}  // namespace

ServerMetrics::ServerMetrics(LengthClasses classes)
    : ttft_(latency_buckets()),
      itl_(latency_buckets()),
      e2e_(latency_buckets()),
      queue_(latency_buckets()),
      prefill_(latency_buckets()),
      decode_(latency_buckets()),
      prompt_tokens_(token_buckets()),
      gen_tokens_(token_buckets()),
      output_({1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01}),
      log_(std::move(classes)) {}

void ServerMetrics::record_finished(const engine::Event& last, const std::vector<double>& itl) {
    const auto& t = last.timings;
    if (t.has_token) {
        ttft_.observe(t.ttft_seconds());
        prefill_.observe(std::chrono::duration<double>(t.first_token - t.first_scheduled).count());
        decode_.observe(std::chrono::duration<double>(t.finished - t.first_token).count());
    }
    if (t.scheduled) queue_.observe(t.queue_seconds());
    e2e_.observe(t.e2e_seconds());
    itl_.observe_all(itl);
    prompt_tokens_.observe(double(last.usage.prompt_tokens));
    gen_tokens_.observe(double(last.usage.completion_tokens));
    prompt_total_ += last.usage.prompt_tokens;
    gen_total_ += last.usage.completion_tokens;
    ++finished_[int(last.finish.value_or(engine::FinishReason::kError))];
}

void ServerMetrics::count_response(int status) {
    ++http_by_status_[std::clamp(status / 100, 1, 5)];
}

std::string ServerMetrics::text(const MetricsSources& src) const {
    const auto st = src.engine.stats();
    metrics::TextWriter w;
    const metrics::Labels model = {{"model_name", src.model_name}};
    write_request_families(w, "pagoda_", *st, model);
    if (src.vllm_names) write_request_families(w, "vllm:", *st, model);
    write_native_detail(w, src, *st, model);
    write_resources(w, src, *st, model);
    log_.write(w, model);
    return w.text();
}

// The families published under both prefixes (vLLM's names and their pagoda_ twins).
void ServerMetrics::write_request_families(metrics::TextWriter& w, const std::string& p,
                                           const engine::EngineStats& st,
                                           const metrics::Labels& model) const {
    auto one = [&](const std::string& name, const char* type, const char* help, double v) {
        w.family(name, type, help);
        w.sample(name, model, v);
    };
    one(p + "num_requests_running", "gauge", "Requests in the running batch.",
        double(st.queue.running));
    one(p + "num_requests_waiting", "gauge", "Requests waiting, by reason.",
        double(st.queue.waiting));
    one(p + "kv_cache_usage_perc", "gauge", "Fraction of KV cache blocks in use (0-1).",
        st.blocks.usage);
    one(p + "prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
        double(prompt_total_.load()));
    one(p + "generation_tokens_total", "counter", "Generated tokens of finished requests.",
        double(gen_total_.load()));
    one(p + "num_preemptions_total", "counter", "Preemptions (recompute).", double(st.preemptions));
    one(p + "prefix_cache_queries_total", "counter", "Prompt blocks looked up in the prefix cache.",
        double(st.blocks.prefix_queries));
    one(p + "prefix_cache_hits_total", "counter", "Prompt blocks found in the prefix cache.",
        double(st.blocks.prefix_hits));
    one(p + "spec_decode_num_drafts_total", "counter",
        "Speculative decoding: decodes that verified proposed drafts.", double(st.spec_drafts));
    one(p + "spec_decode_num_draft_tokens_total", "counter",
        "Speculative decoding: draft tokens proposed and verified.", double(st.spec_draft_tokens));
    one(p + "spec_decode_num_accepted_tokens_total", "counter",
        "Speculative decoding: draft tokens accepted (the model's own choice).",
        double(st.spec_accepted_tokens));
    w.family(p + "request_success_total", "counter", "Finished requests by finish reason.");
    for (int r = 0; r < 6; ++r) {
        w.sample(
            p + "request_success_total",
            with(model, "finished_reason", engine::finish_reason_name(engine::FinishReason(r))),
            double(finished_[r].load()));
    }
    const std::pair<const char*, const metrics::Histogram*> hists[] = {
        {"time_to_first_token_seconds", &ttft_},     {"inter_token_latency_seconds", &itl_},
        {"e2e_request_latency_seconds", &e2e_},      {"request_queue_time_seconds", &queue_},
        {"request_prefill_time_seconds", &prefill_}, {"request_decode_time_seconds", &decode_},
        {"request_prompt_tokens", &prompt_tokens_},  {"request_generation_tokens", &gen_tokens_}};
    const char* helps[] = {"Time from arrival to the first token.",
                           "Time between consecutive tokens of a request.",
                           "Time from arrival to the last token.",
                           "Time from arrival to first scheduled.",
                           "Time from first scheduled to the first token.",
                           "Time from the first token to the last.",
                           "Prompt tokens per request.",
                           "Generated tokens per request."};
    for (size_t i = 0; i < std::size(hists); ++i) {
        w.family(p + hists[i].first, "histogram", helps[i]);
        w.histogram(p + hists[i].first, model, *hists[i].second);
    }
}

namespace {
// Structured outputs: constrained requests and the token-mask time per step.
void write_grammar(metrics::TextWriter& w, const engine::StepHistograms& sh,
                   const engine::EngineStats& st, const metrics::Labels& model) {
    w.family("pagoda_grammar_mask_seconds", "histogram",
             "Token-mask time of the grammar-constrained sequences of an engine step.");
    w.histogram("pagoda_grammar_mask_seconds", model, sh.grammar_mask);
    w.family("pagoda_constrained_requests_total", "counter",
             "Requests whose output a grammar constrains (structured outputs, forced tool calls).");
    w.sample("pagoda_constrained_requests_total", model, double(st.constrained_requests));
}
// The warm levels' cost and passes (docs/architecture.md, "Warmup tiers").
void write_warm(metrics::TextWriter& w, const engine::Engine& engine,
                const metrics::Labels& model) {
    w.family("pagoda_warmup_cpu_seconds_total", "counter",
             "CPU time the compute pool spent warm between steps: spinning and warm passes (warm "
             "levels).");
    w.sample("pagoda_warmup_cpu_seconds_total", model, engine.idle_spin_cpu_seconds());
    w.family("pagoda_warm_passes_total", "counter",
             "Warm passes during the idle spin (warm levels with --warm-pass-ms): completed, or "
             "interrupted because a request came.");
    w.sample("pagoda_warm_passes_total", with(model, "outcome", "completed"),
             double(engine.warm_passes()));
    w.sample("pagoda_warm_passes_total", with(model, "outcome", "interrupted"),
             double(engine.warm_passes_interrupted()));
}

}  // namespace

// Native-only detail: waiting reasons, block states, steps, stages, HTTP classes, config.
void ServerMetrics::write_native_detail(metrics::TextWriter& w, const MetricsSources& src,
                                        const engine::EngineStats& st,
                                        const metrics::Labels& model) const {
    w.family("pagoda_requests_waiting_by_reason", "gauge",
             "Waiting requests by the reason they wait.");
    for (int r = 0; r < scheduler::kNumWaitReasons; ++r) {
        w.sample("pagoda_requests_waiting_by_reason",
                 with(model, "reason", scheduler::wait_reason_name(scheduler::WaitReason(r))),
                 double(st.queue.by_reason[r]));
    }
    w.family("pagoda_kv_cache_blocks", "gauge", "KV cache blocks by state.");
    for (auto [state, v] : {std::pair{"used", st.blocks.used},
                            {"free", st.blocks.free},
                            {"cached", st.blocks.cached}}) {
        w.sample("pagoda_kv_cache_blocks", with(model, "state", state), double(v));
    }
    w.family("pagoda_engine_steps_total", "counter", "Engine steps run.");
    w.sample("pagoda_engine_steps_total", model, double(st.steps));
    w.family("pagoda_engine_step_seconds_total", "counter", "Time in engine steps by stage.");
    for (auto [stage, v] : {std::pair{"schedule", st.total_time.schedule_s},
                            {"forward", st.total_time.forward_s},
                            {"sample", st.total_time.sample_s},
                            {"output", st.total_time.output_s}}) {
        w.sample("pagoda_engine_step_seconds_total", with(model, "stage", stage), v);
    }
    w.family("pagoda_http_responses_total", "counter", "HTTP responses by status class.");
    for (int c = 1; c <= 5; ++c) {
        w.sample("pagoda_http_responses_total", with(model, "code", fmt::format("{}xx", c)),
                 double(http_by_status_[c].load()));
    }
    for (const char* name : {"pagoda_cache_config_info", "vllm:cache_config_info"}) {
        if (!src.vllm_names && name[0] == 'v') continue;
        w.family(name, "gauge", "KV cache configuration.");
        w.sample(name,
                 {{"block_size", std::to_string(st.block_size)},
                  {"num_gpu_blocks", std::to_string(st.blocks.total)},
                  {"enable_prefix_caching",
                   src.engine.config().enable_prefix_caching ? "True" : "False"}},
                 1.0);
    }
    write_state(w, src, st, model);
    const auto& sh = src.engine.step_histograms();
    for (auto [name, h] : {std::pair{"pagoda_step_schedule_seconds", &sh.schedule},
                           {"pagoda_step_forward_seconds", &sh.forward},
                           {"pagoda_step_sample_seconds", &sh.sample},
                           {"pagoda_step_output_seconds", &sh.output},
                           {"pagoda_step_seconds", &sh.step}}) {
        w.family(name, "histogram", "Engine step stage duration (see docs/metrics.md).");
        w.histogram(name, model, *h);
    }
    w.family("pagoda_idle_wakeup_seconds", "histogram",
             "The first forward pass after an idle pause minus the average pass of its size.");
    w.histogram("pagoda_idle_wakeup_seconds", model, sh.idle_wakeup);
    write_grammar(w, sh, st, model);
    write_warm(w, src.engine, model);
    w.family("pagoda_http_output_seconds", "histogram",
             "I/O-thread time turning a batch of engine events into JSON or SSE chunks and "
             "queueing them.");
    w.histogram("pagoda_http_output_seconds", model, output_);
}

// The running knobs, readiness and the replica's state.
void ServerMetrics::write_state(metrics::TextWriter& w, const MetricsSources& src,
                                const engine::EngineStats& st, const metrics::Labels& model) const {
    w.family("pagoda_max_num_seqs", "gauge", "The running max_num_seqs (batch size cap).");
    w.sample("pagoda_max_num_seqs", model, double(st.knobs.max_num_seqs));
    w.family("pagoda_max_num_batched_tokens", "gauge",
             "The running max_num_batched_tokens (token cap per step).");
    w.sample("pagoda_max_num_batched_tokens", model, double(st.knobs.max_num_batched_tokens));
    w.family("pagoda_ready", "gauge", "1 when ready to serve, 0 while warming up or draining.");
    w.sample("pagoda_ready", model, src.ready ? 1.0 : 0.0);
    w.family("pagoda_replica_state", "gauge",
             "1 for the replica's state: warming, serving, shedding (an alert moves traffic "
             "away) or draining.");
    for (const char* state : {"warming", "serving", "shedding", "draining"}) {
        w.sample("pagoda_replica_state", with(model, "state", state),
                 src.replica_state == state ? 1.0 : 0.0);
    }
}

// The resource layer: memory, CPU, threads, KV pool, compute busy time, connections.
void ServerMetrics::write_resources(metrics::TextWriter& w, const MetricsSources& src,
                                    const engine::EngineStats& st,
                                    const metrics::Labels& model) const {
    auto gauge = [&](const char* name, const char* help, double v) {
        w.family(name, "gauge", help);
        w.sample(name, model, v);
    };
    const ProcessStats ps = read_process_stats();
    gauge("pagoda_process_resident_memory_bytes", "Resident set size of the process.",
          double(ps.rss_bytes));
    w.family("pagoda_process_cpu_seconds_total", "counter",
             "User + system CPU time of the process.");
    w.sample("pagoda_process_cpu_seconds_total", model, ps.cpu_seconds);
    gauge("pagoda_process_threads", "Threads of the process.", double(ps.threads));
    gauge("pagoda_kv_cache_memory_bytes", "Bytes of the KV cache pool.",
          double(src.engine.kv_cache_bytes()));
    w.family("pagoda_compute_busy_seconds_total", "counter",
             "Wall time the compute pool spent in forward passes (busy fraction = rate of this).");
    w.sample("pagoda_compute_busy_seconds_total", model, st.total_time.forward_s);
    if (src.open_connections) {
        gauge("pagoda_http_open_connections", "Open HTTP connections.",
              double(src.open_connections()));
    }
    if (src.stream_writes) {
        w.family("pagoda_http_stream_writes_total", "counter",
                 "Socket writes of streamed answers (head, chunks, end): about tokens / "
                 "--stream-interval + 1 a stream.");
        w.sample("pagoda_http_stream_writes_total", model, double(src.stream_writes()));
    }
    write_memory(w, src, st, model);
    if (src.engine.model().simulated()) write_sim(w, src, st, model);
}

void ServerMetrics::write_memory(metrics::TextWriter& w, const MetricsSources& src,
                                 const engine::EngineStats& st,
                                 const metrics::Labels& model) const {
    auto gauge = [&](const char* name, const char* help, double v) {
        w.family(name, "gauge", help);
        w.sample(name, model, v);
    };
    const model::Model& m = src.engine.model();
    double used = 0, limit = 0, traffic = st.memory_traffic_bytes, peak = src.memory_bandwidth;
    if (const auto* perf = m.perf_model()) {  // one modelled GPU
        const model::SimTotals t = m.sim_totals();
        limit = double(perf->gpu().memory_bytes());
        used = double(perf->shape().total_params()) * perf->weight_bytes_per_param() / perf->tp() +
               (st.blocks.total > 0 ? st.blocks.usage * double(src.engine.kv_cache_bytes()) : 0);
        traffic = t.bytes;
        peak = perf->gpu().memory_tbps * 1e12 * m.sim_speed();
        used = std::max(used, m.sim_faults().memory_pressure * limit);  // an injected fault
    } else {
        used = double(read_process_stats().rss_bytes);
        limit =
            double(src.memory_limit_bytes > 0 ? src.memory_limit_bytes : physical_memory_bytes());
    }
    gauge("pagoda_memory_used_bytes",
          "Memory in use: resident set (CPU) or modelled weights + KV in use on one GPU (sim).",
          used);
    gauge("pagoda_memory_limit_bytes",
          "The memory limit: --memory-limit, else the cgroup limit, else physical memory "
          "(sim: the GPU's memory).",
          limit);
    gauge("pagoda_memory_usage_perc", "pagoda_memory_used_bytes / pagoda_memory_limit_bytes.",
          limit > 0 ? used / limit : 0);
    w.family("pagoda_memory_traffic_bytes_total", "counter",
             "Bytes the forward passes read: weights once per pass plus the KV of each context "
             "(sim: modelled HBM traffic per GPU).");
    w.sample("pagoda_memory_traffic_bytes_total", model, traffic);
    if (peak > 0 && !m.simulated() && st.last_step.forward_s > 0) {
        gauge("pagoda_step_memory_bandwidth_perc",
              "Memory bandwidth use of the last forward pass: its bytes / its duration / peak.",
              st.last_step_traffic_bytes / st.last_step.forward_s / peak);
    }
    if (peak > 0) {
        gauge("pagoda_memory_bandwidth_peak_bytes_per_second",
              "Peak memory bandwidth: measured at start (CPU) or the card's (sim, times "
              "--sim-speed); utilisation = rate(pagoda_memory_traffic_bytes_total) / this.",
              peak);
    }
}

// The simulated GPU's modelled utilisation (--backend sim), per GPU of the TP group. The
// rates of the *_seconds_total counters against modelled time are the busy fractions.
void ServerMetrics::write_sim(metrics::TextWriter& w, const MetricsSources& src,
                              const engine::EngineStats& st, const metrics::Labels& model) const {
    const model::Model& m = src.engine.model();
    const model::SimTotals t = m.sim_totals();
    const auto* perf = m.perf_model();
    auto counter = [&](const char* name, const char* help, double v) {
        w.family(name, "counter", help);
        w.sample(name, model, v);
    };
    counter("pagoda_sim_busy_seconds_total", "Modelled GPU time of all steps.", t.busy_s);
    counter("pagoda_sim_tensor_seconds_total",
            "Modelled time the tensor cores needed (the analogue of SM activity).", t.compute_s);
    counter("pagoda_sim_hbm_seconds_total", "Modelled time memory traffic needed.", t.memory_s);
    counter("pagoda_sim_interconnect_seconds_total",
            "Modelled tensor-parallel all-reduce time (NVLink or PCIe).", t.comm_s);
    counter("pagoda_sim_flops_total", "Modelled FLOPs, all GPUs.", t.flops);
    counter("pagoda_sim_hbm_bytes_total", "Modelled bytes moved to or from HBM, per GPU.", t.bytes);
    counter("pagoda_sim_interconnect_bytes_total", "Modelled all-reduce bytes sent, per GPU.",
            t.comm_bytes);
    w.family("pagoda_sim_gpu_memory_bytes", "gauge",
             "Modelled memory of one GPU: total, and used by weights and the KV cache in use.");
    const double total = double(perf->gpu().memory_bytes());
    const double weights =
        double(perf->shape().total_params()) * perf->weight_bytes_per_param() / perf->tp();
    const double kv_used =
        st.blocks.total > 0 ? st.blocks.usage * double(src.engine.kv_cache_bytes()) : 0;
    w.sample("pagoda_sim_gpu_memory_bytes", {{"model_name", model.at(0).second}, {"kind", "total"}},
             total);
    w.sample("pagoda_sim_gpu_memory_bytes",
             {{"model_name", model.at(0).second}, {"kind", "weights"}}, weights);
    w.sample("pagoda_sim_gpu_memory_bytes",
             {{"model_name", model.at(0).second}, {"kind", "kv_used"}}, kv_used);
}

}  // namespace pagoda::server
