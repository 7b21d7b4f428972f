// StopMatcher: the implementation (the contract is in engine/stop_matcher.h).
#include "engine/stop_matcher.h"

#include <algorithm>

namespace pagoda::engine {

StopMatcher::Result StopMatcher::push(std::string_view text, Matching matching) {
    held_ += text;
    if (matching == Matching::kActive) {
        size_t best = std::string::npos;
        const std::string* which = nullptr;
        for (const auto& s : stops_) {
            const size_t p = held_.find(s);
            if (p != std::string::npos && p < best) {
                best = p;
                which = &s;
            }
        }
        if (which != nullptr) {
            Result r{held_.substr(0, best), which};
            held_.clear();
            return r;
        }
    }
    // Hold back the longest tail that is a proper prefix of some stop string.
    size_t keep = 0;
    for (const auto& s : stops_) {
        for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k) {
            if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
                keep = k;
                break;
            }
        }
    }
    Result r{held_.substr(0, held_.size() - keep), nullptr};
    held_.erase(0, held_.size() - keep);
    return r;
}

std::string StopMatcher::flush() {
    std::string out = std::move(held_);
    held_.clear();
    return out;
}

}  // namespace pagoda::engine
