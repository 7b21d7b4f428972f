// libFuzzer target: arbitrary bytes as a chat template (model files carry templates),
// parsed and rendered with a fixed conversation. Errors are fine; crashes, hangs and
// unbounded memory are not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/jinja.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const nlohmann::json ctx = nlohmann::json::parse(R"({
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Hi"},
                     {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}],
        "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true})");
    auto t = pagoda::server::jinja::Template::parse(
        std::string(reinterpret_cast<const char*>(data), size));
    if (t.ok()) (void)t->render(ctx);
    return 0;
}
