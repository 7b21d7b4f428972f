#pragma once
// Weight cache: a model's packed weights (the panels and rows the fast kernels read) in one
// file, so the next start maps them instead of packing again. A start with a warm cache
// reads no tensor data from the GGUF file and packs nothing; on kernels whose page cache
// holds large folios (Linux 6.x on ext4/XFS) the mapping gets 2 MiB pages and costs
// milliseconds, and replicas on one host share the pages.
//
// One file per (model file, CPU layout): `<dir>/<model file name>.<key hash>.packed`.
// The key (weight_cache_key) is the model file's size and modification time, a hash of its
// header (metadata and tensor directory) and of 64 samples of 4 KiB spread over the tensor
// data, plus kernels::cpu::packed_layout_key() (layout version, CPU features, oneDNN
// version). A file whose key differs is stale: it is not used, and the next write replaces
// every cache file of that model name.
//
// Layout (little-endian): "PAGODAWC", u32 version, u32 entry count, u64 header bytes,
// u64 hash of the header's remaining bytes, u32 key length, the key, then per entry: u32
// name length, name, u32 kind, u32 tensor type, i64 rows, i64 cols, u64 offset, u64 size.
// Entry data at 4 KiB-aligned offsets after the header. Written to a temporary file,
// flushed and renamed, so a reader sees a whole file or none.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/huge_buffer.h"
#include "base/mapped_file.h"
#include "base/result.h"
#include "formats/tensor_type.h"

namespace pagoda::model {

inline constexpr uint32_t kWeightCacheVersion = 1;

enum class PackedKind : uint32_t { kQuant = 1, kDense = 2 };  // QuantMatmul, DenseMatmul

struct PackedEntry {
    std::string name;  // e.g. "blk.0.attn_qkv", "output"
    PackedKind kind = PackedKind::kQuant;
    formats::TensorType type = formats::TensorType::kF32;
    int64_t rows = 0, cols = 0;
    uint64_t offset = 0, size = 0;  // where the bytes are in the file
};

struct WeightCacheHeader {
    std::string key;
    std::vector<PackedEntry> entries;
    uint64_t header_bytes = 0;
};

// Parses and checks a cache file (bytes = the whole file): magic, version, header hash,
// every entry inside the file, 4 KiB-aligned, after the header, names unique. The error
// says what is wrong. A fuzz target (fuzz/weight_cache_fuzz.cpp).
Result<WeightCacheHeader> parse_weight_cache(std::span<const uint8_t> bytes);

// The key of `file` (a mapped GGUF file) on this CPU; see above. Reads the header and the
// samples, ~1 ms for a 1 GB model.
std::string weight_cache_key(const MappedFile& file, uint64_t tensor_data_offset);

// `<dir>/<file name of model_path>.<16 hex digits of the key's hash>.packed`.
std::string weight_cache_path(const std::string& dir, const std::string& model_path,
                              const std::string& key);

// One packed matrix to write: its entry (offset and size are assigned when written) and
// its bytes, which must stay alive until write_weight_cache returns.
struct PackedPiece {
    PackedEntry entry;
    std::span<const uint8_t> data;
};

// Writes the cache file atomically (creating `path`'s directory), then deletes the other
// cache files of the same model name in that directory (stale keys), and temporary files
// of writers that died.
Status write_weight_cache(const std::string& path, const std::string& key,
                          std::vector<PackedPiece> pieces);

// An opened cache file, mapped read-only for as long as it lives.
class WeightCache {
  public:
    enum class Use { kAuto, kCopy };  // kCopy: copy out even where the mapping has huge pages
    // kNotFound when there is no file; another error when it is unreadable, malformed or
    // its key is not `key` (stale).
    static Result<std::unique_ptr<WeightCache>> open(const std::string& path,
                                                     const std::string& key, Use use = Use::kAuto);
    ~WeightCache();
    WeightCache(const WeightCache&) = delete;
    WeightCache& operator=(const WeightCache&) = delete;

    // The bytes of the entry with this name if its kind, type and shape match (nullopt
    // otherwise): a view into the mapping when the kernel mapped it with 2 MiB pages (or it
    // is small), else a copy into huge pages (4 KiB pages would cost the kernels TLB misses).
    std::optional<Result<HugeBuffer>> take(const PackedEntry& want) const;
    bool copies() const { return copy_; }

  private:
    WeightCache() = default;
    uint8_t* base_ = nullptr;  // the reservation (reserved_ bytes) the file is mapped into
    uint8_t* map_ = nullptr;
    size_t size_ = 0, reserved_ = 0;
    bool copy_ = false;
    WeightCacheHeader header_;
};

}  // namespace pagoda::model
