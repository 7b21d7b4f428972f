// libFuzzer target: arbitrary bytes as a request body. The one-pass parser
// (server/json_body.h) either leaves the body to nlohmann or gives exactly nlohmann's value;
// it never accepts what nlohmann refuses.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/json_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto fast = pagoda::server::parse_json_fast(text);
    if (!fast) return 0;
    const auto ref = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
    if (ref.is_discarded() || fast->dump() != ref.dump()) std::abort();
    return 0;
}
