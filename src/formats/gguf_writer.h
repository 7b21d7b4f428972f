#pragma once
// GgufWriter: builds a GGUF v3 file in memory (metadata, tensor directory, aligned data)
// and writes it out. Used by tests and `pagoda model make-test`. Not thread-safe.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "formats/gguf.h"

namespace pagoda::formats {

class GgufWriter {
  public:
    void add(const std::string& key, GgufValue value);
    void add_string(const std::string& key, const std::string& v);
    void add_u32(const std::string& key, uint32_t v);
    void add_f32(const std::string& key, float v);
    void add_bool(const std::string& key, bool v);
    void add_string_array(const std::string& key, const std::vector<std::string>& v);
    void add_f32_array(const std::string& key, const std::vector<float>& v);
    void add_i32_array(const std::string& key, const std::vector<int32_t>& v);
    // dims in ggml order (dims[0] contiguous); data must be exactly the type's byte size.
    void add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> dims,
                    std::vector<uint8_t> data);
    // A tensor whose bytes are produced by `fill` while writing (out has the type's byte
    // size), so multi-gigabyte files never sit in memory whole.
    using Fill = std::function<void(uint8_t* out, size_t num_bytes)>;
    void add_tensor_lazy(const std::string& name, TensorType type, std::vector<uint64_t> dims,
                         Fill fill);

    std::vector<uint8_t> serialize() const;
    // Streams the file: header, then each tensor's bytes in turn. `progress` (may be
    // empty) is called after each tensor with (done, total) bytes.
    Status write(const std::string& path,
                 const std::function<void(size_t, size_t)>& progress = {}) const;

  private:
    struct Tensor {
        std::string name;
        TensorType type;
        std::vector<uint64_t> dims;
        std::vector<uint8_t> data;
        Fill fill;  // used when data is empty
        size_t num_bytes;
    };
    std::vector<uint8_t> header(std::vector<uint64_t>& offsets) const;
    std::vector<std::pair<std::string, GgufValue>> kv_;
    std::vector<Tensor> tensors_;
    uint64_t alignment_ = 32;
};

}  // namespace pagoda::formats
