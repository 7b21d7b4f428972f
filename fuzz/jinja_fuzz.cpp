// libFuzzer target: arbitrary bytes as a chat template (model files carry templates),
// parsed and rendered with a fixed conversation. Errors are fine; crashes, hangs and
// unbounded memory are not. Invariants checked on every input T:
//   1. a failed parse names the line ("chat template line N");
//   2. rendering is deterministic (twice, the same text or the same error);
//   3. `{% if false %}T{% endif %}` parses exactly when T parses, and then renders "";
//   4. `{% for x in [] %}T{% endfor %}` parses exactly when T parses;
//      (3 and 4 for T without statements of its own, which could close or continue the
//      wrapping block, and not ending in '{', which would join the closing tag);
//   5. text without '{' parses and renders as itself (one trailing newline dropped).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "template/jinja.h"

namespace {

using pagoda::jinja::Template;

void check(bool cond) {
    if (!cond) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Hi"},
                     {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}],
        "tools": null, "documents": null,
        "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true})");
    const std::string src(reinterpret_cast<const char*>(data), size);
    auto t = Template::parse(src);
    if (!t.ok()) {
        check(t.error().message.find("chat template line ") != std::string::npos);
    } else {
        auto a = t->render(ctx);
        auto b = t->render(ctx);
        check(a.ok() == b.ok());
        check(a.ok() ? *a == *b : a.error().message == b.error().message);
    }
    // Inside blocks that never run, the template must parse (or fail) all the same. A
    // trailing newline belongs to the whole template, so it is left out of the wrapped one.
    std::string body = src;
    if (!body.empty() && body.back() == '\n') body.pop_back();
    if (body.find("{%") == std::string::npos && (body.empty() || body.back() != '{')) {
        auto in_if = Template::parse("{% if false %}" + body + "{% endif %}");
        check(in_if.ok() == t.ok());
        if (in_if.ok()) {
            auto r = in_if->render(ctx);
            check(r.ok() && r->empty());
        }
        auto in_for = Template::parse("{% for x in [] %}" + body + "{% endfor %}");
        check(in_for.ok() == t.ok());
    }
    if (src.find('{') == std::string::npos) {
        check(t.ok());
        auto r = t->render(ctx);
        check(r.ok() && *r == body);
    }
    return 0;
}
