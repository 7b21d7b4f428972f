// SseSplitter: the implementation (the contract is in router/sse.h).
#include "router/sse.h"

namespace pagoda::router {

std::optional<std::string> SseSplitter::next() {
    for (;;) {
        // An event ends at an empty line.
        std::string data;
        bool has_data = false;
        size_t p = pos_;
        for (;;) {
            const size_t nl = buf_.find('\n', p);
            if (nl == std::string::npos) {
                if (pos_ > (1u << 16)) {
                    buf_.erase(0, pos_);
                    pos_ = 0;
                }
                return std::nullopt;
            }
            std::string_view line(buf_.data() + p, nl - p);
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            p = nl + 1;
            if (line.empty()) break;
            if (line.starts_with("data:")) {
                line.remove_prefix(5);
                if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
                if (has_data) data += '\n';
                data.append(line);
                has_data = true;
            }
        }
        pos_ = p;
        if (has_data) return data;
    }
}

}  // namespace pagoda::router
