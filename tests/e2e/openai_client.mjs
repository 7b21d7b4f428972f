// Drives `pagoda serve` with the official openai Node client (tests/server_test.sh).
// Usage: node openai_client.mjs BASE_URL GOLDEN_TEXT
import OpenAI from "openai";
import assert from "node:assert/strict";

const [baseURL, golden] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const models = await client.models.list();
const model = models.data[0].id;

// Completions, plain and streamed with usage.
const c = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 32, temperature: 0 });
assert.equal(c.choices[0].text, golden);
assert.equal(c.usage.completion_tokens, 32);
let text = "";
let usage = null;
const stream = await client.completions.create({
  model, prompt: "Once upon a time", max_tokens: 32, temperature: 0, stream: true, stream_options: { include_usage: true },
});
for await (const chunk of stream) {
  for (const ch of chunk.choices) text += ch.text;
  if (chunk.usage) usage = chunk.usage;
}
assert.equal(text, golden);
assert.equal(usage.completion_tokens, 32);

// Chat, n > 1, logprobs; streamed chat.
const chat = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "Tell me a story" }], max_tokens: 8, n: 2, temperature: 0.9, seed: 3,
  logprobs: true, top_logprobs: 2,
});
assert.equal(chat.choices.length, 2);
assert.equal(chat.choices[0].message.role, "assistant");
assert.equal(chat.choices[0].logprobs.content[0].top_logprobs.length, 2);
let chatText = "";
for await (const chunk of await client.chat.completions.create({
  model, messages: [{ role: "user", content: "Hi" }], max_tokens: 8, temperature: 0, stream: true,
})) {
  chatText += chunk.choices[0]?.delta?.content ?? "";
}
assert.ok(chatText.length > 0);

// Errors surface as APIError with the status and OpenAI's message.
await assert.rejects(client.completions.create({ model, prompt: "x", top_p: 3 }), (e) => {
  assert.equal(e.status, 400);
  assert.match(e.message, /top_p/);
  return true;
});
await assert.rejects(client.completions.create({ model: "nope", prompt: "x" }), (e) => e.status === 404);
console.log("openai client: all checks passed");
