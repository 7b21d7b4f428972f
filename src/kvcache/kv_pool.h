#pragma once
// KvPool: the KV cache memory. Per layer, one K pool and one V pool of `num_blocks`
// blocks, each [num_kv_heads][block_size][head_dim] (head-major inside a block, so decode
// attention streams contiguous rows). KvView hands the model per-layer PagedKv views.
// Owned by the engine thread; the pool memory itself is written only by forward().

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/huge_buffer.h"
#include "base/result.h"
#include "base/strong_id.h"
#include "kernels/types.h"
#include "settings/settings.h"

namespace pagoda::kvcache {

// One KV block of the pool.
using BlockId = StrongId<struct BlockIdTag, int32_t>;

using kernels::KvDtype;

// The supported block sizes, as the settings table declares them.
inline constexpr const auto& kAllowedBlockSizes = settings::kBlockSizes;

struct KvCacheConfig {
    int block_size = int(settings::default_int("block_size"));        // token slots per block
    KvDtype dtype = KvDtype::kF32;                                    // storage type of K and V
    int64_t num_blocks = 0;                                           // 0: derive from memory_bytes
    int64_t memory_bytes = settings::default_int("kv_cache_memory");  // when num_blocks == 0
    // No memory behind the pool (the simulated GPU's KV cache): blocks are counted and
    // handed out as usual, nothing is stored, layer() views have null data.
    bool virtual_memory = false;

    Status validate() const;
};

Result<KvDtype> parse_kv_dtype(const std::string& s);
const char* kv_dtype_name(KvDtype t);

class KvPool {
  public:
    static Result<KvPool> create(const KvCacheConfig& cfg, int num_layers, int num_kv_heads,
                                 int head_dim);

    const KvCacheConfig& config() const { return cfg_; }  // as created
    int block_size() const { return cfg_.block_size; }
    int64_t num_blocks() const { return num_blocks_; }
    int num_layers() const { return num_layers_; }
    KvDtype dtype() const { return cfg_.dtype; }
    size_t bytes_per_block() const;  // all layers, K and V
    size_t total_bytes() const { return bytes_per_block() * size_t(num_blocks_); }
    kernels::PagedKv layer(int l) const;
    // Copies block `src` into block `dst` in every layer, K and V (copy-on-write).
    void copy_block(BlockId src, BlockId dst);
    // Copies the K/V of the first `tokens` positions of a sequence from `from` (its block
    // table `from_table` there) into this pool (`to_table`): the KV re-layout that keeps the
    // computed tokens. Same dtype, layers and heads; any block sizes. No-op on a virtual pool.
    void copy_tokens_from(const KvPool& from, const std::vector<int32_t>& from_table,
                          const std::vector<int32_t>& to_table, int64_t tokens);
    // Faults in the whole pool now (contents unchanged); false where the kernel cannot.
    bool populate() const { return memory_.populate(); }

  private:
    // copy_tokens_from for layouts of whole rows (q8_0, q4_0).
    void copy_rows_from(const KvPool& from, const std::vector<int32_t>& from_table,
                        const std::vector<int32_t>& to_table, int64_t tokens);

    KvCacheConfig cfg_;
    int num_layers_ = 0, num_kv_heads_ = 0, head_dim_ = 0;
    int64_t num_blocks_ = 0;
    HugeBuffer memory_;
};

// Simple free-list allocator over a pool's block ids. Not thread-safe (engine thread).
class BlockAllocator {
  public:
    explicit BlockAllocator(int64_t num_blocks);
    // Returns kNoBlock when the pool is exhausted.
    int32_t allocate();
    void free(int32_t block);
    int64_t num_free() const { return int64_t(free_.size()); }
    int64_t num_total() const { return total_; }
    static constexpr int32_t kNoBlock = -1;

  private:
    int64_t total_;
    std::vector<int32_t> free_;
};

// The per-sequence block table: block ids in position order. Plain int32 on purpose: it is
// the flat array the batch -> forward contract hands to the attention kernels
// (model::SeqSpan::block_table); the block manager's API names single blocks as BlockId.
using BlockTable = std::vector<int32_t>;
inline BlockId block_at(const BlockTable& t, size_t i) { return BlockId{t[i]}; }

// What forward() sees of the cache: one PagedKv per layer.
class KvView {
  public:
    explicit KvView(const KvPool& pool) : pool_(&pool) {}
    kernels::PagedKv layer(int l) const { return pool_->layer(l); }
    int block_size() const { return pool_->block_size(); }

  private:
    const KvPool* pool_;
};

}  // namespace pagoda::kvcache
