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
    if (ffn_dim <= 0) return bad("feed_forward_length", ffn_dim);
    if (context_length <= 0) return bad("context_length", context_length);
    if (rope.rot_dim <= 0 || rope.rot_dim > head_dim || rope.rot_dim % 2 != 0)
        return bad("rope.dimension_count", rope.rot_dim);
    if (!(rope.freq_base > 0.0f)) return bad("rope.freq_base", int64_t(rope.freq_base));
    return ok_status();
}

Result<ModelConfig> read_config(const formats::GgufFile& g, const std::string& p) {
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
    PAGODA_ASSIGN_OR_RETURN(c.ffn_dim, geti("feed_forward_length"));
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
    PAGODA_TRY(c.validate());
    return c;
}

}  // namespace pagoda::model
