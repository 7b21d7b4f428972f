// libFuzzer target: arbitrary bytes as the JSON body of /v1/completions and
// /v1/chat/completions, mapped to prompts and sampling parameters with the bundled model's
// tokenizer (chat: its fallback template). Errors are fine; crashes, hangs and unbounded
// memory are not, and an accepted request must be one the engine can run.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <variant>

#include "fuzz/fuzz_common.h"
#include "server/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static auto loaded = pagoda_fuzz::load(PAGODA_SOURCE_DIR "/models/stories260K.gguf");
    const auto& tok = *loaded->tok;
    auto body = nlohmann::json::parse(data, data + size, nullptr, false);
    if (body.is_discarded()) return 0;
    const pagoda::server::RequestLimits limits{"stories260K.gguf", 512,
                                               int64_t(tok.vocab().tokens.size())};
    for (bool chat : {false, true}) {
        auto r = pagoda::server::parse_generation_request(body, chat, limits, tok);
        if (auto* p = std::get_if<pagoda::server::ParsedRequest>(&r)) {
            if (p->prompts.empty() || !p->sampling.validate(int(limits.vocab_size)).ok())
                std::abort();
            for (const auto& prompt : p->prompts) {
                if (prompt.empty() || int64_t(prompt.size()) >= limits.max_model_len) std::abort();
                for (int32_t id : prompt) {
                    if (id < 0 || id >= limits.vocab_size) std::abort();
                }
            }
        } else if (std::get<pagoda::server::RequestError>(r).message.empty()) {
            std::abort();  // every refusal says why
        }
    }
    return 0;
}
