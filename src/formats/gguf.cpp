// The implementation of formats/gguf.h (the contract is there).
#include "formats/gguf.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>

namespace pagoda::formats {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxArrayDepth = 8;
constexpr uint64_t kMaxDims = 4;

// Bounds-checked little-endian cursor. Every read reports failure instead of
// reading past the end.
class Reader {
  public:
    Reader(std::span<const uint8_t> b, const std::string& src) : b_(b), src_(src) {}

    size_t pos() const { return pos_; }
    size_t remaining() const { return b_.size() - pos_; }

    template <typename T>
    Result<T> read(const char* what) {
        if (remaining() < sizeof(T)) return truncated(what);
        T v;
        std::memcpy(&v, b_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    Result<std::string> read_string(const char* what) {
        PAGODA_ASSIGN_OR_RETURN(uint64_t n, read<uint64_t>(what));
        if (n > remaining()) {
            return make_error(ErrorCode::kInvalidFile,
                              "{}: {} at byte {} has length {} but only {} bytes remain", src_,
                              what, pos_ - 8, n, remaining());
        }
        std::string s(reinterpret_cast<const char*>(b_.data() + pos_), size_t(n));
        pos_ += size_t(n);
        return s;
    }

    Error truncated(const char* what) const {
        return make_error(ErrorCode::kInvalidFile,
                          "{}: truncated: file ends at byte {} while reading {}", src_, b_.size(),
                          what);
    }

  private:
    std::span<const uint8_t> b_;
    size_t pos_ = 0;
    const std::string& src_;
};

// Smallest encoded size of one value of type t (used to bound array counts).
uint64_t min_encoded_size(GgufType t) {
    switch (t) {
        case GgufType::kU8:
        case GgufType::kI8:
        case GgufType::kBool: return 1;
        case GgufType::kU16:
        case GgufType::kI16: return 2;
        case GgufType::kU32:
        case GgufType::kI32:
        case GgufType::kF32: return 4;
        case GgufType::kString:
        case GgufType::kU64:
        case GgufType::kI64:
        case GgufType::kF64: return 8;
        case GgufType::kArray: return 12;
    }
    return 1;
}

bool valid_type(uint32_t t) { return t <= uint32_t(GgufType::kF64); }

Result<GgufValue> read_value(Reader& r, GgufType type, int depth, const std::string& key,
                             const std::string& src);

// An array value: element type, length (bounded by the bytes left), then the elements.
Status read_array(Reader& r, GgufValue& v, int depth, const std::string& key,
                  const std::string& src) {
    if (depth >= kMaxArrayDepth) {
        return make_error(ErrorCode::kInvalidFile, "{}: key '{}': arrays nested deeper than {}",
                          src, key, kMaxArrayDepth);
    }
    PAGODA_ASSIGN_OR_RETURN(uint32_t et, r.read<uint32_t>("array element type"));
    if (!valid_type(et)) {
        return make_error(ErrorCode::kInvalidFile,
                          "{}: key '{}': unknown array element type {} (allowed 0..12)", src, key,
                          et);
    }
    PAGODA_ASSIGN_OR_RETURN(uint64_t n, r.read<uint64_t>("array length"));
    v.elem_type = GgufType(et);
    if (n > r.remaining() / min_encoded_size(v.elem_type)) {
        return make_error(ErrorCode::kInvalidFile,
                          "{}: key '{}': array of {} elements cannot fit in the {} bytes left", src,
                          key, n, r.remaining());
    }
    v.array.reserve(size_t(n));
    for (uint64_t k = 0; k < n; ++k) {
        PAGODA_ASSIGN_OR_RETURN(GgufValue e, read_value(r, v.elem_type, depth + 1, key, src));
        v.array.push_back(std::move(e));
    }
    return ok_status();
}

Result<GgufValue> read_value(Reader& r, GgufType type, int depth, const std::string& key,
                             const std::string& src) {
    GgufValue v;
    v.type = type;
    switch (type) {
        case GgufType::kU8: {
            PAGODA_ASSIGN_OR_RETURN(v.u, r.read<uint8_t>("u8 value"));
            break;
        }
        case GgufType::kI8: {
            // GGUF i8 is signed: the sign extension is intended.
            // NOLINTNEXTLINE(bugprone-signed-char-misuse)
            PAGODA_ASSIGN_OR_RETURN(v.i, r.read<int8_t>("i8 value"));
            break;
        }
        case GgufType::kU16: {
            PAGODA_ASSIGN_OR_RETURN(v.u, r.read<uint16_t>("u16 value"));
            break;
        }
        case GgufType::kI16: {
            PAGODA_ASSIGN_OR_RETURN(v.i, r.read<int16_t>("i16 value"));
            break;
        }
        case GgufType::kU32: {
            PAGODA_ASSIGN_OR_RETURN(v.u, r.read<uint32_t>("u32 value"));
            break;
        }
        case GgufType::kI32: {
            PAGODA_ASSIGN_OR_RETURN(v.i, r.read<int32_t>("i32 value"));
            break;
        }
        case GgufType::kU64: {
            PAGODA_ASSIGN_OR_RETURN(v.u, r.read<uint64_t>("u64 value"));
            break;
        }
        case GgufType::kI64: {
            PAGODA_ASSIGN_OR_RETURN(v.i, r.read<int64_t>("i64 value"));
            break;
        }
        case GgufType::kF32: {
            PAGODA_ASSIGN_OR_RETURN(float f, r.read<float>("f32 value"));
            v.f = f;
            break;
        }
        case GgufType::kF64: {
            PAGODA_ASSIGN_OR_RETURN(v.f, r.read<double>("f64 value"));
            break;
        }
        case GgufType::kBool: {
            PAGODA_ASSIGN_OR_RETURN(uint8_t b, r.read<uint8_t>("bool value"));
            if (b > 1) {
                return make_error(ErrorCode::kInvalidFile,
                                  "{}: key '{}': bool value {} is not 0 or 1", src, key, b);
            }
            v.u = b;
            break;
        }
        case GgufType::kString: {
            PAGODA_ASSIGN_OR_RETURN(v.s, r.read_string("string value"));
            break;
        }
        case GgufType::kArray: {
            PAGODA_TRY(read_array(r, v, depth, key, src));
            break;
        }
    }
    return v;
}

}  // namespace

const char* gguf_type_name(GgufType t) {
    static const char* kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                   "bool", "string", "array", "u64", "i64", "f64"};
    return uint32_t(t) <= 12 ? kNames[uint32_t(t)] : "?";
}

bool GgufValue::is_integer() const {
    switch (type) {
        case GgufType::kU8:
        case GgufType::kI8:
        case GgufType::kU16:
        case GgufType::kI16:
        case GgufType::kU32:
        case GgufType::kI32:
        case GgufType::kU64:
        case GgufType::kI64:
        case GgufType::kBool: return true;
        default: return false;
    }
}

std::optional<int64_t> GgufValue::as_int() const {
    switch (type) {
        case GgufType::kU8:
        case GgufType::kU16:
        case GgufType::kU32:
        case GgufType::kBool: return int64_t(u);
        case GgufType::kU64:
            if (u > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
            return int64_t(u);
        case GgufType::kI8:
        case GgufType::kI16:
        case GgufType::kI32:
        case GgufType::kI64: return i;
        default: return std::nullopt;
    }
}

std::optional<double> GgufValue::as_double() const {
    if (is_float()) return f;
    if (auto v = as_int()) return double(*v);
    if (type == GgufType::kU64) return double(u);
    return std::nullopt;
}

std::string GgufValue::to_string(size_t max_items) const {
    switch (type) {
        case GgufType::kString:
            return s.size() > 60 ? fmt::format("\"{}...\" ({} bytes)", s.substr(0, 60), s.size())
                                 : fmt::format("\"{}\"", s);
        case GgufType::kBool: return u ? "true" : "false";
        case GgufType::kF32:
        case GgufType::kF64: return fmt::format("{}", f);
        case GgufType::kU64: return fmt::format("{}", u);
        case GgufType::kArray: {
            std::string out = fmt::format("[{} x {}: ", array.size(), gguf_type_name(elem_type));
            for (size_t k = 0; k < array.size() && k < max_items; ++k) {
                if (k) out += ", ";
                out += array[k].to_string(2);
            }
            if (array.size() > max_items) out += ", ...";
            return out + "]";
        }
        default: return fmt::format("{}", as_int().value_or(0));
    }
}

// One tensor's directory entry: name, dimensions, type, offset (checked, not yet placed).
static Result<GgufTensorInfo> read_tensor_info(Reader& r, uint64_t alignment,
                                               const std::string& src) {
    GgufTensorInfo t;
    PAGODA_ASSIGN_OR_RETURN(t.name, r.read_string("tensor name"));
    PAGODA_ASSIGN_OR_RETURN(uint32_t nd, r.read<uint32_t>("tensor dimension count"));
    if (nd == 0 || nd > kMaxDims) {
        return make_error(ErrorCode::kInvalidFile,
                          "{}: tensor '{}' has {} dimensions (allowed 1..{})", src, t.name, nd,
                          kMaxDims);
    }
    t.num_elems = 1;
    for (uint32_t d = 0; d < nd; ++d) {
        PAGODA_ASSIGN_OR_RETURN(uint64_t dim, r.read<uint64_t>("tensor dimension"));
        if (dim == 0 || dim > (uint64_t(1) << 40) || t.num_elems > (uint64_t(1) << 50) / dim) {
            return make_error(ErrorCode::kInvalidFile,
                              "{}: tensor '{}' dimension {} = {} is invalid or overflows", src,
                              t.name, d, dim);
        }
        t.num_elems *= dim;
        t.dims.push_back(dim);
    }
    PAGODA_ASSIGN_OR_RETURN(uint32_t type, r.read<uint32_t>("tensor type"));
    auto traits = tensor_type_traits(type);
    if (!traits) {
        return make_error(ErrorCode::kUnsupported, "{}: tensor '{}' has unknown tensor type id {}",
                          src, t.name, type);
    }
    t.type = TensorType(type);
    if (t.dims[0] % traits->block_elems != 0) {
        return make_error(ErrorCode::kInvalidFile,
                          "{}: tensor '{}' row length {} is not a multiple of the {} block size {}",
                          src, t.name, t.dims[0], traits->name, traits->block_elems);
    }
    t.num_bytes = t.num_elems / traits->block_elems * traits->block_bytes;
    PAGODA_ASSIGN_OR_RETURN(t.offset, r.read<uint64_t>("tensor offset"));
    if (t.offset % alignment != 0) {
        return make_error(ErrorCode::kInvalidFile, "{}: tensor '{}' offset {} is not aligned to {}",
                          src, t.name, t.offset, alignment);
    }
    return t;
}

// general.alignment, or GGUF's default.
static Result<uint64_t> alignment_of(const GgufFile& g) {
    const GgufValue* a = g.find("general.alignment");
    if (a == nullptr) return g.alignment();
    auto al = a->as_int();
    if (!al || *al <= 0 || (*al & (*al - 1)) != 0 || *al > 65536) {
        return make_error(ErrorCode::kInvalidFile,
                          "{}: general.alignment must be a power of two up to 65536, got {}",
                          g.source(), a->to_string());
    }
    return uint64_t(*al);
}

Result<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes, const std::string& source) {
    GgufFile g;
    g.source_ = source;
    Reader r(bytes, g.source_);
    const std::string& src = g.source_;

    PAGODA_ASSIGN_OR_RETURN(uint32_t magic, r.read<uint32_t>("magic"));
    if (magic != kMagic) {
        return make_error(ErrorCode::kInvalidFile,
                          "{}: not a GGUF file (magic 0x{:08x}, expected 'GGUF')", src, magic);
    }
    PAGODA_ASSIGN_OR_RETURN(g.version_, r.read<uint32_t>("version"));
    if (g.version_ != 2 && g.version_ != 3) {
        return make_error(ErrorCode::kUnsupported,
                          "{}: GGUF version {} is not supported (allowed: 2, 3)", src, g.version_);
    }
    PAGODA_ASSIGN_OR_RETURN(uint64_t n_tensors, r.read<uint64_t>("tensor count"));
    PAGODA_ASSIGN_OR_RETURN(uint64_t n_kv, r.read<uint64_t>("metadata count"));
    // Each KV takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor 8 + 4 + 8 + 4 + 8.
    if (n_kv > r.remaining() / 13) {
        return make_error(
            ErrorCode::kInvalidFile,
            "{}: truncated or corrupt: metadata count {} cannot fit in a {}-byte file", src, n_kv,
            bytes.size());
    }
    if (n_tensors > r.remaining() / 32) {
        return make_error(ErrorCode::kInvalidFile,
                          "{}: truncated or corrupt: tensor count {} cannot fit in a {}-byte file",
                          src, n_tensors, bytes.size());
    }

    for (uint64_t k = 0; k < n_kv; ++k) {
        PAGODA_ASSIGN_OR_RETURN(std::string key, r.read_string("metadata key"));
        PAGODA_ASSIGN_OR_RETURN(uint32_t t, r.read<uint32_t>("metadata type"));
        if (!valid_type(t)) {
            return make_error(ErrorCode::kInvalidFile,
                              "{}: key '{}' has unknown value type {} (allowed 0..12)", src, key,
                              t);
        }
        PAGODA_ASSIGN_OR_RETURN(GgufValue v, read_value(r, GgufType(t), 0, key, src));
        if (g.kv_index_.count(key)) {
            return make_error(ErrorCode::kInvalidFile, "{}: duplicate metadata key '{}'", src, key);
        }
        g.kv_index_[key] = g.kv_.size();
        g.kv_.emplace_back(std::move(key), std::move(v));
    }

    PAGODA_ASSIGN_OR_RETURN(g.alignment_, alignment_of(g));

    for (uint64_t k = 0; k < n_tensors; ++k) {
        PAGODA_ASSIGN_OR_RETURN(GgufTensorInfo t, read_tensor_info(r, g.alignment_, src));
        if (g.tensor_index_.count(t.name)) {
            return make_error(ErrorCode::kInvalidFile, "{}: duplicate tensor name '{}'", src,
                              t.name);
        }
        g.tensor_index_[t.name] = g.tensors_.size();
        g.tensors_.push_back(std::move(t));
    }

    const uint64_t header_end = r.pos();
    const uint64_t data_start = (header_end + g.alignment_ - 1) / g.alignment_ * g.alignment_;
    for (auto& t : g.tensors_) {
        if (data_start > bytes.size() || t.offset > bytes.size() - data_start ||
            t.num_bytes > bytes.size() - data_start - t.offset) {
            return make_error(
                ErrorCode::kInvalidFile,
                "{}: tensor '{}' data [{}, +{}) lies outside the {}-byte file (truncated?)", src,
                t.name, data_start + t.offset, t.num_bytes, bytes.size());
        }
        t.data = bytes.subspan(size_t(data_start + t.offset), size_t(t.num_bytes));
    }
    return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Result<std::string> GgufFile::get_string(const std::string& key) const {
    const GgufValue* v = find(key);
    if (!v) return make_error(ErrorCode::kNotFound, "{}: missing metadata key '{}'", source_, key);
    if (v->type != GgufType::kString) {
        return make_error(ErrorCode::kInvalidFile, "{}: key '{}' should be a string, is {}",
                          source_, key, gguf_type_name(v->type));
    }
    return v->s;
}

Result<int64_t> GgufFile::get_int(const std::string& key) const {
    const GgufValue* v = find(key);
    if (!v) return make_error(ErrorCode::kNotFound, "{}: missing metadata key '{}'", source_, key);
    auto i = v->as_int();
    if (!i) {
        return make_error(ErrorCode::kInvalidFile, "{}: key '{}' should be an integer, is {}",
                          source_, key, gguf_type_name(v->type));
    }
    return *i;
}

Result<double> GgufFile::get_float(const std::string& key) const {
    const GgufValue* v = find(key);
    if (!v) return make_error(ErrorCode::kNotFound, "{}: missing metadata key '{}'", source_, key);
    auto d = v->as_double();
    if (!d) {
        return make_error(ErrorCode::kInvalidFile, "{}: key '{}' should be a number, is {}",
                          source_, key, gguf_type_name(v->type));
    }
    return *d;
}

std::string GgufFile::get_string_or(const std::string& key, const std::string& dflt) const {
    const GgufValue* v = find(key);
    return v && v->type == GgufType::kString ? v->s : dflt;
}

int64_t GgufFile::get_int_or(const std::string& key, int64_t dflt) const {
    const GgufValue* v = find(key);
    if (!v) return dflt;
    return v->as_int().value_or(dflt);
}

double GgufFile::get_float_or(const std::string& key, double dflt) const {
    const GgufValue* v = find(key);
    if (!v) return dflt;
    return v->as_double().value_or(dflt);
}

bool GgufFile::get_bool_or(const std::string& key, bool dflt) const {
    const GgufValue* v = find(key);
    if (!v || !v->is_integer()) return dflt;
    return v->as_int().value_or(0) != 0;
}

}  // namespace pagoda::formats
