// Structured outputs and tool calling with the official openai Node client against
// `pagoda serve` on the bundled model (tests/structured_e2e_test.sh). Every output is
// checked with Ajv against the schema that constrained it.
// Usage: node structured_outputs.mjs BASE_URL
import OpenAI from "openai";
import Ajv from "ajv";
import assert from "node:assert/strict";

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const model = (await client.models.list()).data[0].id;
const ajv = new Ajv({ strict: false });
const messages = [{ role: "user", content: "Tell me about a person." }];
let checks = 0;

// 1. response_format json_schema (strict) for 50 seeds: every answer parses and validates.
const person = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 16 },
    age: { type: "integer" },
    mood: { enum: ["happy", "sad", "sleepy"] },
    friends: { type: "array", items: { type: "string", maxLength: 10 }, maxItems: 3 },
    pet: { anyOf: [{ type: "null" }, { type: "object", properties: { kind: { type: "string", maxLength: 8 } }, required: ["kind"] }] },
  },
  required: ["name", "age", "mood"],
  additionalProperties: false,
};
const validPerson = ajv.compile(person);
for (let seed = 1; seed <= 50; seed++) {
  const r = await client.chat.completions.create({
    model, messages, seed, temperature: 1.0, max_tokens: 400,
    response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: person } },
  });
  const c = r.choices[0];
  assert.equal(c.finish_reason, "stop", `seed ${seed}: ${c.message.content}`);
  const value = JSON.parse(c.message.content);
  assert.ok(validPerson(value), `seed ${seed}: ${c.message.content} ${JSON.stringify(validPerson.errors)}`);
  checks++;
}

// json_object, vLLM's guided_* names on both endpoints.
{
  const r = await client.chat.completions.create({ model, messages, seed: 7, max_tokens: 300, response_format: { type: "json_object" } });
  if (r.choices[0].finish_reason === "stop") {
    const v = JSON.parse(r.choices[0].message.content);
    assert.ok(v !== null && typeof v === "object" && !Array.isArray(v));
  } else {
    assert.equal(r.choices[0].finish_reason, "length");  // an object may be longer than max_tokens
  }
  checks++;
  const choice = await client.completions.create({ model, prompt: "The cat was", max_tokens: 5, guided_choice: ["happy", "sad"] });
  assert.ok(["happy", "sad"].includes(choice.choices[0].text), choice.choices[0].text);
  const rx = await client.completions.create({ model, prompt: "Her phone number is", max_tokens: 20, temperature: 0.8, seed: 3, guided_regex: "\\d{3}-\\d{4}" });
  assert.match(rx.choices[0].text, /^\d{3}-\d{4}$/);
  const gj = await client.completions.create({ model, prompt: "Numbers:", max_tokens: 60, temperature: 0.8, seed: 4,
    guided_json: { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 4 } });
  const arr = JSON.parse(gj.choices[0].text);
  assert.ok(Array.isArray(arr) && arr.length >= 1 && arr.length <= 4 && arr.every(Number.isInteger), gj.choices[0].text);
  checks += 3;
}

// 2. tool_choice "required": always a valid tool_calls entry; streaming reassembles to it.
const tools = [
  { type: "function", function: { name: "get_weather", description: "Weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", minLength: 1, maxLength: 20 }, unit: { enum: ["celsius", "fahrenheit"] } }, required: ["city"] } } },
  { type: "function", function: { name: "get_time", parameters: { type: "object", properties: { zone: { type: "string", maxLength: 12 } }, required: ["zone"] } } },
];
const validArgs = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
const toolMessages = [{ role: "user", content: "What is the weather in Paris?" }];
for (let seed = 1; seed <= 12; seed++) {
  // One call per answer here (parallel calls below), so that max_tokens never cuts one.
  const req = { model, messages: toolMessages, tools, tool_choice: "required", parallel_tool_calls: false, seed, temperature: 1.0, max_tokens: 450 };
  const r = await client.chat.completions.create(req);
  const c = r.choices[0];
  assert.equal(c.finish_reason, "tool_calls", JSON.stringify(c));
  assert.ok(c.message.tool_calls.length >= 1);
  for (const call of c.message.tool_calls) {
    assert.equal(call.type, "function");
    assert.match(call.id, /^call_/);
    const check = validArgs[call.function.name];
    assert.ok(check, `unknown tool ${call.function.name}`);
    assert.ok(check(JSON.parse(call.function.arguments)), call.function.arguments);
  }
  // The same request streamed: tool_calls deltas by index add up to the same calls.
  const calls = [];
  let finish = null;
  for await (const chunk of await client.chat.completions.create({ ...req, stream: true })) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    if (ch.finish_reason) finish = ch.finish_reason;
    for (const d of ch.delta?.tool_calls ?? []) {
      if (d.id) calls[d.index] = { name: d.function.name, arguments: "" };
      calls[d.index].arguments += d.function?.arguments ?? "";
    }
  }
  assert.equal(finish, "tool_calls");
  assert.deepEqual(calls, c.message.tool_calls.map((t) => ({ name: t.function.name, arguments: t.function.arguments })));
  checks += 2;
}

// Parallel calls (the default): every call in the answer is complete and valid (this small
// model rarely closes the list, so max_tokens may end it: the call cut there is left out).
for (let seed = 1; seed <= 4; seed++) {
  const r = await client.chat.completions.create({ model, messages: toolMessages, tools, tool_choice: "required", seed, temperature: 1.0, max_tokens: 450 });
  const c = r.choices[0];
  assert.ok(["tool_calls", "length"].includes(c.finish_reason));
  assert.ok(c.message.tool_calls.length >= 1 && c.message.tool_calls.length <= 8);
  for (const call of c.message.tool_calls) assert.ok(validArgs[call.function.name](JSON.parse(call.function.arguments)), call.function.arguments);
  checks++;
}
// A named function: that function, valid arguments.
{
  const named = await client.chat.completions.create({ model, messages: toolMessages, tools, seed: 6, temperature: 1.0, max_tokens: 300,
    tool_choice: { type: "function", function: { name: "get_time" } } });
  const call = named.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, "get_time");
  assert.ok(validArgs.get_time(JSON.parse(call.function.arguments)), call.function.arguments);
  checks++;
}

// 3. Bad input: 400 with the reason.
for (const [body, says] of [
  [{ response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", pattern: "a+" } } } }, /keyword 'pattern' is not supported/],
  [{ tools, tool_choice: { type: "function", function: { name: "nope" } } }, /'nope', which is not in 'tools'/],
  [{ tools: [{ type: "function", function: { description: "no name" } }] }, /needs a 'name'/],
  [{ guided_regex: "(a" }, /missing '\)'/],
]) {
  await assert.rejects(client.chat.completions.create({ model, messages, max_tokens: 4, ...body }), (e) => {
    assert.equal(e.status, 400);
    assert.match(e.message, says);
    return true;
  });
  checks++;
}
console.log(`structured outputs: ${checks} checks passed`);
