// `pagoda tokenize` and `pagoda detokenize`: work on any GGUF with tokenizer metadata,
// vocab-only files included.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/cli_common.h"
#include "apps/commands.h"
#include "hf/hf_convert.h"
#include "model/model.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::app {
namespace {

struct TokFlags {
    std::string model = default_model_path();
    bool special = false;
    bool no_bos = false;
    bool jsonl = false;
};

// A GGUF file's tokenizer, or a directory's tokenizer.json (Hugging Face).
Result<tokenizer::Tokenizer> open_tokenizer(const std::string& path, model::OpenedGguf& keep) {
    if (std::filesystem::is_directory(path)) {
        static std::vector<uint8_t> image;  // the parsed file's bytes live here
        PAGODA_ASSIGN_OR_RETURN(image, hf::tokenizer_gguf(path));
        PAGODA_ASSIGN_OR_RETURN(formats::GgufFile g, formats::GgufFile::parse(image, path));
        return tokenizer::Tokenizer::from_gguf(g);
    }
    PAGODA_ASSIGN_OR_RETURN(keep, model::open_gguf(path));
    return tokenizer::Tokenizer::from_gguf(*keep.gguf);
}

int run_tokenize(const TokFlags& f) {
    model::OpenedGguf g;
    auto tok = open_tokenizer(f.model, g);
    if (!tok.ok()) return fail(tok.error());
    const tokenizer::EncodeOptions opts{
        .add_special = f.no_bos ? tokenizer::AddSpecial::kNo : tokenizer::AddSpecial::kYes,
        .parse_special = f.special ? tokenizer::ParseSpecial::kYes : tokenizer::ParseSpecial::kNo};
    auto print = [&](const std::string& text) {
        const auto ids = tok->encode(text, opts);
        std::string out;
        for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
        std::printf("%s\n", out.c_str());
    };
    if (!f.jsonl) {
        print(std::string((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>()));
        return 0;
    }
    std::string line;
    for (int no = 1; std::getline(std::cin, line); ++no) {  // one JSON string a line
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_string()) {
            return fail(make_error(ErrorCode::kInvalidArgument,
                                   "stdin line {}: --jsonl wants one JSON string a line", no));
        }
        print(j.get<std::string>());
    }
    return 0;
}

int run_detokenize(const TokFlags& f) {
    model::OpenedGguf g;
    auto tok = open_tokenizer(f.model, g);
    if (!tok.ok()) return fail(tok.error());
    std::vector<int32_t> ids;
    std::string word;
    while (std::cin >> word) {
        for (char& c : word) {
            if (c == ',' || c == '[' || c == ']') c = ' ';
        }
        std::istringstream is(word);
        std::string piece;
        while (is >> piece) {
            char* end = nullptr;
            const long v = std::strtol(piece.c_str(), &end, 10);
            if (*end != '\0' || v < 0 || v >= tok->vocab().size()) {
                return fail(make_error(ErrorCode::kInvalidArgument,
                                       "'{}' is not a token id (allowed: 0..{})", piece,
                                       tok->vocab().size() - 1));
            }
            ids.push_back(int32_t(v));
        }
    }
    const std::string text = tokenizer::sanitize_utf8(
        tok->decode(ids, f.special ? tokenizer::SkipSpecial::kNo : tokenizer::SkipSpecial::kYes));
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
}

}  // namespace

void add_tokenize(CLI::App& app, std::function<int()>& action) {
    auto f = std::make_shared<TokFlags>();
    CLI::App* t = app.add_subcommand(
        "tokenize", "Read stdin byte for byte and print its token ids on one line");
    t->add_option("-m,--model", f->model,
                  "GGUF file (a vocab-only file works), or a directory with tokenizer.json")
        ->capture_default_str()
        ->check(CLI::ExistingPath);
    t->add_flag("--special", f->special, "Match special-token text such as <|im_start|>");
    t->add_flag("--jsonl", f->jsonl,
                "Read one JSON string a line and print each one's ids on a line of its own");
    t->add_flag("--no-bos", f->no_bos, "Add no special tokens (no BOS, no EOS)");
    t->callback([f, &action] { action = [f] { return run_tokenize(*f); }; });

    auto d = std::make_shared<TokFlags>();
    CLI::App* dt = app.add_subcommand("detokenize", "Read token ids from stdin and print the text");
    dt->add_option("-m,--model", d->model, "GGUF file (a vocab-only file works)")
        ->capture_default_str()
        ->check(CLI::ExistingFile);
    dt->add_flag("--special", d->special, "Print control tokens' text too");
    dt->callback([d, &action] { action = [d] { return run_detokenize(*d); }; });
}

}  // namespace pagoda::app
