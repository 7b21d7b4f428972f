// HfConfig: the implementation (the contract is in hf/hf_config.h).
#include "hf/hf_config.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

namespace pagoda::hf {
namespace {

using nlohmann::json;

struct ArchEntry {
    std::string gguf;
    bool permute_qk;
    bool qkv_bias;
    ExpertLayout experts;
};

const std::map<std::string, ArchEntry>& arch_table() {
    static const std::map<std::string, ArchEntry> m = {
        {"LlamaForCausalLM", {"llama", true, false, ExpertLayout::kNone}},
        {"MistralForCausalLM", {"llama", true, false, ExpertLayout::kNone}},
        {"MixtralForCausalLM", {"llama", true, false, ExpertLayout::kMixtral}},
        {"Qwen2ForCausalLM", {"qwen2", false, true, ExpertLayout::kNone}},
        {"Qwen3ForCausalLM", {"qwen3", false, false, ExpertLayout::kNone}},
        {"Qwen3MoeForCausalLM", {"qwen3moe", false, false, ExpertLayout::kQwenOlmo}},
        {"OlmoeForCausalLM", {"olmoe", false, false, ExpertLayout::kQwenOlmo}},
        {"GraniteMoeForCausalLM", {"granitemoe", true, false, ExpertLayout::kGranite}},
    };
    return m;
}

// Llama 3.1's rope_scaling "llama3": a factor per rotary frequency (llama.cpp writes them
// as rope_freqs.weight): 1 for short wavelengths, `factor` for long ones, smoothly between.
std::vector<float> llama3_rope_freqs(const json& rs, double theta, int head_dim) {
    const double factor = rs.value("factor", 8.0), low = rs.value("low_freq_factor", 1.0),
                 high = rs.value("high_freq_factor", 4.0),
                 old_ctx = rs.value("original_max_position_embeddings", 8192.0);
    const double low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
    std::vector<float> out;
    for (int i = 0; i < head_dim; i += 2) {
        const double freq = 1.0 / std::pow(theta, double(i) / head_dim);
        const double wavelen = 2.0 * M_PI / freq;
        if (wavelen < high_wavelen) {
            out.push_back(1.0f);
        } else if (wavelen > low_wavelen) {
            out.push_back(float(factor));
        } else {
            const double smooth = (old_ctx / wavelen - low) / (high - low);
            out.push_back(float(1.0 / ((1.0 - smooth) / factor + smooth)));
        }
    }
    return out;
}

// The experts' count, top-k and width, and the fields a mixture's GGUF architecture fixes.
template <class Need, class Bad>
Status read_experts(const json& j, Need& need, Bad& bad, HfConfig& c) {
    const char* n_key =
        c.experts_layout == ExpertLayout::kQwenOlmo ? "num_experts" : "num_local_experts";
    PAGODA_TRY(need(n_key, c.experts));
    PAGODA_TRY(need("num_experts_per_tok", c.experts_used));
    PAGODA_TRY(
        need(c.arch == "qwen3moe" ? "moe_intermediate_size" : "intermediate_size", c.expert_ffn));
    c.ffn = c.expert_ffn;
    const bool norm = j.value("norm_topk_prob", c.arch != "olmoe");
    if (norm != (c.arch != "olmoe")) {
        return bad("norm_topk_prob", fmt::format("= {} is not supported for {} (its GGUF "
                                                 "architecture fixes it to {})",
                                                 norm, c.hf_arch, !norm));
    }
    if (j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array() &&
        !j["mlp_only_layers"].empty())
        return bad("mlp_only_layers", "is not empty: dense layers among experts are not read");
    return ok_status();
}

// Granite's multipliers and rope_scaling (linear, or Llama 3's per-frequency factors).
Status read_scales_and_rope(const json& j, const std::string& path, HfConfig& c) {
    if (c.arch == "granitemoe") {
        c.embedding_scale = j.value("embedding_multiplier", 1.0);
        c.residual_scale = j.value("residual_multiplier", 1.0);
        c.attention_scale = j.value("attention_multiplier", 0.0);
        c.logit_scale = j.value("logits_scaling", 1.0);
    }
    if (!j.contains("rope_scaling") || !j["rope_scaling"].is_object()) return ok_status();
    const json& rs = j["rope_scaling"];
    const std::string type = rs.value("rope_type", rs.value("type", std::string("none")));
    if (type == "linear") {
        c.rope_scaling = "linear";
        c.rope_factor = rs.value("factor", 1.0);
    } else if (type == "llama3") {
        c.rope_freqs = llama3_rope_freqs(rs, c.rope_theta, c.head_dim);
    } else if (type != "default" && type != "none") {
        return make_error(ErrorCode::kUnsupported,
                          "{}: field 'rope_scaling' has type '{}', which is not supported "
                          "(supported: linear, llama3)",
                          path, type);
    }
    return ok_status();
}

}  // namespace

std::vector<std::string> hf_architectures() {
    std::vector<std::string> v;
    for (const auto& [k, e] : arch_table()) v.push_back(k);
    return v;
}

Result<HfConfig> read_hf_config(const std::string& dir) {
    const std::string path = dir + "/config.json";
    std::ifstream in(path);
    if (!in) {
        return make_error(ErrorCode::kNotFound,
                          "{}: not found (a Hugging Face model directory has config.json, "
                          "*.safetensors and tokenizer.json)",
                          path);
    }
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return make_error(ErrorCode::kInvalidFile, "{}: not valid JSON", path);
    auto bad = [&](const std::string& field, const std::string& why) {
        return make_error(ErrorCode::kInvalidFile, "{}: field '{}' {}", path, field, why);
    };
    if (!j.contains("architectures") || !j["architectures"].is_array() ||
        j["architectures"].empty() || !j["architectures"][0].is_string())
        return bad("architectures", "is missing (expected e.g. [\"LlamaForCausalLM\"])");
    HfConfig c;
    c.hf_arch = j["architectures"][0].get<std::string>();
    auto it = arch_table().find(c.hf_arch);
    if (it == arch_table().end()) {
        std::string known;
        for (const auto& n : hf_architectures()) known += (known.empty() ? "" : ", ") + n;
        return make_error(ErrorCode::kUnsupported,
                          "{}: field 'architectures' names {}, which is not supported "
                          "(supported: {})",
                          path, c.hf_arch, known);
    }
    c.arch = it->second.gguf;
    c.permute_qk = it->second.permute_qk;
    c.qkv_bias = it->second.qkv_bias;
    c.experts_layout = it->second.experts;
    c.name = std::filesystem::path(dir).filename().string();
    if (c.name.empty()) c.name = std::filesystem::path(dir).parent_path().filename().string();
    auto need = [&](const char* key, int& out) -> Status {
        if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() <= 0 ||
            j[key].get<int64_t>() > (int64_t(1) << 30))
            return bad(key, "is missing or not a positive integer");
        out = j[key].get<int>();
        return ok_status();
    };
    PAGODA_TRY(need("num_hidden_layers", c.layers));
    PAGODA_TRY(need("hidden_size", c.dim));
    PAGODA_TRY(need("num_attention_heads", c.heads));
    PAGODA_TRY(need("vocab_size", c.vocab));
    c.kv_heads = j.value("num_key_value_heads", c.heads);
    c.head_dim = j.contains("head_dim") && j["head_dim"].is_number_integer()
                     ? j["head_dim"].get<int>()
                     : c.dim / c.heads;
    c.context = j.value("max_position_embeddings", 4096);
    c.rms_eps = j.value("rms_norm_eps", 1e-5);
    c.rope_theta = j.contains("rope_theta") && j["rope_theta"].is_number()
                       ? j["rope_theta"].get<double>()
                       : 10000.0;
    c.tied = j.value("tie_word_embeddings", false);
    if (j.contains("sliding_window") && j["sliding_window"].is_number_integer())
        c.sliding_window = j["sliding_window"].get<int>();
    if (c.experts_layout == ExpertLayout::kNone) {
        PAGODA_TRY(need("intermediate_size", c.ffn));
    } else {
        PAGODA_TRY(read_experts(j, need, bad, c));
    }
    PAGODA_TRY(read_scales_and_rope(j, path, c));
    if (c.kv_heads <= 0 || c.heads % c.kv_heads != 0)
        return bad("num_key_value_heads", "must divide num_attention_heads");
    if (c.head_dim <= 0 || c.head_dim % 2 != 0) return bad("head_dim", "must be even");
    return c;
}

void HfConfig::write_metadata(formats::GgufWriter& w) const {
    const std::string& a = arch;
    w.add_string("general.architecture", a);
    w.add_string("general.name", name);
    w.add_u32(a + ".block_count", uint32_t(layers));
    w.add_u32(a + ".embedding_length", uint32_t(dim));
    w.add_u32(a + ".feed_forward_length", uint32_t(ffn));
    w.add_u32(a + ".attention.head_count", uint32_t(heads));
    w.add_u32(a + ".attention.head_count_kv", uint32_t(kv_heads));
    w.add_u32(a + ".attention.key_length", uint32_t(head_dim));
    w.add_u32(a + ".attention.value_length", uint32_t(head_dim));
    w.add_u32(a + ".context_length", uint32_t(context));
    w.add_u32(a + ".rope.dimension_count", uint32_t(head_dim));
    w.add_f32(a + ".rope.freq_base", float(rope_theta));
    w.add_f32(a + ".attention.layer_norm_rms_epsilon", float(rms_eps));
    if (rope_scaling == "linear") {
        w.add_string(a + ".rope.scaling.type", "linear");
        w.add_f32(a + ".rope.scaling.factor", float(rope_factor));
    }
    if (experts > 0) {
        w.add_u32(a + ".expert_count", uint32_t(experts));
        w.add_u32(a + ".expert_used_count", uint32_t(experts_used));
        w.add_u32(a + ".expert_feed_forward_length", uint32_t(expert_ffn));
    }
    if (arch == "granitemoe") {
        w.add_f32(a + ".embedding_scale", float(embedding_scale));
        w.add_f32(a + ".residual_scale", float(residual_scale));
        w.add_f32(a + ".attention.scale", float(attention_scale));
        w.add_f32(a + ".logit_scale", float(logit_scale));
    }
}

}  // namespace pagoda::hf
