#!/usr/bin/env bash
# The after-idle penalty and what the warm levels buy (issue 15): starts `pagoda serve` on
# MODEL, and for each warm level (off, low, high; set with POST /admin/warmup) measures the
# latency of 1-token completions sent back to back and after IDLE seconds of idle (median,
# one keep-alive connection), and the CPU the level spent spinning
# (pagoda_warmup_cpu_seconds_total) per idle hour.
#   scripts/perf-idle.sh [MODEL] [IDLE_SECONDS...]    default: the bundled model, 0.5 5
# LEVELS="off low high" (default) picks the levels; SERVE_FLAGS adds `pagoda serve` flags
# (e.g. SERVE_FLAGS="--warm-pass-ms 0,0,0,0" for the spin without warm passes).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/apps/pagoda
MODEL=${1:-models/stories260K.gguf}
shift || true
GAPS=("${@:-0.5 5}")
# shellcheck disable=SC2206
GAPS=(${GAPS[*]})
LOG=$(mktemp)
"$BIN" serve -m "$MODEL" --port 0 --state-dir "$(mktemp -d)" --block-size-policy static \
    --no-dynamic-warmup ${SERVE_FLAGS:-} 2>"$LOG" &
PID=$!
trap 'kill $PID 2>/dev/null; rm -f "$LOG"' EXIT
for _ in $(seq 600); do
    PORT=$(grep -o 'listening url=http://127.0.0.1:[0-9]*' "$LOG" | head -1 | sed 's/.*://' || true)
    [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/ready" >/dev/null 2>&1 && break
    sleep 0.2
done
LEVELS=${LEVELS:-off low high} python3 - "$PORT" "${GAPS[@]}" <<'PY'
import http.client, json, os, statistics, sys, time, urllib.request
port, gaps = int(sys.argv[1]), [float(g) for g in sys.argv[2:]]
base = f"http://127.0.0.1:{port}"
c = http.client.HTTPConnection("127.0.0.1", port)
body = json.dumps({"prompt": "Once upon a time there was", "max_tokens": 1, "temperature": 0})
def one():
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    c.getresponse().read()
    return (time.perf_counter() - t0) * 1000
def spin_cpu():
    for line in urllib.request.urlopen(base + "/metrics").read().decode().splitlines():
        if line.startswith("pagoda_warmup_cpu_seconds_total"):
            return float(line.split()[-1])
    return 0.0
def level(l):
    req = urllib.request.Request(base + "/admin/warmup", json.dumps({"level": l, "duration": "1h"}).encode(),
                                 {"Content-Type": "application/json"})
    urllib.request.urlopen(req).read()
for _ in range(5): one()
print(f"{'level':6} {'back-to-back':>13} " + " ".join(f"{'after ' + str(g) + ' s':>12}" for g in gaps) + f" {'spin CPU-s per idle hour':>25}")
for l in os.environ["LEVELS"].split():
    level(l)
    b2b = statistics.median(one() for _ in range(30))
    cols, idle, cpu0 = [], 0.0, spin_cpu()
    for g in gaps:
        xs = []
        for _ in range(max(3, int(10 / max(g, 1)))):
            time.sleep(g); idle += g; xs.append(one())
        cols.append(statistics.median(xs))
    per_hour = (spin_cpu() - cpu0) / idle * 3600
    print(f"{l:6} {b2b:10.2f} ms " + " ".join(f"{x:9.2f} ms" for x in cols) + f" {per_hour:25.0f}")
PY
