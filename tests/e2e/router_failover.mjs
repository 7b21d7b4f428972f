// Failover through `pagoda router` with the official openai Node client (tests/router_e2e_test.sh).
// Usage: node router_failover.mjs ROUTER_URL DIRECT_URL PID_TO_KILL
// Sends 32 streaming greedy requests (completions and chat) through the router, kills the
// given replica with SIGKILL once every stream has produced tokens, and checks that every
// request completes with the same text and usage as an undisturbed run sent straight to a
// replica.
import OpenAI from "openai";
import assert from "node:assert/strict";

const [routerURL, directURL, pid] = process.argv.slice(2);
const router = new OpenAI({ baseURL: routerURL, apiKey: "unused", maxRetries: 0 });
const direct = new OpenAI({ baseURL: directURL, apiKey: "unused", maxRetries: 0 });
const model = (await direct.models.list()).data[0].id;
const N = 32;
const words = ["cat", "dog", "tree", "ball", "sun", "moon", "boat", "bird"];
const req = (i) => {
  const common = { model, max_tokens: 160, temperature: 0, ignore_eos: true };
  const topic = `${words[i % 8]} number ${i}`;
  return i % 2 === 0
    ? { kind: "completions", body: { ...common, prompt: `Once upon a time there was a ${topic}` } }
    : { kind: "chat", body: { ...common, messages: [{ role: "user", content: `Tell me about the ${topic}` }] } };
};

async function run(client, i, progress) {
  const { kind, body } = req(i);
  const api = kind === "chat" ? client.chat.completions : client.completions;
  const stream = await api.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let text = "", usage = null, finish = null, chunks = 0;
  for await (const chunk of stream) {
    for (const ch of chunk.choices) {
      text += kind === "chat" ? (ch.delta.content ?? "") : ch.text;
      if (ch.finish_reason) finish = ch.finish_reason;
      chunks++;
    }
    if (chunk.usage) usage = chunk.usage;
    if (progress) progress(i, chunks);
  }
  return { text, usage, finish };
}

const golden = [];
for (let i = 0; i < N; i++) golden.push(await run(direct, i, null));

const seen = new Array(N).fill(0);
let killed = false;
const progress = (i, chunks) => {
  seen[i] = chunks;
  if (!killed && seen.every((c) => c >= 3)) {
    killed = true;
    process.kill(Number(pid), "SIGKILL");
  }
};
const results = await Promise.all([...Array(N).keys()].map((i) => run(router, i, progress)));
assert.ok(killed, "the replica was not killed: streams ended too early");
for (let i = 0; i < N; i++) {
  assert.equal(results[i].text, golden[i].text, `request ${i}: text differs from the undisturbed run`);
  assert.equal(results[i].finish, golden[i].finish, `request ${i}: finish_reason`);
  for (const k of ["prompt_tokens", "completion_tokens", "total_tokens"]) {
    assert.equal(results[i].usage[k], golden[i].usage[k], `request ${i}: usage.${k}`);
  }
}
console.log(`ok: ${N} streams complete and equal to the undisturbed run`);
