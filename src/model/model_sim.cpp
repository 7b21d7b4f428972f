// Model::simulate and the simulated forward pass: no weights, the step time of the
// performance model (sim/perf_model.h), deterministic pseudo-random tokens.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "model/model.h"

namespace pagoda::model {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// The shape to model: a known shape's, or a GGUF file's (its tied output when the file
// has no output.weight).
Result<sim::SimShape> shape_of(const SimOptions& o, const formats::GgufFile* g,
                               const ModelConfig* cfg) {
    if (g == nullptr) {
        PAGODA_ASSIGN_OR_RETURN(ModelShape s, find_shape(o.model));
        return sim::SimShape::of(s);
    }
    sim::SimShape s;
    s.layers = cfg->num_layers;
    s.dim = cfg->dim;
    s.heads = cfg->num_heads;
    s.kv_heads = cfg->num_kv_heads;
    s.head_dim = cfg->head_dim;
    s.ffn = cfg->ffn_dim;
    s.experts = cfg->num_experts;
    s.experts_used = cfg->num_experts_used;
    s.expert_ffn = cfg->expert_ffn_dim;
    s.vocab = cfg->vocab_size;
    s.tied_embeddings = g->find_tensor("output.weight") == nullptr;
    return s;
}

}  // namespace

Result<std::unique_ptr<Model>> Model::simulate(const SimOptions& o) {
    std::unique_ptr<Model> m(new Model());
    const bool from_file = std::filesystem::is_regular_file(o.model);
    PAGODA_ASSIGN_OR_RETURN(OpenedGguf f, open_gguf(from_file ? o.model : o.vocab_path));
    m->file_ = std::move(f.file);
    m->gguf_ = std::move(f.gguf);
    const formats::GgufFile& g = *m->gguf_;
    PAGODA_ASSIGN_OR_RETURN(std::string arch, g.get_string("general.architecture"));
    m->arch_ = find_architecture(arch);
    if (!m->arch_) {
        return make_error(ErrorCode::kUnsupported, "{}: architecture '{}' is not supported",
                          g.source(), arch);
    }
    PAGODA_ASSIGN_OR_RETURN(ModelConfig file_cfg, read_config(g, *m->arch_));
    PAGODA_ASSIGN_OR_RETURN(sim::SimShape shape, shape_of(o, from_file ? &g : nullptr, &file_cfg));
    PAGODA_ASSIGN_OR_RETURN(
        sim::PerfModel perf,
        sim::PerfModel::create(o.gpu, shape, o.tp, o.weights, o.kv_dtype, o.efficiency));
    PAGODA_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::from_gguf(g));
    if (!(o.speed > 0) || !(o.eos_probability >= 0 && o.eos_probability <= 1)) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--sim-speed must be > 0 (got {}) and the EOS probability in [0, 1] "
                          "(got {})",
                          o.speed, o.eos_probability);
    }
    // One GPU's shard of the model, for the KV pool; logits span the tokenizer's vocabulary.
    ModelConfig& c = m->cfg_;
    c = file_cfg;
    c.name = from_file ? file_cfg.name : o.model;
    c.num_layers = shape.layers;
    c.dim = shape.dim;
    c.head_dim = shape.head_dim;
    c.ffn_dim = shape.ffn;
    c.num_heads = shape.heads / o.tp;
    c.num_kv_heads = perf.kv_heads_per_gpu();
    c.vocab_size = tok.vocab().size();
    if (!from_file) {
        PAGODA_ASSIGN_OR_RETURN(ModelShape ms, find_shape(o.model));
        c.context_length = ms.context_length;
    }
    m->tokenizer_ = std::make_unique<tokenizer::Tokenizer>(std::move(tok));
    m->sim_.reset(new Sim{std::move(perf), o, {}, {}, {}, {}, {}});
    const tokenizer::Vocab& v = m->tokenizer_->vocab();
    for (int32_t id = 0; id < v.size(); ++id) {
        if (v.types[size_t(id)] == tokenizer::TokenType::kNormal)
            m->sim_->plain_tokens.push_back(id);
    }
    if (m->sim_->plain_tokens.empty()) {
        return make_error(ErrorCode::kInvalidFile, "{}: the vocabulary has no normal tokens",
                          from_file ? o.model : o.vocab_path);
    }
    return m;
}

SimTotals Model::sim_totals() const {
    if (!sim_) return {};
    std::lock_guard<std::mutex> lock(sim_->mu);
    return sim_->totals;
}

Status Model::set_sim_faults(const SimFaults& f) const {
    if (!sim_) {
        return make_error(ErrorCode::kUnsupported,
                          "fault injection needs the simulated backend (--backend sim)");
    }
    if (!(f.memory_pressure >= 0 && f.memory_pressure <= 1.5) ||
        !(f.slow_factor >= 1 && f.slow_factor <= 1000) ||
        !(f.error_rate >= 0 && f.error_rate <= 1) || f.crash_after_tokens < -1) {
        return make_error(ErrorCode::kInvalidArgument,
                          "faults: memory_pressure must be in [0, 1.5], slow_factor in [1, 1000], "
                          "error_rate in [0, 1], crash_after_tokens -1 (never) or >= 0");
    }
    std::lock_guard<std::mutex> lock(sim_->mu);
    sim_->faults = f;
    return ok_status();
}

SimFaults Model::sim_faults() const {
    if (!sim_) return {};
    std::lock_guard<std::mutex> lock(sim_->mu);
    return sim_->faults;
}

// The simulated GPU's output: for each logits row, one token made from the seed, the row's
// token and position (EOS with probability eos_probability). Its logits are 10 at that
// token (20 at EOS) and 0 elsewhere, so their argmax is the token; rows the engine samples
// greedily get only the token, as a GPU server's host would (no vocabulary-wide rows).
Status Model::sim_forward(const ForwardBatch& b, std::vector<float>& logits,
                          std::vector<int32_t>* device_tokens) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<sim::SeqWork>& work = sim_->work;  // capacity kept across steps
    work.clear();
    size_t next_row = 0;
    const int V = cfg_.vocab_size;
    logits.resize(b.logits_rows.size() * size_t(V));
    if (device_tokens) device_tokens->assign(b.logits_rows.size(), 0);
    const tokenizer::Vocab& voc = tokenizer_->vocab();
    const bool has_eos = voc.eos >= 0 && voc.eos < V;
    for (const SeqSpan& s : b.seqs) {
        sim::SeqWork w{s.num_tokens, s.pos_start, false};
        while (next_row < b.logits_rows.size() &&
               b.logits_rows[next_row] < s.token_start + s.num_tokens) {
            const int32_t row = b.logits_rows[next_row];
            const uint64_t pos = uint64_t(s.pos_start + (row - s.token_start));
            const uint64_t h =
                mix(sim_->opts.seed ^ mix(uint64_t(b.token_ids[size_t(row)]) ^ mix(pos)));
            const int32_t plain = sim_->plain_tokens[h % sim_->plain_tokens.size()];
            const double u = double(mix(h) >> 11) * 0x1.0p-53;
            const bool eos = u < sim_->opts.eos_probability && has_eos;
            if (device_tokens) (*device_tokens)[next_row] = eos ? voc.eos : plain;
            const bool greedy = device_tokens && !b.greedy_rows.empty() && b.greedy_rows[next_row];
            if (!greedy) {
                float* out = logits.data() + next_row * size_t(V);
                std::fill(out, out + V, 0.0f);
                out[plain] = 10.0f;
                if (eos) out[voc.eos] = 20.0f;
            }
            w.logits = true;
            ++next_row;
        }
        work.push_back(w);
    }
    const sim::StepCost c = sim_->perf.step(work);
    double slow = 1;
    {
        std::lock_guard<std::mutex> lock(sim_->mu);
        SimFaults& f = sim_->faults;
        slow = f.slow_factor;
        if (f.crash_after_tokens >= 0) {
            f.crash_after_tokens -=
                std::min<int64_t>(f.crash_after_tokens, int64_t(b.logits_rows.size()));
            if (f.crash_after_tokens == 0) {
                std::fprintf(stderr, "sim_fault crash: the injected crash after N tokens\n");
                kill(getpid(), SIGKILL);
            }
        }
        SimTotals& t = sim_->totals;
        ++t.steps;
        t.busy_s += c.total_s;
        t.compute_s += c.compute_s;
        t.memory_s += c.memory_s;
        t.comm_s += c.comm_s;
        t.flops += c.flops;
        t.bytes += c.bytes_per_gpu;
        t.comm_bytes += c.comm_bytes;
    }
    std::this_thread::sleep_until(
        t0 + std::chrono::duration<double>(slow * c.total_s / sim_->opts.speed));
    return ok_status();
}

}  // namespace pagoda::model
