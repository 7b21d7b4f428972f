// BlockManager: the implementation (the contract is in kvcache/block_manager.h).
#include "kvcache/block_manager.h"

#include <algorithm>
#include <bit>

#include "base/check.h"

namespace pagoda::kvcache {

namespace {
inline uint64_t mix(uint64_t h, uint64_t v) {
    // splitmix64-style avalanche of (h, v): cheap, and collisions need 2^32 blocks.
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}
}  // namespace

BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens, uint64_t salt) {
    uint64_t h = mix(parent, salt ^ 0x5bd1e995ull);
    h = mix(h, tokens.size());
    for (int32_t t : tokens) h = mix(h, uint32_t(t));
    return h;
}

BlockManager::BlockManager(int64_t num_blocks, int block_size, bool enable_prefix_caching)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching), blocks_(size_t(num_blocks)) {
    PAGODA_CHECK(num_blocks > 0 && block_size > 0) << num_blocks << " " << block_size;
    free_.reserve(size_t(num_blocks));
    for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(int32_t(b));
}

int32_t BlockManager::lookup(BlockHash h) const {
    auto it = cache_.find(h);
    return it == cache_.end() ? -1 : it->second;
}

BlockManager::Seq& BlockManager::seq(SeqId id) {
    auto it = seqs_.find(id);
    PAGODA_CHECK(it != seqs_.end()) << "unknown sequence " << id;
    return it->second;
}

const BlockTable& BlockManager::table(SeqId id) const {
    auto it = seqs_.find(id);
    PAGODA_CHECK(it != seqs_.end()) << "unknown sequence " << id;
    return it->second.table;
}

int32_t BlockManager::take_fresh() {
    int32_t b = -1;
    if (!free_.empty()) {
        b = free_.back();
        free_.pop_back();
    } else {
        PAGODA_CHECK(!lru_.empty()) << "block pool exhausted (the caller must check first)";
        b = lru_.front();
        lru_.pop_front();
        Block& blk = blocks_[size_t(b)];
        cache_.erase(blk.hash);
        blk.hashed = false;
        ++evictions_;
    }
    blocks_[size_t(b)].ref = 1;
    return b;
}

void BlockManager::acquire(int32_t b) {
    Block& blk = blocks_[size_t(b)];
    if (blk.ref == 0) {
        PAGODA_CHECK(blk.hashed) << "acquire of a free block " << b;
        lru_.erase(blk.lru_it);
    }
    ++blk.ref;
}

void BlockManager::release(int32_t b) {
    Block& blk = blocks_[size_t(b)];
    PAGODA_CHECK(blk.ref > 0) << "double free of block " << b;
    if (--blk.ref > 0) return;
    if (blk.hashed) {
        blk.lru_it = lru_.insert(lru_.end(), b);
    } else {
        free_.push_back(b);
    }
}

AllocationCheck BlockManager::check_allocate(std::span<const int32_t> tokens, uint64_t salt,
                                             int64_t watermark_blocks) const {
    AllocationCheck c;
    const int64_t need = blocks_for(int64_t(tokens.size()));
    int64_t hits = 0, evictable_hits = 0;
    if (prefix_caching_ && !tokens.empty()) {
        const int64_t max_hit = int64_t(tokens.size() - 1) / block_size_;
        BlockHash h = 0;
        for (int64_t i = 0; i < max_hit; ++i) {
            h = hash_block(h, tokens.subspan(size_t(i * block_size_), size_t(block_size_)), salt);
            const int32_t b = lookup(h);
            if (b < 0) break;
            ++hits;
            if (blocks_[size_t(b)].ref == 0) ++evictable_hits;
        }
    }
    c.cached_tokens = int32_t(hits * block_size_);
    c.new_blocks = need - hits;
    // Hits that sit in the evictable list stop being available once taken.
    c.fits = c.new_blocks + evictable_hits + watermark_blocks <= num_available();
    return c;
}

int32_t BlockManager::allocate(SeqId id, std::span<const int32_t> tokens, uint64_t salt) {
    PAGODA_CHECK(!has(id)) << "sequence " << id << " already has blocks";
    Seq s;
    s.salt = salt;
    s.num_tokens = int64_t(tokens.size());
    const int64_t need = blocks_for(s.num_tokens);
    if (prefix_caching_ && !tokens.empty()) {
        const int64_t max_hit = int64_t(tokens.size() - 1) / block_size_;
        const int64_t full = int64_t(tokens.size()) / block_size_;
        queries_ += full;
        BlockHash h = 0;
        for (int64_t i = 0; i < max_hit; ++i) {
            h = hash_block(h, tokens.subspan(size_t(i * block_size_), size_t(block_size_)), salt);
            const int32_t b = lookup(h);
            if (b < 0) break;
            acquire(b);
            s.table.push_back(b);
            s.hashes.push_back(h);
            ++hits_;
        }
    }
    const int32_t cached = int32_t(s.table.size()) * block_size_;
    while (int64_t(s.table.size()) < need) s.table.push_back(take_fresh());
    tally(s, +1);
    seqs_.emplace(id, std::move(s));
    return cached;
}

namespace {
size_t length_bucket(size_t blocks) { return blocks <= 1 ? 0 : size_t(std::bit_width(blocks) - 1); }
}  // namespace

void BlockManager::Tally::add(const Seq& s, int block_size, int64_t sign) {
    const int64_t n = int64_t(s.table.size()) * block_size;
    slots += sign * n;
    filled += sign * std::min(s.num_tokens, n);
    const size_t bucket = length_bucket(s.table.size());
    if (lengths.size() <= bucket) lengths.resize(bucket + 1, 0);
    lengths[bucket] += sign;
}

std::vector<int64_t> BlockManager::Tally::histogram() const {
    size_t buckets = lengths.size();
    while (buckets > 1 && lengths[buckets - 1] == 0) --buckets;
    std::vector<int64_t> h(lengths.begin(), lengths.begin() + ptrdiff_t(buckets));
    if (h.empty()) h.assign(1, 0);  // one bucket when there is no sequence
    return h;
}

int64_t BlockManager::blocks_to_grow(SeqId id, int64_t num_tokens, int64_t write_from) const {
    const Seq& s = seqs_.at(id);
    int64_t n = std::max<int64_t>(0, blocks_for(num_tokens) - int64_t(s.table.size()));
    for (size_t i = size_t(write_from / block_size_); i < s.table.size(); ++i) {
        if (blocks_[size_t(s.table[i])].ref > 1) ++n;
    }
    return n;
}

void BlockManager::grow(SeqId id, int64_t num_tokens, int64_t write_from,
                        std::vector<BlockCopy>* copies) {
    Seq& s = seq(id);
    tally(s, -1);
    for (size_t i = size_t(write_from / block_size_); i < s.table.size(); ++i) {
        const int32_t old = s.table[i];
        if (blocks_[size_t(old)].ref <= 1) continue;
        const int32_t b = take_fresh();
        if (copies != nullptr) copies->push_back({BlockId{old}, BlockId{b}});
        release(old);
        s.table[i] = b;
    }
    while (int64_t(s.table.size()) < blocks_for(num_tokens)) s.table.push_back(take_fresh());
    s.num_tokens = std::max(s.num_tokens, num_tokens);
    tally(s, +1);
}

void BlockManager::publish(SeqId id, std::span<const int32_t> tokens, int64_t computed) {
    if (!prefix_caching_) return;
    Seq& s = seq(id);
    const int64_t full = std::min<int64_t>(computed, int64_t(tokens.size())) / block_size_;
    for (int64_t i = int64_t(s.hashes.size()); i < full && i < int64_t(s.table.size()); ++i) {
        const BlockHash parent = i == 0 ? 0 : s.hashes[size_t(i - 1)];
        const BlockHash h = hash_block(
            parent, tokens.subspan(size_t(i * block_size_), size_t(block_size_)), s.salt);
        s.hashes.push_back(h);
        Block& blk = blocks_[size_t(s.table[size_t(i)])];
        if (blk.hashed || cache_.count(h) != 0) continue;  // an equal block is already cached
        blk.hashed = true;
        blk.hash = h;
        cache_.emplace(h, s.table[size_t(i)]);
    }
}

void BlockManager::fork(SeqId parent, SeqId child) {
    PAGODA_CHECK(!has(child)) << "sequence " << child << " already has blocks";
    Seq copy = seq(parent);
    for (int32_t b : copy.table) acquire(b);
    tally(copy, +1);
    seqs_.emplace(child, std::move(copy));
}

void BlockManager::free(SeqId id) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) return;
    tally(it->second, -1);
    const BlockTable& t = it->second.table;
    for (auto b = t.rbegin(); b != t.rend(); ++b) release(*b);
    seqs_.erase(it);
}

int64_t BlockManager::reset_prefix_cache() {
    int64_t n = 0;
    for (int32_t b : lru_) {
        blocks_[size_t(b)].hashed = false;
        free_.push_back(b);
        ++n;
    }
    lru_.clear();
    for (auto it = cache_.begin(); it != cache_.end();) {
        if (!blocks_[size_t(it->second)].hashed) {
            it = cache_.erase(it);
        } else {
            ++it;
        }
    }
    return n;
}

BlockStats BlockManager::stats() const {
    BlockStats st;
    st.total = num_total();
    st.free = int64_t(free_.size());
    st.cached = int64_t(lru_.size());
    st.used = st.total - st.free - st.cached;
    st.usage = double(st.used) / double(st.total);
    st.num_seqs = int64_t(seqs_.size());
    st.allocated_slots = tally_.slots;
    st.filled_slots = tally_.filled;
    st.length_histogram = tally_.histogram();
    st.internal_waste =
        st.allocated_slots == 0 ? 0.0 : 1.0 - double(st.filled_slots) / double(st.allocated_slots);
    st.prefix_queries = queries_;
    st.prefix_hits = hits_;
    st.evictions = evictions_;
    return st;
}

bool BlockManager::consistent() const {
    std::vector<int32_t> refs(blocks_.size(), 0);
    Tally walked;
    for (const auto& [id, s] : seqs_) {
        walked.add(s, block_size_, +1);
        for (int32_t b : s.table) {
            if (b < 0 || size_t(b) >= blocks_.size()) return false;
            ++refs[size_t(b)];
        }
    }
    if (walked.slots != tally_.slots || walked.filled != tally_.filled ||
        walked.histogram() != tally_.histogram()) {
        return false;
    }
    std::vector<int> state(blocks_.size(), 0);  // 1 free, 2 cached
    for (int32_t b : free_) {
        if (state[size_t(b)] != 0 || blocks_[size_t(b)].hashed) return false;
        state[size_t(b)] = 1;
    }
    for (int32_t b : lru_) {
        if (state[size_t(b)] != 0 || !blocks_[size_t(b)].hashed) return false;
        state[size_t(b)] = 2;
    }
    for (size_t b = 0; b < blocks_.size(); ++b) {
        if (blocks_[b].ref != refs[b]) return false;
        if ((blocks_[b].ref == 0) != (state[b] != 0)) return false;
        if (blocks_[b].hashed) {
            auto it = cache_.find(blocks_[b].hash);
            if (it == cache_.end() || it->second != int32_t(b)) return false;
        }
    }
    return cache_.size() == size_t(std::count_if(blocks_.begin(), blocks_.end(),
                                                 [](const Block& x) { return x.hashed; }));
}

}  // namespace pagoda::kvcache
