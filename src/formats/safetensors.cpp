// SafetensorsFile: the implementation (the contract is in formats/safetensors.h).
#include "formats/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>

namespace pagoda::formats {
namespace {

// Bytes per element of the dtypes the format defines (0: unknown name).
size_t dtype_bytes(const std::string& d) {
    static const std::map<std::string, size_t> m = {
        {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
        {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
        {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
    auto it = m.find(d);
    return it == m.end() ? 0 : it->second;
}

}  // namespace

Result<TensorType> SafetensorsTensor::type(const std::string& source) const {
    if (dtype == "F32") return TensorType::kF32;
    if (dtype == "F16") return TensorType::kF16;
    if (dtype == "BF16") return TensorType::kBF16;
    return make_error(ErrorCode::kUnsupported,
                      "{}: tensor '{}' has dtype {}, which is not read (supported: F32, F16, "
                      "BF16; quantized checkpoints such as FP8 or GPTQ are not)",
                      source, name, dtype);
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

Result<SafetensorsFile> SafetensorsFile::parse(std::span<const uint8_t> bytes,
                                               const std::string& source) {
    auto bad = [&](const std::string& why) {
        return make_error(ErrorCode::kInvalidFile, "{}: not a valid safetensors file: {}", source,
                          why);
    };
    if (bytes.size() < 8) return bad("shorter than its 8-byte header length");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[size_t(i)];
    if (n > bytes.size() - 8 || n > (uint64_t(100) << 20))
        return bad(fmt::format("header length {} exceeds the file ({} bytes)", n, bytes.size()));
    const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), size_t(n));
    nlohmann::json h = nlohmann::json::parse(text, nullptr, false);
    if (h.is_discarded() || !h.is_object()) return bad("the header is not a JSON object");
    SafetensorsFile f;
    f.source_ = source;
    const std::span<const uint8_t> data = bytes.subspan(size_t(8 + n));
    for (auto& [name, v] : h.items()) {
        if (name == "__metadata__") {
            if (!v.is_object()) return bad("__metadata__ is not an object");
            for (auto& [k, s] : v.items()) {
                if (s.is_string()) f.metadata_[k] = s.get<std::string>();
            }
            continue;
        }
        if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() ||
            !v.contains("shape") || !v["shape"].is_array() || !v.contains("data_offsets") ||
            !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
            return bad(fmt::format("tensor '{}' lacks dtype, shape or data_offsets", name));
        SafetensorsTensor t;
        t.name = name;
        t.dtype = v["dtype"].get<std::string>();
        const size_t eb = dtype_bytes(t.dtype);
        if (eb == 0) return bad(fmt::format("tensor '{}' has unknown dtype '{}'", name, t.dtype));
        t.num_elems = 1;
        for (const auto& d : v["shape"]) {
            if (!d.is_number_unsigned()) return bad(fmt::format("tensor '{}': bad shape", name));
            const uint64_t x = d.get<uint64_t>();
            if (x != 0 && t.num_elems > (uint64_t(1) << 48) / x)
                return bad(fmt::format("tensor '{}': shape too large", name));
            t.num_elems *= x;
            t.shape.push_back(x);
        }
        const auto& o = v["data_offsets"];
        if (!o[0].is_number_unsigned() || !o[1].is_number_unsigned())
            return bad(fmt::format("tensor '{}': bad data_offsets", name));
        const uint64_t b = o[0].get<uint64_t>(), e = o[1].get<uint64_t>();
        if (b > e || e > data.size())
            return bad(fmt::format("tensor '{}': data_offsets [{}, {}) outside the {} data bytes",
                                   name, b, e, data.size()));
        if (e - b != t.num_elems * eb)
            return bad(fmt::format("tensor '{}': {} bytes for {} elements of {}", name, e - b,
                                   t.num_elems, t.dtype));
        t.data = data.subspan(size_t(b), size_t(e - b));
        f.tensors_.emplace(name, std::move(t));
    }
    return f;
}

}  // namespace pagoda::formats
