// The Hugging Face directory converter (the contract is in hf/hf_convert.h): shards,
// the tensor plan (names, Q/K row permutation, experts stacked), and the GGUF writer.
#include "hf/hf_convert.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/half.h"
#include "base/log.h"
#include "base/mapped_file.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"
#include "hf/hf_config.h"
#include "hf/hf_tokenizer.h"
#include "kernels/ref/ops.h"

namespace pagoda::hf {
namespace fs = std::filesystem;
using formats::SafetensorsTensor;
using formats::TensorType;

namespace {

// Every shard of the checkpoint, mapped, and where each tensor lives.
struct Shards {
    std::vector<std::unique_ptr<MappedFile>> files;
    std::vector<std::unique_ptr<formats::SafetensorsFile>> parsed;
    std::map<std::string, const SafetensorsTensor*> by_name;
    std::map<std::string, std::string> file_of;  // tensor -> shard path (errors)
};

Result<Shards> open_shards(const std::string& dir) {
    Shards s;
    std::vector<std::string> names;
    const std::string index = dir + "/model.safetensors.index.json";
    std::map<std::string, std::string> weight_map;
    if (fs::exists(index)) {
        std::ifstream in(index);
        nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
            return make_error(ErrorCode::kInvalidFile, "{}: field 'weight_map' is missing", index);
        for (auto& [t, f] : j["weight_map"].items()) {
            if (!f.is_string())
                return make_error(ErrorCode::kInvalidFile,
                                  "{}: weight_map['{}'] is not a file name", index, t);
            weight_map[t] = f.get<std::string>();
            if (std::find(names.begin(), names.end(), weight_map[t]) == names.end())
                names.push_back(weight_map[t]);
        }
        for (const auto& n : names) {
            if (n.find('/') != std::string::npos || !fs::exists(dir + "/" + n)) {
                return make_error(ErrorCode::kNotFound,
                                  "{}: weight_map names shard '{}', which is not in {} (a "
                                  "download that stopped early?)",
                                  index, n, dir);
            }
        }
    } else {
        for (const auto& e : fs::directory_iterator(dir)) {
            if (e.path().extension() == ".safetensors") names.push_back(e.path().filename());
        }
        std::sort(names.begin(), names.end());
    }
    if (names.empty()) {
        const bool bin = fs::exists(dir + "/pytorch_model.bin");
        return make_error(ErrorCode::kNotFound, "{}: no *.safetensors files{}", dir,
                          bin ? " (pytorch_model.bin is not read: convert the checkpoint to "
                                "safetensors first)"
                              : "");
    }
    for (const auto& n : names) {
        const std::string path = dir + "/" + n;
        PAGODA_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(path));
        s.files.push_back(std::make_unique<MappedFile>(std::move(f)));
        PAGODA_ASSIGN_OR_RETURN(formats::SafetensorsFile p,
                                formats::SafetensorsFile::parse(s.files.back()->bytes(), path));
        s.parsed.push_back(std::make_unique<formats::SafetensorsFile>(std::move(p)));
        for (const auto& [t, info] : s.parsed.back()->tensors()) {
            s.by_name[t] = &info;
            s.file_of[t] = path;
        }
    }
    for (const auto& [t, f] : weight_map) {
        if (!s.by_name.count(t)) {
            return make_error(ErrorCode::kInvalidFile,
                              "{}: tensor '{}' is listed in shard '{}' but not in it", index, t, f);
        }
    }
    return s;
}

// One logical row of an output tensor, as f32.
using RowFn = std::function<void(int64_t row, float* out)>;

void read_row(const SafetensorsTensor& t, int64_t r, float* out) {
    const int64_t cols = int64_t(t.shape.back());
    const uint8_t* p = t.data.data();
    if (t.dtype == "F32") {
        std::memcpy(out, p + size_t(r * cols) * 4, size_t(cols) * 4);
    } else if (t.dtype == "F16") {
        const auto* h = reinterpret_cast<const uint16_t*>(p) + r * cols;
        for (int64_t c = 0; c < cols; ++c) out[c] = fp16_to_float(h[c]);
    } else {  // BF16 (checked when planned)
        const auto* h = reinterpret_cast<const uint16_t*>(p) + r * cols;
        for (int64_t c = 0; c < cols; ++c) out[c] = bf16_to_float(h[c]);
    }
}

class Planner {
  public:
    Planner(const HfConfig& c, const Shards& s, const ConvertOptions& o, formats::GgufWriter& w)
        : c_(c), s_(s), o_(o), w_(w) {}

    Result<const SafetensorsTensor*> get(const std::string& name, std::vector<uint64_t> shape) {
        auto it = s_.by_name.find(name);
        if (it == s_.by_name.end()) {
            return make_error(ErrorCode::kInvalidFile,
                              "the checkpoint has no tensor '{}' (config.json says {}; is a shard "
                              "missing?)",
                              name, c_.hf_arch);
        }
        const SafetensorsTensor& t = *it->second;
        if (auto ty = t.type(s_.file_of.at(name)); !ty.ok()) return ty.error();
        if (t.shape != shape) {
            auto str = [](const std::vector<uint64_t>& v) {
                std::string o;
                for (auto d : v) o += (o.empty() ? "" : ", ") + std::to_string(d);
                return o;
            };
            return make_error(ErrorCode::kInvalidFile,
                              "{}: tensor '{}' has shape [{}], config.json implies [{}]",
                              s_.file_of.at(name), name, str(t.shape), str(shape));
        }
        return &t;
    }

    // The output type of a matrix from source `t` with `cols` columns.
    TensorType matrix_type(const SafetensorsTensor& t, int64_t cols) const {
        const std::string& d = o_.dtype;
        if (d == "q8_0" || d == "q4_0") {
            if (cols % 32 == 0) return d == "q8_0" ? TensorType::kQ8_0 : TensorType::kQ4_0;
        } else if (d == "f32") {
            return TensorType::kF32;
        } else if (d == "f16") {
            return TensorType::kF16;
        } else if (d == "bf16") {
            return TensorType::kBF16;
        }
        return t.dtype == "F16"    ? TensorType::kF16
               : t.dtype == "BF16" ? TensorType::kBF16
                                   : TensorType::kF32;
    }

    // A tensor of `rows` x `cols` (GGUF dims {cols, rows} or with an expert axis) whose
    // row r is row(r).
    void emit(const std::string& name, TensorType type, std::vector<uint64_t> dims, int64_t rows,
              int64_t cols, RowFn row) {
        w_.add_tensor_lazy(name, type, std::move(dims), [=](uint8_t* out, size_t num_bytes) {
            const size_t row_bytes = num_bytes / size_t(rows);
#pragma omp parallel
            {
                std::vector<float> buf(static_cast<size_t>(cols));
#pragma omp for schedule(static)
                for (int64_t r = 0; r < rows; ++r) {
                    row(r, buf.data());
                    kernels::ref::quantize_row(type, buf.data(), cols, out + size_t(r) * row_bytes);
                }
            }
        });
    }

    Status vector(const std::string& src, const std::string& dst, uint64_t n) {
        PAGODA_ASSIGN_OR_RETURN(const SafetensorsTensor* t, get(src, {n}));
        emit(dst, TensorType::kF32, {n}, 1, int64_t(n),
             [t](int64_t, float* o) { read_row(*t, 0, o); });
        return ok_status();
    }

    // A [rows x cols] matrix; `heads` > 0 permutes its rows from HF's rotary half-split
    // order to adjacent pairs within each of `heads` heads.
    Status matrix(const std::string& src, const std::string& dst, uint64_t rows, uint64_t cols,
                  int heads = 0) {
        PAGODA_ASSIGN_OR_RETURN(const SafetensorsTensor* t, get(src, {rows, cols}));
        const int64_t hd = heads > 0 ? int64_t(rows) / heads : 0;
        emit(dst, matrix_type(*t, int64_t(cols)), {cols, rows}, int64_t(rows), int64_t(cols),
             [t, hd](int64_t r, float* o) {
                 if (hd == 0) return read_row(*t, r, o);
                 // out row (h, i, j) <- in row (h, j, i): pairs (i, i + hd/2) become adjacent
                 const int64_t h = r / hd, k = r % hd, i = k / 2, j = k % 2;
                 read_row(*t, h * hd + j * (hd / 2) + i, o);
             });
        return ok_status();
    }

    Status layer(int l);
    Status experts(const std::string& p, const std::string& b);
    Status run();

  private:
    const HfConfig& c_;
    const Shards& s_;
    const ConvertOptions& o_;
    formats::GgufWriter& w_;
};

Status Planner::experts(const std::string& p, const std::string& b) {
    const uint64_t D = uint64_t(c_.dim), F = uint64_t(c_.expert_ffn), E = uint64_t(c_.experts);
    std::vector<const SafetensorsTensor*> gate(E), up(E), down(E);
    std::string router;
    if (c_.experts_layout == ExpertLayout::kGranite) {
        router = p + "block_sparse_moe.router.layer.weight";
        PAGODA_ASSIGN_OR_RETURN(const SafetensorsTensor* in,
                                get(p + "block_sparse_moe.input_linear.weight", {E, 2 * F, D}));
        PAGODA_ASSIGN_OR_RETURN(const SafetensorsTensor* out,
                                get(p + "block_sparse_moe.output_linear.weight", {E, D, F}));
        const TensorType tg = matrix_type(*in, int64_t(D)), td = matrix_type(*out, int64_t(F));
        // input_linear rows: each expert's gate (first F), then its up.
        emit(b + "ffn_gate_exps.weight", tg, {D, F, E}, int64_t(E * F), int64_t(D),
             [in, F](int64_t r, float* o) { read_row(*in, (r / F) * 2 * F + r % F, o); });
        emit(b + "ffn_up_exps.weight", tg, {D, F, E}, int64_t(E * F), int64_t(D),
             [in, F](int64_t r, float* o) { read_row(*in, (r / F) * 2 * F + F + r % F, o); });
        emit(b + "ffn_down_exps.weight", td, {F, D, E}, int64_t(E * D), int64_t(F),
             [out](int64_t r, float* o) { read_row(*out, r, o); });
    } else {
        const bool mixtral = c_.experts_layout == ExpertLayout::kMixtral;
        const std::string moe = mixtral ? p + "block_sparse_moe." : p + "mlp.";
        router = moe + "gate.weight";
        for (uint64_t e = 0; e < E; ++e) {
            const std::string x = fmt::format("{}experts.{}.", moe, e);
            PAGODA_ASSIGN_OR_RETURN(gate[e],
                                    get(x + (mixtral ? "w1" : "gate_proj") + ".weight", {F, D}));
            PAGODA_ASSIGN_OR_RETURN(up[e],
                                    get(x + (mixtral ? "w3" : "up_proj") + ".weight", {F, D}));
            PAGODA_ASSIGN_OR_RETURN(down[e],
                                    get(x + (mixtral ? "w2" : "down_proj") + ".weight", {D, F}));
        }
        auto stacked = [&](const std::string& name, const std::vector<const SafetensorsTensor*>& v,
                           uint64_t rows, uint64_t cols) {
            emit(name, matrix_type(*v[0], int64_t(cols)), {cols, rows, E}, int64_t(E * rows),
                 int64_t(cols), [v, rows](int64_t r, float* o) {
                     read_row(*v[size_t(uint64_t(r) / rows)], int64_t(uint64_t(r) % rows), o);
                 });
        };
        stacked(b + "ffn_gate_exps.weight", gate, F, D);
        stacked(b + "ffn_up_exps.weight", up, F, D);
        stacked(b + "ffn_down_exps.weight", down, D, F);
    }
    PAGODA_ASSIGN_OR_RETURN(const SafetensorsTensor* r, get(router, {E, D}));
    emit(b + "ffn_gate_inp.weight", TensorType::kF32, {D, E}, int64_t(E), int64_t(D),
         [r](int64_t row, float* o) { read_row(*r, row, o); });
    return ok_status();
}

Status Planner::layer(int l) {
    const std::string p = fmt::format("model.layers.{}.", l), b = fmt::format("blk.{}.", l);
    const uint64_t D = uint64_t(c_.dim), QD = uint64_t(c_.heads) * uint64_t(c_.head_dim),
                   KVD = uint64_t(c_.kv_heads) * uint64_t(c_.head_dim);
    PAGODA_TRY(vector(p + "input_layernorm.weight", b + "attn_norm.weight", D));
    const int qh = c_.permute_qk ? c_.heads : 0, kh = c_.permute_qk ? c_.kv_heads : 0;
    PAGODA_TRY(matrix(p + "self_attn.q_proj.weight", b + "attn_q.weight", QD, D, qh));
    PAGODA_TRY(matrix(p + "self_attn.k_proj.weight", b + "attn_k.weight", KVD, D, kh));
    PAGODA_TRY(matrix(p + "self_attn.v_proj.weight", b + "attn_v.weight", KVD, D));
    PAGODA_TRY(matrix(p + "self_attn.o_proj.weight", b + "attn_output.weight", D, QD));
    if (c_.qkv_bias) {
        PAGODA_TRY(vector(p + "self_attn.q_proj.bias", b + "attn_q.bias", QD));
        PAGODA_TRY(vector(p + "self_attn.k_proj.bias", b + "attn_k.bias", KVD));
        PAGODA_TRY(vector(p + "self_attn.v_proj.bias", b + "attn_v.bias", KVD));
    }
    if (c_.arch == "qwen3" || c_.arch == "qwen3moe") {
        const uint64_t hd = uint64_t(c_.head_dim);
        PAGODA_TRY(vector(p + "self_attn.q_norm.weight", b + "attn_q_norm.weight", hd));
        PAGODA_TRY(vector(p + "self_attn.k_norm.weight", b + "attn_k_norm.weight", hd));
    } else if (c_.arch == "olmoe") {
        PAGODA_TRY(vector(p + "self_attn.q_norm.weight", b + "attn_q_norm.weight", QD));
        PAGODA_TRY(vector(p + "self_attn.k_norm.weight", b + "attn_k_norm.weight", KVD));
    }
    PAGODA_TRY(vector(p + "post_attention_layernorm.weight", b + "ffn_norm.weight", D));
    if (c_.experts_layout != ExpertLayout::kNone) return experts(p, b);
    const uint64_t F = uint64_t(c_.ffn);
    PAGODA_TRY(matrix(p + "mlp.gate_proj.weight", b + "ffn_gate.weight", F, D));
    PAGODA_TRY(matrix(p + "mlp.up_proj.weight", b + "ffn_up.weight", F, D));
    PAGODA_TRY(matrix(p + "mlp.down_proj.weight", b + "ffn_down.weight", D, F));
    return ok_status();
}

Status Planner::run() {
    const uint64_t D = uint64_t(c_.dim), V = uint64_t(c_.vocab);
    PAGODA_TRY(matrix("model.embed_tokens.weight", "token_embd.weight", V, D));
    PAGODA_TRY(vector("model.norm.weight", "output_norm.weight", D));
    if (!c_.tied && s_.by_name.count("lm_head.weight")) {
        PAGODA_TRY(matrix("lm_head.weight", "output.weight", V, D));
    }
    if (!c_.rope_freqs.empty()) {
        std::vector<uint8_t> bytes(c_.rope_freqs.size() * 4);
        std::memcpy(bytes.data(), c_.rope_freqs.data(), bytes.size());
        w_.add_tensor("rope_freqs.weight", TensorType::kF32, {c_.rope_freqs.size()}, bytes);
    }
    for (int l = 0; l < c_.layers; ++l) PAGODA_TRY(layer(l));
    return ok_status();
}

}  // namespace

bool is_hf_dir(const std::string& path) {
    std::error_code ec;
    return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

Result<std::vector<uint8_t>> tokenizer_gguf(const std::string& dir) {
    formats::GgufWriter w;
    w.add_string("general.name", fs::path(dir).filename().string());
    PAGODA_TRY(write_tokenizer(dir, "", 0, false, w));
    return w.serialize();
}

std::string default_cache_dir() {
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
        return std::string(x) + "/pagoda/hf";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/pagoda/hf";
    return "/tmp/pagoda-hf";
}

Status convert(const std::string& dir, const std::string& out, const ConvertOptions& o,
               const std::function<void(size_t, size_t)>& progress) {
    static const std::vector<std::string> kTypes = {"auto", "f32", "f16", "bf16", "q8_0", "q4_0"};
    if (std::find(kTypes.begin(), kTypes.end(), o.dtype) == kTypes.end()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--dtype '{}' is not one of auto, f32, f16, bf16, q8_0, q4_0", o.dtype);
    }
    PAGODA_ASSIGN_OR_RETURN(HfConfig c, read_hf_config(dir));
    PAGODA_ASSIGN_OR_RETURN(Shards s, open_shards(dir));
    formats::GgufWriter w;
    c.write_metadata(w);
    PAGODA_TRY(write_tokenizer(dir, o.tokenizer, c.vocab, o.generation_config, w));
    Planner plan(c, s, o, w);
    PAGODA_TRY(plan.run());
    const std::string tmp = out + ".partial";
    PAGODA_TRY(w.write(tmp, progress));
    std::error_code ec;
    fs::rename(tmp, out, ec);
    if (ec) return make_error(ErrorCode::kIo, "cannot rename {} to {}: {}", tmp, out, ec.message());
    return ok_status();
}

Result<std::string> resolve(const std::string& dir, const std::string& cache_dir,
                            const ConvertOptions& o) {
    // Fingerprint: every file's name, size and modification time, and the options.
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](const std::string& s) {
        for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
    };
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir)) {
        if (e.is_regular_file()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
        std::error_code ec;
        mix(f.filename().string());
        mix(std::to_string(fs::file_size(f, ec)));
        mix(std::to_string(fs::last_write_time(f, ec).time_since_epoch().count()));
    }
    mix(o.dtype + "|" + o.tokenizer + "|" + (o.generation_config ? "g" : "-") + "|v1");
    std::string base = fs::path(dir).filename().string();
    if (base.empty()) base = fs::path(dir).parent_path().filename().string();
    const std::string out = fmt::format("{}/{}-{}-{:016x}.gguf", cache_dir, base, o.dtype, h);
    if (fs::exists(out)) return out;
    std::error_code ec;
    fs::create_directories(cache_dir, ec);
    if (ec) {
        return make_error(ErrorCode::kIo, "cannot create the conversion folder {}: {}", cache_dir,
                          ec.message());
    }
    log_info("hf_convert dir={} out={} dtype={}", dir, out, o.dtype);
    PAGODA_TRY(convert(dir, out, o));
    return out;
}

}  // namespace pagoda::hf
