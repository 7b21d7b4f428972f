// The simulated GPU's performance model: the implementation (the contract is in
// model/sim/perf_model.h).
#include "model/sim/perf_model.h"

#include <fmt/core.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "base/toml_reader.h"
#include "model/sim/gpus_toml.h"  // generated from gpus.toml: kGpusToml

namespace pagoda::model::sim {

namespace {

Result<double> number(const toml::table& t, const std::string& card, const char* key,
                      std::string_view origin) {
    const toml::node* n = t.get(key);
    if (n == nullptr || !(n->is_floating_point() || n->is_integer())) {
        return make_error(ErrorCode::kInvalidArgument, "{}: [{}] needs a number '{}'", origin, card,
                          key);
    }
    const double v = n->value<double>().value_or(-1);
    if (v < 0) {
        return make_error(ErrorCode::kInvalidArgument, "{}: [{}] {} = {} must be >= 0", origin,
                          card, key, v);
    }
    return v;
}

}  // namespace

Result<std::vector<GpuSpec>> parse_gpu_table(std::string_view text, std::string_view origin) {
    PAGODA_ASSIGN_OR_RETURN(toml::table root, parse_toml(text, std::string(origin)));
    std::vector<GpuSpec> out;
    for (const auto& [k, v] : root) {
        const toml::table* t = v.as_table();
        GpuSpec g;
        g.name = std::string(k.str());
        if (t == nullptr) {
            return make_error(ErrorCode::kInvalidArgument, "{}: '{}' is not a [card] table", origin,
                              g.name);
        }
        g.description = t->get("description") ? t->get("description")->value_or(std::string()) : "";
        g.interconnect =
            t->get("interconnect") ? t->get("interconnect")->value_or(std::string()) : "";
        g.source = t->get("source") ? t->get("source")->value_or(std::string()) : "";
        if (g.source.empty()) {
            return make_error(ErrorCode::kInvalidArgument, "{}: [{}] has no 'source'", origin,
                              g.name);
        }
        PAGODA_ASSIGN_OR_RETURN(g.bf16_tflops, number(*t, g.name, "bf16_tflops", origin));
        PAGODA_ASSIGN_OR_RETURN(g.fp8_tflops, number(*t, g.name, "fp8_tflops", origin));
        PAGODA_ASSIGN_OR_RETURN(const double mib, number(*t, g.name, "memory_mib", origin));
        g.memory_mib = int64_t(mib);
        PAGODA_ASSIGN_OR_RETURN(g.memory_tbps, number(*t, g.name, "memory_tbps", origin));
        PAGODA_ASSIGN_OR_RETURN(g.link_gbps, number(*t, g.name, "link_gbps", origin));
        PAGODA_ASSIGN_OR_RETURN(g.link_latency_us, number(*t, g.name, "link_latency_us", origin));
        auto factor = [&](const char* key, double& v) -> Status {
            if (t->get(key) == nullptr) return ok_status();
            PAGODA_ASSIGN_OR_RETURN(v, number(*t, g.name, key, origin));
            return ok_status();
        };
        PAGODA_TRY(factor("efficiency_compute", g.efficiency.compute));
        PAGODA_TRY(factor("efficiency_memory", g.efficiency.memory));
        PAGODA_TRY(factor("efficiency_network", g.efficiency.network));
        PAGODA_TRY(factor("step_overhead_ms", g.efficiency.step_overhead_ms));
        PAGODA_TRY(factor("efficiency_overlap", g.efficiency.overlap));
        PAGODA_TRY(factor("efficiency_attention", g.efficiency.attention));
        PAGODA_TRY(factor("seq_overhead_ms", g.efficiency.seq_overhead_ms));
        if (Status st = g.efficiency.validate(); !st.ok()) {
            return make_error(ErrorCode::kInvalidArgument, "{}: [{}]: {}", origin, g.name,
                              st.error().message);
        }
        if (g.bf16_tflops <= 0 || g.memory_mib <= 0 || g.memory_tbps <= 0 || g.link_gbps <= 0) {
            return make_error(ErrorCode::kInvalidArgument,
                              "{}: [{}] needs positive bf16_tflops, memory_mib, memory_tbps and "
                              "link_gbps",
                              origin, g.name);
        }
        out.push_back(std::move(g));
    }
    return out;
}

const std::vector<GpuSpec>& builtin_gpus() {
    static const std::vector<GpuSpec> table = [] {
        auto t = parse_gpu_table(kGpusToml, "src/model/sim/gpus.toml");
        return t.ok() ? std::move(t).value() : std::vector<GpuSpec>{};
    }();
    return table;
}

Result<GpuSpec> find_gpu(const std::string& name, const std::string& extra_table) {
    std::vector<GpuSpec> cards;
    if (!extra_table.empty()) {
        std::ifstream in(extra_table);
        if (!in) {
            return make_error(ErrorCode::kNotFound, "cannot read the GPU table {}", extra_table);
        }
        std::stringstream text;
        text << in.rdbuf();
        PAGODA_ASSIGN_OR_RETURN(cards, parse_gpu_table(text.str(), extra_table));
    }
    cards.insert(cards.end(), builtin_gpus().begin(), builtin_gpus().end());
    std::string known;
    for (const GpuSpec& g : cards) {
        if (g.name == name) return g;
        known += (known.empty() ? "" : ", ") + g.name;
    }
    return make_error(ErrorCode::kInvalidArgument, "unknown GPU '{}' (known: {})", name, known);
}

namespace {
int64_t attention_params(const SimShape& s) {  // one layer's Q, K, V and output projections
    const int64_t q = int64_t(s.heads) * s.head_dim, kv = int64_t(s.kv_heads) * s.head_dim;
    return int64_t(s.dim) * q + 2 * int64_t(s.dim) * kv + q * s.dim;
}
int64_t expert_params(const SimShape& s) { return 3 * int64_t(s.dim) * s.expert_ffn; }
}  // namespace

int64_t SimShape::layer_params() const {
    const int64_t ffn_params =
        experts > 0 ? int64_t(experts) * (expert_params(*this) + dim) : 3 * int64_t(dim) * ffn;
    return int64_t(layers) * (attention_params(*this) + ffn_params);
}

int64_t SimShape::active_layer_params() const {
    if (experts == 0) return layer_params();
    return int64_t(layers) * (attention_params(*this) + int64_t(experts) * dim +
                              int64_t(experts_used) * expert_params(*this));
}

double SimShape::read_layer_params(int64_t tokens) const {
    if (experts == 0 || tokens <= 0) return double(layer_params());
    const double miss = std::pow(1.0 - double(experts_used) / double(experts), double(tokens));
    const double touched = double(experts) * (1.0 - miss);
    return double(layers) * (double(attention_params(*this)) + double(experts) * dim +
                             touched * double(expert_params(*this)));
}

int64_t SimShape::lm_head_params() const { return vocab * dim; }

int64_t SimShape::total_params() const {
    const int64_t norms = (2 * int64_t(layers) + 1) * dim;
    return layer_params() + lm_head_params() + (tied_embeddings ? 0 : vocab * dim) + norms;
}

SimShape SimShape::of(const ModelShape& s) {
    SimShape o;
    o.layers = s.num_layers;
    o.dim = s.dim;
    o.heads = s.num_heads;
    o.kv_heads = s.num_kv_heads;
    o.head_dim = s.head_dim > 0 ? s.head_dim : s.dim / s.num_heads;
    o.ffn = s.ffn_dim;
    o.vocab = s.vocab_size;
    o.tied_embeddings = s.tied_embeddings;
    o.experts = s.num_experts;
    o.experts_used = s.num_experts_used;
    o.expert_ffn = s.expert_ffn_dim;
    return o;
}

Result<WeightType> parse_weight_type(const std::string& s) {
    if (s == "bf16" || s == "fp16") return WeightType::kBf16;
    if (s == "fp8") return WeightType::kFp8;
    if (s == "q8_0") return WeightType::kQ8_0;
    if (s == "q4_0") return WeightType::kQ4_0;
    return make_error(ErrorCode::kInvalidArgument,
                      "weight type '{}' (allowed: bf16, fp16, fp8, q8_0, q4_0)", s);
}

double PerfModel::weight_bytes_per_param() const {
    switch (w_) {
        case WeightType::kFp8: return 1.0;
        case WeightType::kQ8_0: return 34.0 / 32;  // 32 int8 and an fp16 scale
        case WeightType::kQ4_0: return 18.0 / 32;  // 32 nibbles and an fp16 scale
        case WeightType::kBf16: break;
    }
    return 2.0;
}

Status Efficiency::validate() const {
    for (auto [name, v] : {std::pair{"compute", compute},
                           {"memory", memory},
                           {"network", network},
                           {"attention", attention}}) {
        if (!(v > 0 && v <= 1)) {
            return make_error(ErrorCode::kInvalidArgument,
                              "efficiency factor {} = {} must be in (0, 1]", name, v);
        }
    }
    if (!(overlap >= 0 && overlap <= 1)) {
        return make_error(ErrorCode::kInvalidArgument, "efficiency overlap {} must be in [0, 1]",
                          overlap);
    }
    if (!(seq_overhead_ms >= 0 && seq_overhead_ms < 100)) {
        return make_error(ErrorCode::kInvalidArgument,
                          "overhead per sequence {} ms must be in [0, 100)", seq_overhead_ms);
    }
    if (!(step_overhead_ms >= 0 && step_overhead_ms < 1000)) {
        return make_error(ErrorCode::kInvalidArgument, "step overhead {} ms must be in [0, 1000)",
                          step_overhead_ms);
    }
    return ok_status();
}

int64_t MemoryPlan::num_blocks(int block_size) const {
    const int64_t per_block = kv_bytes_per_token * block_size;
    return per_block > 0 ? kv / per_block : 0;
}

Result<PerfModel> PerfModel::create(const GpuSpec& gpu, const SimShape& shape, int tp, WeightType w,
                                    kernels::KvDtype kv, const Efficiency& eff) {
    PAGODA_TRY(eff.validate());
    if (tp < 1 || shape.heads % tp != 0) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--tensor-parallel-size {} must divide the {} attention heads", tp,
                          shape.heads);
    }
    if (shape.kv_heads % tp != 0 && tp % shape.kv_heads != 0) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--tensor-parallel-size {} must divide the {} KV heads or be a "
                          "multiple of them",
                          tp, shape.kv_heads);
    }
    PerfModel m;
    m.gpu_ = gpu;
    m.shape_ = shape;
    m.tp_ = tp;
    m.w_ = w;
    m.kv_ = kv;
    m.eff_ = eff;
    return m;
}

int PerfModel::kv_heads_per_gpu() const { return std::max(1, shape_.kv_heads / tp_); }

double PerfModel::peak_flops() const {
    const double tflops =
        w_ == WeightType::kFp8 && gpu_.fp8_tflops > 0 ? gpu_.fp8_tflops : gpu_.bf16_tflops;
    return tflops * 1e12;
}

StepCost PerfModel::step(const std::vector<SeqWork>& batch) const {
    StepCost c;
    double tokens = 0, rows = 0, attn_pairs = 0, kv_tokens = 0;
    for (const SeqWork& s : batch) {
        const double n = s.new_tokens, ctx = double(s.context);
        tokens += n;
        rows += s.logits ? 1 : 0;
        attn_pairs += n * ctx + n * (n + 1) / 2;  // query-key pairs, causal
        kv_tokens += ctx + n;                     // each cached token read once, new ones written
    }
    const SimShape& m = shape_;
    const double attn_flops = 4.0 * m.layers * m.heads * m.head_dim * attn_pairs;
    c.flops = 2.0 * double(m.active_layer_params()) * tokens +
              2.0 * double(m.lm_head_params()) * rows + attn_flops;
    const double weights = (m.read_layer_params(int64_t(tokens)) + double(m.lm_head_params())) *
                           weight_bytes_per_param() / tp_;
    const double kv_per_token =
        2.0 * m.layers * kv_heads_per_gpu() * double(kernels::kv_row_bytes(kv_, m.head_dim));
    c.bytes_per_gpu = weights + kv_per_token * kv_tokens;
    c.compute_s =
        (c.flops - attn_flops + attn_flops / eff_.attention) / tp_ / (peak_flops() * eff_.compute);
    c.memory_s = c.bytes_per_gpu / (gpu_.memory_tbps * 1e12 * eff_.memory);
    if (tp_ > 1) {
        // Two ring all-reduces per layer (after attention and after the MLP) of the hidden
        // states in bf16: each GPU sends 2 (tp - 1) / tp of the message, in 2 (tp - 1) hops.
        const double msg = tokens * m.dim * 2.0;
        const double per = 2.0 * (tp_ - 1) / tp_ * msg / (gpu_.link_gbps * 1e9 * eff_.network) +
                           2.0 * (tp_ - 1) * gpu_.link_latency_us * 1e-6;
        c.comm_bytes = 2.0 * m.layers * 2.0 * (tp_ - 1) / tp_ * msg;
        c.comm_s = 2.0 * m.layers * per;
    }
    c.overhead_s = (eff_.step_overhead_ms + eff_.seq_overhead_ms * double(batch.size())) * 1e-3;
    c.total_s = std::max(c.compute_s, c.memory_s) +
                (1 - eff_.overlap) * std::min(c.compute_s, c.memory_s) + c.comm_s + c.overhead_s;
    return c;
}

Result<MemoryPlan> PerfModel::memory(double util, int max_num_batched_tokens) const {
    if (!(util > 0 && util <= 1)) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--gpu-memory-utilization {} must be in (0, 1]", util);
    }
    const SimShape& m = shape_;
    MemoryPlan p;
    p.total = gpu_.memory_bytes();
    p.budget = int64_t(double(p.total) * util);
    p.weights = int64_t(double(m.total_params()) * weight_bytes_per_param() / tp_);
    // The profiled forward pass of max_num_batched_tokens tokens (bf16 hidden states,
    // residual, the widest MLP and QKV intermediates of one layer) and fp32 logits for up
    // to 256 sampled rows.
    const int64_t q = int64_t(m.heads) * m.head_dim, kv = int64_t(m.kv_heads) * m.head_dim;
    p.activation = int64_t(max_num_batched_tokens) *
                       (4 * int64_t(m.dim) + (2 * m.ffn + q + 2 * kv) / tp_) * 2 +
                   256 * m.vocab * 4;
    p.non_torch = kNonTorchBytes + (tp_ > 1 ? int64_t(256) << 20 : 0);
    p.kv_bytes_per_token = int64_t(2) * m.layers * kv_heads_per_gpu() *
                           int64_t(kernels::kv_row_bytes(kv_, m.head_dim));
    p.kv = p.budget - p.weights - p.activation - p.non_torch;
    if (p.kv <= 0) {
        return make_error(ErrorCode::kResourceExhausted,
                          "the model does not fit {} at TP {}: it needs {:.1f} GiB per GPU for "
                          "weights, {:.1f} GiB for activations and {:.1f} GiB other, and "
                          "--gpu-memory-utilization {} leaves {:.1f} GiB of {:.1f}; raise the TP "
                          "degree or use a larger card",
                          gpu_.name, tp_, double(p.weights) / (1 << 30),
                          double(p.activation) / (1 << 30), double(p.non_torch) / (1 << 30), util,
                          double(p.budget) / (1 << 30), double(p.total) / (1 << 30));
    }
    return p;
}

}  // namespace pagoda::model::sim
