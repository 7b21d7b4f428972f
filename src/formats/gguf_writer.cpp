// GgufWriter: the implementation (the contract is in formats/gguf_writer.h).
#include "formats/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/check.h"

namespace pagoda::formats {
namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
    const size_t at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    const size_t at = out.size();
    out.resize(at + s.size());
    if (!s.empty()) std::memcpy(out.data() + at, s.data(), s.size());
}

void put_value(std::vector<uint8_t>& out, const GgufValue& v) {
    switch (v.type) {
        case GgufType::kU8: put<uint8_t>(out, uint8_t(v.u)); break;
        case GgufType::kI8: put<int8_t>(out, int8_t(v.i)); break;
        case GgufType::kU16: put<uint16_t>(out, uint16_t(v.u)); break;
        case GgufType::kI16: put<int16_t>(out, int16_t(v.i)); break;
        case GgufType::kU32: put<uint32_t>(out, uint32_t(v.u)); break;
        case GgufType::kI32: put<int32_t>(out, int32_t(v.i)); break;
        case GgufType::kU64: put<uint64_t>(out, v.u); break;
        case GgufType::kI64: put<int64_t>(out, v.i); break;
        case GgufType::kF32: put<float>(out, float(v.f)); break;
        case GgufType::kF64: put<double>(out, v.f); break;
        case GgufType::kBool: put<uint8_t>(out, v.u ? 1 : 0); break;
        case GgufType::kString: put_string(out, v.s); break;
        case GgufType::kArray:
            put<uint32_t>(out, uint32_t(v.elem_type));
            put<uint64_t>(out, v.array.size());
            for (const auto& e : v.array) put_value(out, e);
            break;
    }
}

GgufValue scalar(GgufType t) {
    GgufValue v;
    v.type = t;
    return v;
}

}  // namespace

void GgufWriter::add(const std::string& key, GgufValue value) {
    if (key == "general.alignment") alignment_ = uint64_t(value.as_int().value_or(32));
    kv_.emplace_back(key, std::move(value));
}

void GgufWriter::add_string(const std::string& key, const std::string& s) {
    GgufValue v = scalar(GgufType::kString);
    v.s = s;
    add(key, std::move(v));
}
void GgufWriter::add_u32(const std::string& key, uint32_t x) {
    GgufValue v = scalar(GgufType::kU32);
    v.u = x;
    add(key, std::move(v));
}
void GgufWriter::add_f32(const std::string& key, float x) {
    GgufValue v = scalar(GgufType::kF32);
    v.f = x;
    add(key, std::move(v));
}
void GgufWriter::add_bool(const std::string& key, bool x) {
    GgufValue v = scalar(GgufType::kBool);
    v.u = x ? 1 : 0;
    add(key, std::move(v));
}
void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& xs) {
    GgufValue v = scalar(GgufType::kArray);
    v.elem_type = GgufType::kString;
    for (const auto& s : xs) {
        GgufValue e = scalar(GgufType::kString);
        e.s = s;
        v.array.push_back(std::move(e));
    }
    add(key, std::move(v));
}
void GgufWriter::add_f32_array(const std::string& key, const std::vector<float>& xs) {
    GgufValue v = scalar(GgufType::kArray);
    v.elem_type = GgufType::kF32;
    for (float x : xs) {
        GgufValue e = scalar(GgufType::kF32);
        e.f = x;
        v.array.push_back(e);
    }
    add(key, std::move(v));
}
void GgufWriter::add_i32_array(const std::string& key, const std::vector<int32_t>& xs) {
    GgufValue v = scalar(GgufType::kArray);
    v.elem_type = GgufType::kI32;
    for (int32_t x : xs) {
        GgufValue e = scalar(GgufType::kI32);
        e.i = x;
        v.array.push_back(e);
    }
    add(key, std::move(v));
}

void GgufWriter::add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> dims,
                            std::vector<uint8_t> data) {
    auto tr = tensor_type_traits(uint32_t(type));
    PAGODA_CHECK(tr.has_value()) << "unknown type";
    uint64_t n = 1;
    for (auto d : dims) n *= d;
    PAGODA_CHECK(dims[0] % tr->block_elems == 0) << name;
    PAGODA_CHECK(data.size() == n / tr->block_elems * tr->block_bytes)
        << name << " size " << data.size();
    const size_t nb = data.size();
    tensors_.push_back(Tensor{name, type, std::move(dims), std::move(data), {}, nb});
}

void GgufWriter::add_tensor_lazy(const std::string& name, TensorType type,
                                 std::vector<uint64_t> dims, Fill fill) {
    auto tr = tensor_type_traits(uint32_t(type));
    PAGODA_CHECK(tr.has_value()) << "unknown type";
    uint64_t n = 1;
    for (auto d : dims) n *= d;
    PAGODA_CHECK(dims[0] % tr->block_elems == 0) << name;
    const size_t nb = n / tr->block_elems * tr->block_bytes;
    tensors_.push_back(Tensor{name, type, std::move(dims), {}, std::move(fill), nb});
}

std::vector<uint8_t> GgufWriter::header(std::vector<uint64_t>& offsets) const {
    std::vector<uint8_t> out;
    put<uint32_t>(out, 0x46554747);
    put<uint32_t>(out, 3);
    put<uint64_t>(out, tensors_.size());
    put<uint64_t>(out, kv_.size());
    for (const auto& [k, v] : kv_) {
        put_string(out, k);
        put<uint32_t>(out, uint32_t(v.type));
        put_value(out, v);
    }
    uint64_t offset = 0;
    offsets.clear();
    for (const auto& t : tensors_) {
        put_string(out, t.name);
        put<uint32_t>(out, uint32_t(t.dims.size()));
        for (auto d : t.dims) put<uint64_t>(out, d);
        put<uint32_t>(out, uint32_t(t.type));
        put<uint64_t>(out, offset);
        offsets.push_back(offset);
        offset += (t.num_bytes + alignment_ - 1) / alignment_ * alignment_;
    }
    offsets.push_back(offset);  // end of data
    out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, 0);
    return out;
}

std::vector<uint8_t> GgufWriter::serialize() const {
    std::vector<uint64_t> offsets;
    std::vector<uint8_t> out = header(offsets);
    const size_t data_start = out.size();
    out.resize(data_start + offsets.back(), 0);
    for (size_t k = 0; k < tensors_.size(); ++k) {
        uint8_t* dst = out.data() + data_start + offsets[k];
        if (tensors_[k].fill) {
            tensors_[k].fill(dst, tensors_[k].num_bytes);
        } else if (!tensors_[k].data.empty()) {
            std::memcpy(dst, tensors_[k].data.data(), tensors_[k].data.size());
        }
    }
    return out;
}

Status GgufWriter::write(const std::string& path,
                         const std::function<void(size_t, size_t)>& progress) const {
    std::vector<uint64_t> offsets;
    const std::vector<uint8_t> head = header(offsets);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return make_error(ErrorCode::kIo, "cannot create '{}': {}", path, std::strerror(errno));
    bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size();
    std::vector<uint8_t> buf;
    size_t done = 0;
    for (size_t k = 0; k < tensors_.size() && ok; ++k) {
        const Tensor& t = tensors_[k];
        const size_t padded = size_t(offsets[k + 1] - offsets[k]);
        buf.assign(padded, 0);
        if (t.fill) {
            t.fill(buf.data(), t.num_bytes);
        } else if (!t.data.empty()) {
            std::memcpy(buf.data(), t.data.data(), t.data.size());
        }
        ok = std::fwrite(buf.data(), 1, padded, f) == padded;
        done += padded;
        if (progress) progress(done, size_t(offsets.back()));
    }
    const bool closed = std::fclose(f) == 0;
    if (!ok || !closed)
        return make_error(ErrorCode::kIo, "cannot write '{}': {}", path, std::strerror(errno));
    return ok_status();
}

}  // namespace pagoda::formats
