// Model: the implementation (the contract is in model/model.h).
#include "model/model.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <thread>

#include "base/log.h"
#include "kernels/cpu/ops.h"
#include "kernels/ref/ops.h"

namespace pagoda::model {

Result<OpenedGguf> open_gguf(const std::string& path) {
    OpenedGguf o;
    PAGODA_ASSIGN_OR_RETURN(o.file, MappedFile::open(path));
    PAGODA_ASSIGN_OR_RETURN(formats::GgufFile g, formats::GgufFile::parse(o.file.bytes(), path));
    o.gguf = std::make_unique<formats::GgufFile>(std::move(g));
    return o;
}

namespace {

// OpenMP worker pools belong to the thread that opened the parallel region and live as
// long as it. Packing weights (and oneDNN's reorders) run parallel loops; on the caller's
// thread they would leave a second, idle pool beside the engine thread's, and libgomp,
// then counting more threads than CPUs, would ignore GOMP_SPINCOUNT and sleep in futex
// between every two parallel regions (apps/main.cpp explains the spin setting). So the
// work runs on a thread that ends with it, taking its pool along.
template <typename F>
auto on_transient_thread(F&& f) -> decltype(f()) {
    std::optional<decltype(f())> result;
    std::thread([&] {
        kernels::cpu::adopt_num_threads();
        result.emplace(f());
    }).join();
    return std::move(*result);
}

}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& path, LoadOptions opts) {
    if (hf::is_hf_dir(path)) {
        const std::string dir =
            opts.hf_cache_dir.empty() ? hf::default_cache_dir() : opts.hf_cache_dir;
        PAGODA_ASSIGN_OR_RETURN(std::string gguf, hf::resolve(path, dir, opts.hf));
        return on_transient_thread([&] { return load_on_this_thread(gguf, opts); });
    }
    return on_transient_thread([&] { return load_on_this_thread(path, opts); });
}

Result<std::unique_ptr<Model>> Model::load_on_this_thread(const std::string& path,
                                                          LoadOptions opts) {
    std::unique_ptr<Model> m(new Model());
    PAGODA_ASSIGN_OR_RETURN(OpenedGguf o, open_gguf(path));
    m->file_ = std::move(o.file);
    m->gguf_ = std::move(o.gguf);
    const formats::GgufFile& g = *m->gguf_;
    PAGODA_ASSIGN_OR_RETURN(std::string arch, g.get_string("general.architecture"));
    m->arch_ = find_architecture(arch);
    if (!m->arch_) {
        std::string known;
        for (const auto& n : architecture_names()) known += (known.empty() ? "" : ", ") + n;
        return make_error(ErrorCode::kUnsupported,
                          "{}: architecture '{}' is not supported (supported: {})", path, arch,
                          known);
    }
    PAGODA_ASSIGN_OR_RETURN(m->cfg_, read_config(g, *m->arch_));
    if (g.tensors().empty()) {
        return make_error(ErrorCode::kInvalidFile,
                          "{}: the file has no tensors (a vocab-only file cannot generate)", path);
    }
    PAGODA_TRY(m->load_weights(path, opts));
    if (!m->weights_.rope_freqs.empty()) m->cfg_.rope.freq_factors = m->weights_.rope_freqs.data();
    if (arch == "mistral") {
        const int64_t window = g.get_int_or("mistral.attention.sliding_window", 0);
        if (window > 0 && window < m->cfg_.context_length) m->cfg_.context_length = int(window);
    }
    if (opts.hf.generation_config) {  // --generation-config auto
        auto f = [&](const char* k) -> std::optional<float> {
            const formats::GgufValue* v = g.find(std::string("pagoda.generation.") + k);
            if (!v || !v->as_double()) return std::nullopt;
            return float(*v->as_double());
        };
        GenerationDefaults& d = m->gen_defaults_;
        d.temperature = f("temperature");
        d.top_p = f("top_p");
        d.min_p = f("min_p");
        d.repetition_penalty = f("repetition_penalty");
        if (auto k = f("top_k")) d.top_k = int(*k);
    }
    PAGODA_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::from_gguf(g));
    if (tok.vocab().size() > m->cfg_.vocab_size) {
        return make_error(ErrorCode::kInvalidFile,
                          "{}: tokenizer has {} tokens but the embedding only {} rows", path,
                          tok.vocab().size(), m->cfg_.vocab_size);
    }
    m->tokenizer_ = std::make_unique<tokenizer::Tokenizer>(std::move(tok));
    return m;
}

const char* weight_cache_state_name(WeightCacheReport::State s) {
    switch (s) {
        case WeightCacheReport::State::kOff: return "off";
        case WeightCacheReport::State::kHit: return "hit";
        case WeightCacheReport::State::kWriting: return "writing";
        case WeightCacheReport::State::kWritten: return "written";
        case WeightCacheReport::State::kFailed: return "failed";
    }
    return "?";
}

Model::~Model() { wait_weight_cache(); }

WeightCacheReport Model::weight_cache_report() const {
    std::lock_guard<std::mutex> lock(cache_mu_);
    return cache_report_;
}

void Model::wait_weight_cache() const {
    if (cache_writer_.joinable()) cache_writer_.join();
}

Status Model::load_weights(const std::string& path, const LoadOptions& opts) {
    using State = WeightCacheReport::State;
    PackCache cache;
    WeightCacheReport report;
    std::string key;
    const bool use_cache = !opts.weight_cache_dir.empty() && opts.pack == Weights::Pack::kYes;
    if (use_cache) {
        size_t data_offset = file_.bytes().size();
        for (const auto& t : gguf_->tensors())
            data_offset = std::min(data_offset, size_t(t.data.data() - file_.bytes().data()));
        key = weight_cache_key(file_, data_offset);
        report.path = weight_cache_path(opts.weight_cache_dir, path, key);
        auto c = WeightCache::open(report.path, key, opts.weight_cache_use);
        if (c.ok()) {
            weight_cache_ = std::move(*c);
            cache.in = weight_cache_.get();
            report.copied = weight_cache_->copies();
        } else {
            report.note =
                c.error().code == ErrorCode::kNotFound ? "no cache file yet" : c.error().message;
        }
        cache.record = true;
    }
    PAGODA_ASSIGN_OR_RETURN(
        weights_, Weights::load(*gguf_, *arch_, cfg_, opts.pack, use_cache ? &cache : nullptr));
    // The fast path reads the packed copies; what still reads the file (the embedding
    // rows of the tokens seen, the reference forward) faults its pages back in.
    if (opts.pack == Weights::Pack::kYes) file_.release_pages();
    if (report.copied) weight_cache_.reset();  // everything taken was copied out
    report.adopted = cache.adopted;
    report.packed = cache.packed;
    report.state = !use_cache ? State::kOff : cache.packed == 0 ? State::kHit : State::kWriting;
    cache_report_ = report;
    if (report.state != State::kWriting) return ok_status();
    // Written beside the engine's start: the packed buffers are read-only from here on.
    cache_writer_ = std::thread([this, key, out = report.path, pieces = std::move(cache.out)] {
        // Below the engine's threads: serving starts while the file is written.
        setpriority(PRIO_PROCESS, id_t(gettid()), 10);
        const auto t0 = std::chrono::steady_clock::now();
        size_t bytes = 0;
        for (const PackedPiece& p : pieces) bytes += p.data.size();
        const Status st = write_weight_cache(out, key, pieces);
        std::lock_guard<std::mutex> lock(cache_mu_);
        if (st.ok()) {
            cache_report_.state = State::kWritten;
            log_info("weight_cache_written path={} gib={:.2f} seconds={:.2f}", out,
                     double(bytes) / double(1 << 30),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        } else {
            cache_report_.state = State::kFailed;
            cache_report_.note = st.error().message;
            log_warn("weight cache not written (the next start packs again): {}",
                     st.error().message);
        }
    });
    return ok_status();
}

void Model::embed(const ForwardBatch& b, float* x) const {
    for (int32_t t = 0; t < b.num_tokens(); ++t) {
        float* xt = x + size_t(t) * size_t(cfg_.dim);
        kernels::ref::dequantize_row(weights_.token_embd, b.token_ids[size_t(t)], xt);
        if (cfg_.embedding_scale != 1.0f) {
            for (int i = 0; i < cfg_.dim; ++i) xt[i] *= cfg_.embedding_scale;
        }
    }
}

Status Model::check_batch(const ForwardBatch& b, int block_size) const {
    int32_t covered = 0;
    for (const SeqSpan& s : b.seqs) {
        if (s.token_start != covered || s.num_tokens <= 0) {
            return make_error(ErrorCode::kInvalidArgument,
                              "forward: sequence spans must tile the batch in order");
        }
        covered += s.num_tokens;
        const int64_t need = (int64_t(s.pos_start) + s.num_tokens + block_size - 1) / block_size;
        if (int64_t(s.block_table.size()) < need) {
            return make_error(ErrorCode::kInvalidArgument,
                              "forward: block table has {} blocks, {} needed", s.block_table.size(),
                              need);
        }
        if (s.pos_start + s.num_tokens > cfg_.context_length) {
            return make_error(ErrorCode::kOutOfRange,
                              "forward: position {} exceeds the context length {}",
                              s.pos_start + s.num_tokens, cfg_.context_length);
        }
    }
    if (covered != b.num_tokens()) {
        return make_error(ErrorCode::kInvalidArgument, "forward: spans cover {} of {} tokens",
                          covered, b.num_tokens());
    }
    for (int32_t id : b.token_ids) {
        if (id < 0 || id >= cfg_.vocab_size) {
            return make_error(ErrorCode::kInvalidArgument,
                              "forward: token id {} outside vocabulary of {}", id, cfg_.vocab_size);
        }
    }
    for (int32_t r : b.logits_rows) {
        if (r < 0 || r >= b.num_tokens()) {
            return make_error(ErrorCode::kInvalidArgument, "forward: logits row {} outside batch",
                              r);
        }
    }
    if (!b.greedy_rows.empty() && b.greedy_rows.size() != b.logits_rows.size()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "forward: {} greedy_rows flags for {} logits rows (one per row, or none)",
                          b.greedy_rows.size(), b.logits_rows.size());
    }
    return ok_status();
}

int Model::prepare_kernels(int max_tokens, int max_logits_rows) {
    return on_transient_thread(
        [&] { return prepare_kernels_on_this_thread(max_tokens, max_logits_rows); });
}

int Model::prepare_kernels_on_this_thread(int max_tokens, int max_logits_rows) {
    int n = 0;
    if (sim_) return 0;
    auto prep = [&](const Linear& l, int m) {
        if (l.dense) n += l.dense->prepare(m);
    };
    for (const LayerWeights& L : weights_.layers) {
        for (const Linear* l : {&L.wq, &L.wk, &L.wv, &L.wo, &L.qkv, &L.gate_up, &L.w_gate, &L.w_up,
                                &L.w_down, &L.router})
            prep(*l, max_tokens);
        for (const Expert& e : L.experts) {  // primitives are shared by shape: cheap
            for (const Linear* l : {&e.gate_up, &e.gate, &e.up, &e.down}) prep(*l, max_tokens);
        }
    }
    prep(weights_.output, max_logits_rows);
    return n;
}

// Per-row position and the attention description of each sequence.
struct Model::Rows {
    std::vector<int32_t> pos, seq_of;
    std::vector<kernels::AttentionSeq> aseqs;
    std::vector<int> row_offsets;
};

Model::Rows Model::rows_of(const ForwardBatch& b) {
    const int T = b.num_tokens();
    Rows r;
    r.pos.resize(static_cast<size_t>(T));
    r.seq_of.resize(static_cast<size_t>(T));
    for (size_t s = 0; s < b.seqs.size(); ++s) {
        const SeqSpan& sp = b.seqs[s];
        for (int32_t i = 0; i < sp.num_tokens; ++i) {
            r.pos[size_t(sp.token_start + i)] = sp.pos_start + i;
            r.seq_of[size_t(sp.token_start + i)] = int32_t(s);
        }
        r.aseqs.push_back({sp.block_table.data(), sp.num_tokens, sp.pos_start});
        r.row_offsets.push_back(sp.token_start);
    }
    return r;
}

// Scratch only grows: a step reuses what earlier steps allocated.
static void grow(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
}

void Model::grow_scratch(int T) {
    const int D = cfg_.dim, QD = cfg_.q_dim(), KVD = cfg_.kv_dim();
    const int F = std::max(cfg_.ffn_dim, cfg_.expert_ffn_dim);
    grow(s_.x, size_t(T) * D);
    grow(s_.h, size_t(T) * D);
    grow(s_.q, size_t(T) * QD);
    grow(s_.k, size_t(T) * KVD);
    grow(s_.v, size_t(T) * KVD);
    grow(s_.att, size_t(T) * QD);
    grow(s_.o, size_t(T) * D);
    grow(s_.gate, size_t(T) * F);
    grow(s_.up, size_t(T) * F);
}

Status Model::forward(const ForwardBatch& b, const kvcache::KvView& kv, std::vector<float>& logits,
                      std::vector<int32_t>* device_tokens) {
    PAGODA_TRY(check_batch(b, kv.block_size()));
    if (sim_) return sim_forward(b, logits, device_tokens);
    if (device_tokens) device_tokens->clear();
    const int T = b.num_tokens();
    const int D = cfg_.dim;
    grow_scratch(T);
    const Rows rows = rows_of(b);
    float *x = s_.x.data(), *h = s_.h.data();
    // 1. Token embeddings.
    embed(b, x);
    for (int l = 0; l < cfg_.num_layers; ++l) {
        if (b.interrupt && b.interrupt())
            return make_error(ErrorCode::kConflict, "the pass was interrupted before layer {}", l);
        const LayerWeights& L = weights_.layers[size_t(l)];
        attention_block(b, L, kv.layer(l), rows);  // 2-4
        if (L.experts.empty()) {
            ffn_block(L, T);  // 5
        } else {
            moe_block(L, T);  // 5, a mixture of experts (model_moe.cpp)
        }
    }
    // 6. Final norm and logits, only for the rows asked for.
    const int R = int(b.logits_rows.size());
    for (int r = 0; r < R; ++r) {
        kernels::cpu::rmsnorm(x + size_t(b.logits_rows[size_t(r)]) * D, weights_.output_norm.data(),
                              D, cfg_.rms_eps, h + size_t(r) * D);
    }
    logits.resize(size_t(R) * size_t(cfg_.vocab_size));
    if (R > 0) weights_.output.forward(h, R, logits.data());
    if (cfg_.logit_scale != 1.0f) {
        for (float& z : logits) z /= cfg_.logit_scale;
    }
    return ok_status();
}

void Model::attention_block(const ForwardBatch& b, const LayerWeights& L,
                            const kernels::PagedKv& pkv, const Rows& rows) {
    const int T = b.num_tokens();
    const int D = cfg_.dim, QD = cfg_.q_dim(), KVD = cfg_.kv_dim(), HD = cfg_.head_dim;
    float *x = s_.x.data(), *h = s_.h.data(), *q = s_.q.data(), *k = s_.k.data(), *v = s_.v.data();
    const std::vector<int32_t>& pos = rows.pos;
    const std::vector<int32_t>& seq_of = rows.seq_of;
    const float scale =
        cfg_.attention_scale > 0.0f ? cfg_.attention_scale : 1.0f / std::sqrt(float(HD));
    const kernels::AttentionShape ashape{cfg_.num_heads, scale, QD, QD};
    // 2. Attention block: norm, Q/K/V projections.
#pragma omp parallel for schedule(static) if (T > 1)
    for (int t = 0; t < T; ++t) {
        kernels::cpu::rmsnorm(x + size_t(t) * D, L.attn_norm.data(), D, cfg_.rms_eps,
                              h + size_t(t) * D);
    }
    if (L.qkv.packed()) {  // one fused matmul, then split the rows into q, k, v
        const int W = QD + 2 * KVD;
        grow(s_.fused, size_t(T) * W);
        L.qkv.forward(h, T, s_.fused.data());
        for (int t = 0; t < T; ++t) {
            const float* row = s_.fused.data() + size_t(t) * W;
            std::memcpy(q + size_t(t) * QD, row, sizeof(float) * size_t(QD));
            std::memcpy(k + size_t(t) * KVD, row + QD, sizeof(float) * size_t(KVD));
            std::memcpy(v + size_t(t) * KVD, row + QD + KVD, sizeof(float) * size_t(KVD));
        }
    } else {
        L.wq.forward(h, T, q);
        L.wk.forward(h, T, k);
        L.wv.forward(h, T, v);
    }
    // 3. Optional per-head Q/K norm (qwen3), RoPE, and K/V into the paged cache.
#pragma omp parallel for schedule(static) if (T > 1)
    for (int t = 0; t < T; ++t) {
        float* qt = q + size_t(t) * QD;
        float* kt = k + size_t(t) * KVD;
        if (cfg_.qk_norm == QkNorm::kWhole) {
            kernels::cpu::rmsnorm(qt, L.q_norm.data(), QD, cfg_.rms_eps, qt);
            kernels::cpu::rmsnorm(kt, L.k_norm.data(), KVD, cfg_.rms_eps, kt);
        } else if (cfg_.qk_norm == QkNorm::kPerHead) {
            for (int hh = 0; hh < cfg_.num_heads; ++hh)
                kernels::cpu::rmsnorm(qt + hh * HD, L.q_norm.data(), HD, cfg_.rms_eps,
                                      qt + hh * HD);
            for (int hh = 0; hh < cfg_.num_kv_heads; ++hh)
                kernels::cpu::rmsnorm(kt + hh * HD, L.k_norm.data(), HD, cfg_.rms_eps,
                                      kt + hh * HD);
        }
        kernels::cpu::rope(qt, cfg_.num_heads, HD, pos[size_t(t)], cfg_.rope);
        kernels::cpu::rope(kt, cfg_.num_kv_heads, HD, pos[size_t(t)], cfg_.rope);
        kernels::cpu::kv_write(pkv, b.seqs[size_t(seq_of[size_t(t)])].block_table.data(),
                               pos[size_t(t)], kt, v + size_t(t) * KVD);
    }
    // 4. Causal attention over each sequence's blocks, output projection, residual.
    kernels::cpu::paged_attention_batch(pkv, ashape, rows.aseqs, rows.row_offsets, q,
                                        s_.att.data());
    L.wo.forward(s_.att.data(), T, s_.o.data());
#pragma omp parallel for schedule(static) if (T > 1)
    for (int t = 0; t < T; ++t) {
        kernels::cpu::axpy_f32(cfg_.residual_scale, s_.o.data() + size_t(t) * D, x + size_t(t) * D,
                               D);
        kernels::cpu::rmsnorm(x + size_t(t) * D, L.ffn_norm.data(), D, cfg_.rms_eps,
                              h + size_t(t) * D);
    }
}

void Model::ffn_block(const LayerWeights& L, int T) {
    const int D = cfg_.dim, F = cfg_.ffn_dim;
    float *x = s_.x.data(), *h = s_.h.data();
    // 5. SwiGLU feed-forward and residual.
    if (L.gate_up.packed()) {  // fused [gate | up] rows
        grow(s_.fused, size_t(T) * 2 * F);
        L.gate_up.forward(h, T, s_.fused.data());
#pragma omp parallel for schedule(static) if (T > 1)
        for (int t = 0; t < T; ++t) {
            const float* row = s_.fused.data() + size_t(t) * 2 * F;
            kernels::cpu::swiglu(row, row + F, F, s_.gate.data() + size_t(t) * F);
        }
    } else {
        L.w_gate.forward(h, T, s_.gate.data());
        L.w_up.forward(h, T, s_.up.data());
#pragma omp parallel for schedule(static) if (T > 1)
        for (int t = 0; t < T; ++t) {
            kernels::cpu::swiglu(s_.gate.data() + size_t(t) * F, s_.up.data() + size_t(t) * F, F,
                                 s_.gate.data() + size_t(t) * F);
        }
    }
    L.w_down.forward(s_.gate.data(), T, s_.o.data());
#pragma omp parallel for schedule(static) if (T > 1)
    for (int t = 0; t < T; ++t) {
        kernels::cpu::axpy_f32(cfg_.residual_scale, s_.o.data() + size_t(t) * D, x + size_t(t) * D,
                               D);
    }
}

}  // namespace pagoda::model
