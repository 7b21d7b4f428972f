// `pagoda model info` and `pagoda model make-test`.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>

#include "apps/cli_common.h"
#include "apps/commands.h"
#include "hf/hf_convert.h"
#include "kernels/types.h"
#include "model/model.h"
#include "model/test_model.h"

namespace pagoda::app {
namespace {

int run_info(const std::string& path) {
    model::LoadOptions opts;
    opts.pack = model::Weights::Pack::kNo;
    auto m = model::Model::load(path, opts);
    if (!m.ok()) return fail(m.error());
    const model::Model& md = **m;
    const auto& c = md.config();
    const auto& g = md.gguf();
    std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // type -> (tensors, bytes)
    uint64_t params = 0, bytes = 0;
    for (const auto& t : g.tensors()) {
        auto& e = by_type[formats::tensor_type_name(t.type)];
        ++e.first;
        e.second += t.num_bytes;
        params += t.num_elems;
        bytes += t.num_bytes;
    }
    const auto& v = md.tokenizer().vocab();
    std::printf("file:            %s (GGUF v%u, %zu tensors, %zu metadata keys)\n", path.c_str(),
                g.version(), g.tensors().size(), g.metadata().size());
    std::printf("name:            %s\n", c.name.c_str());
    std::printf("architecture:    %s (%s)\n", c.arch.c_str(),
                md.architecture().description.c_str());
    std::printf("layers:          %d\n", c.num_layers);
    std::printf("dim:             %d (heads %d, kv heads %d, head dim %d, ffn %d)\n", c.dim,
                c.num_heads, c.num_kv_heads, c.head_dim, c.ffn_dim);
    std::printf("vocab:           %d\n", c.vocab_size);
    std::printf("context length:  %d\n", c.context_length);
    std::printf("rope:            %s, base %g, dims %d, scaling %s%s\n",
                c.rope.style == kernels::RopeStyle::kNeox ? "neox" : "normal",
                double(c.rope.freq_base), c.rope.rot_dim, c.rope_scaling.c_str(),
                md.weights().rope_freqs.empty() ? "" : " (rope_freqs)");
    if (c.moe()) {
        std::printf("experts:         %d, %d per token, width %d (%s the top-k weights)\n",
                    c.num_experts, c.num_experts_used, c.expert_ffn_dim,
                    c.moe_norm_topk ? "renormalising" : "not renormalising");
    }
    std::printf("parameters:      %.3f M (%s embeddings)", double(params) / 1e6,
                md.weights().tied_embeddings ? "tied" : "separate");
    if (c.moe()) std::printf(", %.3f M active per token", double(c.active_params()) / 1e6);
    std::printf("\n");
    std::printf("tensor bytes:    %.2f MB\n", double(bytes) / 1e6);
    for (const auto& [type, e] : by_type) {
        std::printf("  %-6s         %llu tensors, %.2f MB\n", type.c_str(),
                    (unsigned long long)e.first, double(e.second) / 1e6);
    }
    std::printf("tokenizer:       %s, pre-tokenizer %s, %d tokens\n", v.model_name.c_str(),
                v.pre.c_str(), v.size());
    auto tok_name = [&](int32_t id) {
        return id >= 0 ? v.tokens[size_t(id)] + " (" + std::to_string(id) + ")"
                       : std::string("none");
    };
    std::printf("special tokens:  bos %s, eos %s, unk %s, pad %s, eot %s; add_bos %s, add_eos %s\n",
                tok_name(v.bos).c_str(), tok_name(v.eos).c_str(), tok_name(v.unk).c_str(),
                tok_name(v.pad).c_str(), tok_name(v.eot).c_str(), v.add_bos ? "yes" : "no",
                v.add_eos ? "yes" : "no");
    std::printf("chat template:   %s\n",
                v.chat_template.empty()
                    ? "absent"
                    : ("present (" + std::to_string(v.chat_template.size()) + " bytes)").c_str());
    const double per_tok = 2.0 * c.num_layers * c.num_kv_heads * c.head_dim;
    std::printf("KV bytes/token:  %.0f (f32), %.0f (f16/bf16)", per_tok * 4, per_tok * 2);
    if (c.head_dim % kernels::kKvQ8Block == 0) {
        std::printf(", %.0f (q8_0), %.0f (q4_0)",
                    per_tok / kernels::kKvQ8Block * kernels::kKvQ8BlockBytes,
                    per_tok / kernels::kKvQ8Block * kernels::kKvQ4BlockBytes);
    }
    std::printf("\n");
    return 0;
}

struct MakeTestFlags {
    std::string shape, dtype = "f32", vocab = default_model_path(), out;
    uint64_t seed = 1;
    int context = 0;
};

int run_make_test(const MakeTestFlags& f) {
    auto shape = model::find_shape(f.shape);
    if (!shape.ok()) return fail(shape.error());
    if (f.context > 0) shape->context_length = f.context;
    auto type = formats::parse_tensor_type(f.dtype);
    if (!type) {
        return fail(make_error(
            ErrorCode::kInvalidArgument,
            "--dtype '{}' is not supported (allowed: f32, f16, bf16, q8_0, q4_0)", f.dtype));
    }
    model::TestModelOptions o{.shape = *shape,
                              .dtype = *type,
                              .seed = f.seed,
                              .vocab_path = f.vocab,
                              .output_path = f.out};
    auto st = model::write_test_model(
        o, [](size_t done, size_t total) { progress_bar("writing", done, total); });
    if (!st.ok()) return fail(st.error());
    std::fprintf(stderr, "wrote %s (shape %s, %s, seed %llu)\n", f.out.c_str(), f.shape.c_str(),
                 f.dtype.c_str(), (unsigned long long)f.seed);
    return 0;
}

struct ConvertFlags {
    std::string dir, out;
    hf::ConvertOptions o;
};

int run_convert(const ConvertFlags& f) {
    if (!hf::is_hf_dir(f.dir)) {
        return fail(make_error(ErrorCode::kInvalidArgument,
                               "{} is not a Hugging Face model directory (no config.json)", f.dir));
    }
    auto st = hf::convert(f.dir, f.out, f.o, [](size_t done, size_t total) {
        progress_bar("converting", done, total);
    });
    if (!st.ok()) return fail(st.error());
    std::fprintf(stderr, "wrote %s (%s, matrices %s)\n", f.out.c_str(), f.dir.c_str(),
                 f.o.dtype.c_str());
    return 0;
}

}  // namespace

void add_model(CLI::App& app, std::function<int()>& action) {
    CLI::App* m = app.add_subcommand(
        "model", "Inspect models, render chat prompts, write random-weight test models");
    m->require_subcommand(1);
    auto path = std::make_shared<std::string>();
    CLI::App* info = m->add_subcommand(
        "info", "Architecture, sizes, tensor types, tokenizer and KV bytes per token");
    info->add_option("MODEL", *path, "GGUF model file or Hugging Face model directory")
        ->required()
        ->check(CLI::ExistingPath);
    info->callback([path, &action] { action = [path] { return run_info(*path); }; });

    auto f = std::make_shared<MakeTestFlags>();
    std::string shapes;
    for (const auto& s : model::known_shapes()) shapes += (shapes.empty() ? "" : ", ") + s.name;
    CLI::App* mk = m->add_subcommand(
        "make-test", "Write a random-weight model with a real model's shape (speed work only)");
    mk->add_option("--shape", f->shape, "One of: " + shapes)->required();
    mk->add_option("--dtype", f->dtype, "Matrix type: f32, f16, bf16, q8_0, q4_0")
        ->capture_default_str();
    mk->add_option("--vocab", f->vocab, "GGUF file whose tokenizer is copied")
        ->capture_default_str()
        ->check(CLI::ExistingFile);
    mk->add_option("--seed", f->seed, "Random seed")->capture_default_str();
    mk->add_option("--context", f->context,
                   "Context length written to the file (default: the shape's), e.g. 16384 to "
                   "measure long contexts on a 2048-context shape")
        ->check(CLI::Range(1, 1 << 20));
    mk->add_option("-o,--output", f->out, "Output .gguf path")->required();
    mk->callback([f, &action] { action = [f] { return run_make_test(*f); }; });

    auto cv = std::make_shared<ConvertFlags>();
    CLI::App* conv =
        m->add_subcommand("convert",
                          "Write a Hugging Face model directory (config.json, *.safetensors, "
                          "tokenizer.json) as one GGUF file that llama.cpp loads too");
    conv->add_option("DIR", cv->dir, "The model directory")
        ->required()
        ->check(CLI::ExistingDirectory);
    conv->add_option("-o,--output", cv->out, "Output .gguf path")->required();
    conv->add_option("--dtype", cv->o.dtype,
                     "Matrix type: auto (the checkpoint's F32/F16/BF16), f32, f16, bf16, q8_0, "
                     "q4_0; norms, biases and routers stay f32")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "f32", "f16", "bf16", "q8_0", "q4_0"}));
    conv->add_option("--tokenizer", cv->o.tokenizer,
                     "Take the tokenizer from this Hugging Face directory or GGUF file instead")
        ->check(CLI::ExistingPath);
    conv->callback([cv, &action] { action = [cv] { return run_convert(*cv); }; });

    struct PadFlags {
        std::string in, out;
        int dim = 256, ffn = 768, head_dim = 0;
    };
    auto pf = std::make_shared<PadFlags>();
    CLI::App* pad = m->add_subcommand(
        "pad",
        "Write an F32 llama model zero-padded to a wider shape that computes the same "
        "function (makes K-quantizable test models from the bundled one)");
    pad->add_option("MODEL", pf->in, "F32 llama GGUF file")->required()->check(CLI::ExistingFile);
    pad->add_option("--dim", pf->dim, "Model width (a multiple of the head dim)")
        ->capture_default_str();
    pad->add_option("--ffn", pf->ffn, "Feed-forward width")->capture_default_str();
    pad->add_option("--head-dim", pf->head_dim,
                    "Head size, padded with zero dimensions (default: the model's), e.g. 64 "
                    "to run the trained model through the kernels' paths for real head sizes")
        ->check(CLI::Range(0, 512));
    pad->add_option("-o,--output", pf->out, "Output .gguf path")->required();
    pad->callback([pf, &action] {
        action = [pf] {
            auto st = model::write_padded_model(pf->in, pf->dim, pf->ffn, pf->out, pf->head_dim);
            if (!st.ok()) return fail(st.error());
            std::fprintf(
                stderr, "wrote %s (dim %d, ffn %d%s)\n", pf->out.c_str(), pf->dim, pf->ffn,
                pf->head_dim > 0 ? (", head dim " + std::to_string(pf->head_dim)).c_str() : "");
            return 0;
        };
    });
    add_render_chat(m, action);
}

}  // namespace pagoda::app
