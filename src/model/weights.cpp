// Weights: the implementation (the contract is in model/weights.h).
#include "model/weights.h"

#include <fmt/format.h>

#include <cstring>

#include "kernels/cpu/quant_vnni.h"
#include "kernels/ref/ops.h"

namespace pagoda::model {

using formats::TensorType;

bool is_supported_weight_type(TensorType t) {
    return t == TensorType::kF32 || t == TensorType::kF16 || t == TensorType::kBF16 ||
           t == TensorType::kQ8_0 || t == TensorType::kQ4_0 || formats::is_k_quant(t);
}

void Linear::forward(const float* x, int m, float* y) const {
    if (dense) {
        dense->run(x, m, y);
    } else if (quant) {
        quant->run(x, m, y);
    } else {
        kernels::cpu::matmul(view, x, m, y);
    }
    if (!bias.empty()) {
        for (int i = 0; i < m; ++i) {
            float* yi = y + size_t(i) * size_t(view.rows);
            for (int64_t r = 0; r < view.rows; ++r) yi[r] += bias[size_t(r)];
        }
    }
}

namespace {

// Whether QuantMatmul computes type t here (K-quants only with AVX-512 VNNI).
bool quant_kernel(TensorType t) {
    return t == TensorType::kQ8_0 || t == TensorType::kQ4_0 ||
           (formats::is_k_quant(t) && kernels::cpu::have_avx512_vnni() &&
            !kernels::cpu::force_portable_kernels());
}

class Loader {
  public:
    Loader(const formats::GgufFile& g, Weights::Pack pack, PackCache* cache)
        : g_(g), pack_(pack), cache_(cache) {}

    Result<const formats::GgufTensorInfo*> tensor(const std::string& name,
                                                  std::vector<uint64_t> dims) {
        const formats::GgufTensorInfo* t = g_.find_tensor(name);
        if (!t)
            return make_error(ErrorCode::kInvalidFile, "{}: missing tensor '{}'", g_.source(),
                              name);
        if (t->dims != dims) {
            std::string want, got;
            for (auto d : dims) want += (want.empty() ? "" : " x ") + std::to_string(d);
            for (auto d : t->dims) got += (got.empty() ? "" : " x ") + std::to_string(d);
            return make_error(ErrorCode::kInvalidFile,
                              "{}: tensor '{}' has shape [{}], expected [{}]", g_.source(), name,
                              got, want);
        }
        if (!is_supported_weight_type(t->type)) {
            return make_error(ErrorCode::kUnsupported,
                              "{}: tensor '{}' has type {}, which is not supported yet (supported: "
                              "F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)",
                              g_.source(), name, formats::tensor_type_name(t->type));
        }
        bytes += t->num_bytes;
        return t;
    }

    Result<std::vector<float>> vec(const std::string& name, uint64_t n) {
        PAGODA_ASSIGN_OR_RETURN(const formats::GgufTensorInfo* t, tensor(name, {n}));
        std::vector<float> out(n);
        kernels::WeightView v{t->type, 1, int64_t(n), t->data.data()};
        kernels::ref::dequantize_row(v, 0, out.data());
        return out;
    }

    Result<kernels::WeightView> view(const std::string& name, uint64_t rows, uint64_t cols) {
        PAGODA_ASSIGN_OR_RETURN(const formats::GgufTensorInfo* t, tensor(name, {cols, rows}));
        return kernels::WeightView{t->type, int64_t(rows), int64_t(cols), t->data.data()};
    }

    enum class PackNow { kYes, kNo };
    Status linear(const std::string& name, uint64_t rows, uint64_t cols, Linear& out,
                  bool bias = false, PackNow now = PackNow::kYes) {
        PAGODA_ASSIGN_OR_RETURN(out.view, view(name + ".weight", rows, cols));
        out.name = name;
        if (now == PackNow::kYes) PAGODA_TRY(pack(out));
        if (bias) {
            const std::string bname = name + ".bias";
            if (!g_.find_tensor(bname)) {
                return make_error(ErrorCode::kInvalidFile, "{}: missing tensor '{}'", g_.source(),
                                  bname);
            }
            PAGODA_ASSIGN_OR_RETURN(out.bias, vec(bname, rows));
        }
        return ok_status();
    }

    // What a cache entry for `l` holds: the QuantMatmul's or DenseMatmul's packed bytes
    // (K-quants without a VNNI kernel run dense from f32 values).
    static PackedEntry entry_for(const Linear& l) {
        const TensorType t = l.view.type;
        const bool q = quant_kernel(t);
        return PackedEntry{l.name, q ? PackedKind::kQuant : PackedKind::kDense,
                           q || !formats::is_k_quant(t) ? t : TensorType::kF32, l.view.rows,
                           l.view.cols};
    }

    // Takes l's packed bytes from the cache when it has them; false when it does not (or
    // they do not fit this build's layout: then l is packed and the cache rewritten).
    Result<bool> adopt(Linear& l) {
        if (!cache_ || !cache_->in) return false;
        const PackedEntry e = entry_for(l);
        auto bytes = cache_->in->take(e);
        if (!bytes) return false;
        if (!bytes->ok()) return bytes->error();
        if (e.kind == PackedKind::kQuant) {
            auto q = kernels::cpu::QuantMatmul::adopt(e.type, e.rows, e.cols, std::move(**bytes));
            if (!q.ok()) return false;
            l.quant = std::move(*q);
        } else {
            auto d = kernels::cpu::DenseMatmul::adopt(e.type, e.rows, e.cols, std::move(**bytes));
            if (!d.ok()) return false;
            l.dense = std::move(*d);
        }
        ++cache_->adopted;
        packed += l.quant ? l.quant->packed_bytes() : l.dense->packed_bytes();
        return true;
    }

    // Lists l's packed bytes for a new cache file.
    void record(const Linear& l) {
        if (!cache_ || !cache_->record) return;
        cache_->out.push_back(
            PackedPiece{entry_for(l), l.quant ? l.quant->packed_data() : l.dense->packed_data()});
    }

    Status pack(Linear& l) {
        if (pack_ == Weights::Pack::kNo) return ok_status();
        PAGODA_ASSIGN_OR_RETURN(const bool adopted, adopt(l));
        if (!adopted) {
            PAGODA_TRY(pack_now(l));
            if (cache_) ++cache_->packed;
        }
        record(l);
        return ok_status();
    }

    Status pack_now(Linear& l) {
        const TensorType t = l.view.type;
        if (quant_kernel(t)) {
            PAGODA_ASSIGN_OR_RETURN(l.quant, kernels::cpu::QuantMatmul::create(l.view));
            packed += l.quant->packed_bytes();
            return ok_status();
        }
        if (formats::is_k_quant(t)) {  // no VNNI kernel here: dense f32 from the values
            std::vector<float> values(size_t(l.view.rows) * size_t(l.view.cols));
#pragma omp parallel for schedule(static)
            for (int64_t r = 0; r < l.view.rows; ++r)
                kernels::ref::dequantize_row(l.view, r, values.data() + size_t(r * l.view.cols));
            const kernels::WeightView f32{TensorType::kF32, l.view.rows, l.view.cols,
                                          reinterpret_cast<const uint8_t*>(values.data())};
            PAGODA_ASSIGN_OR_RETURN(l.dense, kernels::cpu::DenseMatmul::create(f32));
            packed += l.dense->packed_bytes();
            return ok_status();
        }
        PAGODA_ASSIGN_OR_RETURN(l.dense, kernels::cpu::DenseMatmul::create(l.view));
        packed += l.dense->packed_bytes();
        return ok_status();
    }

    // Packs the row-wise concatenation of `parts` (same type and width) into `out`, with
    // their biases concatenated, or adopts it from the cache; when the parts differ in type
    // or width, packs each alone.
    Status fuse(std::initializer_list<Linear*> parts, const std::string& name, Linear& out) {
        const Linear& first = **parts.begin();
        bool same = pack_ == Weights::Pack::kYes;
        int64_t rows = 0;
        for (Linear* p : parts) {
            same = same && p->view.type == first.view.type && p->view.cols == first.view.cols;
            rows += p->view.rows;
        }
        if (!same) {
            for (Linear* p : parts) PAGODA_TRY(pack(*p));
            return ok_status();
        }
        for (Linear* p : parts) {
            if (!p->bias.empty() || !out.bias.empty()) {
                std::vector<float> b =
                    p->bias.empty() ? std::vector<float>(size_t(p->view.rows), 0.0f) : p->bias;
                out.bias.insert(out.bias.end(), b.begin(), b.end());
            }
        }
        out.name = name;
        out.view = kernels::WeightView{first.view.type, rows, first.view.cols, nullptr};
        PAGODA_ASSIGN_OR_RETURN(const bool adopted, adopt(out));
        if (!adopted) {
            PAGODA_TRY(pack_joined(parts, out));
            if (cache_) ++cache_->packed;
        }
        record(out);
        return ok_status();
    }

    // Packs `out` (its view set, without data) from the rows of `parts`.
    Status pack_joined(std::initializer_list<Linear*> parts, Linear& out) {
        if (quant_kernel(out.view.type)) {  // packed straight from the parts' rows
            std::vector<const uint8_t*> row_data;
            for (Linear* p : parts) {
                for (int64_t r = 0; r < p->view.rows; ++r) row_data.push_back(p->view.row(r));
            }
            PAGODA_ASSIGN_OR_RETURN(out.quant, kernels::cpu::QuantMatmul::create_rows(
                                                   out.view.type, out.view.cols, row_data));
            packed += out.quant->packed_bytes();
            return ok_status();
        }
        std::vector<uint8_t> joined;  // temporary: the packed copy is made from it
        for (Linear* p : parts) {
            const size_t n = p->view.row_bytes() * size_t(p->view.rows);
            joined.insert(joined.end(), p->view.data, p->view.data + n);
        }
        out.view.data = joined.data();
        PAGODA_TRY(pack_now(out));
        out.view.data = nullptr;  // `joined` dies here; only the packed copy is used
        return ok_status();
    }

    // A mixture-of-experts layer: the router and, per expert, views of its slices of the
    // 3-D tensors ([experts][rows][cols], the expert slowest), gate and up fused.
    Status experts(const std::string& p, const ModelConfig& cfg, LayerWeights& L) {
        const uint64_t dim = uint64_t(cfg.dim), n = uint64_t(cfg.num_experts),
                       f = uint64_t(cfg.expert_ffn_dim);
        // An F32 router is read by direct dot products (model::router_logits), never packed.
        PAGODA_TRY(linear(p + "ffn_gate_inp", n, dim, L.router, false, PackNow::kNo));
        if (L.router.view.type != TensorType::kF32) PAGODA_TRY(pack(L.router));
        PAGODA_ASSIGN_OR_RETURN(const formats::GgufTensorInfo* gate,
                                tensor(p + "ffn_gate_exps.weight", {dim, f, n}));
        PAGODA_ASSIGN_OR_RETURN(const formats::GgufTensorInfo* up,
                                tensor(p + "ffn_up_exps.weight", {dim, f, n}));
        PAGODA_ASSIGN_OR_RETURN(const formats::GgufTensorInfo* down,
                                tensor(p + "ffn_down_exps.weight", {f, dim, n}));
        auto slice = [](const formats::GgufTensorInfo* t, uint64_t e, const std::string& name) {
            Linear l;
            l.name = fmt::format("{}.{}", name, e);
            l.view =
                kernels::WeightView{t->type, int64_t(t->dims[1]), int64_t(t->dims[0]), nullptr};
            l.view.data = t->data.data() + e * l.view.row_bytes() * t->dims[1];
            return l;
        };
        L.experts.resize(n);
        for (uint64_t e = 0; e < n; ++e) {
            Expert& x = L.experts[e];
            x.gate = slice(gate, e, p + "ffn_gate_exps");
            x.up = slice(up, e, p + "ffn_up_exps");
            x.down = slice(down, e, p + "ffn_down_exps");
            PAGODA_TRY(
                fuse({&x.gate, &x.up}, fmt::format("{}ffn_gate_up_exps.{}", p, e), x.gate_up));
            if (pack_ == Weights::Pack::kYes && !x.gate_up.packed()) {
                return make_error(ErrorCode::kUnsupported,
                                  "{}: {}ffn_gate_exps ({}) and ffn_up_exps ({}) differ in type; "
                                  "experts need both of one type",
                                  g_.source(), p, formats::tensor_type_name(gate->type),
                                  formats::tensor_type_name(up->type));
            }
            PAGODA_TRY(pack(x.down));
        }
        return ok_status();
    }

    size_t bytes = 0;
    size_t packed = 0;

  private:
    const formats::GgufFile& g_;
    Weights::Pack pack_;
    PackCache* cache_;
};

}  // namespace

Result<Weights> Weights::load(const formats::GgufFile& g, const Architecture& arch,
                              ModelConfig& cfg, Pack pack, PackCache* cache) {
    Weights w;
    Loader ld(g, pack, cache);
    const formats::GgufTensorInfo* emb = g.find_tensor("token_embd.weight");
    if (!emb || emb->dims.size() != 2) {
        return make_error(ErrorCode::kInvalidFile,
                          "{}: missing or malformed tensor 'token_embd.weight'", g.source());
    }
    cfg.vocab_size = int(emb->dims[1]);
    const uint64_t dim = uint64_t(cfg.dim), vocab = uint64_t(cfg.vocab_size);
    const uint64_t qd = uint64_t(cfg.q_dim()), kvd = uint64_t(cfg.kv_dim()),
                   ffn = uint64_t(cfg.ffn_dim);
    PAGODA_ASSIGN_OR_RETURN(w.token_embd, ld.view("token_embd.weight", vocab, dim));
    PAGODA_ASSIGN_OR_RETURN(w.output_norm, ld.vec("output_norm.weight", dim));
    if (g.find_tensor("output.weight")) {
        PAGODA_TRY(ld.linear("output", vocab, dim, w.output));
    } else {
        w.tied_embeddings = true;
        w.output.name = "output";
        w.output.view = w.token_embd;
        PAGODA_TRY(ld.pack(w.output));
    }
    if (g.find_tensor("rope_freqs.weight")) {
        PAGODA_ASSIGN_OR_RETURN(w.rope_freqs,
                                ld.vec("rope_freqs.weight", uint64_t(cfg.rope.rot_dim / 2)));
    }
    w.layers.resize(size_t(cfg.num_layers));
    for (int l = 0; l < cfg.num_layers; ++l) {
        LayerWeights& L = w.layers[size_t(l)];
        const std::string p = fmt::format("blk.{}.", l);
        PAGODA_ASSIGN_OR_RETURN(L.attn_norm, ld.vec(p + "attn_norm.weight", dim));
        const auto later = Loader::PackNow::kNo;
        PAGODA_TRY(ld.linear(p + "attn_q", qd, dim, L.wq, arch.qkv_bias, later));
        PAGODA_TRY(ld.linear(p + "attn_k", kvd, dim, L.wk, arch.qkv_bias, later));
        PAGODA_TRY(ld.linear(p + "attn_v", kvd, dim, L.wv, arch.qkv_bias, later));
        PAGODA_TRY(ld.fuse({&L.wq, &L.wk, &L.wv}, p + "attn_qkv", L.qkv));
        PAGODA_TRY(ld.linear(p + "attn_output", dim, qd, L.wo));
        if (arch.qk_norm != QkNorm::kNone) {
            const bool whole = arch.qk_norm == QkNorm::kWhole;
            const uint64_t hd = uint64_t(cfg.head_dim);
            PAGODA_ASSIGN_OR_RETURN(L.q_norm, ld.vec(p + "attn_q_norm.weight", whole ? qd : hd));
            PAGODA_ASSIGN_OR_RETURN(L.k_norm, ld.vec(p + "attn_k_norm.weight", whole ? kvd : hd));
        }
        PAGODA_ASSIGN_OR_RETURN(L.ffn_norm, ld.vec(p + "ffn_norm.weight", dim));
        if (cfg.moe()) {
            PAGODA_TRY(ld.experts(p, cfg, L));
            continue;
        }
        PAGODA_TRY(ld.linear(p + "ffn_gate", ffn, dim, L.w_gate, false, later));
        PAGODA_TRY(ld.linear(p + "ffn_up", ffn, dim, L.w_up, false, later));
        PAGODA_TRY(ld.fuse({&L.w_gate, &L.w_up}, p + "ffn_gate_up", L.gate_up));
        PAGODA_TRY(ld.linear(p + "ffn_down", dim, ffn, L.w_down));
    }
    w.file_bytes = ld.bytes;
    w.packed_bytes = ld.packed;
    return w;
}

}  // namespace pagoda::model
