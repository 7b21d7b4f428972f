#!/usr/bin/env bash
# What `pagoda router` adds to TTFT and end-to-end latency at a given rate, against the
# simulated backend: one sim replica, reached through the router and directly, with the
# same open-loop workload interleaved over both URLs (`pagoda bench --compare-endpoints`),
# so host noise hits both arms alike. Prints each arm's p50/p99 and the differences.
# Usage: scripts/perf-router-overhead.sh [RATE (200)] [DURATION (30s)] [RUNS (3)]
set -euo pipefail
RATE=${1:-200}
DUR=${2:-30s}
RUNS=${3:-3}
BIN=${BIN:-build/apps/pagoda}
TMP=$(mktemp -d)
export XDG_STATE_HOME=$TMP/state
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
# A fast modelled card (--sim-speed 8) keeps the replica far from saturation at this rate,
# so the comparison measures the router, not a queue.
"$BIN" serve --backend sim --sim-model llama-3.1-8b --sim-eos-probability 0 --sim-speed 8 \
    --port 18651 2>"$TMP/serve.log" &
"$BIN" router --port 18652 --backend http://127.0.0.1:18651 2>"$TMP/router.log" &
for _ in $(seq 100); do curl -sf http://127.0.0.1:18652/ready >/dev/null && break; sleep 0.1; done
echo "rate=$RATE duration=$DUR runs=$RUNS (A = through the router, B = direct)"
for i in $(seq "$RUNS"); do
    "$BIN" bench --compare-endpoints http://127.0.0.1:18652 http://127.0.0.1:18651 --rate "$RATE" \
        --duration "$DUR" --input-len 64 --output-len 16 --seed "$i" --no-progress --no-record \
        --json "$TMP/run$i.json" >"$TMP/run$i.txt" 2>&1 || true
    python3 - "$TMP/run$i.json" "$i" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
a, b = d["a"], d["b"]
def p(r, m, q): return r[m][q]
print(f"run {sys.argv[2]}: ttft p50 {p(a,'ttft_ms','p50'):.2f} vs {p(b,'ttft_ms','p50'):.2f} ms "
      f"(+{p(a,'ttft_ms','p50') - p(b,'ttft_ms','p50'):.2f}), "
      f"p99 {p(a,'ttft_ms','p99'):.2f} vs {p(b,'ttft_ms','p99'):.2f} ms "
      f"(+{p(a,'ttft_ms','p99') - p(b,'ttft_ms','p99'):.2f}); "
      f"e2e p50 +{p(a,'e2e_ms','p50') - p(b,'e2e_ms','p50'):.2f} ms; "
      f"failed {a['requests']['failed']}/{b['requests']['failed']}; "
      f"rate {a['requests_per_s'] + b['requests_per_s']:.0f}/s")
PY
done
