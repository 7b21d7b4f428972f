#pragma once
// Safetensors reader over a byte span (an mmap'ed *.safetensors file): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, optional
// "__metadata__"}, then the tensors' bytes. Every offset, shape and dtype is checked
// against the file; the reader never reads out of bounds. F32, F16 and BF16 are read;
// other dtypes are listed and refused by name when a tensor of one is used.
// Immutable after parse; safe to read from many threads.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "formats/tensor_type.h"

namespace pagoda::formats {

struct SafetensorsTensor {
    std::string name;
    std::string dtype;            // as written: "F32", "BF16", "I64", ...
    std::vector<uint64_t> shape;  // row-major: shape.back() is contiguous
    std::span<const uint8_t> data;
    uint64_t num_elems = 0;
    // The type for F32/F16/BF16; kUnsupported (an error naming the dtype) otherwise.
    Result<TensorType> type(const std::string& source) const;
};

class SafetensorsFile {
  public:
    static Result<SafetensorsFile> parse(std::span<const uint8_t> bytes, const std::string& source);
    const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
    const SafetensorsTensor* find(const std::string& name) const;
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    const std::string& source() const { return source_; }

  private:
    std::string source_;
    std::map<std::string, SafetensorsTensor> tensors_;
    std::map<std::string, std::string> metadata_;
};

}  // namespace pagoda::formats
