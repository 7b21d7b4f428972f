#!/usr/bin/env bash
# Chat templates end to end (issue 18): a template that does not parse is a load-time
# error and a 400 on chat (never a silent fallback) while completions are served;
# --chat-template overrides the model's; the request fields add_generation_prompt,
# continue_final_message, chat_template (only with --trust-request-chat-template) and
# chat_template_kwargs; raise_exception's message in the 400; `pagoda model render-chat`
# agrees with what the server tokenizes.
set -uo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/e2e_lib.sh"
CORPUS="$SRC/testdata/chat-templates/corpus"
QWEN3="$CORPUS/Qwen-Qwen3-0.6B.jinja"
post() {  # PATH BODY: body to $TMP/body, prints the status
    curl -s -o "$TMP/body" -w '%{http_code}' "$(URL "$1")" -H 'Content-Type: application/json' -d "$2"
}
MSGS='[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Once upon a time"}]'
echo "$MSGS" >"$TMP/msgs.json"

# 1. A template outside what Pagoda reads: load-time error, chat 400, completions served.
printf '{%% for m in messages %%}{{ m.content }}\n  {%% include "footer.jinja" %%}{%% endfor %%}\n' >"$TMP/bad.jinja"
start_server "$TMP/bad.log" --chat-template "$TMP/bad.jinja" || exit 1
expect_in "the log names the unusable template at start" 'chat_template unusable=' "$TMP/bad.log"
expect_in "with line, column and construct" "line 2, column 3: unsupported statement 'include'" "$TMP/bad.log"
expect_eq "completions are still served" "$(post /v1/completions '{"prompt": "Once", "max_tokens": 2}')" "200"
expect_eq "chat is a 400, not a fallback" "$(post /v1/chat/completions "{\"messages\": $MSGS, \"max_tokens\": 2}")" "400"
expect_eq "carrying the template's error" "$(jq_ '"unsupported statement" in d["error"]["message"] and "--chat-template" in d["error"]["message"]' <"$TMP/body")" "True"
expect_eq "/tokenize with messages too" "$(post /tokenize "{\"messages\": $MSGS}")" "400"
kill "$SPID"

# 2. --chat-template FILE: the server renders what render-chat shows.
"$BIN" model render-chat -m "$MODEL" --chat-template "$QWEN3" --messages "$TMP/msgs.json" --format json >"$TMP/cli.json" 2>"$TMP/cli.err"
expect_eq "render-chat prints the prompt" "$(jq_ 'd["prompt"].startswith("<|im_start|>system\nBe brief.<|im_end|>")' <"$TMP/cli.json")" "True"
"$BIN" model render-chat -m "$MODEL" --chat-template "$QWEN3" --messages "$TMP/msgs.json" >"$TMP/cli.txt" 2>"$TMP/cli.err"
expect_in "and, as text, its tokens on stderr" "tokens:" "$TMP/cli.err"
start_server "$TMP/qwen.log" --chat-template "$QWEN3" || exit 1
expect_in "the log says which template renders chats" "chat_template renderer=\"--chat-template $QWEN3\"" "$TMP/qwen.log"
post /tokenize "{\"messages\": $MSGS}" >/dev/null
expect_eq "the server tokenizes the same prompt" "$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["tokens"]; b=json.load(open(sys.argv[2]))["tokens"]; print(a == b)' "$TMP/cli.json" "$TMP/body")" "True"
expect_eq "chat answers" "$(post /v1/chat/completions "{\"messages\": $MSGS, \"max_tokens\": 3}")" "200"

# 3. chat_template_kwargs (Qwen3's enable_thinking) change the prompt as the template says.
"$BIN" model render-chat -m "$MODEL" --chat-template "$QWEN3" --messages "$TMP/msgs.json" \
    --chat-template-kwargs '{"enable_thinking": false}' --format json >"$TMP/nothink.json" 2>/dev/null
expect_eq "enable_thinking false closes the think block" "$(jq_ 'd["prompt"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")' <"$TMP/nothink.json")" "True"
post /tokenize "{\"messages\": $MSGS, \"chat_template_kwargs\": {\"enable_thinking\": false}}" >/dev/null
expect_eq "and the server agrees" "$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["tokens"]; b=json.load(open(sys.argv[2]))["tokens"]; print(a == b)' "$TMP/nothink.json" "$TMP/body")" "True"
expect_eq "kwargs cannot replace the messages" "$(post /v1/chat/completions "{\"messages\": $MSGS, \"chat_template_kwargs\": {\"messages\": []}}")" "400"
expect_eq "naming the field" "$(jq_ 'd["error"]["param"]' <"$TMP/body")" "chat_template_kwargs"

# 4. add_generation_prompt and continue_final_message.
CONT='[{"role": "user", "content": "Tell a story"}, {"role": "assistant", "content": "Once upon a"}]'
post /tokenize "{\"messages\": $CONT, \"continue_final_message\": true, \"add_generation_prompt\": false}" >/dev/null
cp "$TMP/body" "$TMP/cont.json"
post /tokenize "{\"messages\": $CONT, \"add_generation_prompt\": false}" >/dev/null
expect_eq "continue_final_message ends inside the last message" "$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["tokens"]; b=json.load(open(sys.argv[2]))["tokens"]; print(len(a) < len(b) and b[:len(a)] == a)' "$TMP/cont.json" "$TMP/body")" "True"
expect_eq "both flags at once is a 400" "$(post /v1/chat/completions "{\"messages\": $CONT, \"continue_final_message\": true, \"add_generation_prompt\": true}")" "400"

# 5. A request's own chat_template needs --trust-request-chat-template.
REQ_T='{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}'
expect_eq "a request template is refused by default" "$(post /v1/chat/completions "{\"messages\": $MSGS, \"chat_template\": \"$REQ_T\"}")" "400"
expect_eq "saying how to allow it" "$(jq_ '"--trust-request-chat-template" in d["error"]["message"] and d["error"]["param"] == "chat_template"' <"$TMP/body")" "True"
kill "$SPID"
start_server "$TMP/trust.log" --trust-request-chat-template || exit 1
expect_eq "with the flag it renders" "$(post /tokenize "{\"messages\": $MSGS, \"chat_template\": \"$REQ_T\", \"add_special_tokens\": false}")" "200"
post /tokenize '{"prompt": "[system] Be brief.\n[user] Once upon a time\n", "add_special_tokens": false}' >"$TMP/code" 2>&1
cp "$TMP/body" "$TMP/plain.json"
post /tokenize "{\"messages\": $MSGS, \"chat_template\": \"$REQ_T\"}" >/dev/null
expect_eq "exactly as the request's template says" "$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["tokens"]; b=json.load(open(sys.argv[2]))["tokens"]; print(a == b)' "$TMP/plain.json" "$TMP/body")" "True"
expect_eq "a request template that does not parse is a 400" "$(post /v1/chat/completions "{\"messages\": $MSGS, \"chat_template\": \"{% if %}\"}")" "400"
expect_eq "saying where" "$(jq_ '"line 1, column 1" in d["error"]["message"]' <"$TMP/body")" "True"
kill "$SPID"

# 6. raise_exception: the template's own message in the 400.
start_server "$TMP/gemma.log" --chat-template "$CORPUS/google-gemma-2-2b-it.jinja" || exit 1
expect_eq "a template that raises is a 400" "$(post /v1/chat/completions "{\"messages\": $MSGS, \"max_tokens\": 2}")" "400"
expect_eq "with the template's message" "$(jq_ '"System role not supported" in d["error"]["message"]' <"$TMP/body")" "True"

# 7. No template in the GGUF and no flag: the built-in renderer, and the log says so.
expect_in "the bundled model has no template: the log names the built-in" "built-in 'default' renderer" "$TMP/trust.log"
echo "chat_template_e2e_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
