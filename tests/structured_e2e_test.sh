#!/usr/bin/env bash
# Structured outputs and tool calling end to end on the bundled model: the official openai
# Node client (tests/e2e/structured_outputs.mjs: json_schema over 50 seeds validated with
# Ajv, forced tool calls, streamed tool_calls deltas, 400s), then curl for what a client
# library hides: the raw SSE deltas, finish reasons and /metrics.
# Usage: structured_e2e_test.sh PAGODA_BIN SOURCE_DIR
set -uo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/e2e_lib.sh"
post() { curl -s -o "$TMP/body" -w '%{http_code}' "$(URL "$1")" -H 'Content-Type: application/json' -d "$2" "${@:3}"; }

start_server "$TMP/s.log" || exit 1
expect_in "the log names the tool-call parser, and that no template chose it" "tool_call_parser=llama3_json (the default: the model has no chat template to detect one from" "$TMP/s.log"

# 1. The official client.
if [ -d "$SRC/tests/e2e/node_modules/openai" ]; then
    if node "$SRC/tests/e2e/structured_outputs.mjs" "$(URL /v1)" >"$TMP/node" 2>&1; then ok "openai client: $(tail -1 "$TMP/node")"; else bad "openai client" "$(tail -15 "$TMP/node")"; fi
else
    bad "openai client" "tests/e2e/node_modules is missing (run scripts/install-deps.sh)"
fi

# 2. A choice that max_tokens cannot finish: "length", and stop_reason says why.
expect_eq "unfinishable grammar answers" "$(post /v1/completions '{"prompt": "Once", "max_tokens": 3, "guided_regex": "\\[[a-z ]*\\]"}')" "200"
expect_eq "with finish_reason length" "$(jq_ 'd["choices"][0]["finish_reason"]' <"$TMP/body")" "length"
expect_eq "and a stop_reason that says so" "$(jq_ '"grammar was complete" in d["choices"][0]["stop_reason"]' <"$TMP/body")" "True"

# 3. Raw SSE of a forced call: the first tool_calls delta has id, type and name; the
# arguments follow in later deltas; the last chunk says tool_calls.
curl -sN "$(URL /v1/chat/completions)" -d '{"messages": [{"role": "user", "content": "Hi"}], "stream": true, "seed": 2, "max_tokens": 200,
  "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"q": {"type": "string", "maxLength": 12}}, "required": ["q"]}}}],
  "tool_choice": "required", "parallel_tool_calls": false}' >"$TMP/sse"
expect_eq "SSE tool_calls deltas" "$(python3 - "$TMP/sse" <<'PY'
import json, sys
deltas, finish = [], None
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("data: ") or line == "data: [DONE]":
        continue
    ch = json.loads(line[6:])["choices"][0]
    finish = ch["finish_reason"] or finish
    deltas += ch["delta"].get("tool_calls", [])
head = deltas[0]
args = "".join(d["function"].get("arguments", "") for d in deltas)
print(head["id"].startswith("call_"), head["type"], head["function"]["name"], len(deltas) > 2,
      all(d["index"] == 0 for d in deltas), "q" in json.loads(args), finish)
PY
)" "True function f True True True tool_calls"

# 4. Metrics: constrained requests counted, mask time observed (promtool-clean names).
curl -s "$(URL /metrics)" >"$TMP/metrics"
expect_eq "constrained requests counted" "$(awk '/^pagoda_constrained_requests_total/ {print ($2 > 60)}' "$TMP/metrics")" "1"
expect_eq "mask time observed" "$(awk '/^pagoda_grammar_mask_seconds_count/ {print ($2 > 0)}' "$TMP/metrics")" "1"
kill "$SPID"

# 5. --tool-call-parser: a bad name is refused at start; a good one is logged.
"$BIN" serve -m "$MODEL" --port 0 --tool-call-parser nope >/dev/null 2>"$TMP/bad.log"
expect_eq "a bad parser name is refused" "$?" "2"
expect_in "naming the allowed ones" "llama3_json" "$TMP/bad.log"
start_server "$TMP/h.log" --tool-call-parser hermes --enable-auto-tool-choice || exit 1
expect_in "the chosen parser is logged" "tool_call_parser=hermes" "$TMP/h.log"
kill "$SPID"
echo "structured_e2e_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
