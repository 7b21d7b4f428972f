#!/usr/bin/env bash
# End-to-end tests of monitoring, alert rules and tiered automatic response (issue 14),
# with curl, `pagoda bench` load and a webhook receiver on 127.0.0.1:
# 1. warning: a tight rule fires after its `for` under load; the report files have every
#    section; the webhook gets the payload; max_num_seqs steps down 10% (/admin/config and
#    /metrics) and is restored after the alert resolves;
# 2. critical: a bad config applied under load fires the rule; rollback to the stable
#    version, /ready and pagoda_replica_state show shedding, then recovery; the hook runs;
# 3. severe: the disaster-recovery and redeploy hooks run with the alert JSON; a hook
#    that hangs is killed at --hook-timeout; Alertmanager's v4 payload runs the mapped action;
# 4. dry-run changes nothing and audits everything; pause and resume;
# 5. bad rule files (at start and on reload), a webhook that is down; every metric a
#    default rule uses is in a live scrape.
# Usage: alerts_test.sh PAGODA_BIN SOURCE_DIR
set -uo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/e2e_lib.sh"
req() {  # METHOD PATH [BODY]: body to $TMP/body, prints the status
    curl -s -o "$TMP/body" -w '%{http_code}' -X "$1" "$(URL "$2")" \
        -H 'Content-Type: application/json' ${3:+-d "$3"}
}
audit() {  # KIND: the audit log's events of KIND (newest first) as JSON in $TMP/audit
    curl -s "$(URL "/admin/audit?limit=500&kind=$1")" >"$TMP/audit"
}
wait_for() {  # SECONDS PYTHON-EXPR-over-d URL-PATH: polls until the expression is true
    local t=$1 expr=$2 path=$3
    for _ in $(seq $((t * 10))); do
        if [ "$(curl -s "$(URL "$path")" | jq_ "$expr" 2>/dev/null)" == "True" ]; then return 0; fi
        sleep 0.1
    done
    return 1
}
# (3000 requests: more than the seconds asked for send on this machine, and few enough that
# the bench's prompts, built before the first request, take seconds, not the ~20 s that
# 20000 took in a slow hour, by which time the rules under test had stopped waiting.)
load() {  # SECONDS CONCURRENCY [OUTPUT_LEN]: closed-loop load in the background
    "$BIN" bench --url "$(URL "")" --concurrency "$2" --duration "$1s" --requests 3000 \
        --input-len 16 --output-len "${3:-16}" >"$TMP/bench.log" 2>&1 &
    LOAD_PID=$!
}
python3 "$SRC/tests/e2e/webhook_receiver.py" "$TMP/hooks.jsonl" "$TMP/hook.port" &
PIDS+=("$!")
for _ in $(seq 50); do [ -f "$TMP/hook.port" ] && break; sleep 0.1; done
HOOK_URL="http://127.0.0.1:$(cat "$TMP/hook.port")/alerts"
# A webhook that accepts the connection and never answers (each try waits --hook-timeout).
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
open(sys.argv[1], "w").write(str(s.getsockname()[1])); time.sleep(600)' "$TMP/hang.port" &
PIDS+=("$!")
for _ in $(seq 50); do [ -s "$TMP/hang.port" ] && break; sleep 0.1; done
HANG_URL="http://127.0.0.1:$(cat "$TMP/hang.port")/alerts"
cat >"$TMP/hook.sh" <<'SH'
#!/bin/sh
# Records the alert JSON from stdin and the PAGODA_ALERT_* environment.
{ cat; echo "env name=$PAGODA_ALERT_NAME severity=$PAGODA_ALERT_SEVERITY hook=$PAGODA_ALERT_HOOK"; } >>"$HOOK_LOG"
SH
chmod +x "$TMP/hook.sh"
export HOOK_LOG="$TMP/hook.log"

# 1. Warning tier.
cat >"$TMP/warn.toml" <<'TOML'
[settings]
interval = "200ms"

[[rule]]
name = "BatchBusy"
expr = "max(num_requests_running[1s]) >= 2"
for = "1s"
keep_firing_for = "1s"
severity = "warning"
summary = "two or more requests run at once"
actions = ["report", "webhook", "knob_step"]
[rule.knob_step]
knob = "max_num_seqs"
direction = "down"
max_steps = 1
cooldown = "500ms"
undo_after = "1s"
TOML
cp "$TMP/warn.toml" "$TMP/warn.good"
S1="$TMP/s1"
start_server "$TMP/s1.log" --state-dir "$S1" --rules "$TMP/warn.toml" --alert-webhook "$HOOK_URL" \
    --max-num-seqs 40 || exit 1
expect_eq "the rules are loaded" "$(req GET /admin/rules >/dev/null; jq_ '[r["name"] for r in d["rules"]]' <"$TMP/body")" "['BatchBusy']"
load 6 8
if wait_for 10 'any(a["rule"] == "BatchBusy" and a["state"] == "firing" for a in d["alerts"])' /admin/alerts; then
    ok "the warning fires under load"
else bad "the warning fires under load" "$(curl -s "$(URL /admin/alerts)")"; fi
audit alert
expect_eq "pending, then firing after its 'for' (1 s)" "$(jq_ 'str([e["detail"]["event"] for e in d["events"]][::-1][:2]) + " " + str(d["events"][-2]["at_ms"] - d["events"][-1]["at_ms"] >= 1000)' <"$TMP/audit")" "['pending', 'firing'] True"
if wait_for 5 'd["value"]["max_num_seqs"] == 36' /admin/config; then
    ok "max_num_seqs stepped down 10% (40 -> 36) in /admin/config"
else bad "max_num_seqs stepped down 10%" "$(curl -s "$(URL /admin/config)")"; fi
expect_eq "and in /metrics" "$(curl -s "$(URL /metrics)" | grep '^pagoda_max_num_seqs' | awk '{print $2}')" "36"
expect_eq "the step is a config version from the alert" "$(req GET /admin/config >/dev/null; jq_ 'd["source"]' <"$TMP/body")" "alert:BatchBusy"
wait "$LOAD_PID"
if wait_for 10 'd["value"]["max_num_seqs"] == 40' /admin/config; then
    ok "restored to 40 after the alert resolved"
else bad "restored after the alert resolved" "$(curl -s "$(URL /admin/config)")"; fi
audit alert
expect_in "the alert resolved" '"event": *"resolved"' <(python3 -m json.tool "$TMP/audit")
audit alert_action
expect_eq "actions: report, webhook, knob_step, knob_undo all ok" "$(jq_ 'sorted(set(e["detail"]["action"] + ":" + e["detail"]["result"] for e in d["events"]))' <"$TMP/audit")" "['knob_step:ok', 'knob_undo:ok', 'report:ok', 'webhook:ok']"
REPORT=$(ls "$S1"/reports/*.json 2>/dev/null | head -1)
if [ -n "$REPORT" ] && [ -f "${REPORT%.json}.md" ]; then ok "the report exists as JSON and Markdown"; else bad "report files" "$(ls -R "$S1")"; fi
expect_eq "the report has every section" "$(jq_ 'sorted(k for k in ["alert","metric_snapshot","series_window","kv_cache","scheduler_queue","slowest_requests","config","host"] if k in d and d[k] not in (None, {}, []))' <"$REPORT")" "['alert', 'config', 'host', 'kv_cache', 'metric_snapshot', 'scheduler_queue', 'series_window', 'slowest_requests']"
expect_eq "with the slowest requests' stage breakdown" "$(jq_ 'sorted(d["slowest_requests"]["data"][0]["stages_seconds"])' <"$REPORT")" "['decode', 'forward', 'http_output', 'network_write', 'output', 'prefill', 'queue', 'sample', 'schedule']"
expect_eq "the webhook got firing and resolved, with text and the report" "$(python3 -c '
import json,sys
ev=[json.loads(l)["body"] for l in open(sys.argv[1])]
print([e["alert"]["event"] for e in ev if e["alert"]["rule"]=="BatchBusy"], all("text" in e for e in ev), "report" in ev[0])' "$TMP/hooks.jsonl")" "['firing', 'resolved'] True True"
expect_eq "GET /admin/requests/slowest?n=3" "$(req GET '/admin/requests/slowest?n=3' >/dev/null; jq_ 'len(d["data"]) == 3 and d["data"][0]["e2e_seconds"] >= d["data"][2]["e2e_seconds"]' <"$TMP/body")" "True"

# 2. Critical tier: a bad config under load; rollback to the stable version and shedding.
cat >"$TMP/crit.toml" <<'TOML'
[settings]
interval = "200ms"

[[rule]]
name = "QueueWaitHigh"
expr = "quantile(0.9, queue_seconds[2s]) > 0.05"
for = "400ms"
keep_firing_for = "2s"
severity = "critical"
summary = "queue wait p90 above 50 ms"
TOML
S2="$TMP/s-crit"
# Its webhook hangs (3 tries of 10 s): the critical hook must not wait behind it.
start_server "$TMP/crit.log" --state-dir "$S2" --rules "$TMP/crit.toml" --stable-window 1s \
    --hook-critical "$TMP/hook.sh" --max-num-seqs 64 --alert-webhook "$HANG_URL" || exit 1
if wait_for 10 'd["stable"]' /admin/config; then ok "version 1 turns stable"; else bad "version 1 stable" "$(curl -s "$(URL /admin/config)")"; fi
load 12 16 32
sleep 1
"$BIN" config set max_num_seqs=1 --reason "a bad change" --url "$(URL "")" >/dev/null
expect_eq "the bad config is applied (version 2)" "$(req GET /admin/config >/dev/null; jq_ '(d["id"], d["value"]["max_num_seqs"])' <"$TMP/body")" "(2, 1)"
shed_seen=no
for _ in $(seq 100); do
    if [ "$(req GET /ready)" == "503" ] && grep -q shedding "$TMP/body"; then shed_seen=yes; break; fi
    sleep 0.1
done
expect_eq "/ready answers 503 shedding" "$shed_seen" "yes"
expect_eq "pagoda_replica_state says shedding" "$(curl -s "$(URL /metrics)" | grep '^pagoda_replica_state' | grep 'state="shedding"' | awk '{print $2}')" "1"
expect_eq "requests are still served while shedding" "$(curl -s -o /dev/null -w '%{http_code}' "$(URL /v1/completions)" -d '{"prompt":"Once","max_tokens":2}')" "200"
expect_eq "rolled back to version 1's settings" "$(req GET /admin/config >/dev/null; jq_ '(d["value"]["max_num_seqs"], d["source"])' <"$TMP/body")" "(64, 'alert:QueueWaitHigh')"
audit alert_action
expect_eq "the rollback is audited, from 2 to 1" "$(jq_ '[(e["detail"]["from"], e["detail"]["to"], e["detail"]["result"]) for e in d["events"] if e["detail"]["action"] == "rollback"]' <"$TMP/audit")" "[(2, 1, 'ok')]"
for _ in $(seq 200); do [ "$(req GET /ready)" == "200" ] && break; sleep 0.1; done
expect_eq "recovery: /ready is 200 again" "$(req GET /ready)" "200"
if wait_for 20 '[a["state"] for a in d["alerts"]] == ["inactive"]' /admin/alerts; then ok "the critical alert resolved"; else bad "resolved" "$(curl -s "$(URL /admin/alerts)")"; fi
expect_eq "and the replica serves again" "$(curl -s "$(URL /metrics)" | grep '^pagoda_replica_state' | grep 'state="serving"' | awk '{print $2}')" "1"
wait "$LOAD_PID"
expect_in "the critical hook got the alert JSON" '"rule":"QueueWaitHigh"' "$HOOK_LOG"
expect_in "and its environment" "env name=QueueWaitHigh severity=critical hook=hook_critical" "$HOOK_LOG"

# 3. Severe tier: both hooks run with the alert JSON; one that hangs is killed; the severe
#    alert inhibits a warning on the same target.
cat >"$TMP/severe.toml" <<'TOML'
[settings]
interval = "200ms"

[[rule]]
name = "ReplicaFailingTest"
expr = "increase(requests_total[10s]) >= 3"
severity = "severe"

[[rule]]
name = "SameSignalWarning"
expr = "increase(requests_total[10s]) >= 3"
severity = "warning"
actions = ["report"]
TOML
: >"$HOOK_LOG"
start_server "$TMP/severe.log" --state-dir "$TMP/s-severe" --rules "$TMP/severe.toml" \
    --hook-severe "$TMP/hook.sh" --hook-redeploy "$TMP/hook.sh; sleep 30" --hook-timeout 1s || exit 1
sleep 0.5  # the rules' first scrape comes before the requests
for _ in 1 2 3 4; do curl -s -o /dev/null "$(URL /v1/completions)" -d '{"prompt":"Once","max_tokens":2}'; done
if wait_for 10 'sum(e["detail"]["action"] == "hook_redeploy" for e in d["events"]) == 1' '/admin/audit?kind=alert_action'; then
    ok "the severe hooks ran"
else bad "the severe hooks ran" "$(curl -s "$(URL '/admin/audit?kind=alert_action')")"; fi
audit alert_action
expect_eq "disaster recovery ok; the hanging redeploy hook killed at --hook-timeout" "$(jq_ 'sorted((e["detail"]["action"], e["detail"]["result"], e["detail"].get("detail", "")) for e in d["events"] if e["detail"]["action"].startswith("hook"))' <"$TMP/audit")" "[('hook_redeploy', 'failed', 'killed after 1.0 s (--hook-timeout)'), ('hook_severe', 'ok', 'exit 0')]"
expect_eq "the warning on the same target is inhibited" "$(jq_ '[(e["detail"]["rule"], e["detail"]["result"]) for e in d["events"] if e["detail"]["action"] == "all"]' <"$TMP/audit")" "[('SameSignalWarning', 'inhibited')]"
expect_eq "both hooks got the alert JSON" "$(grep -c '"rule":"ReplicaFailingTest"' "$HOOK_LOG")" "2"
expect_in "with PAGODA_ALERT_* set" "env name=ReplicaFailingTest severity=severe hook=hook_redeploy" "$HOOK_LOG"

# 3b. Alertmanager's webhook (version 4; the example payload of its documentation) runs
#     the mapped action; 4b. pause and resume.
: >"$HOOK_LOG"
start_server "$TMP/am.log" --state-dir "$TMP/s-am" --rules none --hook-critical "$TMP/hook.sh" || exit 1
am() {  # STATUS: Alertmanager's payload for ExternalCritical
    cat <<JSON
{"version": "4", "groupKey": "{}:{alertname=\"ExternalCritical\"}", "truncatedAlerts": 0,
 "status": "$1", "receiver": "pagoda", "groupLabels": {"alertname": "ExternalCritical"},
 "commonLabels": {"alertname": "ExternalCritical", "severity": "critical"},
 "commonAnnotations": {"summary": "p99 over budget (from Prometheus)"},
 "externalURL": "http://alertmanager:9093",
 "alerts": [{"status": "$1", "labels": {"alertname": "ExternalCritical", "severity": "critical",
   "instance": "127.0.0.1:$PORT"}, "annotations": {"summary": "p99 over budget (from Prometheus)"},
   "startsAt": "2026-12-04T01:00:00.000Z", "endsAt": "0001-01-01T00:00:00Z",
   "generatorURL": "http://prometheus:9090/graph?g0.expr=up", "fingerprint": "c6a1d2e3f4a5b6c7"}]}
JSON
}
expect_eq "a firing Alertmanager payload is accepted" "$(req POST /admin/alerts/webhook "$(am firing)" >/dev/null; jq_ 'd["alerts"][0]["result"]' <"$TMP/body")" "firing"
expect_eq "its critical actions run: shedding" "$(req GET /ready)" "503"
if wait_for 10 'any(e["detail"]["action"] == "hook_critical" for e in d["events"])' '/admin/audit?kind=alert_action'; then ok "the critical hook ran"; else bad "critical hook"; fi
expect_in "with the external alert's JSON" '"rule":"ExternalCritical"' "$HOOK_LOG"
audit alert_action
expect_eq "no stable version yet: the rollback says so" "$(jq_ '[e["detail"]["error"] for e in d["events"] if e["detail"]["action"] == "rollback"]' <"$TMP/audit")" "['no stable config version to roll back to']"
expect_eq "resolved: serving again" "$(req POST /admin/alerts/webhook "$(am resolved)" >/dev/null; req GET /ready)" "200"
expect_eq "a payload of another version is refused" "$(req POST /admin/alerts/webhook '{"version": "3", "alerts": []}')" "400"
expect_eq "pause" "$(req POST /admin/control/pause '{}' >/dev/null; jq_ 'd["mode"]' <"$TMP/body")" "paused"
req POST /admin/alerts/webhook "$(am firing)" >/dev/null
expect_eq "paused: the alert is recorded, nothing acts (/ready stays 200)" "$(req GET /ready)" "200"
audit alert_action
expect_eq "every action audited as paused" "$(jq_ 'sorted(set(e["detail"]["result"] for e in d["events"][:5]))' <"$TMP/audit")" "['paused']"
expect_eq "resume restores the mode" "$(req POST /admin/control/resume '{}' >/dev/null; jq_ 'd["mode"]' <"$TMP/body")" "on"

# 4. Dry-run: the warning scenario again changes nothing and audits everything.
lines_before=$(wc -l <"$TMP/hooks.jsonl")
cp "$TMP/warn.good" "$TMP/warn-dry.toml"
start_server "$TMP/dry.log" --state-dir "$TMP/s-dry" --rules "$TMP/warn-dry.toml" --control dry-run \
    --alert-webhook "$HOOK_URL" --max-num-seqs 40 || exit 1
load 4 8
if wait_for 10 'any(a["state"] == "firing" for a in d["alerts"])' /admin/alerts; then ok "dry-run: the alert fires"; else bad "dry-run fires"; fi
wait "$LOAD_PID"
sleep 1
audit alert_action
expect_eq "dry-run: each action audited as it would have run; the webhook to humans sent" "$(jq_ 'sorted(set(e["detail"]["action"] + ":" + e["detail"]["result"] for e in d["events"]))' <"$TMP/audit")" "['knob_step:dry_run', 'report:dry_run', 'webhook:ok']"
expect_eq "dry-run: the config is untouched" "$(req GET /admin/config >/dev/null; jq_ '(d["id"], d["value"]["max_num_seqs"])' <"$TMP/body")" "(1, 40)"
expect_eq "dry-run: no report written" "$(ls "$TMP/s-dry/reports" 2>/dev/null | wc -l)" "0"
expect_eq "dry-run: the webhook went out, marked dry-run" "$(tail -n +$((lines_before + 1)) "$TMP/hooks.jsonl" | python3 -c '
import json, sys
b = [json.loads(l)["body"] for l in sys.stdin]
print(len(b) > 0 and all(x["alert"]["mode"] == "dry-run" and x["text"].startswith("(dry-run: no action taken) ") for x in b))')" "True"

# 5a. Reloads (on the dry-run server): a bad file is refused with file:line:key and the running rules stay.
printf '[[rule]]\nname = "X"\nexpr = "rate(nope_total[1m]) > 1"\n' >"$TMP/warn-dry.toml"
expect_eq "a bad rule file is refused on reload (400)" "$(req POST /admin/rules/reload '{}')" "400"
expect_in "naming file:line:key" "warn-dry.toml:3:rule\[0\].expr: column" "$TMP/body"
expect_eq "the running rules stay" "$(req GET /admin/rules >/dev/null; jq_ '[r["name"] for r in d["rules"]]' <"$TMP/body")" "['BatchBusy']"
printf '[[rule]]\nname = "Other"\nexpr = "num_requests_waiting > 100"\n' >"$TMP/warn-dry.toml"
kill -HUP "$SPID"
if wait_for 5 '[r["name"] for r in d["rules"]] == ["Other"]' /admin/rules; then ok "SIGHUP reloads the rules"; else bad "SIGHUP reloads" "$(curl -s "$(URL /admin/rules)")"; fi
expect_eq "reloads are counted" "$(curl -s "$(URL /metrics)" | grep '^pagoda_alert_rule_reloads_total' | awk '{print $2}' | tr '\n' ' ')" "1 1 "

# 5b. Every metric a default rule uses appears in a live scrape.
start_server "$TMP/s2.log" --state-dir "$TMP/s2" || exit 1
req GET /admin/rules >/dev/null
cp "$TMP/body" "$TMP/default_rules.json"
curl -s "$(URL /metrics)" >"$TMP/scrape"
missing=$(python3 -c '
import json,sys
names=json.load(open(sys.argv[1]))["metrics"]
have={l.split("{")[0].split(" ")[0] for l in open(sys.argv[2]) if not l.startswith("#")}
print([n for n in names if n not in have and n + "_bucket" not in have])' "$TMP/default_rules.json" "$TMP/scrape")
expect_eq "every series of the default rules is scraped" "$missing" "[]"
expect_eq "the default rules are on" "$(jq_ 'len(d["rules"]) >= 6 and d["source"] == "built-in defaults"' <"$TMP/default_rules.json")" "True"
"$BIN" serve -m "$MODEL" --port 0 --rules "$TMP/nope.toml" 2>"$TMP/bad.log"
expect_eq "a missing rule file stops the start" "$?" "1"
printf '[[rule]]\nname = "A"\nexpr = "memory_usage_perc > 0.5"\nseverity = "fatal"\n' >"$TMP/bad.toml"
"$BIN" serve -m "$MODEL" --port 0 --rules "$TMP/bad.toml" 2>"$TMP/bad.log"
expect_in "a bad severity names file:line:key and what is allowed" "bad.toml:4:rule\[0\].severity: must be warning, critical or severe" "$TMP/bad.log"
"$BIN" serve -m "$MODEL" --port 0 --hook-severe https://dr.example/switch 2>"$TMP/bad.log"
expect_in "an https hook is refused at start, saying what works" "--hook-severe: 'https://dr.example/switch': https is not supported; give an http:// URL" "$TMP/bad.log"
"$BIN" rules check "$TMP/bad.toml" >/dev/null 2>&1
expect_eq "pagoda rules check exits 2 on it" "$?" "2"

echo "alerts_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
