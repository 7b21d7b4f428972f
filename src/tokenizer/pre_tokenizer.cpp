// PreTokenizer: the implementation (the contract is in tokenizer/pre_tokenizer.h).
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
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?"
    "=[\\p{L}])([^a-"
    "z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

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
        s["deepseek-llm"] = {
            {"[\r\n]",
             "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
             "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
             "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"
             "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"
             "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
             "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}"
             "\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}"
             "\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}"
             "\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}"
             "\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}"
             "\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}"
             "\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}"
             "\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
             "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}"
             "\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}"
             "\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}"
             "\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}"
             "\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
             // NOLINTNEXTLINE(bugprone-suspicious-missing-comma): one regex, split by the formatter
             "\\s?[!-/"
             ":-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
             "\\s+$", "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}+"}};
        s["deepseek-coder"] = {{"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
                                "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
                                "\\p{N}"}};
        s["falcon"] = {{"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"}};
        for (const char* name :
             {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}) {
            s[name] = {{"\\p{N}", kGpt2}};
        }
        s["poro-chat"] = {
            {" ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"}};
        s["bloom"] = s["poro-chat"];
        s["gpt3-finnish"] = s["poro-chat"];
        s["viking"] = {
            {" ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+",
             "\\p{N}"}};
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
        return make_error(ErrorCode::kUnsupported,
                          "pre-tokenizer '{}' is not supported (known: {})", pre_name, known);
    }
    PreTokenizer p;
    p.ignore_merges_ = it->second.ignore_merges;
    for (const std::string& re : it->second.regexes) {
        int err = 0;
        PCRE2_SIZE off = 0;
        auto r = std::make_unique<Regex>();
        r->code =
            pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.data()), re.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
        if (!r->code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            return make_error(ErrorCode::kInternal, "pre-tokenizer '{}': regex error at {}: {}",
                              pre_name, off, reinterpret_cast<const char*>(msg));
        }
        pcre2_jit_compile(
            r->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
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
                    pos = ms + (ms < piece.size()
                                    ? std::min(utf8_lead_len(uint8_t(piece[ms])), piece.size() - ms)
                                    : 1);
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
