#!/usr/bin/env bash
# Greedy parity with llama.cpp on mixture-of-experts models (issue 39). For each small MoE
# shape of `pagoda model make-test` (Mixtral as llama with experts, Qwen3-MoE, OLMoE,
# Granite MoE; random weights, a fixed seed: the test writes the same file again), asks the
# shared llama-server for 24 greedy tokens after each of 4 prompts, and writes them to
# testdata/moe_parity.h, which tests/moe_parity_test.cpp checks Pagoda against.
#
#   scripts/moe-parity.sh            # regenerate the expected tokens
#
# Token ids below 259 (unknown, BOS, EOS and the 256 byte tokens of the stories vocabulary)
# are banned on both sides (logit_bias false here, masked in the test): a random model
# emits lone UTF-8 continuation bytes, whose text llama-server's parser refuses (HTTP 500).
# One token per request, streamed, for the same reason. Needs build/apps/pagoda and
# ../shared/anchors/llama.cpp/bin (LLAMACPP_BIN overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/llamacpp-lib.sh
llamacpp_parity_setup
PORT=${PORT:-8392}
BANNED=259
N=24
PROMPTS=("Once upon a time" "Tom and Sue went to the park. They saw a big red ball" "The cat sat on" "Lily liked to sing and dance with her mom")
# shape dtype seed
FILES=("tiny-mixtral f32 7" "tiny-qwen3moe f32 7" "tiny-olmoe f32 7" "tiny-granitemoe f32 7" "tiny-qwen3moe q8_0 7")

greedy() {  # PROMPT_IDS -> N comma-separated token ids, one streamed request per token
    python3 scripts/llamacpp_greedy.py "$PORT" "$N" "$1" --ban "0-$((BANNED - 1))"
}

H=testdata/moe_parity.h
{
    echo "#pragma once"
    echo "// Written by scripts/moe-parity.sh: llama.cpp's greedy continuations (llama-server,"
    echo "// temperature 0, $N tokens, ids below $BANNED banned) of 4 prompts on random-weight"
    echo "// mixture-of-experts models that \`pagoda model make-test --shape S --dtype D --seed N\`"
    echo "// writes. Included by tests only."
    echo "#include <cstdint>"
    echo "#include <string>"
    echo "#include <vector>"
    echo "namespace pagoda::testdata {"
    echo "inline constexpr int32_t kMoeBannedBelow = $BANNED;"
    echo "struct MoeParity {"
    echo "    std::string shape, dtype;"
    echo "    uint64_t seed;"
    echo "    std::vector<std::vector<int32_t>> prompts, llama_cpp;"
    echo "};"
    echo "inline const std::vector<MoeParity> kMoeParity = {"
} > "$H"
for spec in "${FILES[@]}"; do
    read -r shape dtype seed <<< "$spec"
    f="$OUT/$shape-$dtype.gguf"
    "$BIN" model make-test --shape "$shape" --dtype "$dtype" --seed "$seed" -o "$f" 2> /dev/null
    "$OUT/llama/llama-server" -m "$f" -t 2 -c 512 --port "$PORT" > "$OUT/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 60); do curl -sf "localhost:$PORT/health" > /dev/null && break; sleep 0.5; done
    P=""; L=""
    for p in "${PROMPTS[@]}"; do
        ids=$(printf '%s' "$p" | "$BIN" tokenize -m "$f" | tr ' ' ',')
        got=$(greedy "$ids")
        echo "$shape $dtype: [$p] -> $got"
        P="$P{$ids},"; L="$L{$got},"
    done
    kill "$pid"; wait "$pid" 2>/dev/null || true
    echo "    {\"$shape\", \"$dtype\", $seed, {$P}, {$L}}," >> "$H"
done
echo "};" >> "$H"
echo "}  // namespace pagoda::testdata" >> "$H"
echo "wrote $H"
