// libFuzzer target: the grammars a request can send and the tool-call stream that reads
// outputs. The first byte picks the input kind: GBNF text (parsed; when it parses, the
// rest of the input is fed to a matcher and masks are computed over a small vocabulary),
// a regex or a JSON schema (their converters must produce GBNF that parses: a conversion
// that does not is a bug), or model output fed in pieces to ToolCallStream. Errors are
// fine; crashes, hangs and unbounded memory are not.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "server/structured.h"

namespace {

using namespace pagoda;

const grammar::TokenTrie& small_trie() {
    static const grammar::TokenTrie t(std::vector<std::string>{
        "",  "a",  "b",    "ab",   "{",    "}",    "\"",       ":",  ",",   " ",  "[", "]", "0",
        "1", "12", "true", "null", "\xC3", "\xA9", "\xC3\xA9", "\n", "x\"", "\\", "-", ".", "e"});
    return t;
}

void run_grammar(const std::string& text, std::string_view feed) {
    auto g = grammar::parse_gbnf(text);
    if (!g.ok()) {
        if (g.error().message.empty()) std::abort();
        return;
    }
    grammar::Matcher m(*g);
    grammar::MaskCache cache(8);
    std::vector<uint8_t> mask;
    for (size_t i = 0; i < feed.size() && i < 64; i += 3) {
        m.fill_mask(small_trie(), mask, &cache);
        if (mask.size() != small_trie().vocab_size()) std::abort();
        m.accept(feed.substr(i, 3));
    }
}

void run_tools(std::string_view out, uint8_t how) {
    server::ToolRequest t;
    t.choice = server::ToolChoice(how % 4);
    t.parser = server::ToolParser((how / 4) % 3);
    t.named = "f";
    server::ToolCallStream s(t);
    std::string content;
    const size_t step = 1 + how % 7;
    for (size_t i = 0; i < out.size(); i += step) content += s.push(out.substr(i, step)).content;
    content += s.finish().content;
    if (content != s.content()) std::abort();  // streamed content is the answer's content
    if (t.choice == server::ToolChoice::kNone && content != out) std::abort();
    (void)s.calls().dump(-1, ' ', false,
                         nlohmann::json::error_handler_t::replace);  // as the server writes it
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    const std::string_view in(reinterpret_cast<const char*>(data) + 2, size - 2);
    switch (data[0] % 4) {
        case 0: {
            const size_t cut = in.find('\x01');
            run_grammar(std::string(in.substr(0, cut)),
                        cut == std::string_view::npos ? "" : in.substr(cut + 1));
            break;
        }
        case 1: {
            auto g = grammar::regex_to_gbnf(in);
            if (g.ok() && !grammar::parse_gbnf(*g).ok()) std::abort();
            if (g.ok()) run_grammar(*g, in);
            break;
        }
        case 2: {
            auto j = nlohmann::ordered_json::parse(in, nullptr, false);
            if (j.is_discarded()) return 0;
            auto g = grammar::json_schema_to_gbnf(j);
            if (g.ok() && !grammar::parse_gbnf(*g).ok()) std::abort();
            break;
        }
        default: run_tools(in, data[1]); break;
    }
    return 0;
}
