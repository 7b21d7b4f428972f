#!/usr/bin/env bash
# n-gram speculative decoding (issue 40): greedy decode speed with and without
# --speculative-config on the bundled trained model (stories260K) for a prompt that repeats
# itself and a free one, in interleaved pairs (plain, speculative, plain, ...), with the
# acceptance rate; then the verify cost on the TinyLlama-1.1B shape (bench/micro/verify_bench:
# one sequence's forward over 1, 2, 3, 5 and 9 rows at depth 512).
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
run() {  # PROMPT SPEC -> "tok/s accepted/drafts md5"
    "$BIN" generate -p "$1" -n 256 --temp 0 --speculative-config "$2" 2>"$DIR/spec.err" >"$DIR/spec.out"
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
[ -f "$M" ] || "$BIN" model make-test --shape tinyllama-1.1b --dtype q8_0 --seed 1 -o "$M"
PAGODA_BENCH_MODEL=$M build/bench/micro/verify_bench --benchmark_min_time=1 2>/dev/null | grep BM_
