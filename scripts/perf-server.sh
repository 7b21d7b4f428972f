#!/usr/bin/env bash
# Server figures for docs/performance.md, against `pagoda serve` on the bundled model:
#  1. TTFT of the first request after /ready vs the median of the next 30 (steady state), each
#     after the same idle gap; and the back-to-back median;
#  2. server overhead per request (HTTP + JSON + tokenize + SSE): client-side latency minus
#     the engine-side end-to-end latency (from /metrics) over the same requests.
# Usage: scripts/perf-server.sh [MODEL] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-models/stories260K.gguf}
THREADS=${2:-2}
LOG=$(mktemp)
build/apps/pagoda serve -m "$MODEL" --port 0 -t "$THREADS" 2>"$LOG" &
PID=$!
trap 'kill $PID 2>/dev/null; rm -f $LOG' EXIT
for _ in $(seq 400); do
  PORT=$(grep -o 'listening url=http://127.0.0.1:[0-9]*' "$LOG" | head -1 | sed 's/.*://') || true
  [ -n "${PORT:-}" ] && break
  sleep 0.05
done
python3 - "$PORT" <<'PY'
import http.client, json, statistics, sys, time
port = int(sys.argv[1])
def conn(): return http.client.HTTPConnection("127.0.0.1", port)
while True:
    try:
        c = conn(); c.request("GET", "/ready"); r = c.getresponse(); r.read()
        if r.status == 200: break
    except OSError: pass
    time.sleep(0.005)
def ttft(c, i):
    body = json.dumps({"prompt": f"Once upon a time {i}", "max_tokens": 8, "stream": True, "temperature": 0})
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    first = None
    while True:
        line = r.readline()
        if not line: break
        if line.startswith(b"data: {") and first is None: first = time.perf_counter() - t0
    return first
c = conn()
c.request("GET", "/health"); c.getresponse().read()  # the connection exists before the clock starts
# Every measured request comes after the same idle gap, so first and steady pay the same
# thread wake-up (idle engine and compute threads sleep); what differs is warm-up alone.
GAP = 0.5
time.sleep(GAP)
first = ttft(c, 0)
def after_gap(i):
    time.sleep(GAP)
    return ttft(c, i)
steady = statistics.median(after_gap(i) for i in range(1, 31))
busy = statistics.median(ttft(c, i) for i in range(31, 61))  # back to back: threads still spinning
def e2e_sum():
    c2 = conn(); c2.request("GET", "/metrics"); m = c2.getresponse().read().decode()
    s = n = 0.0
    for line in m.splitlines():
        if line.startswith("vllm:e2e_request_latency_seconds_sum"): s = float(line.split()[-1])
        if line.startswith("vllm:e2e_request_latency_seconds_count"): n = float(line.split()[-1])
    return s, n
s0, n0 = e2e_sum()
N = 200
lat = []
for i in range(N):
    body = json.dumps({"prompt": "Hi", "max_tokens": 1, "temperature": 0})
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    lat.append(time.perf_counter() - t0)
s1, n1 = e2e_sum()
engine_mean = (s1 - s0) / (n1 - n0)
client_mean = statistics.mean(lat)
print(f"first request TTFT after ready: {first*1e3:.2f} ms; steady-state median of 30 (each after {GAP} s idle, like the first): "
      f"{steady*1e3:.2f} ms; ratio {first/steady:.2f}; back-to-back median {busy*1e3:.2f} ms")
print(f"{N} requests (1 token, keep-alive): client mean {client_mean*1e3:.3f} ms, engine e2e mean {engine_mean*1e3:.3f} ms, "
      f"server overhead {1e3*(client_mean-engine_mean):.3f} ms per request ({100*(client_mean-engine_mean)/client_mean:.0f}% of the request)")
PY
