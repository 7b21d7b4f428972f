#!/usr/bin/env bash
# n-gram speculative decoding (issue 40): greedy decode speed with and without
# --speculative-config on the bundled trained model (stories260K) for a prompt that repeats
# itself and a free one, in interleaved pairs (plain, speculative, plain, ...), with the
# acceptance rate; then the verify cost on the TinyLlama-1.1B shape (bench/micro/verify_bench:
# one sequence's forward over 1, 2, 3, 5 and 9 rows at depth 512), then decode speed on that
# weight-bound shape (random weights) when every draft is refused and when most are
# accepted, PAIRS x 2 interleaved pairs of 128 tokens each.
#   scripts/perf-spec.sh [PAIRS] [K]
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-5}
K=${2:-4}
BIN=build/apps/pagoda
DIR=${PERF_DIR:-/tmp/pagoda-perf}
mkdir -p "$DIR"
SPEC="{\"method\":\"ngram\",\"num_speculative_tokens\":$K}"
REPEAT="Once upon a time, there was a little girl named Lily. She loved to play outside. Once upon a time, there was a little girl named Lily. She loved to play outside. Once upon a time, there was a little girl named Lily."
FREE="Tom and his dog went to the big hill to fly a kite."
run() {  # PROMPT SPEC [MODEL N] -> "tok/s accepted/drafts md5"
    local model=()
    [ -n "${3:-}" ] && model=(-m "$3" -t 2)
    "$BIN" generate "${model[@]}" -p "$1" -n "${4:-256}" --temp 0 --speculative-config "$2" \
        2>"$DIR/spec.err" >"$DIR/spec.out"
    python3 - "$DIR/spec.err" "$(md5sum <"$DIR/spec.out" | cut -c1-8)" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
tps = re.search(r"generation: \d+ tokens in [\d.]+ s \(([\d.]+) tokens/s\)", t).group(1)
m = re.search(r"speculation: (\d+)/(\d+) drafts", t)
print(tps, f"{m.group(1)}/{m.group(2)}" if m else "0/0", sys.argv[2])
PY
}
printf '%-8s %4s %12s %12s %8s %14s %s\n' prompt pair plain spec ratio accepted same-output
for name in repeat free; do
    [ "$name" = repeat ] && P=$REPEAT || P=$FREE
    for i in $(seq "$PAIRS"); do
        if [ $((i % 2)) = 1 ]; then a=$(run "$P" ""); b=$(run "$P" "$SPEC"); else b=$(run "$P" "$SPEC"); a=$(run "$P" ""); fi
        read -r ta _ ma <<<"$a"; read -r tb acc mb <<<"$b"
        printf '%-8s %4s %12s %12s %8.2f %14s %s\n' "$name" "$i" "$ta" "$tb" \
            "$(python3 -c "print($tb / $ta)")" "$acc" "$([ "$ma" = "$mb" ] && echo yes || echo NO)"
    done
done
M="$DIR/tinyllama-q8_0.gguf"
[ -f "$M" ] || "$BIN" model make-test --shape tinyllama-1.1b --dtype q8_0 --seed 1 \
    --vocab testdata/tokenizer-vectors/ggml-vocab-llama-spm.gguf -o "$M"
PAGODA_BENCH_MODEL=$M build/bench/micro/verify_bench --benchmark_min_time=1 2>/dev/null | grep BM_
# Weight-bound: two random-weight files of that shape (llama's SentencePiece vocabulary), 128
# tokens. Seed 1 after the shorter repeating prompt proposes drafts its output never follows
# (every draft refused: the cost of speculating for nothing); seed 3 after the longer one
# falls into a loop that prompt lookup predicts (every draft accepted: the speed-up).
SHORT="Once upon a time, there was a little girl named Lily. She loved to play outside. Once upon a time, there was a little girl named Lily."
for case in "1 refused" "3 accepted"; do
    read -r seed name <<<"$case"
    model="$DIR/tinyllama-q8_0-spm-seed$seed.gguf"
    [ -f "$model" ] || "$BIN" model make-test --shape tinyllama-1.1b --dtype q8_0 --seed "$seed" \
        --vocab testdata/tokenizer-vectors/ggml-vocab-llama-spm.gguf -o "$model" >/dev/null
    [ "$name" = refused ] && P=$SHORT || P=$REPEAT
    : >"$DIR/spec.ratios"
    for i in $(seq $((PAIRS * 2))); do
        if [ $((i % 2)) = 1 ]; then a=$(run "$P" "" "$model" 128); b=$(run "$P" "$SPEC" "$model" 128)
        else b=$(run "$P" "$SPEC" "$model" 128); a=$(run "$P" "" "$model" 128); fi
        read -r ta _ ma <<<"$a"; read -r tb acc mb <<<"$b"
        python3 -c "print($tb / $ta)" >>"$DIR/spec.ratios"
        printf '%-8s %4s %12s %12s %8.2f %14s %s\n' "$name" "$i" "$ta" "$tb" \
            "$(python3 -c "print($tb / $ta)")" "$acc" "$([ "$ma" = "$mb" ] && echo yes || echo NO)"
    done
    python3 -c '
import statistics, sys
r = [float(x) for x in open(sys.argv[1])]
print(f"TinyLlama shape, drafts {sys.argv[2]}: median speculative / plain over {len(r)} pairs: {statistics.median(r):.3f}")' \
        "$DIR/spec.ratios" "$name"
done
