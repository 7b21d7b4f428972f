#!/usr/bin/env bash
# The front end's CPU per streamed token (issue 40), for docs/performance.md: a simulated
# H100 x8 replica (llama-3-8b; the forward pass only sleeps) served with each
# --stream-interval in turn, `pagoda bench --preset PRESET` against it from the same machine,
# and the server's CPU per streamed token split by thread (pagoda-engine: scheduling,
# sampling, detokenizing; pagoda-http: HTTP, SSE, sockets; the rest) from /proc/PID/task.
# Usage: scripts/perf-frontend.sh [PRESET (50rps)] [INTERVALS ("1 4 8 16")] [ROUNDS (1)]
set -euo pipefail
cd "$(dirname "$0")/.."
P=${PAGODA:-build/apps/pagoda}  # PAGODA=path: another build (A/B runs)
# SERVE_FLAGS: more `pagoda serve` flags, e.g. "--sim-speed 10 --max-num-seqs 1024" (a
# replica that serves the 500rps preset whole: the front end at GPU rates)
PRESET=${1:-50rps}
INTERVALS=${2:-1 4 8 16}
ROUNDS=${3:-1}
DIR=${PERF_DIR:-/tmp/pagoda-perf-frontend}
PORT=${PORT:-18340}
mkdir -p "$DIR"

thread_cpu() {  # pid -> "comm ticks" per thread
    for t in /proc/"$1"/task/*; do
        printf '%s %s\n' "$(cat "$t/comm")" "$(awk '{print $14 + $15}' "$t/stat")"
    done
}

one() {  # interval round
    local name="$PRESET-i$1-r$2"
    rm -rf "$DIR/st-$name"
    $P serve --backend sim --sim-gpu h100-sxm --sim-model llama-3-8b --tensor-parallel-size 8 \
        --block-size-policy static --disable-access-log --stream-interval "$1" ${SERVE_FLAGS:-} \
        --port "$PORT" --state-dir "$DIR/st-$name" >"$DIR/$name.log" 2>&1 &
    local pid=$!
    for _ in $(seq 1 240); do curl -sf "localhost:$PORT/ready" >/dev/null && break; sleep 0.5; done
    thread_cpu "$pid" >"$DIR/$name.cpu0"
    $P bench --url "http://127.0.0.1:$PORT" --preset "$PRESET" --no-progress --no-record \
        --json "$DIR/$name.json" >"$DIR/$name.bench" 2>&1 || true
    thread_cpu "$pid" >"$DIR/$name.cpu1"
    kill "$pid"
    wait "$pid" || true
    python3 - "$DIR/$name" "$1" <<'PY'
import collections, json, sys
base, interval = sys.argv[1], sys.argv[2]
d = json.load(open(base + ".json")); c = d["client"]
def ticks(f):
    t = collections.Counter()
    for line in open(f):
        comm, n = line.rsplit(" ", 1)
        t[comm if comm in ("pagoda-engine", "pagoda-http") else "other"] += int(n)
    return t
t0, t1 = ticks(base + ".cpu0"), ticks(base + ".cpu1")
delta = {k: t1[k] - t0[k] for k in ("pagoda-engine", "pagoda-http", "other")}
total = sum(delta.values()) or 1
us = d.get("server_cpu_us_per_token") or float("nan")
split = " ".join(f"{k.replace('pagoda-', '')} {us * v / total:5.1f}" for k, v in delta.items())
sent = d["requests"]["sent"]
print(f"interval {interval:>3}  sent {sent} ({'saturated' if c['saturated'] else 'not saturated'})  "
      f"errors {json.dumps(d['errors'])}  "
      f"send lag p99 {c['send_lag_p99_ms']:7.2f} ms  TTFT p50 {d['ttft_ms']['p50']:7.1f} ms  "
      f"ITL p99 {d['itl_ms']['p99']:6.1f} ms  server CPU {us:5.1f} us/token ({split})  "
      f"writes/token {d.get('server_stream_writes_per_token') or float('nan'):.3f}")
PY
}

for r in $(seq 1 "$ROUNDS"); do
    for i in $INTERVALS; do one "$i" "$r"; done
done
