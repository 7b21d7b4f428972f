# Shared helpers of the end-to-end shell tests; source it after setting BIN and SRC.
# Gives TMP (removed at exit unless KEEP_TMP is set), ok/bad/expect_eq/expect_in with
# pass/fail counters, and start_server LOG [FLAGS...]: `pagoda serve` on the bundled model
# at an ephemeral port, waiting for /ready; sets PORT and SPID (its own state directory when
# another running server holds the default one). Servers die at exit.
# jq_ EXPR evaluates a Python expression over the JSON on stdin as `d` (json, sys and time
# imported); URL PATH is the started server's address of PATH.
MODEL=${MODEL:-$SRC/models/stories260K.gguf}
TMP=$(mktemp -d)
# Control state (pagoda.db) of every server a test starts stays in its TMP.
export XDG_STATE_HOME="$TMP/state"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do { kill -9 "$p" && wait "$p"; } 2>/dev/null; done
    [ -n "${KEEP_TMP:-}" ] || rm -rf "$TMP"
}
trap cleanup EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; shift; printf '     %s\n' "$@"; }
expect_eq() { if [ "$2" == "$3" ]; then ok "$1"; else bad "$1" "got:  [$2]" "want: [$3]"; fi; }
jq_() { python3 -c 'import json,sys,time; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
URL() { echo "http://127.0.0.1:$PORT$1"; }
expect_in() { if grep -q -- "$2" "$3"; then ok "$1"; else bad "$1" "missing: $2" "$(head -c 600 "$3")"; fi; }

start_server() {
    local log=$1
    shift
    # A state directory belongs to one process: a server started while another holds the
    # default one (and given none) gets a fresh one.
    local lock="$XDG_STATE_HOME/pagoda/pagoda.lock" own=()
    if [[ " $* " != *" --state-dir "* ]] && [ -f "$lock" ] && ! flock -n "$lock" true; then
        own=(--state-dir "$(mktemp -d "$TMP/state-XXXX")")
    fi
    "$BIN" serve -m "$MODEL" --port 0 "${own[@]}" "$@" 2>"$log" &
    SPID=$!
    PIDS+=("$SPID")
    PORT=""
    for _ in $(seq 200); do
        PORT=$(grep -oE 'listening url=http://127.0.0.1:[0-9]*|"event": "listening", "url": "http://127.0.0.1:[0-9]*' "$log" | head -1 | sed 's/.*://')
        if [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/ready" >/dev/null 2>&1; then return 0; fi
        sleep 0.05
    done
    echo "server did not become ready:"; cat "$log"; return 1
}

# start_router_on LOG ARGS...: `pagoda router` on an ephemeral port with its own state
# directory, waiting for /ready; sets RURL (http://127.0.0.1:PORT).
start_router_on() {
    local log=$1
    shift
    "$BIN" router --port 0 --state-dir "$(mktemp -d "$TMP/router-XXXX")" "$@" 2>"$log" &
    PIDS+=($!)
    RURL=""
    for _ in $(seq 100); do
        RURL=$(grep -o 'listening url=http://127.0.0.1:[0-9]*' "$log" | head -1 | sed 's/.*url=//')
        [ -n "$RURL" ] && curl -sf "$RURL/ready" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "router did not become ready:"; cat "$log"; return 1
}

# events NAME PYEXPR: evaluates PYEXPR over ev, the audit log of the fleet NAME's state
# database ($TMP/state-NAME/pagoda.db) as (kind, detail) pairs, oldest first.
events() {
    python3 -c '
import json,sqlite3,sys
ev=[(k, json.loads(d)) for k, d in sqlite3.connect(sys.argv[1]).execute("select kind, detail from events order by id")]
print(eval(sys.argv[2]))' "$TMP/state-$1/pagoda.db" "$2"
}

# A fleet file $TMP/NAME.toml for the pool-sizing tests: one sized pool "main" of sim replicas
# (ports from $BASE, the router on $RPORT), with extra router and pool keys.
fleet_file() {  # NAME EXTRA_ROUTER_KEYS EXTRA_POOL_KEYS
    cat >"$TMP/$1.toml" <<TOML
[fleet]
name = "$1"
base_port = $BASE
state_dir = "$TMP/state-$1"
drain_timeout_s = 30

[profiles.sim]
backend = "sim"
sim-gpu = "a100-80g"
sim-model = "llama-3.1-8b"
sim-eos-probability = 0.0

[router]
port = $RPORT
health_interval_s = 0.2
$2

[[router.pools]]
name = "main"
profile = "sim"
min_replicas = 0
max_replicas = 2
replicas = 2
idle_to_zero_s = 1
scale_down_stabilisation_s = 3600
scale_up_cooldown_s = 0
$3
TOML
}
