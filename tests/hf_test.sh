#!/usr/bin/env bash
# Hugging Face model directories (issue 39), end to end through the CLI: random-weight
# directories that tests/hf/make_hf_dir.py writes (as transformers saves them: config.json,
# safetensors, sharded with an index or not, F32/F16/BF16, tokenizer.json) for Llama,
# Mistral, Qwen2, Qwen3, Mixtral, Qwen3-MoE, OLMoE and Granite MoE.
#  1. `pagoda generate -m DIR`'s greedy tokens are those of an independent numpy forward
#     written from transformers' modeling code (tests/hf/hf_forward.py), and those
#     llama.cpp gave on `pagoda model convert`'s GGUF of the same directory
#     (testdata/hf_llamacpp.txt, recorded by scripts/hf-parity.sh).
#  2. The conversion is cached: a second start does not convert again.
#  3. Broken directories fail with an error naming the file and the field.
# Usage: hf_test.sh PAGODA_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/e2e_lib.sh"
cd "$SRC"
PAGODA=$BIN
PY=/usr/bin/python3  # Debian's, with python3-numpy
WORK=$TMP
export XDG_CACHE_HOME=$WORK/cache
fail() { bad "$1"; }
PROMPT=79,110,99,101,269,259
BAN='{"'$(seq -s '":-100,"' 128 255)'":-100}'

greedy() {  # DIR [FLAGS...] -> 16 greedy token ids, ids 128-255 banned
    local dir=$1; shift
    printf '{"prompt_token_ids":[%s],"max_tokens":16,"temperature":0,"ignore_eos":true,"logit_bias":%s}\n' \
        "$PROMPT" "$BAN" > "$WORK/p.jsonl"
    "$PAGODA" generate -m "$dir" --prompts "$WORK/p.jsonl" --json "$@" 2> "$WORK/gen.log" |
        head -1 |
        python3 -c 'import json,sys; print(",".join(map(str, json.load(sys.stdin)["token_ids"])))'
}

# 1. Against numpy and llama.cpp.
while read -r arch dtype want; do
    case "$arch" in "#"*|"") continue ;; esac
    $PY tests/hf/make_hf_dir.py "$arch" "$WORK/$arch" --seed 5 --dtype "$dtype"
    got=$(greedy "$WORK/$arch")
    $PY tests/hf/hf_forward.py "$WORK/$arch" --check "$PROMPT" "$got" --tie 1e-2 --ban 128-255 > "$WORK/np.txt" ||
        { cat "$WORK/np.txt"; fail "$arch $dtype: greedy tokens differ from the numpy forward"; }
    expect_eq "$arch ($dtype): 16 greedy tokens as the numpy forward and llama.cpp" "$got" "$want"
done < testdata/hf_llamacpp.txt

# Shards with an index, F16, tied embeddings: against numpy.
$PY tests/hf/make_hf_dir.py mistral "$WORK/mistral" --seed 6 --dtype f16 --shards 3 --tied
got=$(greedy "$WORK/mistral")
$PY tests/hf/hf_forward.py "$WORK/mistral" --check "$PROMPT" "$got" --tie 1e-2 --ban 128-255 > "$WORK/np.txt" ||
    { cat "$WORK/np.txt"; fail "mistral, 3 shards, tied: differs from the numpy forward"; }
ok "Mistral in 3 shards with an index, F16, tied embeddings: as the numpy forward"

# 2. Cached: the second start maps the converted file.
conv=$(ls "$WORK"/cache/pagoda/hf/mistral-auto-*.gguf)
before=$(stat -c '%i %Y' "$conv")
sleep 1
greedy "$WORK/mistral" > /dev/null
expect_eq "a second start maps the converted GGUF instead of converting again" \
    "$(stat -c '%i %Y' "$conv") $(ls "$WORK"/cache/pagoda/hf/mistral-* | wc -l)" "$before 1"

# On-load quantization: Q8_0 matrices, still the numpy forward's tokens within a wider tie.
got=$(greedy "$WORK/llama" --quantization q8_0)
"$PAGODA" model info "$(ls "$WORK"/cache/pagoda/hf/llama-q8_0-*.gguf)" | grep -q "Q8_0" || fail "no Q8_0 tensors"
$PY tests/hf/hf_forward.py "$WORK/llama" --check "$PROMPT" "$got" --tie 0.15 --ban 128-255 > /dev/null ||
    fail "--quantization q8_0: far from the numpy forward"
ok "--quantization q8_0 converts the matrices to Q8_0"

# 3. Broken directories: the file and the field named.
expect_error() {  # DIR PATTERN WHAT
    if "$PAGODA" model convert "$1" -o "$WORK/x.gguf" > "$WORK/err.txt" 2>&1; then
        bad "$3: converted"
    elif grep -qE "$2" "$WORK/err.txt"; then
        ok "$3: $(head -c 160 "$WORK/err.txt")"
    else
        bad "$3" "$(cat "$WORK/err.txt")"
    fi
}
cp -r "$WORK/mistral" "$WORK/noshard"
rm "$WORK/noshard/model-00002-of-00003.safetensors"
expect_error "$WORK/noshard" "model.safetensors.index.json.*model-00002-of-00003.safetensors" "a missing shard"
cp -r "$WORK/llama" "$WORK/arch"
sed -i 's/LlamaForCausalLM/GPTBigCodeForCausalLM/' "$WORK/arch/config.json"
expect_error "$WORK/arch" "config.json: field 'architectures'.*GPTBigCodeForCausalLM.*supported:" "an unknown architecture"
cp -r "$WORK/llama" "$WORK/wp"
sed -i 's/"type": "BPE"/"type": "WordPiece"/' "$WORK/wp/tokenizer.json"
expect_error "$WORK/wp" "tokenizer.json: field 'model.type' is 'WordPiece'" "a WordPiece tokenizer"
cp -r "$WORK/llama" "$WORK/i64"
$PY - "$WORK/i64/model.safetensors" <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["model.norm.weight"]["dtype"] = "I16"  # the directory is BF16: same byte count
t = json.dumps(h).encode().ljust(n)
open(sys.argv[1], "wb").write(bytes(b[:8]) + t + bytes(b[8 + n:]))
PY
expect_error "$WORK/i64" "model.safetensors: tensor 'model.norm.weight' has dtype I16" "a dtype not read"
rm "$WORK/llama/tokenizer.json"
expect_error "$WORK/llama" "tokenizer.json: not found.*--tokenizer" "no tokenizer.json"
if "$PAGODA" model convert "$WORK/llama" --tokenizer "$WORK/qwen2" -o "$WORK/tok.gguf" 2> /dev/null; then
    ok "--tokenizer takes another directory's tokenizer.json"
else
    bad "--tokenizer DIR did not convert"
fi
# 4. Serving a directory: the chat template from tokenizer_config.json, and
# generation_config.json's sampling defaults (vLLM's --generation-config auto): with its
# temperature 0, requests that set none are greedy whatever their seed; `vllm` ignores it.
$PY tests/hf/make_hf_dir.py qwen2 "$WORK/served" --seed 7
$PY - "$WORK/served/generation_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["temperature"] = 0.0
json.dump(c, open(sys.argv[1], "w"))
PY
texts() {  # four completions with seeds 1-4, one line each
    for seed in 1 2 3 4; do
        curl -s "$(URL /v1/completions)" -H 'Content-Type: application/json' \
            -d "{\"prompt\":\"Once upon a time\",\"max_tokens\":12,\"seed\":$seed}" | jq_ 'd["choices"][0]["text"]'
    done
}
MODEL=$WORK/served
start_server "$TMP/served.log" --state-dir "$WORK/s1"
code=$(curl -s -o "$WORK/chat.json" -w '%{http_code}' "$(URL /v1/chat/completions)" -H 'Content-Type: application/json' \
    -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}')
expect_eq "chat completions on a directory's tokenizer_config.json template" "$code $(jq_ 'd["choices"][0]["message"]["role"]' < "$WORK/chat.json")" "200 assistant"
expect_eq "generation_config.json's temperature 0 applies to requests without one" "$(texts | sort -u | wc -l)" "1"
kill "$SPID"; wait "$SPID" 2>/dev/null
start_server "$TMP/served2.log" --state-dir "$WORK/s2" --generation-config vllm
n=$(texts | sort -u | wc -l)
if [ "$n" -gt 1 ]; then ok "--generation-config vllm ignores it ($n different texts of 4 seeds)"; else bad "--generation-config vllm: the 4 seeds gave one text"; fi
kill "$SPID"; wait "$SPID" 2>/dev/null

echo "hf_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
