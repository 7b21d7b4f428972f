// Pagoda's reading of tokenizer.json against @huggingface/tokenizers (the reference, pure
// JS): for each directory, the same texts encoded by both (no BOS/EOS added; added and
// special tokens matched in the text, as Hugging Face always does) must give the same ids.
// Texts: every case of testdata/tokenizer-vectors/*.inp, and a seeded fuzzed set (mixed
// scripts, digits, whitespace runs, punctuation, emoji, combining marks, special tokens).
//
//   node tokenizer_json_check.mjs PAGODA_BIN VECTORS_DIR FUZZ_COUNT DIR...
import { Tokenizer } from "@huggingface/tokenizers";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const [bin, vectorsDir, fuzzCount, ...dirs] = process.argv.slice(2);

function vectorTexts() {
  const out = [];
  for (const f of fs.readdirSync(vectorsDir).filter((f) => f.endsWith(".inp")).sort()) {
    for (const t of fs.readFileSync(path.join(vectorsDir, f), "utf8").split("\n__ggml_vocab_test__\n")) {
      if (t.length > 0 && t.length < 4000) out.push(t);
    }
  }
  return [...new Set(out)];
}

// splitmix32-style generator: the same fuzzed texts on every run.
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return ((z ^ (z >>> 16)) >>> 0) / 4294967296;
  };
}

function fuzzTexts(n, specials) {
  const pieces = [
    "the", " The", "  ", "\n", "\n\n", "\t", " ", "'s", "'LL", "don't", "123", "4567890", "3.14",
    "héllo", "naïve", "Ünïcödé", "привет", " мир", "日本語", "中文字符", "한국어", "العربية", "עברית",
    "😀", "👨‍👩‍👧", "🇫🇷", "e\u0301", "\u00a0", "\u200b", "...", "!?", "<", ">", "{}", "()", "$$",
    "https://example.com/a?b=c", "snake_case", "CamelCase", "ALLCAPS", "x²", "½", "ﬁ", "\r\n",
    "    indented", "tab\tbed", "—", "“quoted”", "…", "#", "@user", "a", "I", "ß", "ǅ",
  ];
  const r = rng(39);
  const out = [];
  for (let i = 0; i < n; ++i) {
    let t = "";
    const len = 1 + Math.floor(r() * 12);
    for (let k = 0; k < len; ++k) {
      const x = r();
      if (x < 0.05 && specials.length) t += specials[Math.floor(r() * specials.length)];
      else if (x < 0.15) t += String.fromCodePoint(0x20 + Math.floor(r() * 0x2fe0));
      else t += pieces[Math.floor(r() * pieces.length)];
    }
    out.push(t);
  }
  return out;
}

let failures = 0;
for (const dir of dirs) {
  const json = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const cfgPath = path.join(dir, "tokenizer_config.json");
  const cfg = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, "utf8")) : {};
  const ref = new Tokenizer(json, cfg);
  const specials = (json.added_tokens || []).filter((a) => a.special).map((a) => a.content).slice(0, 8);
  const texts = [...vectorTexts(), ...fuzzTexts(Number(fuzzCount), specials)];
  const input = texts.map((t) => JSON.stringify(t)).join("\n") + "\n";
  const lines = execFileSync(bin, ["tokenize", "--no-bos", "--special", "--jsonl", "-m", dir], {
    input, maxBuffer: 1 << 28,
  }).toString().split("\n");
  let same = 0;
  const bad = [];
  texts.forEach((t, i) => {
    const want = ref.encode(t, { add_special_tokens: false }).ids.join(" ");
    if (lines[i] === want) ++same;
    else bad.push({ text: t, pagoda: lines[i], hf: want });
  });
  console.log(`${path.basename(dir)}: ${same} of ${texts.length} texts encode as @huggingface/tokenizers does`);
  for (const b of bad.slice(0, 5)) {
    console.log(`  ${JSON.stringify(b.text).slice(0, 100)}\n    pagoda: ${b.pagoda.slice(0, 160)}\n    hf:     ${b.hf.slice(0, 160)}`);
  }
  failures += bad.length;
}
process.exit(failures ? 1 : 0);
