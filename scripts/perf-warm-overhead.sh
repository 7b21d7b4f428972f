#!/usr/bin/env bash
# Does warming delay real requests? (issue 15, acceptance 3.) Poisson traffic at RATE
# requests/s (64-token prompts, 16 output tokens) for DURATION against `pagoda serve`, with
# the warm level held at `high` (the idle spin for the whole run: the most warming there
# is) and with warming off, alternating REPS times. Prints per run the queue time of real
# requests (pagoda_request_stage_seconds{stage="queue"}, mean over the run), TTFT p50/p99,
# and the warm level seen; then the medians per mode.
#   scripts/perf-warm-overhead.sh [MODEL] [REPS] [DURATION] [RATE] [MAX_NUM_SEQS]
#   default: the bundled model, 3, 20s, 10, 4
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/apps/pagoda
MODEL=${1:-models/stories260K.gguf}
REPS=${2:-3}
DURATION=${3:-20s}
RATE=${4:-10}
SEQS=${5:-4}
OUT=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$OUT"' EXIT
run() {  # MODE (on|off) REP
    "$BIN" serve -m "$MODEL" --port 0 --state-dir "$OUT/state-$1-$2" --max-num-seqs "$SEQS" \
        --block-size-policy static --no-forecast --no-dynamic-warmup 2>"$OUT/serve.log" &
    local pid=$! port=""
    for _ in $(seq 600); do
        port=$(grep -o 'listening url=http://127.0.0.1:[0-9]*' "$OUT/serve.log" | head -1 | sed 's/.*://' || true)
        [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && break
        sleep 0.2
    done
    if [ "$1" == on ]; then
        curl -s -X POST "http://127.0.0.1:$port/admin/warmup" -H 'Content-Type: application/json' \
            -d '{"level": "high", "duration": "1h"}' >/dev/null
    fi
    "$BIN" bench --url "http://127.0.0.1:$port" --rate "$RATE" --duration "$DURATION" \
        --input-len 64 --output-len 16 --no-progress --json "$OUT/r-$1-$2.json" >/dev/null 2>&1 || true
    kill "$pid"; wait "$pid" 2>/dev/null || true
}
for rep in $(seq "$REPS"); do
    for mode in on off; do run "$mode" "$rep"; done
done
python3 - "$OUT" "$REPS" <<'PY'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
rows = {"on": [], "off": []}
for rep in range(1, reps + 1):
    for mode in ("on", "off"):
        d = json.load(open(f"{out}/r-{mode}-{rep}.json"))
        sm = d.get("server_metrics", {})
        q = next((v for k, v in sm.items() if "request_stage_seconds" in k and 'stage="queue"' in k), {})
        queue_ms = q.get("mean_ms") if isinstance(q, dict) else None
        warm = max((s.get("warm_level", 0) for s in d.get("server_timeline", [])), default=0)
        row = (queue_ms, d["ttft_ms"]["p50"], d["ttft_ms"]["p99"], warm, d["requests"]["completed"])
        rows[mode].append(row)
        print(f"rep {rep} warm {mode:3}: queue mean {row[0]:8.1f} ms  TTFT p50 {row[1]:8.1f} ms  "
              f"p99 {row[2]:8.1f} ms  warm level {row[3]:.0f}  completed {row[4]}")
for mode in ("on", "off"):
    r = rows[mode]
    print(f"median warm {mode:3}: queue mean {statistics.median(x[0] for x in r):8.1f} ms  "
          f"TTFT p50 {statistics.median(x[1] for x in r):8.1f} ms  "
          f"p99 {statistics.median(x[2] for x in r):8.1f} ms")
PY
