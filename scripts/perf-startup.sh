#!/usr/bin/env bash
# Start-up to first answer, Pagoda against llama-server on the same GGUF file (issue 20,
# target 6): alternating runs (the first of each pair swapped every other pair), each the
# wall time from starting the server to the first answered /v1/completions request (a
# client polling every 20 ms, 1 token, temperature 0), and the server's resident memory
# then. Prints every run and the median of the per-pair ratios (Pagoda / llama-server;
# below 1 is faster than llama-server).
#
#   scripts/perf-startup.sh MODEL.gguf [PAIRS] [-- extra pagoda serve flags]
#
# PAIRS: default 5. The model file should already be in the page cache (the first pair
# reads it once for both). Pagoda runs `pagoda serve -m MODEL -t 2` with its default
# warmup unless the extra flags say otherwise (e.g. `-- --warmup off`). The state
# directory is kept across runs, so from the second run on Pagoda maps its packed weights
# from the weight cache; COLD=1 deletes the cache before every Pagoda run (packing each
# time, and writing the cache file in the background).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/apps/pagoda
LLAMA=${LLAMACPP_BIN:-$(cd .. && pwd)/shared/anchors/llama.cpp/bin}
MODEL=${1:?usage: $0 MODEL.gguf [PAIRS] [-- pagoda serve flags]}
shift
PAIRS=5
if [ $# -gt 0 ] && [ "$1" != "--" ]; then PAIRS=$1; shift; fi
[ "${1:-}" = "--" ] && shift
EXTRA=("$@")
[ -f "$MODEL" ] || { echo "$MODEL: no such file" >&2; exit 2; }
[ -x "$BIN" ] || { echo "$BIN is not built (cmake --build build)" >&2; exit 2; }
[ -x "$LLAMA/llama-server" ] || { echo "no llama-server in $LLAMA (set LLAMACPP_BIN)" >&2; exit 2; }
OUT=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$OUT"' EXIT
. scripts/llamacpp-lib.sh
llamacpp_copy "$LLAMA" "$OUT/llama"
PORT=$((20000 + RANDOM % 20000))
cat "$MODEL" > /dev/null  # into the page cache

# run NAME -> prints "seconds rss_mb" of one start-up to first answer.
run() {
    local pid t0 t1 rss body='{"prompt": "Once upon a time", "max_tokens": 1, "temperature": 0}'
    t0=$(date +%s.%N)
    if [ "$1" = pagoda ]; then
        [ "${COLD:-0}" = 1 ] && rm -rf "$OUT/state/weight-cache"
        "$BIN" serve -m "$MODEL" -t 2 --port "$PORT" --state-dir "$OUT/state" "${EXTRA[@]}" \
            > "$OUT/serve.log" 2>&1 &
    else
        "$OUT/llama/llama-server" -m "$MODEL" -t 2 --port "$PORT" > "$OUT/serve.log" 2>&1 &
    fi
    pid=$!
    until curl -sf -m 5 "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
        -d "$body" > /dev/null 2>&1; do
        kill -0 "$pid" 2>/dev/null || { echo "$1 exited; log:" >&2; tail "$OUT/serve.log" >&2; exit 1; }
        sleep 0.02
    done
    t1=$(date +%s.%N)
    rss=$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$pid/status")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    echo "$(echo "$t1 - $t0" | bc -l) $rss"
}

printf '%-5s %14s %14s %10s %12s %12s\n' pair pagoda_s llama_s ratio pagoda_MB llama_MB
ratios=()
for ((p = 1; p <= PAIRS; p++)); do
    if ((p % 2)); then a=$(run pagoda); b=$(run llama); else b=$(run llama); a=$(run pagoda); fi
    read -r as am <<< "$a"
    read -r bs bm <<< "$b"
    r=$(echo "$as / $bs" | bc -l)
    ratios+=("$r")
    printf '%-5s %14.2f %14.2f %10.2f %12s %12s\n' "$p" "$as" "$bs" "$r" "$am" "$bm"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
printf 'median of %d per-pair ratios (pagoda / llama-server first answer): %.2fx\n' "$PAIRS" "$median"
