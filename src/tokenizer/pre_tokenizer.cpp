#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include <algorithm>
#include <map>

#include "tokenizer/unicode.h"

namespace pagoda::tokenizer {
namespace {

// Pre-tokenizer regexes, as published with each model family's tokenizer.
const char* const kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const char* const kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-"
    "z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct Spec {
    std::vector<std::string> regexes;
    bool ignore_merges = false;
};

const std::map<std::string, Spec>& specs() {
    static const std::map<std::string, Spec> m = [] {
        std::map<std::string, Spec> s;
        s["default"] = {{"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}};
        s["gpt-2"] = {{kGpt2}};
        s["mpt"] = s["gpt-2"];
        s["olmo"] = s["gpt-2"];
        s["jais"] = s["gpt-2"];
        s["llama3"] = {{kLlama3}, true};
        s["llama-bpe"] = s["llama3"];
        s["llama-v3"] = s["llama3"];
        s["dbrx"] = {{kLlama3}};
        s["smaug-bpe"] = {{kLlama3}};
        s["qwen2"] = {{kQwen2}};
        s["stablelm2"] = {{kQwen2}};
        s["deepseek-r1-qwen"] = {{kQwen2}};
        s["deepseek-llm"] = {{"[\r\n]",
                              "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
                              "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"}};
        s["deepseek-coder"] = {{"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}};
        s["falcon"] = {{"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"}};
        for (const char* name : {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}) {
            s[name] = {{"\\p{N}", kGpt2}};
        }
        s["poro-chat"] = {{" ?[^(\\s|.,!?…。，、।۔،)]+"}};
        s["bloom"] = s["poro-chat"];
        s["gpt3-finnish"] = s["poro-chat"];
        s["viking"] = {{" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"}};
        s["tekken"] = {{kTekken}, true};
        return s;
    }();
    return m;
}

}  // namespace

struct PreTokenizer::Regex {
    pcre2_code* code = nullptr;
    ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

std::vector<std::string> PreTokenizer::known_names() {
    std::vector<std::string> names;
    for (const auto& [k, v] : specs()) names.push_back(k);
    return names;
}

Result<PreTokenizer> PreTokenizer::create(const std::string& pre_name) {
    auto it = specs().find(pre_name);
    if (it == specs().end()) {
        std::string known;
        for (const auto& n : known_names()) known += (known.empty() ? "" : ", ") + n;
        return make_error(ErrorCode::kUnsupported, "pre-tokenizer '{}' is not supported (known: {})", pre_name, known);
    }
    PreTokenizer p;
    p.ignore_merges_ = it->second.ignore_merges;
    for (const std::string& re : it->second.regexes) {
        int err = 0;
        PCRE2_SIZE off = 0;
        auto r = std::make_unique<Regex>();
        r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.data()), re.size(),
                                PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
        if (!r->code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            return make_error(ErrorCode::kInternal, "pre-tokenizer '{}': regex error at {}: {}", pre_name, off,
                              reinterpret_cast<const char*>(msg));
        }
        pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
        p.regexes_.push_back(std::move(r));
    }
    return p;
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
    std::vector<std::string_view> pieces;
    if (!text.empty()) pieces.push_back(text);
    for (const auto& re : regexes_) {
        pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
        std::vector<std::string_view> next;
        for (std::string_view piece : pieces) {
            const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
            size_t start = 0;  // end of the last match
            size_t pos = 0;    // where the next search starts
            while (pos <= piece.size()) {
                const int rc = pcre2_match(re->code, subject, piece.size(), pos, 0, md, nullptr);
                if (rc < 0) break;
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
                const size_t ms = ov[0], me = ov[1];
                if (me == ms) {  // empty match: skip one character
                    pos = ms + (ms < piece.size() ? std::min(utf8_lead_len(uint8_t(piece[ms])), piece.size() - ms) : 1);
                    continue;
                }
                if (ms > start) next.push_back(piece.substr(start, ms - start));
                next.push_back(piece.substr(ms, me - ms));
                start = pos = me;
            }
            if (start < piece.size()) next.push_back(piece.substr(start));
        }
        pcre2_match_data_free(md);
        pieces = std::move(next);
    }
    return pieces;
}

}  // namespace pagoda::tokenizer
