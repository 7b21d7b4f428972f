#!/usr/bin/env python3
"""How far two servers' next-token logprobs are apart, teacher forced (issue 20, acceptance 2).

For every prompt of testdata/kquant_parity.h and every prefix of llama.cpp's continuation
of it (32 positions a prompt), asks both servers for one greedy token with its top
logprobs and reports, over the positions, the largest difference among the 5 best
logprobs (median, 90th percentile, max), and the positions where the first server's two
best tokens are closest (its near-ties, where rounding decides the greedy token).

With --drift MODEL, the same teacher-forced measure on any GGUF both serve: the
positions are the first server's own 32 greedy tokens after each of the 4 prompts (issue
40: a quantized KV cache's drift, `pagoda:A pagoda:B` with f16 and q8_0 caches, beside
llama-server's own f16 and q8_0 caches).

With --free MODEL, instead: 32 greedy tokens from each server after each of the 4 prompts
of scripts/kquant-parity.sh (tokenized by `pagoda tokenize -m MODEL`), how many lead
tokens are equal, and where they part, both servers' gap between their two best tokens.

    scripts/logprob-diff.py llama:8391 pagoda:8392 [--file q6_k]
    scripts/logprob-diff.py llama:8391 pagoda:8392 --free /tmp/tl-q4km.gguf

Each server is KIND:PORT on 127.0.0.1: `llama` for llama-server (/completion, n_probs),
`pagoda` for pagoda serve or any OpenAI-compatible server (/v1/completions, logprobs).
Serve the same GGUF file on both; docs/performance.md ("K-quant greedy parity") has the
commands and the figures.
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "testdata" / "kquant_parity.h"
PROMPTS = ["Once upon a time", "Tom and Sue went to the park. They saw a big red ball",
           "The cat sat on", "Lily liked to sing and dance with her mom"]  # kquant-parity.sh's


def parity_cases(text):
    """(file, prompts, continuations) per entry of kquant_parity.h."""
    body = text[text.index("kKQuantParity"):]
    cases = []
    for part in body.split("PAGODA_SOURCE_DIR")[1:]:
        name = re.search(r'"([^"]+)"', part).group(1)
        groups = [[int(v) for v in g.split(",") if v.strip()]
                  for g in re.findall(r"\{([^{}]*)\}", part)]
        half = len(groups) // 2
        cases.append((name, groups[:half], groups[half:]))
    return cases


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def top_logprobs(server, ids):
    """The server's 10 best next-token logprobs after `ids`, best first."""
    kind, port = server
    if kind == "llama":
        a = post(f"http://127.0.0.1:{port}/completion",
                 {"prompt": ids, "n_predict": 1, "temperature": 0, "n_probs": 10,
                  "cache_prompt": False, "post_sampling_probs": False})
        values = [t["logprob"] for t in a["completion_probabilities"][0]["top_logprobs"]]
    else:
        b = post(f"http://127.0.0.1:{port}/v1/completions",
                 {"prompt": ids, "max_tokens": 1, "temperature": 0, "logprobs": 10})
        values = list(b["choices"][0]["logprobs"]["top_logprobs"][0].values())
    return sorted(values, reverse=True)


def greedy(server, ids, n):
    """The server's n greedy token ids after `ids` (end of text ignored)."""
    kind, port = server
    if kind == "llama":
        a = post(f"http://127.0.0.1:{port}/completion",
                 {"prompt": ids, "n_predict": n, "temperature": 0, "return_tokens": True,
                  "cache_prompt": False, "ignore_eos": True})
        return a["tokens"]
    b = post(f"http://127.0.0.1:{port}/v1/completions",
             {"prompt": ids, "max_tokens": n, "temperature": 0, "ignore_eos": True,
              "return_token_ids": True})
    return b["choices"][0]["token_ids"]


def tokenized_prompts(model):
    pagoda = ROOT / "build" / "apps" / "pagoda"
    out = []
    for text in PROMPTS:
        tok = subprocess.run([str(pagoda), "tokenize", "-m", model], input=text,
                             capture_output=True, text=True, check=False)
        if tok.returncode != 0:
            sys.exit(f"{pagoda} tokenize -m {model} failed: {tok.stderr.strip()}")
        out.append((text, [int(v) for v in tok.stdout.split()]))
    return out


def free_running(a, b, model):
    for text, ids in tokenized_prompts(model):
        ga, gb = greedy(a, ids, 32), greedy(b, ids, 32)
        n = next((k for k in range(32) if ga[k] != gb[k]), 32)
        if n == 32:
            print(f"{text!r}: equal for 32 of 32 tokens")
            continue
        la, lb = top_logprobs(a, ids + ga[:n]), top_logprobs(b, ids + ga[:n])
        print(f"{text!r}: equal for the first {n} of 32 tokens; there the two best tokens are "
              f"{la[0] - la[1]:.4f} nats apart in the first server, {lb[0] - lb[1]:.4f} in "
              "the second")


def server_arg(text):
    kind, _, port = text.partition(":")
    if kind not in ("llama", "pagoda") or not port.isdigit():
        raise argparse.ArgumentTypeError(
            f"'{text}': expected llama:PORT or pagoda:PORT (a server on 127.0.0.1)")
    return kind, int(port)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a", type=server_arg, help="first server, llama:PORT or pagoda:PORT")
    ap.add_argument("b", type=server_arg, help="second server")
    ap.add_argument("--file", default="",
                    help="only the parity entries whose file name contains this (q6_k, q4_k_m)")
    ap.add_argument("--free", metavar="MODEL",
                    help="compare free-running greedy continuations instead (MODEL: the GGUF "
                         "both serve, for its tokenizer)")
    ap.add_argument("--drift", metavar="MODEL",
                    help="teacher-forced differences along the first server's own greedy "
                         "tokens (MODEL: the GGUF both serve)")
    ap.add_argument("--positions", type=server_arg, metavar="KIND:PORT",
                    help="--drift along this server's greedy tokens instead (llama-server "
                         "refuses some random-weight outputs with a 500)")
    args = ap.parse_args()
    if args.drift:
        prompts = [ids for _, ids in tokenized_prompts(args.drift)]
        try:
            conts = [greedy(args.positions or args.a, ids, 32) for ids in prompts]
        except (urllib.error.URLError, KeyError, IndexError) as e:
            sys.exit(f"the first server did not answer as expected ({e})")
        report(args, args.drift, prompts, conts)
        return
    if args.free:
        try:
            free_running(args.a, args.b, args.free)
        except (urllib.error.URLError, KeyError, IndexError) as e:
            sys.exit(f"a server did not answer as expected ({e}); are both serving "
                     f"{args.free} on the ports given?")
        return
    cases = [c for c in parity_cases(HEADER.read_text()) if args.file in c[0]]
    if not cases:
        sys.exit(f"no entry of {HEADER} matches --file '{args.file}'")
    for name, prompts, continuations in cases:
        report(args, name, prompts, continuations)


def report(args, name, prompts, continuations):
    diffs, gaps = [], []
    try:
        for i, (prompt, cont) in enumerate(zip(prompts, continuations)):
            for k in range(len(cont)):
                ids = prompt + cont[:k]
                a, b = top_logprobs(args.a, ids), top_logprobs(args.b, ids)
                diffs.append(max(abs(x - y) for x, y in zip(a[:5], b[:5])))
                gaps.append((a[0] - a[1], i, k))
    except (urllib.error.URLError, KeyError, IndexError) as e:
        sys.exit(f"{name}: a server did not answer as expected ({e}); are both serving "
                 "the same file on the ports given?")
    diffs.sort()
    print(f"{Path(name).name}: {len(diffs)} positions, largest |logprob difference| of "
          f"the 5 best: median {statistics.median(diffs):.4f}, "
          f"p90 {diffs[int(len(diffs) * 0.9)]:.4f}, max {diffs[-1]:.4f} nats")
    close = ", ".join(f"{g:.4f} (prompt {i}, token {k})" for g, i, k in sorted(gaps)[:4])
    print(f"  closest calls of the first server: {close}")


if __name__ == "__main__":
    main()
