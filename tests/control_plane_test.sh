#!/usr/bin/env bash
# End-to-end tests of the control plane of `pagoda serve` (issue 12, second part), with curl
# on 127.0.0.1: --config FILE seeding version 1, context-length statistics (warmup left
# out), the measured block-size policy and GET /admin/block-size, the audit log, the
# automation mode, a restart that keeps history, stable marks and length statistics and
# starts the policy from them, and the OOM guard rolling back a change that starves the KV
# pool under load (tests/e2e/oom_guard_under_load.py).
# Usage: control_plane_test.sh PAGODA_BIN SOURCE_DIR
set -uo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/e2e_lib.sh"
req() {  # METHOD PATH [BODY]: body to $TMP/body, prints the status
    curl -s -o "$TMP/body" -w '%{http_code}' -X "$1" "$(URL "$2")" \
        -H 'Content-Type: application/json' ${3:+-d "$3"}
}
STATE="$TMP/replica-state"

# 1. --config: a TOML file of serve flags seeds version 1; the command line wins over it.
cat >"$TMP/pagoda.toml" <<'TOML'
# serve flags, long names as keys
max_num_seqs = 48
block-size = 32
max-num-batched-tokens = 4096
TOML
printf 'max_num_seqs = 48\nmax_num_sequences = 4\n' >"$TMP/bad.toml"
"$BIN" serve --config "$TMP/bad.toml" 2>"$TMP/bad.log"
expect_eq "an unknown key in --config exits 1" "$?" "1"
expect_in "naming the line and the key" 'line 2: unknown key "max_num_sequences"' "$TMP/bad.log"
printf 'max_num_seqs = [1\n' >"$TMP/bad.toml"
"$BIN" serve --config "$TMP/bad.toml" 2>"$TMP/bad.log"
expect_in "a TOML syntax error names line and column" 'bad.toml: line 1, column' "$TMP/bad.log"

FLAGS=(--state-dir "$STATE" --config "$TMP/pagoda.toml" --max-num-batched-tokens 1024
       --stable-window 1s --block-size-policy measured --block-size-min-samples 20)
start_server "$TMP/p1.log" "${FLAGS[@]}" || exit 1
expect_eq "version 1 from the file and the flags" "$(req GET /admin/config >/dev/null; jq_ '(d["id"], d["source"], d["value"]["max_num_seqs"], d["value"]["block_size"], d["value"]["max_num_batched_tokens"])' <"$TMP/body")" "(1, 'startup', 48, 32, 1024)"
expect_in "the kernels were calibrated" "block_size_calibrated seconds=" "$TMP/p1.log"

# 2. Context-length statistics: 30 finished requests (warmup requests are not counted).
for i in $(seq 30); do
    curl -s -o /dev/null "$(URL /v1/completions)" -H 'Content-Type: application/json' \
        -d "{\"prompt\": \"Once upon a time $i\", \"max_tokens\": $((10 + i)), \"temperature\": 0, \"ignore_eos\": true}"
done
sleep 2.5
expect_eq "GET /admin/block-size" "$(req GET /admin/block-size)" "200"
expect_eq "30 lengths, policy measured" "$(jq_ '(d["lengths"]["count"], d["policy"], d["block_size"], d["last_decision"])' <"$TMP/body")" "(30, 'measured', 32, None)"
expect_eq "the mean length is prompt + output" "$(jq_ '25 < d["lengths"]["mean"] < 40' <"$TMP/body")" "True"

# 3. A decision with its numbers: distribution, cost per candidate, choice, reason.
expect_eq "POST /admin/block-size/decide" "$(req POST /admin/block-size/decide)" "200"
expect_eq "decision numbers" "$(jq_ '(d["last_decision"]["distribution"]["count"], len(d["last_decision"]["measured"]["candidates"]), d["last_decision"]["action"] in ("kept", "changed"), len(d["last_decision"]["reason"]) > 10, d["last_decision"]["window"] in ("all time", time.strftime("hour %-H UTC", time.gmtime())))' <"$TMP/body")" "(30, 6, True, True, True)"
expect_eq "the audit log holds it" "$(req GET '/admin/events?kind=block_size_decision&limit=5' >/dev/null; jq_ '(len(d["events"]), d["events"][0]["detail"]["choice"] > 0)' <"$TMP/body")" "(1, True)"
expect_eq "events: a bad limit is 400" "$(req GET '/admin/events?limit=x')" "400"

# 4. Automation mode: paused by a person, recorded, on again; a bad mode is a 400.
expect_eq "PUT /admin/automation paused" "$(req PUT /admin/automation '{"mode": "paused", "reason": "maintenance"}')" "200"
expect_eq "a paused decision does not act" "$(req POST /admin/block-size/decide >/dev/null; jq_ 'd["last_decision"]["action"] in ("kept", "paused") and d["automation"] == "paused"' <"$TMP/body")" "True"
curl -s "$(URL /metrics)" >"$TMP/metrics"
expect_in "pagoda_automation_paused" 'pagoda_automation_paused{model_name="stories260K.gguf"} 1' "$TMP/metrics"
expect_in "pagoda_context_length_requests_total" 'pagoda_context_length_requests_total{model_name="stories260K.gguf"} 30' "$TMP/metrics"
expect_in "pagoda_block_size_decisions_total" 'pagoda_block_size_decisions_total{' "$TMP/metrics"
expect_in "pagoda_oom_risk" 'pagoda_oom_risk{model_name="stories260K.gguf",signal="kv_free_blocks"} 0' "$TMP/metrics"
expect_eq "a bad mode is 400" "$(req PUT /admin/automation '{"mode": "sometimes"}')" "400"
expect_in "naming the allowed modes" "on, dry-run, paused" "$TMP/body"
expect_eq "on again" "$(req PUT /admin/automation '{"mode": "on"}'; jq_ 'd["mode"]' <"$TMP/body")" "200on"
expect_eq "the audit log has both switches" "$(req GET '/admin/events?kind=automation' >/dev/null; jq_ '[e["detail"]["to"] for e in d["events"]]' <"$TMP/body")" "['on', 'paused']"
if command -v promtool >/dev/null; then
    grep -v '^vllm:\|^# [A-Z]* vllm:' "$TMP/metrics" >"$TMP/metrics.native"
    promtool check metrics <"$TMP/metrics.native" >"$TMP/promtool.out" 2>&1 && ok "promtool passes the control families" || bad "promtool" "$(head -5 "$TMP/promtool.out")"
fi
for _ in $(seq 40); do [ "$(req GET /admin/config >/dev/null; jq_ 'd["stable"]' <"$TMP/body")" == "True" ] && break; sleep 0.1; done
expect_eq "the version turns stable" "$(jq_ 'd["stable"]' <"$TMP/body")" "True"
LAST=$(jq_ 'd["id"]' <"$TMP/body")

# 5. Restart: history, stable marks and length statistics survive; the policy starts from
# the stored distribution (a first decision before traffic).
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null
start_server "$TMP/p2.log" "${FLAGS[@]}" || exit 1
expect_in "the statistics are loaded" "context_lengths loaded=30 " "$TMP/p2.log"
grep -q "block_size_calibrated" "$TMP/p2.log" && bad "calibration cached" "calibrated again" || ok "calibration cached in pagoda.db"
expect_eq "the policy starts from them" "$(req GET /admin/block-size >/dev/null; jq_ '(d["lengths"]["count"], d["last_decision"]["distribution"]["count"])' <"$TMP/body")" "(30, 30)"
expect_in "a decision at start" "block_size_decision policy=measured" "$TMP/p2.log"
expect_eq "stable marks survive" "$(req GET '/admin/config/history?limit=100' >/dev/null; jq_ '[v["stable"] for v in d["versions"] if v["id"] == '"$LAST"']' <"$TMP/body")" "[True]"
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null

# 6. The OOM guard: memory cut to a tenth under load is rolled back to the last stable
# version by the guard; every request completes (acceptance 3).
start_server "$TMP/g.log" --state-dir "$TMP/guard-state" --kv-cache-memory 64MiB \
    --stable-window 1s --oom-guard-window 60s --oom-guard-free-blocks 0.05 --block-size-policy static || exit 1
python3 "$SRC/tests/e2e/oom_guard_under_load.py" "$PORT" >"$TMP/guard.out" 2>&1 && ok "OOM guard under load" || bad "OOM guard under load" "$(grep -A1 FAIL "$TMP/guard.out" | head -8)"
expect_in "the guard logs a warning" "warn oom_guard_rollback from=" "$TMP/g.log"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
