#pragma once
// BlockManager: which KV blocks each sequence owns. Reference counts (blocks shared by
// prefix hits and by forks), copy-on-write for a shared partial block, and prefix caching:
// a full block whose tokens were computed is keyed by a chained hash of (parent hash, its
// token ids, the request's salt); when its last owner lets go it stays in the cache, and
// is evicted in LRU order only when a fresh block is needed.
//
// Every block is in exactly one state: free (on the free list), used (ref count > 0) or
// cached (ref count 0, hashed, evictable). free + used + cached == total, always.
//
// Check-then-commit: check_*() never change anything; the matching commit may then assume
// it fits. Owned by the engine thread; not thread-safe.

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/strong_id.h"
#include "kvcache/kv_pool.h"

namespace pagoda::kvcache {

// A scheduler sequence (one sample of one request). Ids are never reused in an engine.
using SeqId = StrongId<struct SeqIdTag, int64_t>;
inline constexpr SeqId kNoSeq{0};
using BlockHash = uint64_t;

// Chained hash of one full block: parent's hash, the block's token ids, and a salt.
BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens, uint64_t salt);

// A KV block copy the engine must perform before the next forward (copy-on-write).
struct BlockCopy {
    BlockId src, dst;
};

struct BlockStats {
    int64_t total = 0, used = 0, free = 0, cached = 0;
    double usage = 0.0;  // used / total
    int64_t allocated_slots =
        0;                     // block slots owned by sequences (a shared block counts per owner)
    int64_t filled_slots = 0;  // slots holding a token
    double internal_waste = 0.0;  // 1 - filled / allocated (0 when nothing is allocated)
    int64_t num_seqs = 0;
    // Sequence lengths in blocks: bucket i counts sequences with length in [2^i, 2^(i+1))
    // blocks (bucket 0 also holds empty sequences).
    std::vector<int64_t> length_histogram;
    int64_t prefix_queries = 0;  // full prompt blocks looked up
    int64_t prefix_hits = 0;     // of which found in the cache
    int64_t evictions = 0;
};

struct AllocationCheck {
    bool fits = false;
    int64_t new_blocks = 0;     // blocks that would be taken from free/evictable
    int32_t cached_tokens = 0;  // prompt tokens that would come from the prefix cache
};

class BlockManager {
  public:
    BlockManager(int64_t num_blocks, int block_size, bool enable_prefix_caching);

    int block_size() const { return block_size_; }
    int64_t num_total() const { return int64_t(blocks_.size()); }
    bool prefix_caching() const { return prefix_caching_; }
    // Blocks a new allocation can take: free plus evictable cached blocks.
    int64_t num_available() const { return int64_t(free_.size() + lru_.size()); }
    int64_t blocks_for(int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }

    // Admission of a sequence whose first `tokens.size()` tokens must be held. Looks up the
    // prefix cache (at most tokens.size() - 1 tokens can hit: the last one is always
    // computed so there are logits to sample from) and keeps `watermark_blocks` free.
    AllocationCheck check_allocate(std::span<const int32_t> tokens, uint64_t salt,
                                   int64_t watermark_blocks) const;
    // Commits: takes the prefix hits and fresh blocks for all tokens. Returns cached tokens.
    // Counts prefix queries and hits. The caller has checked that it fits.
    int32_t allocate(SeqId seq, std::span<const int32_t> tokens, uint64_t salt);

    // Growth of a running sequence to hold `num_tokens` tokens in total, writing from slot
    // `write_from` on (copy-on-write applies when that slot lies in a shared block).
    int64_t blocks_to_grow(SeqId seq, int64_t num_tokens, int64_t write_from) const;
    bool can_grow(SeqId seq, int64_t num_tokens, int64_t write_from) const {
        return blocks_to_grow(seq, num_tokens, write_from) <= num_available();
    }
    // Grows; appends copies the engine must perform before the forward that writes them.
    void grow(SeqId seq, int64_t num_tokens, int64_t write_from, std::vector<BlockCopy>* copies);

    // Registers the full blocks of `tokens` whose `computed` tokens are now in the KV cache.
    void publish(SeqId seq, std::span<const int32_t> tokens, int64_t computed);

    // `child` shares every block of `parent` (ref counts up); it must not exist yet.
    void fork(SeqId parent, SeqId child);
    // Releases every block of `seq` (tail first, so the tail is evicted first); hashed blocks
    // whose count drops to zero stay cached. No-op for an unknown sequence.
    void free(SeqId seq);

    bool has(SeqId seq) const { return seqs_.count(seq) != 0; }
    const BlockTable& table(SeqId seq) const;
    int ref_count(BlockId block) const { return blocks_[size_t(block.value())].ref; }
    BlockStats stats() const;

    // Drops every cached (evictable) block from the prefix cache. Returns how many.
    int64_t reset_prefix_cache();
    // Internal consistency (tests): every block in one state, ref counts match the tables.
    bool consistent() const;

  private:
    struct Block {
        int32_t ref = 0;
        bool hashed = false;
        BlockHash hash = 0;
        std::list<int32_t>::iterator lru_it;  // valid when ref == 0 && hashed
    };
    struct Seq {
        BlockTable table;
        std::vector<BlockHash> hashes;  // of table's first hashes.size() blocks (published)
        int64_t num_tokens = 0;         // tokens the table covers (for waste statistics)
        uint64_t salt = 0;
    };

    int32_t take_fresh();     // from the free list, else evicts the LRU cached block
    void acquire(int32_t b);  // ref++ (leaves the LRU list when it was cached)
    void release(int32_t b);
    int32_t lookup(BlockHash h) const;  // block id or -1
    Seq& seq(SeqId id);

    int block_size_;
    bool prefix_caching_;
    std::vector<Block> blocks_;
    std::vector<int32_t> free_;
    std::list<int32_t> lru_;  // cached blocks, least recently used first
    std::unordered_map<BlockHash, int32_t> cache_;
    std::unordered_map<SeqId, Seq> seqs_;
    // Sums over sequences for stats(): table slots, filled slots, sequences per length
    // bucket (BlockStats). Kept as seqs_ changes (no walk per call); consistent() checks
    // them against a walk.
    struct Tally {
        int64_t slots = 0, filled = 0;
        std::vector<int64_t> lengths;
        void add(const Seq& s, int block_size, int64_t sign);  // +1 adds, -1 takes out
        std::vector<int64_t> histogram() const;                // lengths without empty top buckets
    };
    Tally tally_;
    void tally(const Seq& s, int64_t sign) { tally_.add(s, block_size_, sign); }
    int64_t queries_ = 0, hits_ = 0, evictions_ = 0;
};

}  // namespace pagoda::kvcache
