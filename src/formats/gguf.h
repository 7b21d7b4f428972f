#pragma once
// GGUF v2/v3 reader over a byte span (usually an mmap'ed file): header, metadata of
// every value type (nested arrays too), tensor directory and data offsets.
// Every count, length and offset is validated; the reader never reads out of bounds.
// Immutable after parse: safe to read from many threads.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "formats/tensor_type.h"

namespace pagoda::formats {

enum class GgufType : uint32_t {
    kU8 = 0,
    kI8 = 1,
    kU16 = 2,
    kI16 = 3,
    kU32 = 4,
    kI32 = 5,
    kF32 = 6,
    kBool = 7,
    kString = 8,
    kArray = 9,
    kU64 = 10,
    kI64 = 11,
    kF64 = 12,
};

const char* gguf_type_name(GgufType t);

// One metadata value. Scalars live in the matching field; arrays in `array` with
// `elem_type` naming the element type (nested arrays are arrays of arrays).
struct GgufValue {
    GgufType type = GgufType::kU8;
    uint64_t u = 0;  // unsigned integers and bool
    int64_t i = 0;   // signed integers
    double f = 0.0;  // f32/f64
    std::string s;   // string
    GgufType elem_type = GgufType::kU8;
    std::vector<GgufValue> array;

    bool is_integer() const;
    bool is_float() const { return type == GgufType::kF32 || type == GgufType::kF64; }
    // Numeric value as int64/double whatever the stored width; nullopt if not numeric.
    std::optional<int64_t> as_int() const;
    std::optional<double> as_double() const;
    std::string to_string(size_t max_items = 8) const;
};

struct GgufTensorInfo {
    std::string name;
    std::vector<uint64_t> dims;  // ggml order: dims[0] is the contiguous (row) dimension
    TensorType type = TensorType::kF32;
    uint64_t offset = 0;  // relative to the data section
    uint64_t num_elems = 0;
    uint64_t num_bytes = 0;
    std::span<const uint8_t> data;  // inside the file
};

class GgufFile {
  public:
    // Parses and validates `bytes`; `source` names the file in error messages.
    static Result<GgufFile> parse(std::span<const uint8_t> bytes, const std::string& source);

    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

    const GgufValue* find(const std::string& key) const;
    const GgufTensorInfo* find_tensor(const std::string& name) const;

    // Typed getters: error names the key and what was expected.
    Result<std::string> get_string(const std::string& key) const;
    Result<int64_t> get_int(const std::string& key) const;
    Result<double> get_float(const std::string& key) const;
    std::string get_string_or(const std::string& key, const std::string& dflt) const;
    int64_t get_int_or(const std::string& key, int64_t dflt) const;
    double get_float_or(const std::string& key, double dflt) const;
    bool get_bool_or(const std::string& key, bool dflt) const;
    const std::string& source() const { return source_; }

  private:
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    std::string source_;
    std::vector<std::pair<std::string, GgufValue>> kv_;
    std::map<std::string, size_t> kv_index_;
    std::vector<GgufTensorInfo> tensors_;
    std::map<std::string, size_t> tensor_index_;
};

}  // namespace pagoda::formats
