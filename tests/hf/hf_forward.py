#!/usr/bin/env python3
"""An independent forward pass of a Hugging Face directory, in numpy (float64), written
from transformers' published modeling code for Llama, Mistral, Mixtral, Qwen2, Qwen3,
Qwen3-MoE, OLMoE and Granite MoE: rotate_half RoPE on the checkpoint's own Q/K rows,
repeat_kv for GQA, SwiGLU, RMSNorm, tied embeddings, softmax routers with top-k.

  hf_forward.py DIR IDS...   -> prints, for every position, the argmax and its margin
  hf_forward.py DIR --check PROMPT_IDS GENERATED_IDS [--tie T] [--ban LO-HI]
      exits 1 unless every generated token is the argmax after the prompt and the tokens
      before it, or within T of it (default 1e-3)."""
import json, struct, sys, os
import numpy as np


def load(dir):
    files = sorted(f for f in os.listdir(dir) if f.endswith(".safetensors"))
    w = {}
    for f in files:
        b = open(os.path.join(dir, f), "rb").read()
        n = struct.unpack("<Q", b[:8])[0]
        h = json.loads(b[8:8 + n])
        for k, v in h.items():
            if k == "__metadata__":
                continue
            s, e = v["data_offsets"]
            raw = b[8 + n + s:8 + n + e]
            if v["dtype"] == "F32":
                a = np.frombuffer(raw, np.float32)
            elif v["dtype"] == "F16":
                a = np.frombuffer(raw, np.float16).astype(np.float32)
            else:
                a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
            w[k] = a.reshape(v["shape"]).astype(np.float64)
    return w


def rms(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rope(x, pos, theta, hd):
    inv = 1.0 / theta ** (np.arange(0, hd, 2) / hd)
    ang = np.outer(pos, inv)
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))
    half = hd // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], -1)  # rotate_half
    return x * cos[:, None, :] + rot * sin[:, None, :]


def silu(x):
    return x / (1 + np.exp(-x))


def moe(c, w, p, h):
    arch = c["architectures"][0]
    if arch == "MixtralForCausalLM":
        router = w[p + "block_sparse_moe.gate.weight"]
        ex = lambda e: (w[p + f"block_sparse_moe.experts.{e}.w1.weight"],
                        w[p + f"block_sparse_moe.experts.{e}.w3.weight"],
                        w[p + f"block_sparse_moe.experts.{e}.w2.weight"])
        k, norm = c["num_experts_per_tok"], True
    elif arch == "GraniteMoeForCausalLM":
        router = w[p + "block_sparse_moe.router.layer.weight"]
        inp, outl = w[p + "block_sparse_moe.input_linear.weight"], w[p + "block_sparse_moe.output_linear.weight"]
        F = inp.shape[1] // 2
        ex = lambda e: (inp[e][:F], inp[e][F:], outl[e])
        k, norm = c["num_experts_per_tok"], True
    else:
        router = w[p + "mlp.gate.weight"]
        ex = lambda e: (w[p + f"mlp.experts.{e}.gate_proj.weight"], w[p + f"mlp.experts.{e}.up_proj.weight"],
                        w[p + f"mlp.experts.{e}.down_proj.weight"])
        k, norm = c["num_experts_per_tok"], c.get("norm_topk_prob", False)
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        z = router @ h[t]
        pr = np.exp(z - z.max()); pr /= pr.sum()
        top = np.argsort(-pr, kind="stable")[:k]
        wt = pr[top] / pr[top].sum() if norm else pr[top]
        for e, a in zip(top, wt):
            g, u, d = ex(e)
            out[t] += a * (d @ (silu(g @ h[t]) * (u @ h[t])))
    return out


def forward(dir, ids):
    c = json.load(open(os.path.join(dir, "config.json")))
    w = load(dir)
    arch = c["architectures"][0]
    D, H = c["hidden_size"], c["num_attention_heads"]
    KV = c.get("num_key_value_heads", H)
    hd = c.get("head_dim", D // H)
    eps, theta = c.get("rms_norm_eps", 1e-6), c.get("rope_theta", 10000.0)
    granite = arch == "GraniteMoeForCausalLM"
    T = len(ids)
    pos = np.arange(T)
    x = w["model.embed_tokens.weight"][ids] * (c.get("embedding_multiplier", 1.0) if granite else 1.0)
    res = c.get("residual_multiplier", 1.0) if granite else 1.0
    scale = c.get("attention_multiplier", 1.0 / np.sqrt(hd)) if granite else 1.0 / np.sqrt(hd)
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, w[p + "input_layernorm.weight"], eps)
        q, k, v = (h @ w[p + f"self_attn.{n}_proj.weight"].T for n in "qkv")
        if arch == "Qwen2ForCausalLM":
            q, k, v = (a + w[p + f"self_attn.{n}_proj.bias"] for a, n in zip((q, k, v), "qkv"))
        if arch == "OlmoeForCausalLM":
            q, k = rms(q, w[p + "self_attn.q_norm.weight"], eps), rms(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k, v = q.reshape(T, H, hd), k.reshape(T, KV, hd), v.reshape(T, KV, hd)
        if arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):
            q, k = rms(q, w[p + "self_attn.q_norm.weight"], eps), rms(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, pos, theta, hd), rope(k, pos, theta, hd)
        k, v = np.repeat(k, H // KV, axis=1), np.repeat(v, H // KV, axis=1)  # repeat_kv
        att = np.einsum("thd,shd->hts", q, k) * scale
        att += np.triu(np.full((T, T), -np.inf), 1)
        att = np.exp(att - att.max(-1, keepdims=True)); att /= att.sum(-1, keepdims=True)
        o = np.einsum("hts,shd->thd", att, v).reshape(T, H * hd)
        x = x + res * (o @ w[p + "self_attn.o_proj.weight"].T)
        h = rms(x, w[p + "post_attention_layernorm.weight"], eps)
        if p + "mlp.gate_proj.weight" in w:
            f = (silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)) @ \
                w[p + "mlp.down_proj.weight"].T
        else:
            f = moe(c, w, p, h)
        x = x + res * f
    x = rms(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    logits = x @ head.T
    return logits / (c.get("logits_scaling", 1.0) if granite else 1.0)


def main():
    dir = sys.argv[1]
    if "--check" in sys.argv:
        i = sys.argv.index("--check")
        prompt = [int(t) for t in sys.argv[i + 1].split(",")]
        gen = [int(t) for t in sys.argv[i + 2].split(",")]
        tie = float(sys.argv[sys.argv.index("--tie") + 1]) if "--tie" in sys.argv else 1e-3
        z = forward(dir, prompt + gen[:-1])
        if "--ban" in sys.argv:  # LO-HI: ids the generation was not allowed to pick
            lo, hi = map(int, sys.argv[sys.argv.index("--ban") + 1].split("-"))
            z[:, lo:hi + 1] = -np.inf
        bad = 0
        for j, t in enumerate(gen):
            row = z[len(prompt) - 1 + j]
            best = int(np.argmax(row))
            if t != best and row[best] - row[t] > tie:
                print(f"position {j}: Pagoda chose {t} ({row[t]:.5f}), the reference {best} ({row[best]:.5f})")
                bad += 1
        print(f"{len(gen) - bad} of {len(gen)} greedy tokens agree with the numpy forward")
        sys.exit(1 if bad else 0)
    z = forward(dir, [int(t) for t in sys.argv[2:]])
    for row in z:
        s = np.sort(row)
        print(int(np.argmax(row)), f"{s[-1] - s[-2]:.4f}")


if __name__ == "__main__":
    main()
