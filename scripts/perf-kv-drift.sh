#!/usr/bin/env bash
# A quantized KV cache's drift from f16 (issue 40), Pagoda beside llama.cpp: serves MODEL
# (default /tmp/tl-q8.gguf: the TinyLlama shape Q8_0 with the llama vocabulary) with each
# cache and runs scripts/logprob-diff.py --drift along Pagoda f16's greedy tokens.
#   scripts/perf-kv-drift.sh [MODEL] [KV (q8_0 or q4_0)]
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/llamacpp-lib.sh
M=${1:-/tmp/tl-q8.gguf}
Q=${2:-q8_0}
S=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$S"' EXIT
llamacpp_copy "${LLAMACPP_BIN:-$(cd .. && pwd)/shared/anchors/llama.cpp/bin}" "$S/llama"
L=$S/llama
for kv in f16 $Q; do
    port=$([ $kv = f16 ] && echo 18701 || echo 18702)
    build/apps/pagoda serve -m "$M" -t 2 --port $port --kv-cache-dtype $kv --state-dir "$S/$kv" \
        --no-dynamic-warmup 2>"$S/pagoda-$kv.log" &
done
LD_LIBRARY_PATH=$L "$L/llama-server" -m "$M" -t 2 --port 18703 -c 4096 -fa on >"$S/c.log" 2>&1 &
LD_LIBRARY_PATH=$L "$L/llama-server" -m "$M" -t 2 --port 18704 -c 4096 -fa on -ctk $Q -ctv $Q \
    >"$S/d.log" 2>&1 &
for p in 18701 18702 18703 18704; do
    for _ in $(seq 240); do curl -sf "localhost:$p/health" >/dev/null && break; sleep 0.5; done
done
until curl -sf localhost:18701/ready >/dev/null && curl -sf localhost:18702/ready >/dev/null; do sleep 0.5; done
echo "Pagoda f16 vs $Q:"
python3 scripts/logprob-diff.py pagoda:18701 pagoda:18702 --drift "$M"
echo "llama.cpp f16 vs $Q (along Pagoda f16's tokens):"
python3 scripts/logprob-diff.py llama:18703 llama:18704 --drift "$M" --positions pagoda:18701
echo "Pagoda f16 vs llama.cpp f16:"
python3 scripts/logprob-diff.py pagoda:18701 llama:18703 --drift "$M"
