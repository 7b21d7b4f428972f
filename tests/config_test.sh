#!/usr/bin/env bash
# End-to-end tests of the versioned configuration of `pagoda serve` (issue 12, first part),
# with curl on 127.0.0.1: GET/PUT /admin/config, history, If-Match conflicts, rollback,
# bad values that change nothing, /admin/knobs as a versioned alias, the admin key, the
# config metrics (promtool when installed), and history surviving a restart. The servers run
# --block-size-policy static: the policy (control_plane_test.sh) would add versions of its own.
# Usage: config_test.sh PAGODA_BIN SOURCE_DIR
set -uo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/e2e_lib.sh"
req() {  # METHOD PATH [BODY] [curl args...]: body to $TMP/body, prints the status
    local m=$1 p=$2 b=${3:-}
    shift 3 2>/dev/null || shift $#
    curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" "$(URL "$p")" \
        -H 'Content-Type: application/json' ${b:+-d "$b"} "$@"
}
STATE="$TMP/replica-state"

start_server "$TMP/c1.log" --block-size-policy static --state-dir "$STATE" --api-key inference-key || exit 1
expect_in "the start-up API warmup runs with --api-key set" "api_requests_ok=4/4" "$TMP/c1.log"

# 1. The first start is version 1, from the flags.
expect_eq "GET /admin/config" "$(req GET /admin/config)" "200"
expect_eq "first version" "$(jq_ '(d["id"], d["source"], d["value"]["max_num_seqs"], d["value"]["block_size"])' <"$TMP/body")" "(1, 'startup', 256, 16)"
expect_in "state database in --state-dir" "state_db=$STATE/pagoda.db" "$TMP/c1.log"

# 2. A change is applied and recorded with its diff.
expect_eq "PUT /admin/config" "$(req PUT /admin/config '{"max_num_seqs": 8, "reason": "smaller batch"}')" "200"
expect_eq "new version" "$(jq_ '(d["id"], d["source"], d["reason"], d["diff"]["max_num_seqs"]["to"])' <"$TMP/body")" "(2, 'admin_api', 'smaller batch', 8)"
expect_eq "knobs follow" "$(curl -s "$(URL /admin/knobs)" | jq_ 'd["max_num_seqs"]')" "8"

# 3. Bad input: 400 naming key, value and range; nothing changes.
expect_eq "out of range is 400" "$(req PUT /admin/config '{"max_num_seqs": 0}')" "400"
expect_in "names key, value and range" "'max_num_seqs' = 0 is out of range \[1, 65536\]" "$TMP/body"
expect_eq "unknown key is 400" "$(req PUT /admin/config '{"max_num_sequences": 8}')" "400"
expect_in "lists the known keys" "unknown setting 'max_num_sequences' (known: max_num_seqs" "$TMP/body"
expect_eq "wrong type is 400" "$(req PUT /admin/config '{"max_num_seqs": "many"}')" "400"
expect_eq "unsupported block size is 400" "$(req PUT /admin/config '{"block_size": 24}')" "400"
expect_in "names the allowed sizes" "allowed: 8, 16, 32, 48, 64, 128" "$TMP/body"
expect_eq "still version 2" "$(req GET /admin/config >/dev/null; jq_ '(d["id"], d["value"]["max_num_seqs"])' <"$TMP/body")" "(2, 8)"

# 4. Optimistic concurrency: a change based on an old version is a 409 with the current one.
expect_eq "stale If-Match is 409" "$(req PUT /admin/config '{"max_num_seqs": 4}' -H 'If-Match: "1"')" "409"
expect_eq "409 names the current version" "$(jq_ 'd["current_version"]' <"$TMP/body")" "2"
expect_eq "current If-Match is 200" "$(req PUT /admin/config '{"max_num_seqs": 4}' -H 'If-Match: "2"')" "200"

# 5. /admin/knobs is a versioned alias.
expect_eq "PUT /admin/knobs" "$(req PUT /admin/knobs '{"max_num_batched_tokens": 512}')" "200"
expect_eq "knob change is version 4" "$(req GET /admin/config >/dev/null; jq_ '(d["id"], d["reason"], d["value"]["max_num_batched_tokens"])' <"$TMP/body")" "(4, 'PUT /admin/knobs', 512)"

# 6. History, newest first, and rollback.
expect_eq "history" "$(req GET '/admin/config/history?limit=10')" "200"
expect_eq "history ids" "$(jq_ '[v["id"] for v in d["versions"]]' <"$TMP/body")" "[4, 3, 2, 1]"
expect_eq "no stable version yet: 404" "$(req POST /admin/config/rollback '{}')" "404"
expect_eq "rollback to an unknown id: 404" "$(req POST /admin/config/rollback '{"to": 99}')" "404"
expect_eq "rollback to 1" "$(req POST /admin/config/rollback '{"to": 1, "reason": "test"}')" "200"
expect_eq "rollback is version 5 with 1's value" "$(jq_ '(d["id"], d["source"], d["value"]["max_num_seqs"], d["value"]["max_num_batched_tokens"])' <"$TMP/body")" "(5, 'rollback', 256, 2048)"
expect_eq "engine back to version 1's knobs" "$(curl -s "$(URL /admin/knobs)" | jq_ '(d["max_num_seqs"], d["max_num_batched_tokens"])')" "(256, 2048)"

# 7. KV re-layout under load: 64 streams while the block size walks 16 -> 48 -> 8 -> 32.
python3 "$SRC/tests/e2e/relayout_under_load.py" "$PORT" inference-key >"$TMP/relayout.out" 2>&1 && ok "re-layout under load" || bad "re-layout under load" "$(grep -A1 FAIL "$TMP/relayout.out" | head -8)"
grep -q 'kv_relayout block_size=32' "$TMP/c1.log" && ok "re-layout logged with its pause" || bad "re-layout log" "$(grep kv_relayout "$TMP/c1.log")"
# A pool that cannot be allocated is refused; the old one keeps serving.
expect_eq "unallocatable pool is refused" "$(req PUT /admin/config '{"kv_cache_memory": 17592186044416}')" "400"
expect_in "refusal says the old pool serves" "the old pool keeps serving" "$TMP/body"
expect_eq "the refusal is in the audit log" "$(req GET '/admin/events?kind=refusal' >/dev/null; jq_ '(len(d["events"]), d["events"][0]["detail"]["allocation_failure"], d["events"][0]["detail"]["diff"]["kv_cache_memory"]["to"])' <"$TMP/body")" "(1, True, 17592186044416)"
expect_eq "block size unchanged after the refusal" "$(req GET /admin/config >/dev/null; jq_ 'd["value"]["block_size"]' <"$TMP/body")" "32"

# 8. Requests still complete after all that.
expect_eq "completion after changes" "$(req POST /v1/completions '{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}' -H 'Authorization: Bearer inference-key')" "200"

# 9. Metrics.
curl -s "$(URL /metrics)" >"$TMP/metrics"
expect_in "pagoda_config_version" 'pagoda_config_version{model_name="stories260K.gguf"} 8' "$TMP/metrics"
expect_in "changes by source" 'pagoda_config_changes_total{model_name="stories260K.gguf",source="admin_api"} 6' "$TMP/metrics"
expect_in "refusals counted" 'pagoda_config_refusals_total{model_name="stories260K.gguf"} 1' "$TMP/metrics"
expect_in "re-layout pause published" 'pagoda_kv_relayout_pause_seconds{model_name="stories260K.gguf"}' "$TMP/metrics"
expect_in "rollbacks by reason" 'pagoda_config_rollbacks_total{model_name="stories260K.gguf",reason="manual"} 1' "$TMP/metrics"
if command -v promtool >/dev/null; then
    grep -v '^vllm:\|^# [A-Z]* vllm:' "$TMP/metrics" >"$TMP/metrics.native"
    promtool check metrics <"$TMP/metrics.native" >"$TMP/promtool.out" 2>&1 && ok "promtool passes the config families" || bad "promtool" "$(head -5 "$TMP/promtool.out")"
fi

# 10. Restart: the history continues. The flags (block size 16) differ from the last
# version (32 after the re-layouts), so the start is recorded as a version; the flags win.
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null
start_server "$TMP/c2.log" --block-size-policy static --state-dir "$STATE" --api-key inference-key || exit 1
expect_eq "history survives a restart" "$(req GET '/admin/config/history?limit=100' >/dev/null; jq_ '(d["current_version"], len(d["versions"]), d["versions"][0]["source"], d["versions"][0]["diff"]["block_size"])' <"$TMP/body")" "(9, 9, 'startup', {'from': 32, 'to': 16})"
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null
start_server "$TMP/c2b.log" --block-size-policy static --state-dir "$STATE" --api-key inference-key || exit 1
expect_eq "the same flags again: no new version" "$(req GET /admin/config >/dev/null; jq_ 'd["id"]' <"$TMP/body")" "9"
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null
# ... with other flags: recorded as a startup version.
start_server "$TMP/c3.log" --block-size-policy static --state-dir "$STATE" --max-num-seqs 32 || exit 1
expect_eq "other flags are a new version" "$(req GET /admin/config >/dev/null; jq_ '(d["id"], d["source"], d["diff"]["max_num_seqs"]["to"])' <"$TMP/body")" "(10, 'startup', 32)"
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null

# 11. The admin key: inference keys never open /admin.
start_server "$TMP/c4.log" --block-size-policy static --state-dir "$TMP/other-state" --api-key inference-key --admin-api-key admin-key || exit 1
expect_eq "no key: 401" "$(req GET /admin/config)" "401"
expect_eq "inference key: 401" "$(req GET /admin/config '' -H 'Authorization: Bearer inference-key')" "401"
expect_eq "admin key: 200" "$(req GET /admin/config '' -H 'Authorization: Bearer admin-key')" "200"
expect_eq "admin key does not open /v1" "$(req POST /v1/completions '{"prompt": "x", "max_tokens": 1}' -H 'Authorization: Bearer admin-key')" "401"
# The CLI over the same API.
"$BIN" config rollback --url "$(URL '')" --admin-api-key admin-key >"$TMP/cli.out" 2>&1
expect_in "a rollback with no stable version names the CLI's own flag" 'pagoda config rollback --to ID' "$TMP/cli.out"
"$BIN" config get --url "$(URL '')" >"$TMP/cli.out" 2>&1; rc=$?
expect_eq "pagoda config get without the key exits 1" "$rc" "1"
expect_in "and says why" "HTTP 401" "$TMP/cli.out"
PAGODA_ADMIN_API_KEY=admin-key "$BIN" config set --url "$(URL '')" max_num_seqs=16 --reason "from the cli" >"$TMP/cli.out" 2>&1
expect_eq "pagoda config set" "$(jq_ '(d["id"], d["reason"], d["value"]["max_num_seqs"])' <"$TMP/cli.out")" "(2, 'from the cli', 16)"
"$BIN" config history --url "$(URL '')" --admin-api-key admin-key -n 5 >"$TMP/cli.out" 2>&1
expect_eq "pagoda config history" "$(jq_ '[v["id"] for v in d["versions"]]' <"$TMP/cli.out")" "[2, 1]"
"$BIN" config rollback --url "$(URL '')" --admin-api-key admin-key --to 1 >"$TMP/cli.out" 2>&1
expect_eq "pagoda config rollback" "$(jq_ '(d["id"], d["value"]["max_num_seqs"])' <"$TMP/cli.out")" "(3, 256)"
expect_eq "a person's set and rollback are in the audit log" "$(req GET '/admin/audit?limit=50' '' -H 'Authorization: Bearer admin-key' >/dev/null; jq_ '[(e["kind"], e["detail"]["outcome"], e["detail"].get("version")) for e in reversed(d["events"]) if e["kind"].startswith("config_")]' <"$TMP/body")" "[('config_rollback', 'refused', None), ('config_change', 'ok', 2), ('config_rollback', 'ok', 3)]"
PAGODA_ADMIN_API_KEY=admin-key "$BIN" config set --url "$(URL '')" kv_cache_memory=128MiB >"$TMP/cli.out" 2>&1
expect_eq "config set takes units as the flag does" "$(jq_ 'd["value"]["kv_cache_memory"]' <"$TMP/cli.out")" "134217728"
"$BIN" config set --url "$(URL '')" --admin-api-key admin-key max_num_seqs >"$TMP/cli.out" 2>&1; rc=$?
expect_eq "a malformed KEY=VALUE exits 2" "$rc" "2"
expect_in "naming the argument" "'max_num_seqs' is not KEY=VALUE" "$TMP/cli.out"

# 12. A corrupt state database: a clear error and a non-zero exit.
mkdir -p "$TMP/bad-state" && head -c 4096 /dev/urandom >"$TMP/bad-state/pagoda.db"
"$BIN" serve -m "$MODEL" --port 0 --state-dir "$TMP/bad-state" 2>"$TMP/bad.log" &
bpid=$!
wait $bpid
rc=$?
expect_eq "corrupt state database exits non-zero" "$([ $rc -ne 0 ] && echo yes)" "yes"
expect_in "names the file and what to do" "bad-state/pagoda.db" "$TMP/bad.log"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
