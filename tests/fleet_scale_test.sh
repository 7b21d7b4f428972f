#!/usr/bin/env bash
# End-to-end test of pool sizing in `pagoda fleet up` (issue 37) on sim replicas: a
# scale-down from 2 to 1 while 32 streams run loses none (each stream's text equals an
# undisturbed run's: the leaving replica is taken out of routing, then drains); the pool
# scaled to 0, handed back to automatic sizing, serves a request after the wake-up (the
# router holds it) instead of refusing it; a hold shorter than the wake-up answers 503 with
# Retry-After; every decision is audited; bad sizing keys are refused.
# Usage: fleet_scale_test.sh PAGODA_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/e2e_lib.sh"
export XDG_DATA_HOME="$TMP/data"
BASE=$((29000 + ($$ % 300) * 10))
RPORT=$((BASE + 9))
URL="http://127.0.0.1:$RPORT"

FPID=""
fleet_up() {
    "$BIN" fleet up "$TMP/$1.toml" 2>"$TMP/$1.log" &
    FPID=$!
    PIDS+=("$FPID")
    for _ in $(seq 300); do
        curl -sf "$URL/ready" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    bad "fleet $1 did not come up" "$(tail -5 "$TMP/$1.log")"
    return 1
}
ready_backends() {
    curl -s "$URL/admin/pools" | jq_ 'sum(1 for p in d["pools"] for b in p["backends"] if b["ready"])'
}
wait_ready() {  # N
    for _ in $(seq 300); do [ "$(ready_backends)" == "$1" ] && return 0; sleep 0.1; done
    return 1
}

# 1. Sizing keys are checked at load.
fleet_file errs "" ""
sed -i "s/^min_replicas = 0$/min_replicas = 3/" "$TMP/errs.toml"
expect_in "min above max is refused" "min_replicas 3 is above max_replicas 2" <("$BIN" fleet render "$TMP/errs.toml" 2>&1)
fleet_file errs "" ""
sed -i "s/^max_replicas = 2$/max_replicas = 0/" "$TMP/errs.toml"
expect_in "max_replicas 0 is refused with its range" "max_replicas" <("$BIN" fleet render "$TMP/errs.toml" 2>&1)

# Rendered for Kubernetes: a KEDA ScaledObject (min 0) and an HPA (min 1) with the bounds.
fleet_file render "" ""
"$BIN" fleet render "$TMP/render.toml" -o "$TMP/zero.yaml"
sed -i "s/^min_replicas = 0$/min_replicas = 1/" "$TMP/render.toml"
"$BIN" fleet render "$TMP/render.toml" -o "$TMP/hpa.yaml"
for y in zero hpa; do
    if (cd "$SRC/tests/e2e" && node validate_k8s.mjs "$TMP/$y.yaml") >"$TMP/$y.out" 2>&1; then
        ok "fleet render ($y): $(tail -1 "$TMP/$y.out")"
    else
        bad "fleet render ($y) validates" "$(cat "$TMP/$y.out")"
    fi
done
expect_in "scale to zero renders a ScaledObject with the bounds" "minReplicaCount: 0" "$TMP/zero.yaml"
expect_in "min 1 renders an HPA with the bounds" "maxReplicas: 2" "$TMP/hpa.yaml"
expect_in "the stabilisation window is the fleet's" "stabilizationWindowSeconds: 3600" "$TMP/hpa.yaml"

# 2. Undisturbed: 32 streams on two replicas.
fleet_file scale "" ""
fleet_up scale || exit 1
wait_ready 2 || bad "two replicas ready" "$(curl -s "$URL/admin/pools")"
python3 "$SRC/tests/stream_texts.py" "$URL" 32 300 --model llama-3.1-8b "$TMP/calm.json"
expect_eq "undisturbed: 32 streams finished" "$(jq_ 'sum(1 for r in d.values() if r["finish_reason"] == "length" and not r["error"])' <"$TMP/calm.json")" "32"

# 3. The same 32 streams; once all have their first token, scale 2 -> 1 by hand.
python3 "$SRC/tests/stream_texts.py" "$URL" 32 300 --model llama-3.1-8b "$TMP/scaled.json" --started "$TMP/started" &
SP=$!
for _ in $(seq 300); do [ -e "$TMP/started" ] && break; sleep 0.05; done
"$BIN" fleet scale "$TMP/scale.toml" --pool main --replicas 1 >"$TMP/scale.out" 2>&1
expect_in "fleet scale answers" '"replicas": 1' "$TMP/scale.out"
wait $SP
expect_eq "scale-down under 32 streams: every stream equals the undisturbed one" "$(python3 -c '
import json,sys
a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
bad=[k for k in a if a[k]["text"] != b[k]["text"] or b[k]["error"] or b[k]["finish_reason"] != "length"]
print(len(a), bad)' "$TMP/calm.json" "$TMP/scaled.json")" "32 []"
for _ in $(seq 100); do
    [ "$(events scale 'len([1 for k, d in ev if k == "fleet_replica_drained"])')" == "1" ] && break
    sleep 0.1
done
expect_eq "the leaving replica drained and was not restarted" "$(events scale '[(k, d.get("to", d.get("port")), d.get("exit")) for k, d in ev if k in ("pool_sized", "fleet_replica_drained", "fleet_replica_exit")]')" "[('pool_sized', 1, None), ('fleet_replica_drained', $((BASE + 1)), 'exit')]"
expect_eq "one replica is routed" "$(ready_backends)" "1"

# 4. Scale to zero, back to automatic: a request is held while the pool wakes, then served.
"$BIN" fleet scale "$TMP/scale.toml" --pool main --replicas 0 >/dev/null 2>&1
wait_ready 0 || bad "zero replicas" "$(curl -s "$URL/admin/pools")"
# The 32 streams finished moments ago: a request within idle_to_zero_s (1 s) is traffic and
# would rightly wake the pool. Hand it back once that has passed.
sleep 1.5
"$BIN" fleet scale "$TMP/scale.toml" --pool main --auto >/dev/null 2>&1
sleep 2  # idle, nothing forecast: it stays at zero
expect_eq "an idle pool at zero stays at zero" "$(curl -s "$URL/admin/fleet" | jq_ 'd["sizing"]["main"]["replicas"], d["sizing"]["main"]["last_decision"].get("reason")')" "(0, 'manual')"
T0=$(date +%s.%N)
CODE=$(curl -s -o "$TMP/woke.json" -w '%{http_code}' "$URL/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"llama-3.1-8b","prompt":"Once upon a time","max_tokens":8}')
T1=$(date +%s.%N)
expect_eq "a request to the pool at zero is served after the wake-up" "$CODE $(jq_ 'd["usage"]["completion_tokens"]' <"$TMP/woke.json")" "200 8"
expect_eq "it waited for the replica's start (held, not refused)" "$(python3 -c "print($T1 - $T0 > 0.3)")" "True"
expect_eq "the wake-up is audited with its reason" "$(events scale '[d["reason"].split(":")[0] for k, d in ev if k == "pool_sized"][-1]')" "wake"
for _ in $(seq 50); do
    [ "$(events scale 'len([1 for k, d in ev if k == "pool_sized_checked"])')" == "3" ] && break
    sleep 0.1
done
expect_eq "each change's effect was checked: 2->1, 1->0, 0->1 all ok" "$(events scale '[(d["from"], d["to"], d["outcome"]) for k, d in ev if k == "pool_sized_checked"]')" "[(2, 1, 'ok'), (1, 0, 'ok'), (0, 1, 'ok')]"
"$BIN" fleet down "$TMP/scale.toml" >/dev/null 2>&1
wait "$FPID" 2>/dev/null

# 5. A hold shorter than the wake-up: 503 with Retry-After, and the pool still wakes.
fleet_file hold "hold_timeout_s = 0.2" ""
sed -i "s/^replicas = 2$/replicas = 0/" "$TMP/hold.toml"
fleet_up hold || exit 1
curl -s -D "$TMP/hold.h" -o "$TMP/hold.json" "$URL/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"llama-3.1-8b","prompt":"Once","max_tokens":4}' >/dev/null
expect_in "held past hold_timeout_s: 503" "HTTP/1.1 503" "$TMP/hold.h"
expect_in "with Retry-After" "Retry-After" "$TMP/hold.h"
expect_in "saying why" "no backend became ready within the hold time" "$TMP/hold.json"
wait_ready 1 && ok "the pool woke anyway" || bad "the pool woke anyway" "$(curl -s "$URL/admin/fleet")"
"$BIN" fleet down "$TMP/hold.toml" >/dev/null 2>&1
wait "$FPID" 2>/dev/null

# 6. A wake-up whose replica never becomes ready (a model the card cannot hold) is recorded
#    as failed after max(5 s, 3 x cold_start_s).
fleet_file broken "hold_timeout_s = 0.2" "cold_start_s = 1"
sed -i "s/^replicas = 2$/replicas = 0/; s/^sim-model = \"llama-3.1-8b\"$/sim-model = \"llama-3-70b\"/" "$TMP/broken.toml"
fleet_up broken || exit 1
curl -s -o /dev/null "$URL/v1/completions" -H 'Content-Type: application/json' -d '{"prompt":"Once","max_tokens":4}'
for _ in $(seq 150); do
    [ -n "$(events broken '[d["outcome"] for k, d in ev if k == "pool_sized_checked"]' | tr -d '[]')" ] && break
    sleep 0.1
done
expect_eq "a scale-up that never became ready is recorded as failed" "$(events broken '[(d["to"], d["ready"], d["outcome"]) for k, d in ev if k == "pool_sized_checked"][:1]')" "[(1, 0, 'failed')]"
"$BIN" fleet down "$TMP/broken.toml" >/dev/null 2>&1
wait "$FPID" 2>/dev/null

echo "fleet_scale_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
