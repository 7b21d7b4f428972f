#!/usr/bin/env bash
# End-to-end tests of the pagoda CLI: golden generation, tokenize/detokenize on model
# and vocab-only files, make-test + info, and bad input (one clear line, non-zero exit,
# no crash). Usage: cli_test.sh PAGODA_BIN SOURCE_DIR
set -uo pipefail
BIN=$1
SRC=$2
MODEL=$SRC/models/stories260K.gguf
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; shift; printf '     %s\n' "$@"; }

expect_eq() {  # name got want
    if [ "$2" == "$3" ]; then ok "$1"; else bad "$1" "got:  [$2]" "want: [$3]"; fi
}

# Runs a command that must fail cleanly: exit 1 or 2 (not a signal), and one stderr line
# starting with "error:" that contains $2.
expect_error() {
    local name=$1 needle=$2
    shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    local lines
    lines=$(wc -l <"$TMP/err")
    local first
    first=$(head -n1 "$TMP/err")
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$lines" -eq 1 ] && [[ "$first" == error:* ]] && [[ "$first" == *"$needle"* ]]; then
        ok "$name"
    else
        bad "$name" "rc=$rc lines=$lines" "stderr: $(cat "$TMP/err")"
    fi
}

# 1. Golden greedy continuation (../shared/data/models/REFERENCE.md).
want=", there was a little girl named Lily. She loved to play outside in the park. One day, she saw"
got=$("$BIN" generate -m "$MODEL" -p "Once upon a time" -n 32 --temperature 0 2>"$TMP/gen_err")
expect_eq "generate golden text" "$got" "$want"
grep -q "tokens/s" "$TMP/gen_err" && ok "generate prints speed on stderr" || bad "generate prints speed" "$(cat "$TMP/gen_err")"

# 1b. Many prompts through the batching engine (--prompts), plain and --json.
printf 'Once upon a time\nThe cat sat\n{"prompt": "Once upon a time", "max_tokens": 8, "stop": "girl"}\n{"prompt_token_ids": [1, 403, 407], "n": 2, "temperature": 1.0, "seed": 7}\n' >"$TMP/prompts.txt"
"$BIN" generate -m "$MODEL" --prompts "$TMP/prompts.txt" -n 32 --temperature 0 --json >"$TMP/batch.jsonl" 2>"$TMP/batch_err"
expect_eq "--prompts --json: one object per request then a summary" "$(wc -l <"$TMP/batch.jsonl")" "5"
if command -v python3 >/dev/null; then
    check=$(python3 - "$TMP/batch.jsonl" "$want" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
want = sys.argv[2]
assert [r.get("index") for r in rows[:4]] == [0, 1, 2, 3], "input order"
assert rows[0]["text"] == want, rows[0]["text"]
assert rows[2]["finish_reason"] == "stop" and rows[2]["text"] == ", there was a little ", rows[2]
assert len(rows[3]["outputs"]) == 2
s = rows[4]
assert s["summary"] and s["requests"] == 4 and s["generated_tokens"] > 0 and s["failed"] == 0, s
print("ok")
PY
)
    expect_eq "--prompts --json contents (golden, stop string, n=2, summary)" "$check" "ok"
fi
"$BIN" generate -m "$MODEL" --prompts "$TMP/prompts.txt" -n 8 --temperature 0 >"$TMP/batch.txt" 2>&1
grep -q "^requests: 4 (0 failed) | prompt tokens: .* | preemptions: 0 | prefix-cache hit rate" "$TMP/batch.txt" &&
    ok "--prompts prints an aggregate line" || bad "--prompts aggregate line" "$(tail -1 "$TMP/batch.txt")"
printf 'fine\n{"prompt": "x", "max_tokens": "many"}\n' >"$TMP/badprompts.txt"
expect_error "--prompts bad field names line and field" "badprompts.txt:2" "$BIN" generate -m "$MODEL" --prompts "$TMP/badprompts.txt"
printf '{"prompt": "x", "top_p": 7}\n' >"$TMP/badprompts2.txt"
expect_error "--prompts out-of-range value" "top_p must be in (0, 1]" "$BIN" generate -m "$MODEL" --prompts "$TMP/badprompts2.txt"
printf '{not json\n' >"$TMP/badprompts3.txt"
expect_error "--prompts invalid JSON" "not valid JSON" "$BIN" generate -m "$MODEL" --prompts "$TMP/badprompts3.txt"

# 2. Tokenize / detokenize.
expect_eq "tokenize prompt" "$(printf 'Once upon a time' | "$BIN" tokenize -m "$MODEL")" "1 403 407 261 378"
expect_eq "tokenize --no-bos on vocab-only file" \
    "$(printf ' Hello world' | "$BIN" tokenize --no-bos -m "$SRC/testdata/tokenizer-vectors/ggml-vocab-llama-spm.gguf")" \
    "29871 15043 3186"
expect_eq "tokenize keeps trailing newline" "$(printf 'a\n' | "$BIN" tokenize --no-bos -m "$MODEL")" \
    "$(printf 'a\n' | "$BIN" tokenize --no-bos -m "$MODEL")"
expect_eq "detokenize" "$(echo "403 407 261 378" | "$BIN" detokenize -m "$MODEL")" "Once upon a time"
expect_eq "detokenize gpt-2 vocab-only" \
    "$(printf 'Hello world' | "$BIN" tokenize --no-bos -m "$SRC/testdata/tokenizer-vectors/ggml-vocab-gpt-2.gguf" | "$BIN" detokenize -m "$SRC/testdata/tokenizer-vectors/ggml-vocab-gpt-2.gguf")" \
    "Hello world"
special=$(printf '<s>x' | "$BIN" tokenize --no-bos --special -m "$MODEL" | cut -d' ' -f1)
expect_eq "tokenize --special matches <s>" "$special" "1"

# 3. make-test and model info.
if "$BIN" model make-test --shape tiny-gqa --dtype q8_0 --seed 3 -o "$TMP/t.gguf" 2>/dev/null; then
    ok "make-test writes a model"
    info=$("$BIN" model info "$TMP/t.gguf")
    [[ "$info" == *"Q8_0"* && "$info" == *"KV bytes/token"* ]] && ok "model info" || bad "model info" "$info"
    "$BIN" generate -m "$TMP/t.gguf" -p "hello" -n 8 --temperature 0 --ignore-eos >/dev/null 2>&1 &&
        ok "generate on random q8_0 model" || bad "generate on random q8_0 model"
else
    bad "make-test writes a model"
fi
info=$("$BIN" model info "$MODEL")
[[ "$info" == *"llama"* && "$info" == *"KV bytes/token:  1280 (f32)"* ]] && ok "model info bundled" || bad "model info bundled" "$info"

# 4. Bad input.
head -c 1000 "$MODEL" >"$TMP/trunc.gguf"
expect_error "truncated GGUF" "truncated" "$BIN" generate -m "$TMP/trunc.gguf" -p hi
printf 'XXXX' | cat - <(tail -c +5 "$MODEL") >"$TMP/magic.gguf"
expect_error "corrupted magic" "not a GGUF file" "$BIN" generate -m "$TMP/magic.gguf" -p hi
head -c 1100000 "$MODEL" >"$TMP/cut.gguf"
expect_error "truncated tensor data" "outside" "$BIN" generate -m "$TMP/cut.gguf" -p hi
expect_error "vocab-only file cannot generate" "no tensors" "$BIN" generate -m "$SRC/testdata/tokenizer-vectors/ggml-vocab-llama-spm.gguf" -p hi
expect_error "unknown architecture" "architecture 'falcon' is not supported" "$BIN" model info "$SRC/testdata/tokenizer-vectors/ggml-vocab-falcon.gguf"
long=$(python3 -c 'print("Once upon a time " * 600)')
expect_error "prompt longer than context" "maximum context length is 2048 tokens" "$BIN" generate -m "$MODEL" -p "$long" -n 4
expect_error "bad block size" "block-size" "$BIN" generate -m "$MODEL" -p hi --block-size 7
expect_error "bad temperature" "temperature" "$BIN" generate -m "$MODEL" -p hi --temperature -1
expect_error "bad top-p" "top-p" "$BIN" generate -m "$MODEL" -p hi --top-p 2
expect_error "bad kv memory" "memory size" "$BIN" generate -m "$MODEL" -p hi --kv-cache-memory lots
expect_error "tiny kv memory" "holds no block" "$BIN" generate -m "$MODEL" -p hi --kv-cache-memory 1K
expect_error "missing model file" "does not exist" "$BIN" generate -m "$TMP/none.gguf" -p hi
expect_error "bad token id" "not a token id" sh -c "echo 99999 | '$BIN' detokenize -m '$MODEL'"
expect_error "missing prompt" "a prompt" "$BIN" generate -m "$MODEL" -n 4
expect_error "unknown shape" "unknown shape" "$BIN" model make-test --shape gpt-5 -o "$TMP/x.gguf"

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
