#!/usr/bin/env python3
"""Writes a random-weight Hugging Face model directory, as transformers saves one:
config.json, safetensors (one file, or shards with model.safetensors.index.json),
tokenizer.json (byte-level BPE over a small vocabulary), tokenizer_config.json with a chat
template, generation_config.json.

  make_hf_dir.py ARCH OUT [--seed N] [--dtype f32|f16|bf16] [--shards N] [--tied]

ARCH: llama, mistral, qwen2, qwen3, mixtral, qwen3moe, olmoe, granitemoe. Weights are
unit-gain (std 1/sqrt(fan-in)) so every layer matters to the output. Needs numpy."""
import argparse, json, os, struct
import numpy as np

HF = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
      "qwen3": "Qwen3ForCausalLM", "mixtral": "MixtralForCausalLM",
      "qwen3moe": "Qwen3MoeForCausalLM", "olmoe": "OlmoeForCausalLM",
      "granitemoe": "GraniteMoeForCausalLM"}


def byte_chars():
    """GPT-2's printable stand-in for each byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tokenizer(vocab_size):
    bc = byte_chars()
    vocab = {bc[b]: i for i, b in enumerate(range(256))}
    merges = []
    words = ["the", "and", "once", "upon", "time", "there", "was", "little", "girl", "play"]
    for w in words:
        w = bc[ord(" ")] + w
        cur = w[0]
        for ch in w[1:]:
            nxt = cur + ch
            if nxt not in vocab and len(vocab) < vocab_size - 3:
                merges.append(f"{cur} {ch}")
                vocab[nxt] = len(vocab)
            cur = nxt
    added = []
    for s in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]:
        added.append({"id": len(vocab), "content": s, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
        vocab[s] = len(vocab)
    regex = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
             "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": {"type": "NFC"},
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
               {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
           "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                              "use_regex": False},
           "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                       "use_regex": False},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                     "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                     "ignore_merges": False, "vocab": {k: v for k, v in vocab.items() if v < 256 + len(merges)},
                     "merges": merges}}
    return tok, len(vocab)


def config(arch, a):
    c = {"architectures": [HF[arch]], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96,
         "vocab_size": 320, "max_position_embeddings": 1024, "rms_norm_eps": 1e-6,
         "rope_theta": 10000.0, "tie_word_embeddings": a.tied, "torch_dtype": a.dtype,
         "model_type": arch, "bos_token_id": None}
    if arch == "qwen3" or arch == "qwen3moe":
        c["head_dim"] = 32  # wider than hidden / heads, as Qwen3's
    if arch == "mixtral" or arch == "granitemoe":
        c.update(num_local_experts=8, num_experts_per_tok=2, intermediate_size=32)
    if arch == "qwen3moe":
        c.update(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True)
    if arch == "olmoe":
        c.update(num_experts=8, num_experts_per_tok=2, intermediate_size=32, norm_topk_prob=False,
                 num_key_value_heads=4)
    if arch == "granitemoe":
        c.update(embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.03125,
                 logits_scaling=6.0)
    return c


def weights(arch, c, rng):
    D, L, V = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    H, KV = c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim", D // H)
    m = lambda r, k: rng.uniform(-1, 1, (r, k)) * np.sqrt(3.0 / k)
    n = lambda k: 1.0 + 0.1 * rng.uniform(-1, 1, (k,))
    w = {"model.embed_tokens.weight": rng.uniform(-1, 1, (V, D)) * np.sqrt(3.0) /
         (12.0 if arch == "granitemoe" else 1.0), "model.norm.weight": n(D)}
    if not c["tie_word_embeddings"]:
        w["lm_head.weight"] = m(V, D)
    for l in range(L):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = n(D)
        w[p + "post_attention_layernorm.weight"] = n(D)
        w[p + "self_attn.q_proj.weight"] = m(H * hd, D)
        w[p + "self_attn.k_proj.weight"] = m(KV * hd, D)
        w[p + "self_attn.v_proj.weight"] = m(KV * hd, D)
        w[p + "self_attn.o_proj.weight"] = m(D, H * hd)
        if arch == "qwen2":
            for x, r in (("q", H * hd), ("k", KV * hd), ("v", KV * hd)):
                w[p + f"self_attn.{x}_proj.bias"] = 0.1 * rng.uniform(-1, 1, (r,))
        if arch in ("qwen3", "qwen3moe"):
            w[p + "self_attn.q_norm.weight"] = n(hd)
            w[p + "self_attn.k_norm.weight"] = n(hd)
        if arch == "olmoe":
            w[p + "self_attn.q_norm.weight"] = n(H * hd)
            w[p + "self_attn.k_norm.weight"] = n(KV * hd)
        E = c.get("num_local_experts", c.get("num_experts", 0))
        if E == 0:
            F = c["intermediate_size"]
            w[p + "mlp.gate_proj.weight"] = m(F, D)
            w[p + "mlp.up_proj.weight"] = m(F, D)
            w[p + "mlp.down_proj.weight"] = m(D, F)
            continue
        F = c.get("moe_intermediate_size", c["intermediate_size"])
        if arch == "mixtral":
            w[p + "block_sparse_moe.gate.weight"] = m(E, D) * 1.5
            for e in range(E):
                x = p + f"block_sparse_moe.experts.{e}."
                w[x + "w1.weight"], w[x + "w3.weight"], w[x + "w2.weight"] = m(F, D), m(F, D), m(D, F)
        elif arch == "granitemoe":
            w[p + "block_sparse_moe.router.layer.weight"] = m(E, D) * 1.5
            w[p + "block_sparse_moe.input_linear.weight"] = np.stack([m(2 * F, D) for _ in range(E)])
            w[p + "block_sparse_moe.output_linear.weight"] = np.stack([m(D, F) for _ in range(E)])
        else:
            w[p + "mlp.gate.weight"] = m(E, D) * 1.5
            for e in range(E):
                x = p + f"mlp.experts.{e}."
                w[x + "gate_proj.weight"], w[x + "up_proj.weight"] = m(F, D), m(F, D)
                w[x + "down_proj.weight"] = m(D, F)
    return w


def to_bytes(a, dtype):
    a = np.ascontiguousarray(a, dtype=np.float32)
    if dtype == "f32":
        return "F32", a.tobytes()
    if dtype == "f16":
        return "F16", a.astype(np.float16).tobytes()
    bits = a.view(np.uint32)  # bf16: round to nearest even
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return "BF16", bits.tobytes()


def save(path, tensors, dtype):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors.items():
        dt, b = to_bytes(a, dtype)
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("arch", choices=sorted(HF))
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--hidden", type=int, default=64, help="hidden size (start-up timing: 1024)")
    ap.add_argument("--layers", type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    c = config(a.arch, a)
    if a.hidden != 64:  # a wider model of the same architecture (heads of 64)
        scale = a.hidden // 64
        c.update(hidden_size=a.hidden, num_attention_heads=a.hidden // 64,
                 num_key_value_heads=max(1, a.hidden // 256), intermediate_size=c["intermediate_size"] * scale)
        c.pop("head_dim", None)
    c["num_hidden_layers"] = a.layers
    tok, n_tok = tokenizer(c["vocab_size"])
    w = weights(a.arch, c, np.random.default_rng(a.seed))
    names = list(w)
    if a.shards == 1:
        save(os.path.join(a.out, "model.safetensors"), w, a.dtype)
    else:
        index = {"metadata": {"total_size": 0}, "weight_map": {}}
        for s in range(a.shards):
            fn = f"model-{s + 1:05d}-of-{a.shards:05d}.safetensors"
            part = {k: w[k] for k in names[s::a.shards]}
            save(os.path.join(a.out, fn), part, a.dtype)
            index["weight_map"].update({k: fn for k in part})
        json.dump(index, open(os.path.join(a.out, "model.safetensors.index.json"), "w"), indent=1)
    json.dump(c, open(os.path.join(a.out, "config.json"), "w"), indent=1)
    json.dump(tok, open(os.path.join(a.out, "tokenizer.json"), "w"), ensure_ascii=False)
    tmpl = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
            "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    json.dump({"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "bos_token": None,
               "add_bos_token": False, "chat_template": tmpl, "model_max_length": 1024},
              open(os.path.join(a.out, "tokenizer_config.json"), "w"), indent=1)
    json.dump({"eos_token_id": [n_tok - 3, n_tok - 1], "temperature": 0.6, "top_p": 0.95, "top_k": 20},
              open(os.path.join(a.out, "generation_config.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
