// `pagoda generate`: load a model and generate through the continuous-batching engine,
// from one prompt (streamed to stdout, speed on stderr) or from a file of prompts
// submitted all at once (each result, then an aggregate line; --json for JSON lines).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "apps/cli_common.h"
#include "apps/commands.h"
#include "apps/engine_flags.h"
#include "apps/hf_flags.h"
#include "base/log.h"
#include "engine/engine.h"
#include "kernels/cpu/ops.h"
#include "tokenizer/detokenizer.h"

namespace pagoda::app {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct GenerateFlags {
    std::string model = default_model_path();
    std::string weight_cache_dir;  // empty: no weight cache
    hf::ConvertOptions hf;         // a Hugging Face directory's conversion
    std::string prompt;
    std::string prompts_file;
    int n = 128;
    float temperature = 0.8f;
    int top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    int64_t seed = -1;
    bool ignore_eos = false;
    int prompt_tokens = 0;
    int num_prompts = 1;
    bool json_out = false;
    EngineFlags engine;
};

struct Job {
    std::string prompt_text;  // empty for token prompts
    engine::Request request;
};

template <typename T>
Status read_field(const json& j, const char* key, T& out, const std::string& where) {
    if (!j.contains(key) || j[key].is_null()) return ok_status();
    try {
        out = j[key].get<T>();
    } catch (const json::exception&) {
        return make_error(ErrorCode::kInvalidArgument, "{}: field '{}' has the wrong type ({})",
                          where, key, j[key].type_name());
    }
    return ok_status();
}

// One prompt a line, or JSONL objects {"prompt": ..., per-request sampling fields}.
Result<std::vector<Job>> read_prompts(const std::string& path, const engine::SamplingParams& base,
                                      const tokenizer::Tokenizer& tok) {
    std::ifstream in(path);
    if (!in) return make_error(ErrorCode::kNotFound, "cannot open prompts file '{}'", path);
    std::vector<Job> jobs;
    std::string line;
    int no = 0;
    while (std::getline(in, line)) {
        ++no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        Job job;
        job.request.sampling = base;
        const std::string where = fmt::format("{}:{}", path, no);
        if (line.front() == '{') {
            json j;
            try {
                j = json::parse(line);
            } catch (const json::parse_error& e) {
                return make_error(ErrorCode::kInvalidArgument, "{}:{}: not valid JSON: {}", path,
                                  no, e.what());
            }
            if (!j.is_object())
                return make_error(ErrorCode::kInvalidArgument, "{}:{}: expected a JSON object",
                                  path, no);
            auto& sp = job.request.sampling;
            if (j.contains("prompt") && j["prompt"].is_string()) {
                job.prompt_text = j["prompt"].get<std::string>();
                job.request.prompt_ids = tok.encode(job.prompt_text);
            } else if (j.contains("prompt_token_ids")) {
                PAGODA_TRY(read_field(j, "prompt_token_ids", job.request.prompt_ids, where));
            } else {
                return make_error(
                    ErrorCode::kInvalidArgument,
                    "{}:{}: needs \"prompt\" (a string) or \"prompt_token_ids\" (a list of ids)",
                    path, no);
            }
            PAGODA_TRY(read_field(j, "max_tokens", sp.max_tokens, where));
            PAGODA_TRY(read_field(j, "min_tokens", sp.min_tokens, where));
            PAGODA_TRY(read_field(j, "temperature", sp.temperature, where));
            PAGODA_TRY(read_field(j, "top_k", sp.top_k, where));
            PAGODA_TRY(read_field(j, "top_p", sp.top_p, where));
            PAGODA_TRY(read_field(j, "min_p", sp.min_p, where));
            PAGODA_TRY(read_field(j, "repetition_penalty", sp.repetition_penalty, where));
            PAGODA_TRY(read_field(j, "presence_penalty", sp.presence_penalty, where));
            PAGODA_TRY(read_field(j, "frequency_penalty", sp.frequency_penalty, where));
            PAGODA_TRY(read_field(j, "ignore_eos", sp.ignore_eos, where));
            PAGODA_TRY(read_field(j, "n", sp.n, where));
            PAGODA_TRY(read_field(j, "logprobs", sp.logprobs, where));
            PAGODA_TRY(read_field(j, "stop_token_ids", sp.stop_token_ids, where));
            if (j.contains("logit_bias")) {  // OpenAI's shape: {"token id": bias}
                if (!j["logit_bias"].is_object()) {
                    return make_error(ErrorCode::kInvalidArgument,
                                      "{}: \"logit_bias\" must map token ids to numbers", where);
                }
                for (auto& [id, b] : j["logit_bias"].items()) {
                    char* end = nullptr;
                    const long t = std::strtol(id.c_str(), &end, 10);
                    if (*end != '\0' || !b.is_number() || t < 0) {
                        return make_error(ErrorCode::kInvalidArgument,
                                          "{}: logit_bias[\"{}\"]: a token id must map to a number",
                                          where, id);
                    }
                    sp.logit_bias.emplace_back(int32_t(t),
                                               std::clamp(b.get<float>(), -100.0f, 100.0f));
                }
            }
            PAGODA_TRY(read_field(j, "priority", job.request.priority, where));
            if (j.contains("stop") && j["stop"].is_string()) {
                sp.stop = {j["stop"].get<std::string>()};
            } else {
                PAGODA_TRY(read_field(j, "stop", sp.stop, where));
            }
            if (j.contains("seed") && !j["seed"].is_null()) {
                int64_t seed = 0;
                PAGODA_TRY(read_field(j, "seed", seed, where));
                sp.seed = uint64_t(seed);
            }
        } else {
            job.prompt_text = line;
            job.request.prompt_ids = tok.encode(line);
        }
        if (Status st = job.request.sampling.validate(); !st.ok()) {
            return make_error(ErrorCode::kInvalidArgument, "{}:{}: {}", path, no,
                              st.error().message);
        }
        jobs.push_back(std::move(job));
    }
    if (jobs.empty())
        return make_error(ErrorCode::kInvalidArgument, "prompts file '{}' has no prompts", path);
    return jobs;
}

struct Collected {
    std::vector<std::string> text;
    std::vector<std::vector<int32_t>> ids;
    std::vector<std::string> finish;
    std::string error;
    engine::Usage usage;
    engine::RequestTimings timings;
};

Collected collect(engine::RequestStream& s, int n,
                  const std::function<void(const engine::Event&)>& on_event = {}) {
    Collected c;
    c.text.resize(size_t(n));
    c.ids.resize(size_t(n));
    c.finish.resize(size_t(n));
    engine::Event ev;
    while (s.next(ev)) {
        if (on_event) on_event(ev);
        const size_t i = size_t(ev.index);
        c.text[i] += ev.text;
        c.ids[i].insert(c.ids[i].end(), ev.token_ids.begin(), ev.token_ids.end());
        if (ev.finish) c.finish[i] = engine::finish_reason_name(*ev.finish);
        if (!ev.error.empty()) c.error = ev.error;
        if (ev.request_done) {
            c.usage = ev.usage;
            c.timings = ev.timings;
        }
    }
    return c;
}

// " | speculation: A/D drafts accepted (R%), T tokens a decode" when drafts were verified.
std::string spec_summary(const engine::EngineStats& st) {
    if (st.spec_draft_tokens == 0) return "";
    return fmt::format(
        " | speculation: {}/{} drafts accepted ({:.1f}%), {:.2f} tokens per verify",
        st.spec_accepted_tokens, st.spec_draft_tokens,
        100.0 * double(st.spec_accepted_tokens) / double(st.spec_draft_tokens),
        1.0 + double(st.spec_accepted_tokens) / double(std::max<int64_t>(1, st.spec_drafts)));
}

int run_single(engine::Engine& eng, const GenerateFlags& f, engine::Request req) {
    auto s = eng.submit(std::move(req));
    if (!s.ok()) return fail(s.error());
    const Collected c = collect(**s, 1, [](const engine::Event& ev) {
        std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
        std::fflush(stdout);
    });
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (!c.error.empty() && c.finish[0] != "stop" && c.finish[0] != "length") {
        return fail(Error{ErrorCode::kInternal, c.error});
    }
    const auto& t = c.timings;
    const double prefill =
        t.has_token ? std::chrono::duration<double>(t.first_token - t.first_scheduled).count()
                    : 0.0;
    const double decode =
        t.has_token ? std::chrono::duration<double>(t.finished - t.first_token).count() : 0.0;
    const int64_t out = c.usage.completion_tokens;
    const double pp = prefill > 0 ? double(c.usage.prompt_tokens) / prefill : 0.0;
    const double tg =
        decode > 0 && out > 1 ? double(out - 1) / decode : 0.0;  // first token comes from prefill
    std::fprintf(stderr,
                 "prompt: %lld tokens in %.3f s (%.1f tokens/s) | generation: %lld tokens in %.3f "
                 "s (%.1f tokens/s) | "
                 "finish=%s threads=%d simd=%s%s\n",
                 (long long)c.usage.prompt_tokens, prefill, pp, (long long)out, decode, tg,
                 c.finish[0].c_str(), kernels::cpu::num_threads(), kernels::cpu::simd_target_name(),
                 spec_summary(*eng.stats()).c_str());
    return 0;
}

int run_batch(engine::Engine& eng, const GenerateFlags& f, std::vector<Job> jobs) {
    const auto t0 = Clock::now();
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    std::vector<int> ns;
    for (size_t i = 0; i < jobs.size(); ++i) {
        ns.push_back(jobs[i].request.sampling.n);
        auto s = eng.submit(jobs[i].request);
        if (!s.ok()) {
            for (auto& st : streams) st->cancel();
            return fail(
                Error{s.error().code, fmt::format("prompt {}: {}", i + 1, s.error().message)});
        }
        streams.push_back(*s);
    }
    const auto& tok = eng.model().tokenizer();
    int64_t prompt_tokens = 0, gen_tokens = 0, failed = 0;
    for (size_t i = 0; i < streams.size(); ++i) {
        const Collected c = collect(*streams[i], ns[i]);
        prompt_tokens += c.usage.prompt_tokens;
        gen_tokens += c.usage.completion_tokens;
        const bool ok = c.finish[0] == "stop" || c.finish[0] == "length";
        failed += ok ? 0 : 1;
        const std::string prompt = jobs[i].prompt_text.empty()
                                       ? tok.decode(jobs[i].request.prompt_ids)
                                       : jobs[i].prompt_text;
        if (f.json_out) {
            json j = {{"index", i},
                      {"prompt", tokenizer::sanitize_utf8(prompt)},
                      {"text", c.text[0]},
                      {"token_ids", c.ids[0]},
                      {"finish_reason", c.finish[0]},
                      {"prompt_tokens", c.usage.prompt_tokens},
                      {"output_tokens", c.usage.completion_tokens},
                      {"cached_tokens", c.usage.cached_tokens},
                      {"preemptions", c.timings.num_preemptions},
                      {"ttft_s", c.timings.ttft_seconds()},
                      {"e2e_s", c.timings.e2e_seconds()}};
            if (!c.error.empty()) j["error"] = c.error;
            if (ns[i] > 1) {
                json outs = json::array();
                for (int k = 0; k < ns[i]; ++k) {
                    outs.push_back({{"text", c.text[size_t(k)]},
                                    {"token_ids", c.ids[size_t(k)]},
                                    {"finish_reason", c.finish[size_t(k)]}});
                }
                j["outputs"] = outs;
            }
            std::printf("%s\n", j.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
        } else {
            std::printf(
                "--- [%zu] %s, %lld prompt + %lld output tokens, ttft %.3f s, e2e %.3f s%s%s\n",
                i + 1, c.finish[0].c_str(), (long long)c.usage.prompt_tokens,
                (long long)c.usage.completion_tokens, c.timings.ttft_seconds(),
                c.timings.e2e_seconds(), c.error.empty() ? "" : ": ", c.error.c_str());
            for (int k = 0; k < ns[i]; ++k) {
                if (ns[i] > 1) std::printf("(%d) ", k);
                std::printf("%s%s\n", tokenizer::sanitize_utf8(prompt).c_str(),
                            c.text[size_t(k)].c_str());
            }
        }
    }
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    auto st = eng.stats();
    for (int i = 0; i < 100 && st->queue.running + st->queue.waiting > 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        st = eng.stats();
    }
    const double hit_rate = st->blocks.prefix_queries > 0
                                ? double(st->blocks.prefix_hits) / double(st->blocks.prefix_queries)
                                : 0.0;
    const double step_total = st->total_time.total();
    const double overhead =
        step_total > 0 ? (step_total - st->total_time.forward_s) / step_total : 0.0;
    const double decode_tps =
        st->decode_steps_s > 0 ? double(st->decode_steps_tokens) / st->decode_steps_s : 0.0;
    if (f.json_out) {
        json j = {{"summary", true},
                  {"requests", streams.size()},
                  {"failed", failed},
                  {"prompt_tokens", prompt_tokens},
                  {"generated_tokens", gen_tokens},
                  {"wall_s", wall},
                  {"tokens_per_s", double(gen_tokens) / wall},
                  {"decode_tokens_per_s", decode_tps},
                  {"steps", st->steps},
                  {"step_overhead", overhead},
                  {"preemptions", st->preemptions},
                  {"prefix_cache_hit_rate", hit_rate},
                  {"peak_kv_usage", st->peak_kv_usage},
                  {"spec_draft_tokens", st->spec_draft_tokens},
                  {"spec_accepted_tokens", st->spec_accepted_tokens}};
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf(
            "requests: %zu (%lld failed) | prompt tokens: %lld | generated tokens: %lld | wall: "
            "%.3f s | "
            "%.1f tokens/s (decode steps %.1f tokens/s) | steps: %llu, overhead outside forward "
            "%.2f%% | "
            "preemptions: %lld | prefix-cache hit rate: %.1f%% | peak KV usage: %.1f%%%s\n",
            streams.size(), (long long)failed, (long long)prompt_tokens, (long long)gen_tokens,
            wall, double(gen_tokens) / wall, decode_tps, (unsigned long long)st->steps,
            100.0 * overhead, (long long)st->preemptions, 100.0 * hit_rate,
            100.0 * st->peak_kv_usage, spec_summary(*st).c_str());
    }
    std::fflush(stdout);
    return failed == 0 ? 0 : 1;
}

int run_generate(const GenerateFlags& f) {
    auto cfg = engine_config(f.engine);
    if (!cfg.ok()) return fail(cfg.error());
    model::LoadOptions load_opts;
    load_opts.weight_cache_dir = f.weight_cache_dir;
    load_opts.hf = f.hf;
    auto m = model::Model::load(f.model, load_opts);
    if (!m.ok()) return fail(m.error());
    model::Model& model = **m;

    engine::SamplingParams sp;
    sp.temperature = f.temperature;
    sp.top_k = f.top_k;
    sp.top_p = f.top_p;
    sp.min_p = f.min_p;
    sp.seed = f.seed >= 0 ? std::optional<uint64_t>(uint64_t(f.seed)) : std::nullopt;
    sp.max_tokens = f.n;
    sp.ignore_eos = f.ignore_eos;
    if (Status st = sp.validate(); !st.ok()) return fail(st.error());

    std::vector<Job> jobs;
    if (!f.prompts_file.empty()) {
        auto r = read_prompts(f.prompts_file, sp, model.tokenizer());
        if (!r.ok()) return fail(r.error());
        jobs = std::move(r).value();
    } else {
        for (int i = 0; i < f.num_prompts; ++i) {
            Job j;
            j.request.sampling = sp;
            if (f.prompt_tokens > 0) {
                j.request.prompt_ids =
                    synthetic_prompt(model.tokenizer().vocab(), f.prompt_tokens, i);
            } else {
                j.prompt_text = f.prompt;
                j.request.prompt_ids = model.tokenizer().encode(f.prompt);
            }
            jobs.push_back(std::move(j));
        }
    }
    // Everything is submitted at once: the queue must hold it.
    cfg->sched.knobs.max_waiting_requests =
        std::max<int>(cfg->sched.knobs.max_waiting_requests, int(jobs.size()));
    int64_t total_prompt = 0;
    for (const auto& j : jobs) total_prompt += int64_t(j.request.prompt_ids.size());
    cfg->sched.knobs.max_waiting_tokens =
        std::max<int64_t>(cfg->sched.knobs.max_waiting_tokens, total_prompt);
    auto eng = engine::Engine::create(model, *cfg);
    if (!eng.ok()) return fail(eng.error());
    if (f.prompts_file.empty() && jobs.size() == 1 && !f.json_out)
        return run_single(**eng, f, std::move(jobs[0].request));
    return run_batch(**eng, f, std::move(jobs));
}

}  // namespace

void add_generate(CLI::App& app, std::function<int()>& action) {
    auto f = std::make_shared<GenerateFlags>();
    CLI::App* c = app.add_subcommand("generate",
                                     "Generate text through the batching engine: one prompt "
                                     "(streamed to stdout, speed on stderr) or a file of "
                                     "prompts run together (--prompts)");
    c->add_option("-m,--model", f->model, "GGUF model file or Hugging Face model directory")
        ->capture_default_str()
        ->check(CLI::ExistingPath);
    add_hf_flags(c, f->hf);
    c->add_option("--weight-cache-dir", f->weight_cache_dir,
                  "Keep the packed weights in a file here (as pagoda serve does by default), so "
                  "the next run maps them instead of packing; default: none");
    auto* p_opt = c->add_option("-p,--prompt", f->prompt, "Prompt text");
    auto* pt_opt =
        c->add_option("--prompt-tokens", f->prompt_tokens,
                      "Benchmark: use N pseudo-random token ids as the prompt instead of -p")
            ->check(CLI::Range(1, 1 << 24));
    auto* pf_opt =
        c->add_option(
             "--prompts", f->prompts_file,
             "File of prompts, one a line, or JSONL objects with \"prompt\" (or "
             "\"prompt_token_ids\") and per-request fields (max_tokens, temperature, top_p, top_k, "
             "min_p, seed, stop, n, priority, ...); all are submitted at once")
            ->check(CLI::ExistingFile);
    p_opt->excludes(pt_opt);
    pf_opt->excludes(p_opt);
    pf_opt->excludes(pt_opt);
    c->add_option(
         "--num-prompts", f->num_prompts,
         "Benchmark: submit N copies of -p (or N different --prompt-tokens prompts) at once")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    c->add_flag("--json", f->json_out,
                "Print one JSON object per request (in input order), then a summary object");

    c->add_option("-n,--max-tokens", f->n, "Tokens to generate per request")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    c->add_option("--temperature,--temp", f->temperature, "Sampling temperature; 0 = greedy")
        ->capture_default_str()
        ->check(CLI::Range(0.0f, 100.0f));
    c->add_option("--top-k", f->top_k, "Keep the k most likely tokens; 0 = off")
        ->capture_default_str()
        ->check(CLI::Range(0, 1 << 20));
    c->add_option("--top-p", f->top_p, "Nucleus sampling mass, (0, 1]")
        ->capture_default_str()
        ->check(CLI::Range(0.0f, 1.0f));
    c->add_option("--min-p", f->min_p, "Drop tokens below min-p x top probability")
        ->capture_default_str()
        ->check(CLI::Range(0.0f, 1.0f));
    c->add_option("--seed", f->seed, "RNG seed; -1 = random")->capture_default_str();
    c->add_flag("--ignore-eos", f->ignore_eos, "Keep generating past the end-of-sequence token");
    add_engine_flags(c, f->engine);
    c->callback([f, p_opt, pt_opt, pf_opt, &action] {
        if (p_opt->count() == 0 && pt_opt->count() == 0 && pf_opt->count() == 0) {
            throw CLI::RequiredError(
                "a prompt: give -p TEXT, --prompts FILE (or --prompt-tokens N to benchmark)");
        }
        action = [f] { return run_generate(*f); };
    });
}

}  // namespace pagoda::app
