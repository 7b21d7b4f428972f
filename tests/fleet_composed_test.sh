#!/usr/bin/env bash
# The fleet composed as an operator deploys it (label e2e): `pagoda fleet up` with three sim
# replicas in day / night / standby pools behind the router, a real Prometheus (Debian's
# `prometheus`) scraping them with the exported rules, a real Alertmanager (Debian's
# `prometheus-alertmanager`) calling the router's webhook, which dispatches each alert to
# the replica it names. Memory pressure injected into the day replica: only its alert fires,
# only it rolls back and sheds, the standby takes the traffic, no request fails. Then the
# scheduled switch on a 60x clock: the night pool reports warm level `full` before it gets
# 10%, and the breaker judges windows on the scaled clock. Then the night replica is killed
# under 32 constrained streams: every result is valid. The configuration is the one
# docs/operations.md ("Running a fleet") shows.
# Usage: fleet_composed_test.sh PAGODA_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/e2e_lib.sh"
export XDG_DATA_HOME="$TMP/data"
for tool in prometheus prometheus-alertmanager promtool; do
    command -v "$tool" >/dev/null || { echo "FAIL $tool is not installed (scripts/install-deps.sh)"; exit 1; }
done
BASE=$((23000 + ($$ % 300) * 10))
RPORT=$((BASE + 9)) PPORT=$((BASE + 7)) AMPORT=$((BASE + 6))
DAY=127.0.0.1:$BASE NIGHT=127.0.0.1:$((BASE + 1)) STANDBY=127.0.0.1:$((BASE + 2))
KEY=admin-secret
SIM='backend = "sim"
sim-gpu = "a100-80g"
sim-model = "llama-3.1-8b"
sim-eos-probability = 0.0
admin-api-key = "'$KEY'"'

cat >"$TMP/fleet.toml" <<TOML
[fleet]
name = "composed"
base_port = $BASE
state_dir = "$TMP/fleet-state"
drain_timeout_s = 5

[profiles.day]
$SIM
stable-window = "1s"
block-size = 16
max-num-seqs = 64

[profiles.night]
$SIM
block-size = 48
max-num-seqs = 32

[router]
port = $RPORT
backend_admin_key = "$KEY"
breaker_window_s = 120      # on the schedule's clock: 2 s of real traffic at 60x
breaker_min_samples = 3
breaker_threshold = 2.0     # judged, not tripped: few samples a window are noisy on a busy host

[[router.pools]]
name = "day"
profile = "day"
replicas = 1
weight = 100

[[router.pools]]
name = "night"
profile = "night"
replicas = 1
weight = 0
start = "prewarm"

[[router.pools]]
name = "standby"
role = "standby"
profile = "day"
replicas = 1

[schedule]
time_zone = "UTC"
entries = ["19:30 prewarm night", "20:00 shift night 10%", "20:25 shift night 100%"]
TOML

# The rules Prometheus evaluates: the replica's own MemoryCritical, with windows short
# enough for a test (the shipped file keeps the production ones).
cat >"$TMP/rules.toml" <<'TOML'
[[rule]]
name = "MemoryCritical"
expr = "max(memory_usage_perc[5s]) > 0.97"
for = "2s"
keep_firing_for = "1s"
severity = "critical"
summary = "memory use above 97% of the limit"
TOML
"$BIN" rules export --rules "$TMP/rules.toml" -o "$TMP/pagoda-rules.yml" 2>"$TMP/export.err"
expect_in "exported rules aggregate per instance and pool" "sum by (instance, pool)" "$TMP/pagoda-rules.yml"
if promtool check rules "$TMP/pagoda-rules.yml" >"$TMP/promtool.out" 2>&1; then ok "promtool check rules"; else bad "promtool check rules" "$(cat "$TMP/promtool.out")"; fi

cat >"$TMP/alertmanager.yml" <<YAML
route:
  receiver: pagoda-router
  group_by: [alertname, instance]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: pagoda-router
    webhook_configs:
      - url: http://127.0.0.1:$RPORT/admin/alerts/webhook
        send_resolved: true
inhibit_rules:
  - source_matchers: [severity="severe"]
    target_matchers: [severity=~"warning|critical"]
    equal: [instance]
YAML
cat >"$TMP/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [pagoda-rules.yml]
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:$AMPORT"]
scrape_configs:
  - job_name: pagoda
    static_configs:
      - targets: ["$DAY"]
        labels: {pool: day}
      - targets: ["$NIGHT"]
        labels: {pool: night}
      - targets: ["$STANDBY"]
        labels: {pool: standby}
YAML

prometheus-alertmanager --config.file="$TMP/alertmanager.yml" --storage.path="$TMP/am" \
    --web.listen-address="127.0.0.1:$AMPORT" --cluster.listen-address= >"$TMP/am.log" 2>&1 &
PIDS+=($!)
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/prom" \
    --web.listen-address="127.0.0.1:$PPORT" >"$TMP/prom.log" 2>&1 &
PIDS+=($!)

"$BIN" fleet up "$TMP/fleet.toml" --schedule-clock-scale 60 --schedule-clock-start 19:28 \
    2>"$TMP/fleet.log" &
PIDS+=($!)
T0=$(date +%s.%N)
since() { python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$T0" "$(date +%s.%N)"; }
for _ in $(seq 150); do
    [ "$(curl -s "http://127.0.0.1:$RPORT/admin/pools" | jq_ 'sum(b["ready"] for p in d["pools"] for b in p["backends"])' 2>/dev/null)" == "2" ] && break
    sleep 0.1
done
expect_eq "day and standby replicas ready behind the router" "$(curl -s "http://127.0.0.1:$RPORT/admin/pools" | jq_ 'sorted(p["name"] for p in d["pools"] for b in p["backends"] if b["ready"])')" "['day', 'standby']"
expect_eq "each replica has its own state directory" "$(ls "$TMP/fleet-state/replicas" | grep -c -e "^day-$BASE$" -e "^standby-$((BASE + 2))$"),$(cd "$TMP/fleet-state/replicas/day-$BASE" && ls pagoda.db pagoda.lock | tr '\n' ' ')" "2,pagoda.db pagoda.lock "
"$BIN" serve --backend sim --sim-gpu a100-80g --sim-model llama-3.1-8b --port 0 \
    --state-dir "$TMP/fleet-state/replicas/day-$BASE" >"$TMP/second.log" 2>&1
expect_in "a second process on a replica's state directory refuses, naming the holder" "is in use by pid [0-9]*: .*pagoda serve --host 127.0.0.1 --port $BASE" "$TMP/second.log"
# Waits for the condition itself (any two targets up was not it), at most 60 s: under a
# loaded CI machine a target's first scrape can come late.
scraped() {
    curl -s "http://127.0.0.1:$PPORT/api/v1/targets" | jq_ '{"day", "standby"} <= set(t["labels"]["pool"] for t in d["data"]["activeTargets"] if t["health"] == "up")' 2>/dev/null
}
for _ in $(seq 300); do
    [ "$(scraped)" == "True" ] && break
    sleep 0.2
done
expect_eq "Prometheus scrapes the day and standby replicas" "$(scraped)" "True"

bench() {  # RATE DURATION JSON
    "$BIN" bench --url "http://127.0.0.1:$RPORT" --rate "$1" --duration "$2" --input-len 64 \
        --output-len 16 --no-progress --no-record --json "$3" >"$3.out" 2>&1
}

# 1. Memory pressure on the day replica, under load.
bench 20 16s "$TMP/pressure.json" &
BPID=$!
sleep 2
# A bad change on the day replica once its first version is stable: the critical alert
# must roll it back, and only there.
for _ in $(seq 50); do
    [ "$(curl -s "http://$DAY/admin/config" -H "Authorization: Bearer $KEY" | jq_ 'd["stable"]')" == True ] && break
    sleep 0.1
done
curl -sf -X PUT "http://$DAY/admin/config" -H "Authorization: Bearer $KEY" \
    -d '{"max_num_seqs": 8, "reason": "a bad change"}' >/dev/null
expect_eq "fault injection needs the admin key" "$(curl -s -o /dev/null -w '%{http_code}' "http://$DAY/admin/faults" -d '{"memory_pressure": 0.99}')" "401"
curl -sf "http://$DAY/admin/faults" -H "Authorization: Bearer $KEY" -d '{"memory_pressure": 0.99}' >/dev/null
state=""
for _ in $(seq 200); do
    state=$(curl -s "http://$DAY/ready" | jq_ 'd.get("error", {}).get("message", "ready")[:8]' 2>/dev/null)
    [ "$state" == "shedding" ] && break
    sleep 0.1
done
expect_eq "the day replica sheds (Prometheus -> Alertmanager -> router -> replica)" "$state" "shedding"
expect_eq "only the day replica's alert fires in Prometheus" "$(curl -s "http://127.0.0.1:$PPORT/api/v1/alerts" | jq_ 'sorted((a["labels"]["alertname"], a["labels"]["instance"], a["labels"]["pool"]) for a in d["data"]["alerts"] if a["state"] == "firing")')" "[('MemoryCritical', '$DAY', 'day')]"
expect_eq "the router dispatched it to the day replica, and only there" "$(curl -s "http://127.0.0.1:$RPORT/admin/events?kind=alert_dispatched" | jq_ 'sorted(set((e["detail"]["backend"], e["detail"]["outcome"]) for e in d["events"]))')" "[('http://$DAY', 'ok')]"
expect_eq "the day replica rolled back: its live config is version 1's again" "$(curl -s "http://$DAY/admin/config" -H "Authorization: Bearer $KEY" | jq_ '(d["value"]["max_num_seqs"], d["source"])')" "(64, 'alert:MemoryCritical')"
expect_eq "and audited rollback and shed as ok" "$(curl -s "http://$DAY/admin/audit?kind=alert_action" -H "Authorization: Bearer $KEY" | jq_ 'sorted(set(e["detail"]["action"] + ":" + e["detail"]["result"] for e in d["events"] if e["detail"]["action"] in ("rollback", "shed")))')" "['rollback:ok', 'shed:ok']"
expect_eq "the standby's config is untouched" "$(curl -s "http://$STANDBY/admin/config" -H "Authorization: Bearer $KEY" | jq_ '(d["id"], d["value"]["max_num_seqs"])')" "(1, 64)"
expect_eq "the standby took no action and is ready" "$(curl -s "http://$STANDBY/admin/audit?kind=alert_action" -H "Authorization: Bearer $KEY" | jq_ 'len(d["events"])'),$(curl -s -o /dev/null -w '%{http_code}' "http://$STANDBY/ready")" "0,200"
expect_eq "a replica refuses an alert that names another (409)" "$(curl -s -o /dev/null -w '%{http_code}' "http://$STANDBY/admin/alerts/webhook" -H "Authorization: Bearer $KEY" -d '{"version": "4", "alerts": [{"status": "firing", "labels": {"alertname": "MemoryCritical", "severity": "critical", "instance": "'"$DAY"'"}}]}')" "409"
expect_eq "and audits the refusal" "$(curl -s "http://$STANDBY/admin/audit?kind=alert_refused" -H "Authorization: Bearer $KEY" | jq_ '[e["detail"]["instance"] for e in d["events"]]')" "['$DAY']"
sleep 3
wait "$BPID"
expect_eq "no accepted request failed" "$(jq_ '(d["requests"]["sent"] > 100, d["requests"]["failed"])' <"$TMP/pressure.json")" "(True, 0)"
expect_eq "the standby served while the day replica shed" "$(curl -s "http://127.0.0.1:$RPORT/metrics" | grep '^pagoda_router_requests_total{pool="standby"' | awk '{s += $2} END {print (s > 20)}')" "1"

curl -sf "http://$DAY/admin/faults" -H "Authorization: Bearer $KEY" -d '{"clear": true}' >/dev/null

# A client's oversized request is the client's error: answered by the router (413, 431), no
# backend ejected, and a replica's own 413 is read by the client, not reset mid-body.
head -c $((9 << 20)) /dev/zero | tr '\0' 'a' >"$TMP/big.txt"
expect_eq "a 9 MiB body: 413 from the router" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$RPORT/v1/completions" -H 'Content-Type: application/json' --data-binary @"$TMP/big.txt")" "413"
expect_eq "a 9 MiB body: 413 from a replica, read whole" "$(curl -s -o /dev/null -w '%{http_code}' "http://$STANDBY/v1/completions" -H 'Content-Type: application/json' --data-binary @"$TMP/big.txt")" "413"
{ printf 'X-Big: '; head -c 200000 /dev/zero | tr '\0' 'b'; echo; } >"$TMP/header.txt"
expect_eq "a 200 KB header: 431" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$RPORT/v1/models" -H @"$TMP/header.txt")" "431"
expect_eq "no backend was ejected" "$(curl -s "http://127.0.0.1:$RPORT/admin/events?kind=router_ejection" | jq_ 'len(d["events"])')" "0"

for _ in $(seq 150); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$DAY/ready")" == 200 ] && break
    sleep 0.1
done
expect_eq "the fault cleared, the alert resolves and the day replica is ready again" "$(curl -s -o /dev/null -w '%{http_code}' "http://$DAY/ready")" "200"

# 2. The switch (20:00 = +32 s, 20:25 = +57 s on the 60x clock; the fleet's clock starts
#    a little after T0, never before): pre-warmed before 10%.
wait_until() { while [ "$(python3 -c "print(int($(since) < $1))")" == 1 ]; do sleep 0.2; done; }
wait_until 27
bench 30 33s "$TMP/switch.json" &
BPID=$!
wait_until 36
expect_eq "the night replica reports warm level full" "$(curl -s "http://$NIGHT/admin/warmup" -H "Authorization: Bearer $KEY" | jq_ '(d["level"], d["full_warmup"]["state"])')" "('full', 'done')"
expect_eq "the pre-warm, checked, came before the 10% step" "$(curl -s "http://127.0.0.1:$RPORT/admin/events?limit=1000" | jq_ '[(e["kind"], e["detail"].get("outcome"), e["detail"].get("percent")) for e in reversed(d["events"]) if e["kind"] in ("pool_prewarmed", "rollout_step")]')" "[('pool_prewarmed', 'ok', None), ('rollout_step', None, 10.0)]"
# 120 s windows on the 60x clock close every 2 s: 8 s after 10% several have closed and at
# least one compared both arms (a window on the real clock would still be open).
wait_until 40.5
expect_eq "the breaker judged windows on the scaled clock" "$(curl -s "http://127.0.0.1:$RPORT/admin/rollout" | jq_ '(d["state"], d["windows_judged"] >= 2, d["windows_compared"] >= 1)')" "('running', True, True)"
wait "$BPID"
wait_until 59
expect_eq "no request failed during the switch" "$(jq_ '(d["requests"]["sent"] > 100, d["requests"]["failed"])' <"$TMP/switch.json")" "(True, 0)"
expect_eq "the switch is done" "$(curl -s "http://127.0.0.1:$RPORT/admin/rollout" | jq_ 'd["state"]')" "done"

# 3. A replica killed under constrained streams: the night replica (all the traffic now)
#    dies after 150 more tokens while 16 json_schema and 16 tool_choice=required streams run;
#    the router resumes them elsewhere with every field and the tokens already sent, and
#    every result is valid against its schema.
curl -sf "http://$NIGHT/admin/faults" -H "Authorization: Bearer $KEY" -d '{"crash_after_tokens": 150}' >/dev/null
python3 "$SRC/tests/structured_streams.py" "http://127.0.0.1:$RPORT" 16 >"$TMP/structured.out" 2>&1
expect_eq "kill under 32 constrained streams: every result valid" "$(tail -1 "$TMP/structured.out")" "structured: 32 valid of 32"
[ "$(tail -1 "$TMP/structured.out")" == "structured: 32 valid of 32" ] || head -5 "$TMP/structured.out"
expect_eq "the night replica died and was restarted" "$(curl -s "http://127.0.0.1:$RPORT/admin/fleet" | jq_ '[(r["restarts"] >= 1, r["last_exit"]) for r in d["replicas"] if r["pool"] == "night"]')" "[(True, 'signal 9')]"
expect_eq "streams were resumed from the dead replica" "$(curl -s "http://127.0.0.1:$RPORT/metrics" | grep "^pagoda_router_resumptions_total{pool=\"night\",backend=\"http://$NIGHT\"}" | awk '{print ($2 > 0)}')" "1"

echo "fleet_composed_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
