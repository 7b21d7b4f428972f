#!/usr/bin/env bash
# Live-configuration costs for docs/performance.md (issue 12), on random-weight models with
# TinyLlama-1.1B's exact shape and on the bundled model:
#  1. KV re-layout pause and recompute at 1, 16 and 64 live sequences (control_bench relayout);
#  2. decode attention per block size at 1k-8k contexts on the real kernel, each policy's
#     choice, and the predicted step latency against the weight-streaming time measured in
#     the same run (control_bench block-size);
#  3. end to end: decode ms per token of one sequence at 960 and 1920 tokens of context (the
#     4k and 8k of the seed's claim scaled to this shape's 2048-token context on 2 cores)
#     with block size 16 (static), 64 (seed's choice there) and measured's choice.
# Usage: scripts/perf-control.sh [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${1:-2}
BIN=build/apps/pagoda
BENCH=build/bench/micro/control_bench
DIR=${PERF_DIR:-/tmp/pagoda-perf}
mkdir -p "$DIR"
export OMP_NUM_THREADS=$THREADS
[ -f "$DIR/tinyllama-q8_0.gguf" ] || "$BIN" model make-test --shape tinyllama-1.1b --dtype q8_0 --seed 1 -o "$DIR/tinyllama-q8_0.gguf"

echo "## re-layout, bundled model (prompt 32, 96 new tokens, change after 32)"
"$BENCH" relayout models/stories260K.gguf 32 96 32
echo
echo "## re-layout, TinyLlama-1.1B shape q8_0 (prompt 32, 64 new tokens, change after 16)"
"$BENCH" relayout "$DIR/tinyllama-q8_0.gguf" 32 64 16
echo
echo "## block size, TinyLlama-1.1B shape (f32 KV; q8_0 weights: 1.10 GB per token)"
"$BENCH" block-size tinyllama-1.1b 1.10e9 | tee "$DIR/block-size.txt"
echo
echo "## end to end: decode ms per token, one sequence, TinyLlama-1.1B shape q8_0"
echo "| context | block 8 | block 16 | block 32 | block 64 | block 128 |"
echo "|---|---|---|---|---|---|"
for ctx in 960 1920; do
  row="| $ctx |"
  for bs in 8 16 32 64 128; do
    best=""
    for _ in 1 2; do
      tps=$("$BIN" generate -m "$DIR/tinyllama-q8_0.gguf" --prompt-tokens "$ctx" --num-prompts 1 -n 64 \
            --ignore-eos --temperature 0 -t "$THREADS" --block-size "$bs" --kv-cache-memory 1GiB --json \
            | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["decode_tokens_per_s"])')
      best=$(python3 -c "print(max(float('$tps'), float('${best:-0}')))")
    done
    row="$row $(python3 -c "print(f'{1000/$best:.2f}')") |"
  done
  echo "$row"
done
