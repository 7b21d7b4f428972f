#pragma once
// ForwardBatch: the narrow contract between the engine and forward(): flat token ids and
// positions, one span per sequence, block tables, and which rows need logits.
// Built by the engine thread per step; plain data.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace pagoda::model {

struct SeqSpan {
    int32_t token_start = 0;  // first row of this sequence in token_ids
    int32_t num_tokens = 0;   // rows this step (a prefill chunk, or 1 for a decode)
    int32_t pos_start = 0;    // position of the first row = tokens already in the cache
    std::span<const int32_t> block_table;  // covers positions 0 .. pos_start + num_tokens - 1
};

struct ForwardBatch {
    std::vector<int32_t> token_ids;  // [num_tokens]
    std::vector<SeqSpan> seqs;
    std::vector<int32_t> logits_rows;  // rows of token_ids whose logits are returned, in order
    // Parallel to logits_rows when not empty: 1 where the engine only needs the row's top
    // token (greedy, nothing reshapes the logits). A backend that samples on its device (the
    // simulated GPU, as a GPU server does) returns those tokens instead of their logits.
    std::vector<uint8_t> greedy_rows;
    // Asked before each layer when set: true abandons the pass (forward() then returns
    // kConflict, the K/V it wrote are partial). For passes nobody waits for (warm passes).
    std::function<bool()> interrupt;

    int32_t num_tokens() const { return int32_t(token_ids.size()); }
};

}  // namespace pagoda::model
