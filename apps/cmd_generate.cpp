// `pagoda generate`: load a model, generate from a prompt, stream the text.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "apps/cli_common.h"
#include "apps/commands.h"
#include "base/log.h"
#include "engine/generator.h"
#include "kernels/cpu/ops.h"
#include "tokenizer/detokenizer.h"

namespace pagoda::app {
namespace {

struct GenerateFlags {
    std::string model = default_model_path();
    std::string prompt;
    int n = 128;
    float temperature = 0.8f;
    int top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    int64_t seed = -1;
    int block_size = 16;
    int threads = 0;
    std::string kv_memory = "256MiB";
    std::string kv_dtype = "f32";
    bool ignore_eos = false;
    int prompt_tokens = 0;
};

int run_generate(const GenerateFlags& f) {
    if (f.threads > 0) kernels::cpu::set_num_threads(f.threads);
    auto m = model::Model::load(f.model);
    if (!m.ok()) return fail(m.error());
    model::Model& model = **m;

    auto mem = parse_memory(f.kv_memory);
    if (!mem.ok()) return fail(mem.error());
    auto dtype = kvcache::parse_kv_dtype(f.kv_dtype);
    if (!dtype.ok()) return fail(dtype.error());
    kvcache::KvCacheConfig kv{.block_size = f.block_size, .dtype = *dtype, .num_blocks = 0, .memory_bytes = *mem};
    auto gen = engine::Generator::create(model, kv);
    if (!gen.ok()) return fail(gen.error());

    std::vector<int32_t> prompt;
    if (f.prompt_tokens > 0) {  // benchmark prompt: BOS then deterministic pseudo-random ids
        const auto& v = model.tokenizer().vocab();
        uint64_t x = 88172645463325252ull;
        if (v.bos >= 0) prompt.push_back(v.bos);
        while (int(prompt.size()) < f.prompt_tokens) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const int32_t id = int32_t(x % uint64_t(v.size()));
            if (!v.is_control(id)) prompt.push_back(id);
        }
    } else {
        prompt = model.tokenizer().encode(f.prompt);
    }
    engine::GenerateParams p;
    p.max_new_tokens = f.n;
    p.sampling = {.temperature = f.temperature, .top_k = f.top_k, .top_p = f.top_p, .min_p = f.min_p,
                  .seed = f.seed >= 0 ? std::optional<uint64_t>(uint64_t(f.seed)) : std::nullopt};
    p.stop_at_eos = f.ignore_eos ? engine::GenerateParams::StopAtEos::kNo : engine::GenerateParams::StopAtEos::kYes;

    tokenizer::IncrementalDetokenizer detok(model.tokenizer(), false);
    auto r = gen->generate(prompt, p, [&](int32_t id) {
        const std::string text = detok.push(id);
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
    });
    if (!r.ok()) return fail(r.error());
    const std::string rest = detok.flush();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);

    const double pp = r->prefill_seconds > 0 ? double(r->prompt_ids.size()) / r->prefill_seconds : 0.0;
    const size_t decoded = r->output_ids.empty() ? 0 : r->output_ids.size() - 1;  // first token comes from prefill
    const double tg = r->decode_seconds > 0 ? double(decoded) / r->decode_seconds : 0.0;
    std::fprintf(stderr,
                 "prompt: %zu tokens in %.3f s (%.1f tokens/s) | generation: %zu tokens in %.3f s (%.1f tokens/s) | "
                 "finish=%s threads=%d simd=%s\n",
                 r->prompt_ids.size(), r->prefill_seconds, pp, r->output_ids.size(), r->decode_seconds, tg,
                 r->finish_reason.c_str(), kernels::cpu::num_threads(), kernels::cpu::simd_target_name());
    return 0;
}

}  // namespace

void add_generate(CLI::App& app, std::function<int()>& action) {
    auto f = std::make_shared<GenerateFlags>();
    CLI::App* c = app.add_subcommand("generate", "Generate text from a prompt (streams to stdout, speed on stderr)");
    c->add_option("-m,--model", f->model, "GGUF model file")->capture_default_str()->check(CLI::ExistingFile);
    auto* p_opt = c->add_option("-p,--prompt", f->prompt, "Prompt text");
    auto* pt_opt = c->add_option("--prompt-tokens", f->prompt_tokens,
                                 "Benchmark: use N pseudo-random token ids as the prompt instead of -p")
                       ->check(CLI::Range(1, 1 << 24));
    p_opt->excludes(pt_opt);

    c->add_option("-n,--max-tokens", f->n, "Tokens to generate")->capture_default_str()->check(CLI::Range(1, 1 << 20));
    c->add_option("--temperature,--temp", f->temperature, "Sampling temperature; 0 = greedy")
        ->capture_default_str()->check(CLI::Range(0.0f, 100.0f));
    c->add_option("--top-k", f->top_k, "Keep the k most likely tokens; 0 = off")->capture_default_str()->check(CLI::Range(0, 1 << 20));
    c->add_option("--top-p", f->top_p, "Nucleus sampling mass, (0, 1]")->capture_default_str()->check(CLI::Range(0.0f, 1.0f));
    c->add_option("--min-p", f->min_p, "Drop tokens below min-p x top probability")->capture_default_str()->check(CLI::Range(0.0f, 1.0f));
    c->add_option("--seed", f->seed, "RNG seed; -1 = random")->capture_default_str();
    c->add_option("--block-size", f->block_size, "KV cache block size in tokens")
        ->capture_default_str()->check(CLI::IsMember({8, 16, 32, 48, 64, 128}));
    c->add_option("--kv-cache-memory", f->kv_memory, "KV cache budget: bytes with unit (512MiB, 2GiB) or a RAM fraction (0.2)")
        ->capture_default_str();
    c->add_option("--kv-cache-dtype", f->kv_dtype, "KV cache storage: f32, f16, bf16")->capture_default_str();
    c->add_option("-t,--threads", f->threads, "Compute threads; 0 = all cores")->capture_default_str()->check(CLI::Range(0, 1024));
    c->add_flag("--ignore-eos", f->ignore_eos, "Keep generating past the end-of-sequence token");
    c->callback([f, p_opt, pt_opt, &action] {
        if (p_opt->count() == 0 && pt_opt->count() == 0) {
            throw CLI::RequiredError("a prompt: give -p TEXT (or --prompt-tokens N to benchmark)");
        }
        action = [f] { return run_generate(*f); };
    });
}

}  // namespace pagoda::app
