// ModelConfig: the implementation (the contract is in model/config.h).
#include "model/config.h"

namespace pagoda::model {

Status ModelConfig::validate() const {
    auto bad = [&](const char* what, int64_t v) {
        return make_error(ErrorCode::kInvalidFile, "model '{}': {} = {} is invalid", arch, what, v);
    };
    if (num_layers <= 0 || num_layers > 1024) return bad("block_count", num_layers);
    if (dim <= 0 || dim > 65536) return bad("embedding_length", dim);
    if (num_heads <= 0 || num_heads > 1024) return bad("attention.head_count", num_heads);
    if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0)
        return bad("attention.head_count_kv", num_kv_heads);
    if (head_dim <= 0 || head_dim > 1024 || head_dim % 2 != 0)
        return bad("head dimension", head_dim);
    if (ffn_dim <= 0 && !moe()) return bad("feed_forward_length", ffn_dim);
    if (num_experts < 0 || num_experts > 1024) return bad("expert_count", num_experts);
    if (moe() && (num_experts_used <= 0 || num_experts_used > num_experts))
        return bad("expert_used_count", num_experts_used);
    if (moe() && expert_ffn_dim <= 0) return bad("expert_feed_forward_length", expert_ffn_dim);
    if (context_length <= 0) return bad("context_length", context_length);
    if (rope.rot_dim <= 0 || rope.rot_dim > head_dim || rope.rot_dim % 2 != 0)
        return bad("rope.dimension_count", rope.rot_dim);
    if (!(rope.freq_base > 0.0f)) return bad("rope.freq_base", int64_t(rope.freq_base));
    return ok_status();
}

int64_t ModelConfig::active_params() const {
    const int64_t attn = int64_t(dim) * (2 * int64_t(q_dim()) + 2 * int64_t(kv_dim()));
    const int64_t ffn =
        moe() ? int64_t(num_experts_used) * 3 * dim * expert_ffn_dim + int64_t(num_experts) * dim
              : int64_t(3) * dim * ffn_dim;
    return int64_t(num_layers) * (attn + ffn) + int64_t(vocab_size) * dim;
}

int64_t ModelConfig::total_params() const {
    if (!moe()) return active_params();
    return active_params() +
           int64_t(num_layers) * (num_experts - num_experts_used) * 3 * dim * expert_ffn_dim;
}

Result<ModelConfig> read_config(const formats::GgufFile& g, const Architecture& arch) {
    const std::string& p = arch.name;
    ModelConfig c;
    c.arch = p;
    c.name = g.get_string_or("general.name", p);
    auto geti = [&](const std::string& key) -> Result<int> {
        PAGODA_ASSIGN_OR_RETURN(int64_t v, g.get_int(p + "." + key));
        if (v < 0 || v > (int64_t(1) << 31) - 1) {
            return make_error(ErrorCode::kInvalidFile, "{}: {}.{} = {} is out of range", g.source(),
                              p, key, v);
        }
        return int(v);
    };
    PAGODA_ASSIGN_OR_RETURN(c.num_layers, geti("block_count"));
    PAGODA_ASSIGN_OR_RETURN(c.dim, geti("embedding_length"));
    PAGODA_ASSIGN_OR_RETURN(c.num_heads, geti("attention.head_count"));
    c.num_experts = int(g.get_int_or(p + ".expert_count", 0));
    c.num_experts_used = int(g.get_int_or(p + ".expert_used_count", 0));
    if (c.num_experts > 0) {  // Mixtral writes the expert's width as feed_forward_length
        c.ffn_dim = int(g.get_int_or(p + ".feed_forward_length", 0));
        c.expert_ffn_dim = int(g.get_int_or(p + ".expert_feed_forward_length", c.ffn_dim));
    } else {
        if (arch.moe_only) {
            return make_error(ErrorCode::kInvalidFile,
                              "{}: architecture '{}' is a mixture of experts but {}.expert_count "
                              "is missing or 0",
                              g.source(), p, p);
        }
        PAGODA_ASSIGN_OR_RETURN(c.ffn_dim, geti("feed_forward_length"));
    }
    PAGODA_ASSIGN_OR_RETURN(c.context_length, geti("context_length"));
    c.num_kv_heads = int(g.get_int_or(p + ".attention.head_count_kv", c.num_heads));
    c.head_dim =
        c.num_heads > 0 ? int(g.get_int_or(p + ".attention.key_length", c.dim / c.num_heads)) : 0;
    c.rms_eps = float(g.get_float_or(p + ".attention.layer_norm_rms_epsilon", 1e-5));
    c.rope.rot_dim = int(g.get_int_or(p + ".rope.dimension_count", c.head_dim));
    c.rope.freq_base = float(g.get_float_or(p + ".rope.freq_base", 10000.0));
    c.rope_scaling = g.get_string_or(p + ".rope.scaling.type", "none");
    if (c.rope_scaling == "linear") {
        const double factor = g.get_float_or(p + ".rope.scaling.factor", 1.0);
        if (!(factor > 0.0)) {
            return make_error(ErrorCode::kInvalidFile, "{}: rope.scaling.factor {} must be > 0",
                              g.source(), factor);
        }
        c.rope.freq_scale = float(1.0 / factor);
    } else if (c.rope_scaling != "none" && !c.rope_scaling.empty()) {
        return make_error(ErrorCode::kUnsupported,
                          "{}: rope scaling type '{}' is not supported (supported: none, linear)",
                          g.source(), c.rope_scaling);
    }
    c.qkv_bias = arch.qkv_bias;
    c.qk_norm = arch.qk_norm;
    c.moe_norm_topk = arch.moe_norm_topk;
    c.rope.style = arch.rope_style;
    if (arch.granite_scales) {
        c.embedding_scale = float(g.get_float_or(p + ".embedding_scale", 1.0));
        c.residual_scale = float(g.get_float_or(p + ".residual_scale", 1.0));
        c.attention_scale = float(g.get_float_or(p + ".attention.scale", 0.0));
        c.logit_scale = float(g.get_float_or(p + ".logit_scale", 1.0));
        if (!(c.logit_scale > 0.0f)) {
            return make_error(ErrorCode::kInvalidFile, "{}: {}.logit_scale {} must be > 0",
                              g.source(), p, c.logit_scale);
        }
    }
    PAGODA_TRY(c.validate());
    return c;
}

}  // namespace pagoda::model
