#!/usr/bin/env bash
# What grammar-constrained decoding costs per engine step (issue 19): starts `pagoda serve`
# on MODEL and runs rounds of C concurrent chat requests (C = 1 and 16) with a JSON schema
# (response_format json_schema), then the same rounds unconstrained. From /metrics deltas:
# the mask time per step that had constrained sequences (pagoda_grammar_mask_seconds) and
# the mean engine step (pagoda_step_seconds), constrained and not; the ratio mask / step is
# what the issue bounds (< 5% at 16 sequences). Each concurrency has a grammar of its own:
# its first round fills the mask cache (cold), the later rounds mostly hit it (warm).
#   scripts/perf-grammar.sh [MODEL] [MAX_TOKENS]
# A TinyLlama-shaped model with a 32k Llama vocabulary (random weights: the output is
# noise, which walks more of the grammar than a trained model does):
#   build/apps/pagoda model make-test --shape tinyllama-1.1b --dtype q8_0 \
#     --vocab testdata/tokenizer-vectors/ggml-vocab-llama-spm.gguf -o /tmp/tl-q8.gguf
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/apps/pagoda
MODEL=${1:-models/stories260K.gguf}
MAX_TOKENS=${2:-64}
LOG=$(mktemp)
"$BIN" serve -m "$MODEL" --port 0 --state-dir "$(mktemp -d)" --block-size-policy static \
    --no-dynamic-warmup --max-model-len 2048 2>"$LOG" &
PID=$!
trap 'kill $PID 2>/dev/null; rm -f "$LOG"' EXIT
for _ in $(seq 900); do
    PORT=$(grep -o 'listening url=http://127.0.0.1:[0-9]*' "$LOG" | head -1 | sed 's/.*://' || true)
    [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/ready" >/dev/null 2>&1 && break
    sleep 0.2
done
python3 - "$PORT" "$MAX_TOKENS" <<'PY'
import json, sys, threading, urllib.request
port, max_tokens = int(sys.argv[1]), int(sys.argv[2])
base = f"http://127.0.0.1:{port}"
schema = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 24},
    "arguments": {"type": "object", "properties": {
        "location": {"type": "string", "maxLength": 32},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4}},
        "required": ["location", "unit"]}},
    "required": ["name", "arguments"]}

def metrics():
    out = {}
    for line in urllib.request.urlopen(base + "/metrics").read().decode().splitlines():
        for name in ("pagoda_grammar_mask_seconds_sum", "pagoda_grammar_mask_seconds_count",
                     "pagoda_step_seconds_sum", "pagoda_step_seconds_count"):
            if line.startswith(name + "{") or line.startswith(name + " "):
                out[name] = float(line.split()[-1])
    return out

def one(seed, constrained, c):
    body = {"messages": [{"role": "user", "content": "Call a tool for the weather."}],
            "max_tokens": max_tokens, "temperature": 0.8, "seed": seed}
    if constrained:
        s = json.loads(json.dumps(schema))
        s["properties"]["name"]["maxLength"] = 24 + c  # a grammar of its own: starts cold
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "t", "schema": s}}
    req = urllib.request.Request(base + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    urllib.request.urlopen(req).read()

def round_(c, seed0, constrained):
    a = metrics()
    ts = [threading.Thread(target=one, args=(seed0 + i, constrained, c)) for i in range(c)]
    for t in ts: t.start()
    for t in ts: t.join()
    b = metrics()
    d = {k: b.get(k, 0) - a.get(k, 0) for k in b}
    steps = d["pagoda_step_seconds_count"]
    mask_steps = d.get("pagoda_grammar_mask_seconds_count", 0)
    return (d["pagoda_step_seconds_sum"] / steps * 1e3,
            d.get("pagoda_grammar_mask_seconds_sum", 0) / mask_steps * 1e3 if mask_steps else 0.0)

print("| sequences | round | step, unconstrained (ms) | step, constrained (ms) | mask per step (ms) | mask / step |")
print("|---|---|---|---|---|---|")
for c in (1, 16):
    for r, label in enumerate(("cold", "warm", "warm")):
        plain, _ = round_(c, 1000 * c + r, False)
        step, mask = round_(c, 100 * c + r, True)
        print(f"| {c} | {label} | {plain:.2f} | {step:.2f} | {mask:.3f} | {100 * mask / plain:.1f}% |")
PY
