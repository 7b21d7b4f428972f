#include "kvcache/block_manager.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <numeric>
#include <set>

namespace pagoda::kvcache {
namespace {

constexpr SeqId S(int64_t v) { return SeqId{v}; }

// Blocks held by the given sequences, counted from their block tables: independent of the
// manager's own free list and LRU, whose sizes stats() reports.
template <typename Ids>
int64_t distinct_blocks_held(const BlockManager& bm, const Ids& ids) {
    std::set<int32_t> blocks;
    for (SeqId id : ids) {
        if (bm.has(id)) blocks.insert(bm.table(id).begin(), bm.table(id).end());
    }
    return int64_t(blocks.size());
}

std::vector<int32_t> iota_tokens(int n, int start = 100) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    std::iota(t.begin(), t.end(), start);
    return t;
}

TEST(BlockManager, AllocateGrowFree) {
    BlockManager bm(8, 4, true);
    auto toks = iota_tokens(6);
    auto c = bm.check_allocate(toks, 0, 0);
    EXPECT_TRUE(c.fits);
    EXPECT_EQ(c.new_blocks, 2);
    EXPECT_EQ(c.cached_tokens, 0);
    EXPECT_EQ(bm.stats().free, 8);  // check changed nothing
    EXPECT_EQ(bm.allocate(S(1), toks, 0), 0);
    EXPECT_EQ(bm.table(S(1)).size(), 2u);
    EXPECT_EQ(bm.blocks_to_grow(S(1), 8, 6), 0);
    EXPECT_EQ(bm.blocks_to_grow(S(1), 9, 8), 1);
    bm.grow(S(1), 9, 8, nullptr);
    EXPECT_EQ(bm.table(S(1)).size(), 3u);
    auto st = bm.stats();
    EXPECT_EQ(st.used, 3);
    EXPECT_EQ(st.allocated_slots, 12);
    EXPECT_EQ(st.filled_slots, 9);
    EXPECT_NEAR(st.internal_waste, 0.25, 1e-9);
    bm.free(S(1));
    EXPECT_EQ(bm.stats().free, 8);
    EXPECT_TRUE(bm.consistent());
}

TEST(BlockManager, WatermarkAndExhaustion) {
    BlockManager bm(4, 4, false);
    auto toks = iota_tokens(13);  // 4 blocks
    EXPECT_TRUE(bm.check_allocate(toks, 0, 0).fits);
    EXPECT_FALSE(bm.check_allocate(toks, 0, 1).fits);
    auto big = iota_tokens(17);
    EXPECT_FALSE(bm.check_allocate(big, 0, 0).fits);
}

TEST(BlockManager, PrefixHitsSkipComputedBlocks) {
    BlockManager bm(16, 4, true);
    auto a = iota_tokens(14);  // 3 full blocks + 2
    bm.allocate(S(1), a, 0);
    bm.publish(S(1), a, 14);
    auto b = a;
    b.resize(12);
    b.push_back(7);
    b.push_back(8);
    b.push_back(9);  // shares 3 full blocks
    auto c = bm.check_allocate(b, 0, 0);
    EXPECT_EQ(c.cached_tokens, 12);
    EXPECT_EQ(c.new_blocks, 1);
    EXPECT_EQ(bm.allocate(S(2), b, 0), 12);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(bm.table(S(1))[size_t(i)], bm.table(S(2))[size_t(i)]);
    EXPECT_EQ(bm.ref_count(block_at(bm.table(S(1)), 0)), 2);
    // A different salt never shares.
    EXPECT_EQ(bm.check_allocate(b, 42, 0).cached_tokens, 0);
    auto st = bm.stats();
    EXPECT_EQ(st.prefix_queries, 6);  // 3 for the first prompt (all misses), 3 for the second
    EXPECT_EQ(st.prefix_hits, 3);
    // Freed blocks stay cached and are found again.
    bm.free(S(1));
    bm.free(S(2));
    st = bm.stats();
    EXPECT_EQ(st.cached, 3);
    EXPECT_EQ(st.used, 0);
    EXPECT_EQ(bm.allocate(S(3), b, 0), 12);
    EXPECT_EQ(bm.stats().cached, 0);
    EXPECT_TRUE(bm.consistent());
}

TEST(BlockManager, WholePromptCachedStillComputesLastToken) {
    BlockManager bm(16, 4, true);
    auto a = iota_tokens(8);
    bm.allocate(S(1), a, 0);
    bm.publish(S(1), a, 8);
    EXPECT_EQ(bm.check_allocate(a, 0, 0).cached_tokens, 4);
}

TEST(BlockManager, LruEviction) {
    BlockManager bm(4, 4, true);
    auto a = iota_tokens(8, 0), b = iota_tokens(8, 50);
    bm.allocate(S(1), a, 0);
    bm.publish(S(1), a, 8);
    bm.free(S(1));
    bm.allocate(S(2), b, 0);
    bm.publish(S(2), b, 8);
    bm.free(S(2));
    EXPECT_EQ(bm.stats().cached, 4);
    // a's blocks were freed first: they go first.
    auto c = iota_tokens(8, 900);
    bm.allocate(S(3), c, 0);
    EXPECT_EQ(bm.stats().evictions, 2);
    auto b2 = b;
    b2.push_back(1);
    EXPECT_EQ(bm.check_allocate(b2, 0, 0).cached_tokens, 8);
    auto a2 = a;
    a2.push_back(1);
    EXPECT_EQ(bm.check_allocate(a2, 0, 0).cached_tokens, 0);
    EXPECT_TRUE(bm.consistent());
}

TEST(BlockManager, ForkCopyOnWrite) {
    BlockManager bm(8, 4, true);
    auto a = iota_tokens(6);
    bm.allocate(S(1), a, 0);
    bm.fork(S(1), S(2));
    EXPECT_EQ(bm.ref_count(block_at(bm.table(S(1)), 1)), 2);
    // Child writes slot 6 (inside the shared second block): it gets its own copy.
    EXPECT_EQ(bm.blocks_to_grow(S(2), 7, 6), 1);
    std::vector<BlockCopy> copies;
    bm.grow(S(2), 7, 6, &copies);
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(copies[0].src, block_at(bm.table(S(1)), 1));
    EXPECT_EQ(copies[0].dst, block_at(bm.table(S(2)), 1));
    EXPECT_EQ(bm.table(S(1))[0], bm.table(S(2))[0]);  // the untouched first block stays shared
    EXPECT_EQ(bm.ref_count(block_at(bm.table(S(1)), 1)), 1);
    // Parent now owns its block alone: no copy.
    copies.clear();
    bm.grow(S(1), 7, 6, &copies);
    EXPECT_TRUE(copies.empty());
    bm.free(S(1));
    bm.free(S(2));
    EXPECT_EQ(bm.stats().free, 8);
    EXPECT_TRUE(bm.consistent());
}

TEST(BlockManager, HistogramBuckets) {
    BlockManager bm(64, 4, false);
    bm.allocate(S(1), iota_tokens(4), 0);   // 1 block -> bucket 0
    bm.allocate(S(2), iota_tokens(12), 0);  // 3 blocks -> bucket 1
    bm.allocate(S(3), iota_tokens(20), 0);  // 5 blocks -> bucket 2
    auto st = bm.stats();
    ASSERT_EQ(st.length_histogram.size(), 3u);
    EXPECT_EQ(st.length_histogram[0], 1);
    EXPECT_EQ(st.length_histogram[1], 1);
    EXPECT_EQ(st.length_histogram[2], 1);
}

// Random operation sequences: blocks are conserved and the internal state stays consistent.
RC_GTEST_PROP(BlockManagerProperty, BlocksConserved, ()) {
    const int block_size = *rc::gen::element(1, 2, 4, 8);
    const int64_t total = *rc::gen::inRange(1, 40);
    const bool caching = *rc::gen::arbitrary<bool>();
    BlockManager bm(total, block_size, caching);
    std::map<SeqId, std::vector<int32_t>> live;  // tokens per sequence
    std::map<SeqId, int64_t> computed;
    SeqId next{1};
    const int ops = *rc::gen::inRange(1, 200);
    for (int op = 0; op < ops; ++op) {
        const int kind = *rc::gen::inRange(0, 5);
        if (kind == 0 || live.empty()) {  // admit
            const int n = *rc::gen::inRange(1, 30);
            // Few distinct token values so that prefixes repeat.
            auto toks =
                *rc::gen::container<std::vector<int32_t>>(size_t(n), rc::gen::inRange(0, 2));
            const auto c = bm.check_allocate(toks, 0, 0);
            if (c.fits) {
                const int32_t cached = bm.allocate(next, toks, 0);
                RC_ASSERT(cached == c.cached_tokens);
                live[next] = toks;
                computed[next] = cached;
                ++next;
            }
        } else {
            auto it = live.begin();
            std::advance(it, *rc::gen::inRange<size_t>(0, live.size()));
            const SeqId id = it->first;
            if (kind == 1) {  // compute everything, publish
                computed[id] = int64_t(it->second.size());
                bm.publish(id, it->second, computed[id]);
            } else if (kind == 2) {  // grow by a token
                const int64_t n = int64_t(it->second.size()) + 1;
                if (bm.can_grow(id, n, n - 1)) {
                    bm.grow(id, n, n - 1, nullptr);
                    it->second.push_back(*rc::gen::inRange(0, 2));
                }
            } else if (kind == 3) {  // fork
                bm.fork(id, next);
                live[next] = it->second;
                computed[next] = computed[id];
                ++next;
            } else {
                bm.free(id);
                live.erase(it);
            }
        }
        const auto st = bm.stats();
        std::vector<SeqId> ids;
        for (const auto& [id, t] : live) ids.push_back(id);
        // Every block is in exactly one state: held by a live sequence (counted from the
        // tables), free, or cached. A leaked or doubly listed block breaks the sum.
        RC_ASSERT(st.used == distinct_blocks_held(bm, ids));
        RC_ASSERT(st.free + distinct_blocks_held(bm, ids) + st.cached == total);
        RC_ASSERT(st.free >= 0 && st.cached >= 0);
        RC_ASSERT(bm.consistent());
    }
    for (const auto& [id, t] : live) bm.free(id);
    const auto st = bm.stats();
    RC_ASSERT(st.used == 0);
    RC_ASSERT(st.free + st.cached == total);
    RC_ASSERT(bm.num_available() == total);
}

}  // namespace
}  // namespace pagoda::kvcache
