#!/usr/bin/env bash
# End-to-end tests of `pagoda router` over real `pagoda serve` replicas of the bundled model:
# proxying (completions, chat, streams, models, keys), /metrics through promtool when
# installed, failover (kill -9 a replica during 32 streams: every stream completes through
# resumption with the greedy output of an undisturbed run, checked with the official openai
# client), a shedding replica gets no new traffic and the standby pool takes it, the DR pool
# when every other pool is down and by the severe hook, misbehaving backends (garbage, hang,
# 500) with bounded retries, the router's own 429 with Retry-After, and configuration errors.
# Usage: router_e2e_test.sh PAGODA_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/e2e_lib.sh"

start_router() {  # LOG ARGS...: sets RPORT
    local log=$1
    shift
    # Each router its own state directory (its audit log): one process a directory.
    "$BIN" router --port 0 --state-dir "$TMP/router-$(basename "$log" .log)" "$@" 2>"$log" &
    PIDS+=("$!")
    RPID=$!
    RPORT=""
    for _ in $(seq 200); do
        RPORT=$(grep -o 'router_listening url=http://127.0.0.1:[0-9]*' "$log" | head -1 | sed 's/.*://')
        if [ -n "$RPORT" ] && curl -sf "http://127.0.0.1:$RPORT/ready" >/dev/null 2>&1; then return 0; fi
        sleep 0.05
    done
    echo "router did not become ready:"; cat "$log"; return 1
}
R() { echo "http://127.0.0.1:$RPORT$1"; }
until_true() {  # SECONDS COMMAND: polls COMMAND every 0.1 s until it succeeds
    local n=$(($1 * 10))
    shift
    for _ in $(seq "$n"); do eval "$@" && return 0; sleep 0.1; done
    return 1
}
pools() { curl -s "$(R /admin/pools)" | jq_ "$1"; }
metric() {  # NAME_AND_LABELS: its value on the router's /metrics, or 0
    curl -s "$(R /metrics)" | grep -F "$1" | awk '{s += $2} END {print s + 0}'
}

start_server "$TMP/a.log" || exit 1; A=$PORT; PA=$SPID; disown "$PA"  # killed on purpose below
start_server "$TMP/b.log" || exit 1; B=$PORT
start_server "$TMP/c.log" || exit 1; C=$PORT; PC=$SPID; disown "$PC"
start_server "$TMP/d.log" || exit 1; D=$PORT
start_router "$TMP/r.log" --backend "http://127.0.0.1:$A" --backend "http://127.0.0.1:$B" \
    --standby "http://127.0.0.1:$C" --dr "http://127.0.0.1:$D" || exit 1

# 1. Proxying.
golden=$(curl -s "http://127.0.0.1:$D/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0}' | jq_ 'd["choices"][0]["text"]')
expect_eq "completion through the router equals a replica's" "$(curl -s "$(R /v1/completions)" -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0}' | jq_ 'd["choices"][0]["text"]')" "$golden"
curl -sN "$(R /v1/completions)" -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' >"$TMP/stream.txt"
expect_eq "a stream through the router: same text, usage, [DONE]" "$(python3 -c '
import json,sys
ev=[l[6:].strip() for l in open(sys.argv[1]) if l.startswith("data: ")]
text="".join(c["text"] for e in ev[:-1] for c in json.loads(e)["choices"])
u=[json.loads(e)["usage"] for e in ev[:-1] if json.loads(e).get("usage")]
print(text == sys.argv[2], u[0]["completion_tokens"], ev[-1], any("token_ids" in e for e in ev))' "$TMP/stream.txt" "$golden")" "True 24 [DONE] False"
expect_eq "chat through the router" "$(curl -s "$(R /v1/chat/completions)" -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4}' | jq_ 'd["object"], d["usage"]["completion_tokens"]')" "('chat.completion', 4)"
# Access logs: one line per request on the router and on the replica that served it, under
# the client's X-Request-Id (passed through); the id comes back as a header.
hdr=$(curl -sN -D - -o /dev/null "$(R /v1/completions)" -H 'X-Request-Id: trace-42' -d '{"prompt":"Once","max_tokens":3,"stream":true}' | tr -d '\r' | grep -i '^x-request-id:')
expect_eq "the request id comes back" "$hdr" "X-Request-Id: trace-42"
sleep 0.3
line=$(grep 'access id=trace-42 ' "$TMP/r.log" | head -1)
expect_eq "the router's access line" "$(echo "$line" | grep -o 'route=[^ ]* status=[0-9]* prompt_tokens=[0-9]* completion_tokens=3 ttft_ms=[0-9.]* total_ms=[0-9.]* finish_reason=length' | sed 's/ttft_ms=[0-9.]*/ttft_ms=T/; s/total_ms=[0-9.]*/total_ms=T/; s/prompt_tokens=[0-9]*/prompt_tokens=P/')" "route=/v1/completions status=200 prompt_tokens=P completion_tokens=3 ttft_ms=T total_ms=T finish_reason=length"
served=$(echo "$line" | grep -o 'replica=http://127.0.0.1:[0-9]*' | sed 's/.*://')
expect_eq "the replica that served it logged the same id" "$(grep -c 'access id=trace-42 route=/v1/completions status=200' "$TMP/$([ "$served" = "$A" ] && echo a || echo b).log")" "1"
start_server "$TMP/json.log" --log-format json || exit 1
curl -s "$(URL /v1/completions)" -d '{"prompt":"Once","max_tokens":2}' >/dev/null
curl -s "$(URL /v1/completions)" -d '{"prompt":"Once","max_tokens":-2}' >/dev/null
sleep 0.3
expect_eq "--log-format json: every line an object, access lines typed" "$(python3 -c '
import json,sys
lines=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
acc=[l for l in lines if l["event"]=="access"]
print(all("ts" in l and "level" in l for l in lines), [(a["status"], a.get("completion_tokens"), type(a.get("total_ms", 0)).__name__) for a in acc])' "$TMP/json.log")" "True [(200, 2, 'float'), (400, None, 'int')]"
expect_eq "GET /v1/models passes through" "$(curl -s "$(R /v1/models)" | jq_ 'd["data"][0]["owned_by"]')" "pagoda"
expect_eq "a client error passes through as it is" "$(curl -s -o "$TMP/e.json" -w '%{http_code}' "$(R /v1/completions)" -d '{"prompt":"x","max_tokens":-1}'; jq_ 'd["error"]["param"]' <"$TMP/e.json")" "400max_tokens"
expect_eq "a body that is not JSON is a 400 from the router" "$(curl -s -o /dev/null -w '%{http_code}' "$(R /v1/completions)" -d 'nope')" "400"
expect_eq "GET /admin/pools: roles and health" "$(curl -s "$(R /admin/pools)" | jq_ '[(p["name"], p["role"], all(b["ready"] and b["pagoda"] for b in p["backends"])) for p in d["pools"]]')" "[('primary', 'primary', True), ('standby', 'standby', True), ('dr', 'dr', True)]"
curl -s "$(R /metrics)" >"$TMP/metrics.txt"
expect_in "per-backend TTFT histogram" 'pagoda_router_time_to_first_token_seconds_bucket{pool="primary",backend=' "$TMP/metrics.txt"
expect_in "traffic weight gauge" 'pagoda_router_traffic_weight{pool="primary"} 100' "$TMP/metrics.txt"
expect_in "retries exported before the first one" 'pagoda_router_retries_total{pool="primary",backend=""} 0' "$TMP/metrics.txt"
expect_in "failed requests exported before the first one" 'pagoda_router_failed_requests_total{reason="stream_broken"} 0' "$TMP/metrics.txt"
if command -v promtool >/dev/null; then
    promtool check metrics <"$TMP/metrics.txt" >"$TMP/promtool.out" 2>&1 && ok "promtool passes the router's /metrics" || bad "promtool" "$(head -5 "$TMP/promtool.out")"
fi

# 2. Failover: kill -9 replica A during 32 streams (openai client; golden from replica D).
if (cd "$SRC/tests/e2e" && timeout 120 node router_failover.mjs "$(R /v1)" "http://127.0.0.1:$D/v1" "$PA") >"$TMP/failover.out" 2>&1; then
    ok "kill -9 during 32 streams: every stream completes, equal to an undisturbed run"
else
    bad "failover" "$(tail -15 "$TMP/failover.out")"
fi

expect_eq "the router's audit log over HTTP: replica A's ejection" "$(curl -s "$(R '/admin/events?kind=router_ejection')" | jq_ 'sorted(set(e["detail"]["backend"] for e in d["events"]))')" "['http://127.0.0.1:$A']"
expect_eq "the killed replica is charged with the failures" "$(test "$(metric "pagoda_router_upstream_failures_total{pool=\"primary\",backend=\"http://127.0.0.1:$A\"")" -gt 0 && echo yes)" "yes"
expect_eq "streams were resumed on the other replica (counted on the replica that failed)" "$(test "$(metric "pagoda_router_resumptions_total{pool=\"primary\",backend=\"http://127.0.0.1:$A\"}")" -gt 0 && echo yes)" "yes"
a_down() { [ "$(pools '[b["up"] for b in d["pools"][0]["backends"]]')" == "[False, True]" ]; }
until_true 15 a_down
expect_eq "the dead replica is marked down" "$(curl -s "$(R /admin/pools)" | jq_ '[b["up"] for b in d["pools"][0]["backends"]]')" "[False, True]"

# 3. A replica shedding (its critical alert fired) gets no new traffic: the standby takes it.
am='{"version":"4","status":"firing","receiver":"pagoda","groupLabels":{},"commonLabels":{"alertname":"X","severity":"critical"},"commonAnnotations":{},"externalURL":"","alerts":[{"status":"firing","labels":{"alertname":"ExternalCritical","severity":"critical"},"annotations":{"summary":"test"},"startsAt":"2026-12-04T01:00:00Z","endsAt":"0001-01-01T00:00:00Z","generatorURL":"","fingerprint":"f1"}]}'
curl -s "http://127.0.0.1:$B/admin/alerts/webhook" -d "$am" >/dev/null
expect_eq "replica B answers /ready 503 shedding" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$B/ready")" "503"
b_shedding() { [ "$(pools 'd["pools"][0]["backends"][1]["shedding"]')" == "True" ]; }
until_true 15 b_shedding
before_b=$(metric "pagoda_router_requests_total{pool=\"primary\",backend=\"http://127.0.0.1:$B\"")
before_s=$(metric 'pagoda_router_requests_total{pool="standby"')
for i in $(seq 6); do curl -s -o /dev/null "$(R /v1/completions)" -d '{"prompt":"Hello","max_tokens":4}'; done
expect_eq "the shedding replica got no new request" "$(metric "pagoda_router_requests_total{pool=\"primary\",backend=\"http://127.0.0.1:$B\"")" "$before_b"
expect_eq "the standby pool took all 6" "$(( $(metric 'pagoda_router_requests_total{pool="standby"') - before_s ))" "6"

# 4. The severe hook sends everything to DR; then with the standby down too, DR serves.
curl -s "$(R /admin/dr)" -d '{"active":true,"reason":"severe hook (test)"}' >/dev/null
before_d=$(metric 'pagoda_router_requests_total{pool="dr"')
for i in $(seq 4); do curl -s -o /dev/null "$(R /v1/completions)" -d '{"prompt":"Hello","max_tokens":4}'; done
expect_eq "POST /admin/dr: the DR pool takes every request" "$(( $(metric 'pagoda_router_requests_total{pool="dr"') - before_d ))" "4"
curl -s "$(R /admin/dr)" -d '{"active":false}' >/dev/null
kill -9 "$PC"
c_down() { [ "$(pools 'd["pools"][1]["backends"][0]["up"]')" == "False" ]; }
until_true 15 c_down
before_d=$(metric 'pagoda_router_requests_total{pool="dr"')
codes=$(for i in $(seq 4); do curl -s -o /dev/null -w '%{http_code} ' "$(R /v1/completions)" -d '{"prompt":"Hello","max_tokens":4}'; done)
expect_eq "primary shedding or dead and standby dead: DR serves" "$codes/$(( $(metric 'pagoda_router_requests_total{pool="dr"') - before_d ))" "200 200 200 200 /4"
db="$TMP/router-r/pagoda.db"
expect_eq "ejection and DR switches are in the audit log" "$(python3 -c '
import sqlite3,sys
kinds=[r[0] for r in sqlite3.connect(sys.argv[1]).execute("select kind from events")]
print("router_ejection" in kinds, kinds.count("router_dr"))' "$db")" "True 2"

# 5. Misbehaving backends: garbage, a hang, 500s -- every request ends on the good one.
python3 "$SRC/tests/e2e/fake_backend.py" garbage 18931 & PIDS+=("$!")
python3 "$SRC/tests/e2e/fake_backend.py" hang 18932 & PIDS+=("$!")
python3 "$SRC/tests/e2e/fake_backend.py" error 18933 & PIDS+=("$!")
cat >"$TMP/bad.toml" <<TOML
[router]
read_timeout_s = 1.5
max_retries = 3
eject_after_failures = 1
affinity_prefix_chars = 0
[[router.pools]]
name = "mixed"
backends = ["http://127.0.0.1:18931", "http://127.0.0.1:18932", "http://127.0.0.1:18933", "http://127.0.0.1:$D"]
TOML
R1=$RPORT
start_router "$TMP/r2.log" --config "$TMP/bad.toml" || exit 1
for _ in $(seq 100); do
    [ "$(curl -s "$(R /admin/pools)" | jq_ 'sum(b["ready"] for b in d["pools"][0]["backends"])')" == "4" ] && break
    sleep 0.1
done
t0=$(date +%s.%N)
codes=$(for i in $(seq 8); do curl -s -m 20 -o "$TMP/o$i.json" -w '%{http_code} ' "$(R /v1/completions)" -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stream":true}'; done)
expect_eq "garbage, hang and 500 backends: all 8 streams served" "$codes" "200 200 200 200 200 200 200 200 "
expect_eq "and each carries the right text" "$(for i in $(seq 8); do python3 -c '
import json,sys
ev=[l[6:] for l in open(sys.argv[1]) if l.startswith("data: ")]
print("".join(c["text"] for e in ev[:-1] for c in json.loads(e)["choices"]) == sys.argv[2])' "$TMP/o$i.json" "$golden"; done | sort -u)" "True"
expect_eq "bounded: the 8 requests took under 20 s" "$(python3 -c "import time; print(time.time() - $t0 < 20)")" "True"
expect_eq "the bad backends were ejected, requests retried" "$(test "$(metric pagoda_router_ejections_total)" -ge 2 && test "$(metric pagoda_router_retries_total)" -ge 2 && echo yes)" "yes"

# Backends without token ids (vLLM-like, tests/e2e/fake_backend.py words): a stream whose
# backend closes after 3 chunks is resumed from text, completions and chat alike.
python3 "$SRC/tests/e2e/fake_backend.py" dying 18934 & PIDS+=("$!")
python3 "$SRC/tests/e2e/fake_backend.py" words 18935 & PIDS+=("$!")
for _ in $(seq 100); do  # both listening (a loaded machine starts Python slowly)
    (echo > /dev/tcp/127.0.0.1/18934 && echo > /dev/tcp/127.0.0.1/18935) 2>/dev/null && break
    sleep 0.1
done
start_router "$TMP/r6.log" --backend http://127.0.0.1:18934 --standby http://127.0.0.1:18935 || exit 1
text_of() {  # FILE CHAT: the streamed text and the usage's completion tokens
    python3 -c '
import json,sys
ev=[json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith("data: {")]
t="".join((c["delta"].get("content", "") if sys.argv[2] == "1" else c["text"]) for e in ev for c in e["choices"])
print(t, [e["usage"]["completion_tokens"] for e in ev if e.get("usage")])' "$1" "$2"
}
curl -sN "$(R /v1/completions)" -d '{"prompt":"a b c","max_tokens":8,"stream":true,"stream_options":{"include_usage":true}}' >"$TMP/words1"
expect_eq "text resumption (completions): the words continue where they broke off" "$(text_of "$TMP/words1" 0)" " w3 w4 w5 w6 w7 w8 w9 w10 [8]"
curl -sN "$(R /v1/chat/completions)" -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":6,"stream":true,"stream_options":{"include_usage":true}}' >"$TMP/words2"
expect_eq "text resumption (chat, continue_final_message)" "$(text_of "$TMP/words2" 1)" " w0 w1 w2 w3 w4 w5 [6]"

# A client that leaves while its request waits on a hung backend: the upstream call ends.
cat >"$TMP/hang.toml" <<TOML
[router]
[[router.pools]]
name = "hung"
backends = ["http://127.0.0.1:18932"]
TOML
start_router "$TMP/r5.log" --config "$TMP/hang.toml" || exit 1
curl -s -m 1 -o /dev/null "$(R /v1/completions)" -d '{"prompt":"Hi","max_tokens":2,"stream":true}'
sleep 0.5
expect_eq "a client that disconnects cancels the upstream request" "$(metric 'pagoda_router_backend_outstanding_requests{pool="hung"')" "0"

# 6. Every pool saturated: the router's own 429 with Retry-After. The one backend hangs,
#    so the first request holds the only slot (max_outstanding = 1) until the client leaves.
cat >"$TMP/sat.toml" <<TOML
[router]
max_outstanding = 1
retry_after_s = 2
[[router.pools]]
name = "one"
backends = ["http://127.0.0.1:18932"]
TOML
start_router "$TMP/r3.log" --config "$TMP/sat.toml" || exit 1
curl -s -m 4 -o /dev/null "$(R /v1/completions)" -d '{"prompt":"Once","max_tokens":2}' &
held=$!
held_one() { [ "$(metric 'pagoda_router_backend_outstanding_requests{pool="one"')" == "1" ]; }
until_true 10 held_one
codes=$(for i in $(seq 3); do curl -s -o /dev/null -D "$TMP/h$i" -w '%{http_code} ' "$(R /v1/completions)" -d '{"prompt":"Once","max_tokens":2}'; done)
expect_eq "saturated: the next requests get 429" "$codes" "429 429 429 "
expect_eq "the 429 carries Retry-After" "$(grep -il '^retry-after: 2' "$TMP"/h1 "$TMP"/h2 "$TMP"/h3 | wc -l | tr -d ' ')" "3"
wait "$held"

# 7. Discovery: a backends file re-read on change, a DNS name re-resolved; API keys.
echo "http://127.0.0.1:$D  # the DR replica" >"$TMP/backends.txt"
cat >"$TMP/disc.toml" <<TOML
[router]
health_interval_s = 0.2
api_keys = ["sesame"]
[[router.pools]]
name = "filed"
backends_file = "$TMP/backends.txt"
[[router.pools]]
name = "named"
role = "standby"
dns = "http://localhost:$D"
TOML
start_router "$TMP/r4.log" --config "$TMP/disc.toml" || exit 1
expect_eq "backends_file: its backend" "$(curl -s "$(R /admin/pools)" | jq_ '[b["url"] for b in d["pools"][0]["backends"]]')" "['http://127.0.0.1:$D']"
echo "http://127.0.0.1:$B" >>"$TMP/backends.txt"
two_filed() { [ "$(pools 'len(d["pools"][0]["backends"])')" == "2" ]; }
until_true 10 two_filed
expect_eq "backends_file: a line added is picked up" "$(curl -s "$(R /admin/pools)" | jq_ 'sorted(b["url"] for b in d["pools"][0]["backends"])')" "$(python3 -c "print(sorted(['http://127.0.0.1:$D', 'http://127.0.0.1:$B']))")"
expect_eq "dns: the name's address is a backend" "$(curl -s "$(R /admin/pools)" | jq_ '"http://127.0.0.1:'"$D"'" in [b["url"] for b in d["pools"][1]["backends"]]')" "True"
expect_eq "an API key is required" "$(curl -s -o /dev/null -w '%{http_code}' "$(R /v1/completions)" -d '{"prompt":"Hi","max_tokens":2}')" "401"
expect_eq "and accepted" "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer sesame' "$(R /v1/completions)" -d '{"prompt":"Hi","max_tokens":2}')" "200"

# A pool with no healthy backend: /ready says so, requests get a 503 that says why.
"$BIN" router --port 0 --state-dir "$TMP/router-r7" --backend http://127.0.0.1:1 2>"$TMP/r7.log" &
PIDS+=("$!")
for _ in $(seq 100); do
    RPORT=$(grep -o 'router_listening url=http://127.0.0.1:[0-9]*' "$TMP/r7.log" | head -1 | sed 's/.*://')
    [ -n "$RPORT" ] && break
    sleep 0.05
done
expect_eq "no healthy backend: /ready 503" "$(curl -s -o /dev/null -w '%{http_code}' "$(R /ready)")" "503"
expect_eq "and a request gets 503 naming the cause" "$(curl -s -w ' %{http_code}' "$(R /v1/completions)" -d '{"prompt":"Hi"}' | python3 -c 'import json,sys; b,c=sys.stdin.read().rsplit(" ",1); print(json.loads(b)["error"]["message"], c)')" "no healthy backend in any pool 503"

# 8. Bad configuration.
out=$("$BIN" router --backend https://example.com:443 2>&1); rc=$?
expect_eq "https backend: exit 1 with the reason" "$rc $(echo "$out" | grep -c 'https')" "1 1"
printf '[router]\nbackend = "x"\n' >"$TMP/typo.toml"
expect_eq "unknown key: FILE:LINE:KEY" "$("$BIN" router --config "$TMP/typo.toml" 2>&1 | grep -o 'typo.toml:2:router.backend: unknown key')" "typo.toml:2:router.backend: unknown key"
out=$("$BIN" router 2>&1); rc=$?
expect_eq "no backends: a clear error" "$rc $(echo "$out" | grep -c 'give --backend URL')" "1 1"

echo "router_e2e_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
