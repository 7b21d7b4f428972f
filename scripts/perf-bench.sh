#!/usr/bin/env bash
# Capacity at SLO of `pagoda serve` for the standard scenarios, scaled for a small machine:
# `pagoda bench sweep` raises the rate step by step and reports the highest rate whose run
# met every criterion. Prints a Markdown table for docs/performance.md.
# Usage: scripts/perf-bench.sh [DTYPE] [SCALE] [STEP_SECONDS]   (defaults: q8_0 0.1 40)
set -euo pipefail
cd "$(dirname "$0")/.."
DTYPE=${1:-q8_0}
SCALE=${2:-0.1}
STEP=${3:-40}
BIN=build/apps/pagoda
DIR=${PERF_DIR:-/tmp/pagoda-perf}
mkdir -p "$DIR"
MODEL=$DIR/tinyllama-$DTYPE.gguf
[ -f "$MODEL" ] || "$BIN" model make-test --shape tinyllama-1.1b --dtype "$DTYPE" --seed 1 -o "$MODEL"
LOG=$(mktemp)
"$BIN" serve -m "$MODEL" --port 0 2>"$LOG" &
SPID=$!
trap 'kill $SPID 2>/dev/null; rm -f "$LOG"' EXIT
for _ in $(seq 1200); do
  PORT=$(grep -o 'listening url=http://127.0.0.1:[0-9]*' "$LOG" | head -1 | sed 's/.*://' || true)
  if [ -n "${PORT:-}" ] && curl -sf "http://127.0.0.1:$PORT/ready" >/dev/null 2>&1; then break; fi
  sleep 0.1
done
URL=http://127.0.0.1:$PORT
CRIT=(--criteria "p99_ttft_ms < 5000" --criteria "p99_tpot_ms < 500" --criteria "error_rate < 0.01")
echo "| scenario (scale $SCALE) | prompt / output tokens | rates tried (req/s) | capacity at SLO (req/s) | output tok/s there | p99 TTFT there (ms) | p99 TPOT there (ms) |"
echo "|---|---|---|---|---|---|---|"
row() {  # PRESET RATES LENGTHS
  local out="$DIR/sweep-$1.json"
  "$BIN" bench sweep --url "$URL" --preset "$1" --scale "$SCALE" --duration "${STEP}s" --rates "$2" --no-progress \
    "${CRIT[@]}" --json "$out" >/dev/null 2>&1 || true
  python3 - "$out" "$1" "$2" "$3" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
cap = j["capacity_rps"]
at = [s for s in j["steps"] if s["rate"] == cap]
if at:
    s = at[0]
    print(f"| {sys.argv[2]} | {sys.argv[4]} | {sys.argv[3]} | {cap:g} | {s['output_tokens_per_s']:.1f} | {s['ttft_ms']['p99']:.0f} | {s['tpot_ms']['p99']:.0f} |")
else:
    print(f"| {sys.argv[2]} | {sys.argv[4]} | {sys.argv[3]} | below {sys.argv[3].split(',')[0]} | - | - | - |")
PY
}
row 1k "0.1,0.2,0.4,0.8,1.6" "102 / 13"
row 4k "0.05,0.1,0.2,0.4" "410 / 13"
row 50rps "0.2,0.4,0.8,1.6,3.2" "~26 / 13"
row mix-70-30 "0.1,0.2,0.4,0.8,1.6" "70% ~26 / 13, 30% ~205 / 26"
echo
echo "criteria: ${CRIT[*]}; $STEP s a step; $(nproc) threads: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
