#!/usr/bin/env bash
# End-to-end test (slow: ~2 min) of the idle clock of pool sizing in `pagoda fleet up`
# (issue 37): a pool scaled by hand (automatic sizing paused) keeps reading the router's
# signals, so when it is handed back its idle time counts from its last request, even one
# older than the one-minute window of finished requests the sizer reads. idle_to_zero_s is
# 80 s: a request at ~25 s, handed back at ~90 s (65 s after the request, 90 s after the
# start) keeps its replica; it goes to zero 80 s after the request, not before.
# Usage: fleet_idle_test.sh PAGODA_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/e2e_lib.sh"
export XDG_DATA_HOME="$TMP/data"
BASE=$((29500 + ($$ % 300) * 10))
RPORT=$((BASE + 9))
URL="http://127.0.0.1:$RPORT"
fleet_file idle "" "scale_down_cooldown_s = 0"
sed -i 's/^replicas = 2$/replicas = 1/; s/^idle_to_zero_s = 1$/idle_to_zero_s = 80/; s/^scale_down_stabilisation_s = 3600$/scale_down_stabilisation_s = 0/' "$TMP/idle.toml"
sized() {  # replicas, and the last decision's reason
    curl -s "$URL/admin/fleet" | jq_ 'd["sizing"]["main"]["replicas"], (d["sizing"]["main"]["last_decision"] or {}).get("reason")'
}

T0=$(date +%s)
"$BIN" fleet up "$TMP/idle.toml" 2>"$TMP/idle.log" &
PIDS+=($!)
for _ in $(seq 300); do curl -sf "$URL/ready" >/dev/null 2>&1 && break; sleep 0.1; done
"$BIN" fleet scale "$TMP/idle.toml" --pool main --replicas 1 >"$TMP/scale.out" 2>&1
expect_in "sizing paused by a manual scale" '"automatic": false' "$TMP/scale.out"
sleep $((T0 + 25 - $(date +%s)))
CODE=$(curl -s -o "$TMP/c.json" -w '%{http_code}' "$URL/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"llama-3.1-8b","prompt":"Once upon a time","max_tokens":8}')
TREQ=$(date +%s)
expect_eq "a request while paused is served" "$CODE" "200"
# 65 s after the request (out of the sizer's one-minute window), 90 s after the start (past
# idle_to_zero_s): handed back, the pool is still within its idle time.
sleep $((TREQ + 65 - $(date +%s)))
"$BIN" fleet scale "$TMP/idle.toml" --pool main --auto >/dev/null 2>&1
sleep 3
expect_eq "handed back 65 s after its last request (idle_to_zero_s 80): the replica stays" "$(sized)" "(1, 'manual')"
# ... and goes once 80 s have passed since the request.
for _ in $(seq 200); do [ "$(sized)" == "(0, 'idle')" ] && break; sleep 0.1; done
expect_eq "80 s after the request: scaled to zero" "$(sized)" "(0, 'idle')"
expect_eq "the decision's idle time counts from the request" "$(events idle "[round(d['inputs']['since_request_s']) >= 80 and round(d['inputs']['since_request_s']) <= $(($(date +%s) - TREQ + 1)) for k, d in ev if k == 'pool_sized' and d['to'] == 0]")" "[True]"
"$BIN" fleet down "$TMP/idle.toml" >/dev/null 2>&1
echo "fleet_idle_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
