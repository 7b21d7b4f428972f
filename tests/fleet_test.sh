#!/usr/bin/env bash
# End-to-end tests of `pagoda fleet` (label e2e): Kubernetes manifests validated offline
# against the Kubernetes schemas (kubernetes-models), fleet file errors, a day->night switch
# on a compressed clock under `pagoda bench` load (pre-warm, 10%, 100% at the scheduled
# times, zero failed requests) on the sim backend and on two CPU replicas of the bundled
# model, the P99 breaker pausing and rolling back a deliberately slow night profile
# (audited), and canaries: a 30% slower candidate rolled back with its evidence, an equal
# one promoted, both verdicts in the bench history.
# Usage: fleet_test.sh PAGODA_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/e2e_lib.sh"
export XDG_DATA_HOME="$TMP/data"
BASE=$((21000 + ($$ % 400) * 20))
RPORT=$((BASE + 19))

SIM='backend = "sim"
sim-gpu = "a100-80g"
sim-model = "llama-3.1-8b"
sim-eos-probability = 0.0'

# fleet_file NAME DAY_EXTRA NIGHT_EXTRA SCHEDULE_ENTRIES [NIGHT_BACKEND]: writes $TMP/NAME.toml.
fleet_file() {
    cat >"$TMP/$1.toml" <<TOML
[fleet]
name = "$1"
base_port = $BASE
state_dir = "$TMP/state-$1"
drain_timeout_s = 5

[profiles.day]
${5:-$SIM}
block-size = 16
max-num-seqs = 64
$2

[profiles.night]
${5:-$SIM}
block-size = 48
max-num-seqs = 16
$3

[router]
port = $RPORT
breaker_window_s = ${BREAKER_WINDOW:-3}
breaker_min_samples = ${MIN_SAMPLES:-10}
breaker_rollback_windows = 2
canary_min_samples = 30
canary_max_samples = 400

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

[schedule]
time_zone = "Europe/Paris"
entries = [$4]
TOML
}

FPID=""
fleet_up() {  # NAME ARGS...: starts the fleet, waits for its router
    local name=$1
    shift
    "$BIN" fleet up "$TMP/$name.toml" "$@" 2>"$TMP/$name.log" &
    FPID=$!
    PIDS+=("$FPID")
    for _ in $(seq 300); do
        curl -sf "http://127.0.0.1:$RPORT/ready" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    bad "fleet $name did not come up" "$(tail -5 "$TMP/$name.log")"
    return 1
}
fleet_down() {
    "$BIN" fleet down "$TMP/$1.toml" >/dev/null 2>&1
    wait "$FPID" 2>/dev/null
}
bench() {  # RATE DURATION JSON [ARGS...]
    local rate=$1 dur=$2 json=$3
    shift 3
    "$BIN" bench --url "http://127.0.0.1:$RPORT" --rate "$rate" --duration "$dur" --input-len 64 \
        --output-len 16 --no-progress --no-record --json "$json" "$@" >"$json.out" 2>&1
}

# 1. Manifests validated against the Kubernetes schemas; the router's TOML inside checks.
"$BIN" fleet render "$SRC/deploy/fleet/daynight.toml" --namespace llm -o "$TMP/k8s.yaml"
if (cd "$SRC/tests/e2e" && node validate_k8s.mjs "$TMP/k8s.yaml" "$TMP/router.toml" --also "$SRC/deploy/keda/pagoda-scaledobject.yaml") >"$TMP/k8s.out" 2>&1; then
    ok "fleet render: $(tail -1 "$TMP/k8s.out")"
else
    bad "fleet render validates" "$(cat "$TMP/k8s.out")"
fi
expect_eq "the rendered router config checks" "$("$BIN" router --config "$TMP/router.toml" --check 2>&1)" "ok: 3 pools, 4 schedule entries"
sed 's/containerPort: 8000/containerPort: "eight"/' "$TMP/k8s.yaml" >"$TMP/broken.yaml"
expect_eq "a broken manifest fails the validation" "$(cd "$SRC/tests/e2e" && node validate_k8s.mjs "$TMP/broken.yaml" | grep -c 'containerPort must be integer')" "3"
python3 -c 'import sys; s=open(sys.argv[1]).read(); open(sys.argv[2], "w").write(s.replace("  selector:\n    matchLabels: {app.kubernetes.io/name: pagoda, pagoda.dev/pool: day}\n  template", "  template", 1))' "$TMP/k8s.yaml" "$TMP/noselector.yaml"
expect_eq "a StatefulSet without its selector is caught" "$(cd "$SRC/tests/e2e" && node validate_k8s.mjs "$TMP/noselector.yaml" | grep -c "pagoda-day: data/spec must have required property selector")" "1"
sed 's/        timezone: .*//' "$TMP/k8s.yaml" >"$TMP/nocron.yaml"
expect_eq "a cron trigger without its time zone is caught" "$(cd "$SRC/tests/e2e" && node validate_k8s.mjs "$TMP/nocron.yaml" | grep -c "a cron trigger needs timezone")" "1"
sed 's/kind: StatefulSet, name: pagoda-night/kind: Deployment, name: pagoda-night/' "$TMP/k8s.yaml" >"$TMP/badref.yaml"
expect_eq "an autoscaler aimed at a missing workload is caught" "$(cd "$SRC/tests/e2e" && node validate_k8s.mjs "$TMP/badref.yaml" | grep -c "Deployment/llm/pagoda-night is not among")" "1"
# The deploy kit: the night pool (pre-warmed by the schedule) starts at zero and runs on a
# KEDA cron trigger from 19:30 to after 07:30 in the schedule's zone; a state volume per
# replica; probes; the image of this build; a ServiceMonitor with the pool label.
(cd "$SRC/tests/e2e" && node --input-type=module - "$TMP/k8s.yaml" "$("$BIN" --version | cut -d' ' -f2)") <<'JS' >"$TMP/kit.out" 2>&1
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
const [file, version] = process.argv.slice(2);
const docs = parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS()).filter(Boolean);
const by = (kind, name) => docs.find((d) => d.kind === kind && d.metadata.name === name);
const night = by("StatefulSet", "pagoda-night").spec, day = by("StatefulSet", "pagoda-day").spec;
const cron = by("ScaledObject", "pagoda-night").spec.triggers.find((t) => t.type === "cron").metadata;
const c = day.template.spec.containers[0];
console.log("night starts at", night.replicas);
console.log("cron", cron.timezone, cron.start, "->", cron.end, "x", cron.desiredReplicas);
console.log("state volume", day.volumeClaimTemplates[0].metadata.name, c.args.includes("/var/lib/pagoda"));
console.log("probes", c.readinessProbe.httpGet.path, c.livenessProbe.httpGet.path);
console.log("resources", !!(c.resources.requests && c.resources.limits));
console.log("image", c.image === "pagoda:" + version);
console.log("pdbs", docs.filter((d) => d.kind === "PodDisruptionBudget").length);
console.log("monitor", by("ServiceMonitor", "pagoda").spec.endpoints[0].relabelings[0].targetLabel);
JS
expect_eq "deploy kit: night pool, cron, state, probes, resources, image, PDBs, monitor" "$(cat "$TMP/kit.out")" "night starts at 0
cron Europe/Paris 30 19 * * * -> 36 7 * * * x 2
state volume state true
probes /ready /health
resources true
image true
pdbs 3
monitor pool"
# A CPU pool with keys: requests and limits from the model and the KV cache, the keys in a
# Secret (the pods read them from there), never in the router's ConfigMap.
cat >"$TMP/cpu.toml" <<TOML
[fleet]
name = "cpu"
[profiles.small]
model = "$MODEL"
kv-cache-memory = "1GiB"
threads = 4
[router]
admin_api_keys = ["s3cret-admin"]
[[router.pools]]
name = "main"
profile = "small"
replicas = 2
TOML
"$BIN" fleet render "$TMP/cpu.toml" -o "$TMP/cpu.yaml"
mem=$(( ($(stat -c %s "$MODEL") * 2 + (1 << 30) + (512 << 20)) >> 20 ))
expect_in "CPU pool: memory from the model and the KV cache" "requests: {cpu: \"4\", memory: ${mem}Mi}" "$TMP/cpu.yaml"
expect_in "the admin key is in a Secret" 'admin-api-key: "s3cret-admin"' "$TMP/cpu.yaml"
expect_eq "and nowhere else" "$(grep -c s3cret-admin "$TMP/cpu.yaml")" "1"
(cd "$SRC/tests/e2e" && node validate_k8s.mjs "$TMP/cpu.yaml") >"$TMP/cpu.out" 2>&1 && ok "CPU fleet validates: $(tail -1 "$TMP/cpu.out")" || bad "CPU fleet validates" "$(cat "$TMP/cpu.out")"

# 2. Fleet file errors, at load.
fleet_file errs "" "" '"20:00 shift night 10%"'
err() { "$BIN" fleet render "$TMP/errs.toml" 2>&1 >/dev/null | head -1; }
sed -i 's/^max-num-seqs = 16$/max-num-seqs = "lots"/' "$TMP/errs.toml"
expect_in "a profile flag pagoda serve refuses" "profiles.night: --max-num-seqs" <(err)
fleet_file errs "colour = \"red\"" "" '"20:00 shift night 10%"'
expect_in "an unknown serve flag" "profiles.day: The following arguments were not expected: red --colour" <(err)
fleet_file errs "" "" '"20:00 shift night 10%", "20:00 reverse"'
expect_in "overlapping schedule entries" "overlaps another entry" <(err)
fleet_file errs "" "" '"20:00 shift dawn 10%"'
expect_in "a schedule naming no pool" "names 'dawn', which is not a primary pool" <(err)
fleet_file errs "" "" '"20:00 shift night 10%"'
sed -i 's/^weight = 0$/weight = 10/' "$TMP/errs.toml"
expect_in "weights that do not add up" "weights add up to 110, not 100" <(err)
sed -i 's/^weight = 10$/weight = 0\nwieght = 1/' "$TMP/errs.toml"
expect_in "an unknown key with its line" "errs.toml:[0-9]*:router.pools\[1\].wieght: unknown key" <(err)

# 3. Day -> night on a compressed clock (120x: 19:30 at +0.5 s, 20:00 at +15.5 s, 20:30 at
#    +30.5 s) under load; $1 names the variant, $2 the profiles' backend lines.
switch_run() {
    local name=$1
    MIN_SAMPLES=1000 fleet_file "$name" "" "" '"19:30 prewarm night", "20:00 shift night 10%", "20:30 shift night 100%", "07:30 reverse"' "$2"
    fleet_up "$name" --schedule-clock-scale 120 --schedule-clock-start 19:29 || return
    bench "$3" 36s "$TMP/$name.json"
    expect_eq "$name: every request under load succeeded" "$(jq_ '(d["requests"]["sent"] > 100, d["requests"]["failed"])' <"$TMP/$name.json")" "(True, 0)"
    expect_eq "$name: pre-warm, 10%, 100% in order, audited" "$(events "$name" '[(k, d.get("percent")) for k, d in ev if k in ("schedule_prewarm", "rollout_step", "pool_prewarmed")]')" "[('schedule_prewarm', None), ('pool_prewarmed', None), ('rollout_step', 10.0), ('rollout_step', 100.0)]"
    expect_eq "$name: the pre-warm checked its effect: every night replica at level full" "$(events "$name" '[(d["outcome"], d["warmed"], d["replicas"]) for k, d in ev if k == "pool_prewarmed"]')" "[('ok', 1, 1)]"
    expect_eq "$name: each at its scheduled time (router clock, +-2 s)" "$(events "$name" '[abs(d["at_s"] - t) < 2 for (k, d), t in zip([e for e in ev if e[0] == "rollout_step"], (15.5, 30.5))]')" "[True, True]"
    expect_eq "$name: the night pool served the last part" "$(curl -s "http://127.0.0.1:$RPORT/metrics" | grep '^pagoda_router_requests_total{pool="night"' | awk '{s += $2} END {print (s > 50)}')" "1"
    if [ "$name" == sim-switch ]; then  # a crashed replica is restarted, audited
        local pid
        pid=$(curl -s "http://127.0.0.1:$RPORT/admin/fleet" | jq_ 'd["replicas"][0]["pid"]')
        kill -9 "$pid"
        sleep 2.5
        expect_eq "$name: kill -9 a replica: restarted after 1 s" "$(curl -s "http://127.0.0.1:$RPORT/admin/fleet" | jq_ '(d["replicas"][0]["restarts"], d["replicas"][0]["pid"] not in (0, '"$pid"'), d["replicas"][0]["last_exit"])')" "(1, True, 'signal 9')"
        expect_eq "$name: the exit is in the audit log" "$(events "$name" '[d["exit"] for k, d in ev if k == "fleet_replica_exit"]')" "['signal 9']"
    fi
    fleet_down "$name"
}
switch_run sim-switch "$SIM" 40
switch_run cpu-switch 'backend = "cpu"' 20

# A profile that cannot start: restarted with backoff, then reported with its log file.
fleet_file failing "" "max-model-len = 999999" '"20:00 shift night 10%"'
sed -i 's/^start = "prewarm"$/start = "up"/' "$TMP/failing.toml"
fleet_up failing || true
for _ in $(seq 150); do grep -q fleet_replica_failing "$TMP/failing.log" && break; sleep 0.1; done
expect_in "a replica that keeps exiting is reported, naming its log" "fleet_replica_failing pool=night profile=night .*see .*night-[0-9]*.log" "$TMP/failing.log"
expect_in "and its log says why" "max_model_len 999999 exceeds" "$TMP/state-failing/fleet-failing/night-$((BASE + 1)).log"
expect_eq "the day pool serves meanwhile" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$RPORT/v1/completions" -d '{"prompt":"Hi","max_tokens":2}')" "200"
fleet_down failing

# 4. The breaker: the night profile made four times as slow (clear of a busy host's noise); 10% at +0.5 s, 100% due at +25.5 s.
# The breaker's window is on the schedule clock: 360 s at 120x is 3 s of real traffic. The
# schedule clock starts with the fleet, and replicas start slower on a busy host: the 100%
# step leaves the load 15 s or more for the pause and the two rollback windows.
BREAKER_WINDOW=360 fleet_file breaker "" "sim-speed = 0.25" '"20:00 shift night 10%", "20:50 shift night 100%"'
sed -i 's/^start = "prewarm"$/start = "up"/' "$TMP/breaker.toml"
fleet_up breaker --schedule-clock-scale 120 --schedule-clock-start 19:59
for _ in $(seq 100); do
    [ "$(curl -s "http://127.0.0.1:$RPORT/admin/pools" | jq_ 'all(b["ready"] for p in d["pools"] for b in p["backends"])')" == "True" ] && break
    sleep 0.1
done
bench 60 30s "$TMP/breaker.json"
expect_eq "breaker: no request failed" "$(jq_ 'd["requests"]["failed"]' <"$TMP/breaker.json")" "0"
expect_eq "breaker: paused, then rolled back, then the 100% step skipped" "$(events breaker '[k for k, d in ev if k.startswith(("breaker_", "rollout_"))]')" "['rollout_step', 'breaker_pause', 'breaker_rollback', 'rollout_skipped']"
expect_eq "breaker: evidence says the night arm's P99 was above +20%" "$(events breaker '[d["window"]["worst_ratio"] > 1.2 for k, d in ev if k == "breaker_rollback"]')" "[True]"
expect_eq "breaker: the weights are back to the day pool" "$(curl -s "http://127.0.0.1:$RPORT/admin/rollout" | jq_ '(d["state"], d["weights"])')" "('rolled_back', {'day': 100.0, 'night': 0.0})"
fleet_down breaker

# 5. Canaries: 5% to a candidate 30% slower -> rolled back; to an equal one -> promoted.
canary_run() {  # NAME CANDIDATE_EXTRA EXPECTED
    local name=$1
    fleet_file "$name" "" "$2" '"19:30 prewarm night"'
    # Same config as the day pool but for CANDIDATE_EXTRA; the baseline on two replicas so
    # that its per-replica load stays near the candidate's.
    sed -i 's/^start = "prewarm"$/start = "up"/; s/^block-size = 48$/block-size = 16/; s/^max-num-seqs = 16$/max-num-seqs = 64/' "$TMP/$name.toml"
    sed -i '0,/^replicas = 1$/s//replicas = 2/' "$TMP/$name.toml"
    fleet_up "$name" || return
    for _ in $(seq 100); do
        [ "$(curl -s "http://127.0.0.1:$RPORT/admin/pools" | jq_ 'all(b["ready"] for p in d["pools"] for b in p["backends"])')" == "True" ] && break
        sleep 0.1
    done
    bench 40 30s "$TMP/$name.json" &
    local bpid=$!
    sleep 1
    "$BIN" fleet canary "$TMP/$name.toml" --pool night --weight 5% >"$TMP/$name.canary" 2>&1
    local state=""
    for _ in $(seq 280); do
        state=$(curl -s "http://127.0.0.1:$RPORT/admin/rollout" | jq_ 'd["state"]')
        [ "$state" == "running" ] || break
        sleep 0.1
    done
    expect_eq "$name: the canary is $3" "$state" "$3"
    wait "$bpid"
    expect_eq "$name: no request failed" "$(jq_ 'd["requests"]["failed"]' <"$TMP/$name.json")" "0"
    fleet_down "$name"
}
canary_run canary-slow "sim-speed = 0.77" rolled_back
expect_eq "the slow candidate's evidence: e2e p50 above the tolerance, significant" "$(events canary-slow '[(d["evidence"]["e2e"]["ratio"] > 1.1, d["evidence"]["e2e"]["mann_whitney_p"] < 0.05) for k, d in ev if k == "canary_rollback"]')" "[(True, True)]"
canary_run canary-equal "" promoted
"$BIN" bench history >"$TMP/history.txt" 2>&1
expect_in "the rollback verdict is in the bench history" "canary night v.*rollback" "$TMP/history.txt"
expect_in "the promote verdict is in the bench history" "canary night v.*promote" "$TMP/history.txt"

echo "fleet_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
