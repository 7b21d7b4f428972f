// The implementation of model/test_model.h (the contract is there).
#include "model/test_model.h"

#include <fmt/format.h>

#include <cmath>

#include "base/mapped_file.h"
#include "formats/gguf_writer.h"
#include "kernels/ref/ops.h"

namespace pagoda::model {

using formats::TensorType;

const std::vector<ModelShape>& known_shapes() {
    static const std::vector<ModelShape> s = {
        // name, arch, layers, dim, heads, kv heads, ffn, vocab, ctx, rope base, tied
        {"stories260k", "llama", 5, 64, 8, 4, 172, 512, 2048, 10000.0f, false},
        {"tiny-gqa", "llama", 2, 64, 4, 2, 96, 512, 1024, 10000.0f, false},
        {"tiny-gqa-hd32", "llama", 2, 128, 4, 2, 96, 512, 1024, 10000.0f, false},
        {"tiny-qwen2", "qwen2", 2, 64, 4, 2, 96, 512, 1024, 1000000.0f, true},
        {"tiny-qwen3", "qwen3", 2, 64, 4, 2, 96, 512, 1024, 1000000.0f, true},
        // Mixtures of experts, small (tests and the parity files of testdata/models):
        // experts, used per token, expert width last.
        {"tiny-mixtral", "llama", 2, 64, 4, 2, 64, 512, 1024, 1000000.0f, false, 8, 2, 64},
        {"tiny-qwen3moe", "qwen3moe", 2, 64, 4, 2, 32, 512, 1024, 1000000.0f, false, 16, 4, 32},
        {"tiny-olmoe", "olmoe", 2, 64, 4, 4, 32, 512, 1024, 10000.0f, false, 8, 2, 32},
        {"tiny-granitemoe", "granitemoe", 2, 64, 4, 2, 32, 512, 1024, 10000.0f, false, 8, 2, 32},
        // A mid-size mixture for speed against llama.cpp (~0.6 B parameters, 0.1 B active).
        {"moe-bench", "qwen3moe", 8, 1024, 16, 4, 512, 32000, 4096, 1000000.0f, false, 32, 4, 512},
        // Real mixtures (config.json on Hugging Face), for the simulated GPU.
        {"qwen3-30b-a3b", "qwen3moe", 48, 2048, 32, 4, 768, 151936, 40960, 1000000.0f, false, 128,
         8, 768, 128},
        {"mixtral-8x7b", "llama", 32, 4096, 32, 8, 14336, 32000, 32768, 1000000.0f, false, 8, 2,
         14336},
        {"olmoe-1b-7b", "olmoe", 16, 2048, 16, 16, 1024, 50304, 4096, 10000.0f, false, 64, 8, 1024},
        {"smollm2-135m", "llama", 30, 576, 9, 3, 1536, 49152, 8192, 100000.0f, true},
        {"qwen2.5-0.5b", "qwen2", 24, 896, 14, 2, 4864, 151936, 32768, 1000000.0f, true},
        {"tinyllama-1.1b", "llama", 22, 2048, 32, 4, 5632, 32000, 2048, 10000.0f, false},
        {"llama-3.2-1b", "llama", 16, 2048, 32, 8, 8192, 128256, 131072, 500000.0f, true},
        {"llama-3-8b", "llama", 32, 4096, 32, 8, 14336, 128256, 8192, 500000.0f, false},
        // For the simulated GPU (their config.json on Hugging Face): 7B-class shapes and a
        // 70B one. Writing them as test models takes their full size on disk.
        {"llama-3.1-8b", "llama", 32, 4096, 32, 8, 14336, 128256, 131072, 500000.0f, false},
        {"llama-2-7b", "llama", 32, 4096, 32, 32, 11008, 32000, 4096, 10000.0f, false},
        {"deepseek-7b", "llama", 30, 4096, 32, 32, 11008, 102400, 4096, 10000.0f, false},
        {"qwen2.5-7b", "qwen2", 28, 3584, 28, 4, 18944, 152064, 32768, 1000000.0f, false},
        {"llama-3-70b", "llama", 80, 8192, 64, 8, 28672, 128256, 8192, 500000.0f, false},
    };
    return s;
}

Result<ModelShape> find_shape(const std::string& name) {
    std::string known;
    for (const auto& s : known_shapes()) {
        if (s.name == name) return s;
        known += (known.empty() ? "" : ", ") + s.name;
    }
    return make_error(ErrorCode::kInvalidArgument, "unknown shape '{}' (known: {})", name, known);
}

namespace {

// splitmix64: a fast, seedable generator; uniform values with the requested std.
struct Rng {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    float uniform(float std) {  // U(-a, a) with a = std * sqrt(3)
        const float u = float(next() >> 40) * (1.0f / 16777216.0f);
        return (2.0f * u - 1.0f) * std * 1.7320508f;
    }
};

// Fills a [rows x cols] tensor of `type` with random values, quantizing row by row.
formats::GgufWriter::Fill random_fill(TensorType type, int64_t rows, int64_t cols, float std,
                                      uint64_t seed) {
    return [=](uint8_t* out, size_t /*num_bytes*/) {
        const auto tr = formats::tensor_type_traits(uint32_t(type));
        const size_t row_bytes = size_t(cols) / tr->block_elems * tr->block_bytes;
#pragma omp parallel
        {
            std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for schedule(static)
            for (int64_t r = 0; r < rows; ++r) {
                Rng rng{seed * 0x100000001b3ull + uint64_t(r)};
                for (auto& v : row) v = rng.uniform(std);
                kernels::ref::quantize_row(type, row.data(), cols, out + size_t(r) * row_bytes);
            }
        }
    };
}

formats::GgufWriter::Fill const_fill(int64_t n, float value) {
    return [=](uint8_t* out, size_t) {
        for (int64_t i = 0; i < n; ++i) std::memcpy(out + i * 4, &value, 4);
    };
}

}  // namespace

// Every tokenizer.* key of the vocabulary file, token lists padded to the shape's
// vocabulary with unused tokens.
static Status copy_tokenizer(const formats::GgufFile& vg, const ModelShape& s,
                             const std::string& vocab_path, formats::GgufWriter& w) {
    int64_t n_tokens = 0;
    for (const auto& [key, value] : vg.metadata()) {
        if (key.rfind("tokenizer.", 0) != 0) continue;
        formats::GgufValue v = value;
        if (key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.scores" ||
            key == "tokenizer.ggml.token_type") {
            n_tokens = int64_t(v.array.size());
            if (n_tokens > s.vocab_size) {
                return make_error(ErrorCode::kInvalidArgument,
                                  "vocab '{}' has {} tokens, more than shape {}'s {}", vocab_path,
                                  n_tokens, s.name, s.vocab_size);
            }
            for (int64_t k = n_tokens; k < s.vocab_size; ++k) {
                formats::GgufValue e;
                e.type = v.elem_type;
                if (key == "tokenizer.ggml.tokens") e.s = fmt::format("<unused{}>", k);
                if (key == "tokenizer.ggml.token_type") e.i = 5, e.u = 5;  // unused
                v.array.push_back(e);
            }
        }
        w.add(key, v);
    }
    if (n_tokens == 0)
        return make_error(ErrorCode::kInvalidFile, "{}: has no tokenizer.ggml.tokens", vocab_path);
    return ok_status();
}

// general.* and {arch}.* keys of a shape (Granite's multipliers are Granite 3.0's).
static void write_shape_metadata(const ModelShape& s, formats::GgufWriter& w) {
    const std::string& a = s.arch;
    w.add_string("general.architecture", a);
    w.add_string("general.name", "pagoda-test-" + s.name);
    w.add_u32(a + ".block_count", uint32_t(s.num_layers));
    w.add_u32(a + ".embedding_length", uint32_t(s.dim));
    w.add_u32(a + ".feed_forward_length", uint32_t(s.ffn_dim));
    w.add_u32(a + ".attention.head_count", uint32_t(s.num_heads));
    w.add_u32(a + ".attention.head_count_kv", uint32_t(s.num_kv_heads));
    w.add_u32(a + ".context_length", uint32_t(s.context_length));
    const int hd = s.head_dim > 0 ? s.head_dim : s.dim / s.num_heads;
    w.add_u32(a + ".rope.dimension_count", uint32_t(hd));
    if (s.head_dim > 0) {
        w.add_u32(a + ".attention.key_length", uint32_t(hd));
        w.add_u32(a + ".attention.value_length", uint32_t(hd));
    }
    w.add_f32(a + ".rope.freq_base", s.rope_base);
    w.add_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
    if (s.num_experts > 0) {
        w.add_u32(a + ".expert_count", uint32_t(s.num_experts));
        w.add_u32(a + ".expert_used_count", uint32_t(s.num_experts_used));
        w.add_u32(a + ".expert_feed_forward_length", uint32_t(s.expert_ffn_dim));
    }
    if (a == "granitemoe") {  // Granite 3.0's multipliers
        w.add_f32(a + ".embedding_scale", 12.0f);
        w.add_f32(a + ".residual_scale", 0.22f);
        w.add_f32(a + ".attention.scale", 0.015625f);
        w.add_f32(a + ".logit_scale", 6.0f);
    }
}

// Router logits of std ~1.5 (after the norm): spread probabilities, so every expert of
// the top-k weighs in, with margins far above rounding; experts are [experts][rows][cols]
// (ffn_{gate,up,down}_exps). `tid` numbers the tensors' random streams.
static void write_experts(formats::GgufWriter& w, const ModelShape& s, TensorType type,
                          const std::string& p, float sd, float out_sd, uint64_t& tid) {
    const uint64_t n = uint64_t(s.num_experts), f = uint64_t(s.expert_ffn_dim);
    const uint64_t d = uint64_t(s.dim);
    w.add_tensor_lazy(
        p + "ffn_gate_inp.weight", TensorType::kF32, {d, n},
        random_fill(TensorType::kF32, int64_t(n), int64_t(d), 1.5f / std::sqrt(float(d)), ++tid));
    w.add_tensor_lazy(p + "ffn_gate_exps.weight", type, {d, f, n},
                      random_fill(type, int64_t(n * f), int64_t(d), sd, ++tid));
    w.add_tensor_lazy(p + "ffn_up_exps.weight", type, {d, f, n},
                      random_fill(type, int64_t(n * f), int64_t(d), sd, ++tid));
    w.add_tensor_lazy(p + "ffn_down_exps.weight", type, {f, d, n},
                      random_fill(type, int64_t(n * d), int64_t(f), out_sd, ++tid));
}

Status write_test_model(const TestModelOptions& o,
                        const std::function<void(size_t, size_t)>& progress) {
    const ModelShape& s = o.shape;
    if (o.dtype != TensorType::kF32 && o.dtype != TensorType::kF16 &&
        o.dtype != TensorType::kBF16 && o.dtype != TensorType::kQ8_0 &&
        o.dtype != TensorType::kQ4_0) {
        return make_error(ErrorCode::kInvalidArgument,
                          "dtype {} is not supported (allowed: f32, f16, bf16, q8_0, q4_0)",
                          formats::tensor_type_name(o.dtype));
    }
    PAGODA_ASSIGN_OR_RETURN(MappedFile vf, MappedFile::open(o.vocab_path));
    PAGODA_ASSIGN_OR_RETURN(formats::GgufFile vg,
                            formats::GgufFile::parse(vf.bytes(), o.vocab_path));

    formats::GgufWriter w;
    const std::string& a = s.arch;
    const int hd = s.head_dim > 0 ? s.head_dim : s.dim / s.num_heads;
    write_shape_metadata(s, w);
    PAGODA_TRY(copy_tokenizer(vg, s, o.vocab_path, w));

    const int64_t qd = int64_t(s.num_heads) * hd, kvd = int64_t(s.num_kv_heads) * hd;
    uint64_t tid = o.seed * 1000003ull;
    // Real models' 0.02 leaves a small random model's blocks next to no say in its output
    // (the last token's embedding decides). Mixtures are tested for parity of the experts'
    // choice and sum, so their blocks get unit-gain weights (1/sqrt(fan-in)): every layer
    // moves the residual stream by about as much as the embedding.
    const bool strong = s.num_experts > 0 && s.dim <= 256;
    const float std = strong ? 1.0f / std::sqrt(float(s.dim)) : 0.02f;
    const float out_std = strong ? 1.0f / std::sqrt(float(std::max(s.expert_ffn_dim, s.dim)))
                                 : 0.02f / std::sqrt(2.0f * float(s.num_layers));
    auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, float sd) {
        w.add_tensor_lazy(name, o.dtype, {uint64_t(cols), uint64_t(rows)},
                          random_fill(o.dtype, rows, cols, sd, ++tid));
    };
    auto norm = [&](const std::string& name, int64_t n) {
        w.add_tensor_lazy(name, TensorType::kF32, {uint64_t(n)}, const_fill(n, 1.0f));
    };
    auto bias = [&](const std::string& name, int64_t n) {
        w.add_tensor_lazy(name, TensorType::kF32, {uint64_t(n)},
                          random_fill(TensorType::kF32, 1, n, std, ++tid));
    };
    auto experts = [&](const std::string& p, float sd, float out_sd) {
        write_experts(w, s, o.dtype, p, sd, out_sd, tid);
    };
    // Embedding rows carry O(1) activations into the first norm.
    // (Granite's are multiplied by embedding_scale 12 first.)
    matrix("token_embd.weight", s.vocab_size, s.dim, a == "granitemoe" ? 1.0f / 12.0f : 1.0f);
    norm("output_norm.weight", s.dim);
    if (!s.tied_embeddings) matrix("output.weight", s.vocab_size, s.dim, std);
    for (int l = 0; l < s.num_layers; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        norm(p + "attn_norm.weight", s.dim);
        matrix(p + "attn_q.weight", qd, s.dim, std);
        matrix(p + "attn_k.weight", kvd, s.dim, std);
        matrix(p + "attn_v.weight", kvd, s.dim, std);
        if (a == "qwen2") {
            bias(p + "attn_q.bias", qd);
            bias(p + "attn_k.bias", kvd);
            bias(p + "attn_v.bias", kvd);
        }
        if (a == "qwen3" || a == "qwen3moe") {
            norm(p + "attn_q_norm.weight", hd);
            norm(p + "attn_k_norm.weight", hd);
        }
        if (a == "olmoe") {
            norm(p + "attn_q_norm.weight", qd);
            norm(p + "attn_k_norm.weight", kvd);
        }
        matrix(p + "attn_output.weight", s.dim, qd, out_std);
        norm(p + "ffn_norm.weight", s.dim);
        if (s.num_experts > 0) {
            experts(p, std, out_std);
            continue;
        }
        matrix(p + "ffn_gate.weight", s.ffn_dim, s.dim, std);
        matrix(p + "ffn_up.weight", s.ffn_dim, s.dim, std);
        matrix(p + "ffn_down.weight", s.dim, s.ffn_dim, out_std);
    }
    return w.write(o.output_path, progress);
}

namespace {
// Where a source row or column lands in the padded tensor: the identity, or for the heads'
// dimensions (hd_s per head in the source, hd in the padded model) the same dimension of
// the same head.
struct IndexMap {
    uint64_t hd_s = 0, hd = 0;  // 0: the identity
    uint64_t operator()(uint64_t i) const { return hd_s == 0 ? i : i / hd_s * hd + i % hd_s; }
};

// Tensor t (F32, 1-D or 2-D) times `scale` in a zero tensor of `dims`: source row r and
// column c at rows(r), cols(c).
std::vector<uint8_t> padded_f32(const formats::GgufTensorInfo& t, const std::vector<uint64_t>& dims,
                                float scale, IndexMap rows_map, IndexMap cols_map) {
    const uint64_t cols_s = t.dims[0], rows_s = t.dims.size() == 2 ? t.dims[1] : 1;
    const uint64_t cols = dims[0], rows = dims.size() == 2 ? dims[1] : 1;
    std::vector<float> out(size_t(cols * rows), 0.0f);
    const auto* in = reinterpret_cast<const float*>(t.data.data());
    for (uint64_t r = 0; r < rows_s; ++r) {
        for (uint64_t c = 0; c < cols_s; ++c)
            out[size_t(rows_map(r) * cols + cols_map(c))] = in[r * cols_s + c] * scale;
    }
    std::vector<uint8_t> bytes(out.size() * 4);
    std::memcpy(bytes.data(), out.data(), bytes.size());
    return bytes;
}
}  // namespace

Status write_padded_model(const std::string& src_path, int dim, int ffn_dim,
                          const std::string& output_path, int head_dim) {
    PAGODA_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(src_path));
    PAGODA_ASSIGN_OR_RETURN(formats::GgufFile g, formats::GgufFile::parse(f.bytes(), src_path));
    auto num = [&](const std::string& key) -> int64_t {
        const formats::GgufValue* v = g.find("llama." + key);
        return v && v->as_int() ? *v->as_int() : 0;
    };
    const int64_t dim_s = num("embedding_length"), ffn_s = num("feed_forward_length"),
                  heads_s = num("attention.head_count"), kv_s = num("attention.head_count_kv");
    const formats::GgufValue* arch = g.find("general.architecture");
    if (!arch || arch->s != "llama" || dim_s <= 0 || heads_s <= 0 || kv_s <= 0 || ffn_s <= 0)
        return make_error(ErrorCode::kInvalidArgument, "{}: not a llama model", src_path);
    const int64_t hd_s = dim_s / heads_s, hd = head_dim > 0 ? head_dim : hd_s;
    if (dim < dim_s || ffn_dim < ffn_s || hd < hd_s || dim % hd != 0 || dim / hd < heads_s ||
        (dim / hd) * kv_s % heads_s != 0) {
        return make_error(ErrorCode::kInvalidArgument,
                          "cannot pad {} (dim {}, ffn {}, head dim {}, {} heads) to dim {}, ffn "
                          "{}, head dim {}: each must be at least the model's, dim a multiple "
                          "of the head dim with at least as many heads",
                          src_path, dim_s, ffn_s, hd_s, heads_s, dim, ffn_dim, hd);
    }
    const int64_t heads = dim / hd, kv = heads * kv_s / heads_s;
    const IndexMap head_dims = hd == hd_s ? IndexMap{} : IndexMap{uint64_t(hd_s), uint64_t(hd)};
    const float eps_scale = float(dim_s) / float(dim);
    formats::GgufWriter w;
    for (const auto& [key, value] : g.metadata()) {
        formats::GgufValue v = value;
        if (key == "llama.embedding_length") v.u = uint64_t(dim), v.i = dim;
        if (key == "llama.feed_forward_length") v.u = uint64_t(ffn_dim), v.i = ffn_dim;
        if (key == "llama.attention.head_count") v.u = uint64_t(heads), v.i = heads;
        if (key == "llama.attention.head_count_kv") v.u = uint64_t(kv), v.i = kv;
        if (key == "llama.attention.layer_norm_rms_epsilon") v.f *= double(eps_scale);
        if (key == "llama.attention.key_length" || key == "llama.attention.value_length")
            v.u = uint64_t(hd), v.i = hd;
        w.add(key, v);
    }
    if (!g.find("llama.rope.dimension_count"))
        w.add_u32("llama.rope.dimension_count", uint32_t(hd_s));
    auto widen = [&](uint64_t n) -> uint64_t {
        if (n == uint64_t(dim_s)) return uint64_t(dim);
        if (n == uint64_t(ffn_s)) return uint64_t(ffn_dim);
        if (n == uint64_t(kv_s * hd_s)) return uint64_t(kv * hd);
        return n;  // the vocabulary
    };
    auto ends = [](const std::string& name, const char* suffix) { return name.ends_with(suffix); };
    for (const auto& t : g.tensors()) {
        if (t.type != TensorType::kF32 || t.dims.empty() || t.dims.size() > 2) {
            return make_error(ErrorCode::kUnsupported,
                              "{}: tensor '{}' is not an F32 vector or matrix", src_path, t.name);
        }
        std::vector<uint64_t> dims;
        for (uint64_t d : t.dims) dims.push_back(widen(d));
        // RMS over the wider vector is sqrt(dim_s / dim) of the narrow one's: norm weights
        // (the vectors) make up for it.
        float scale = t.dims.size() == 1 ? std::sqrt(eps_scale) : 1.0f;
        // Per-head rows of Q, K and V and per-head columns of the output projection; the
        // queries make up for the attention's 1/sqrt(head dim).
        const bool qkv = ends(t.name, "attn_q.weight") || ends(t.name, "attn_k.weight") ||
                         ends(t.name, "attn_v.weight");
        if (ends(t.name, "attn_q.weight")) scale = std::sqrt(float(hd) / float(hd_s));
        const IndexMap rows = qkv ? head_dims : IndexMap{};
        const IndexMap cols = ends(t.name, "attn_output.weight") ? head_dims : IndexMap{};
        w.add_tensor(t.name, TensorType::kF32, dims, padded_f32(t, dims, scale, rows, cols));
    }
    return w.write(output_path);
}

}  // namespace pagoda::model
