#!/usr/bin/env python3
"""Streams constrained chat completions through an OpenAI-compatible endpoint at once and
checks every result against its constraint: N `response_format: json_schema` streams (the
content parses and matches the schema) and N `tool_choice: "required"` streams (every tool
call names the tool and its arguments match the tool's parameters). Used by
tests/fleet_composed_test.sh while a replica behind the router is killed.

Usage: structured_streams.py URL N [--max-tokens M]; prints one line per failure and a
summary line "structured: K valid of T"; exit 0 when all are valid.
"""
import argparse
import http.client
import json
import sys
import threading
import urllib.parse

SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"enum": ["yes", "no", "maybe"]},
        "sure": {"type": "boolean"},
    },
    "required": ["answer", "sure"],
    "additionalProperties": False,
}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"enum": ["Paris", "Oslo", "Lima"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


def matches(value, schema):
    """The subset of JSON Schema used above: object/properties/required/
    additionalProperties, enum, boolean."""
    if "enum" in schema:
        return value in schema["enum"]
    if schema.get("type") == "boolean":
        return isinstance(value, bool)
    if schema.get("type") == "object":
        if not isinstance(value, dict):
            return False
        props = schema.get("properties", {})
        if any(k not in value for k in schema.get("required", [])):
            return False
        if schema.get("additionalProperties") is False and any(k not in props for k in value):
            return False
        return all(matches(value[k], props[k]) for k in value if k in props)
    return True


def stream(url, body):
    """POSTs a streamed request; returns (content, {index: call}, finish_reason, error)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    conn.request("POST", "/v1/chat/completions", json.dumps(body),
                 {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        return "", {}, None, f"HTTP {resp.status}: {resp.read()[:300]!r}"
    content, calls, finish, error = "", {}, None, None
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if "error" in chunk:
            error = json.dumps(chunk["error"])[:300]
            continue
        for choice in chunk.get("choices", []):
            delta = choice.get("delta", {})
            content += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                call = calls.setdefault(tc["index"], {"name": "", "arguments": ""})
                fn = tc.get("function", {})
                call["name"] += fn.get("name") or ""
                call["arguments"] += fn.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    conn.close()
    return content, calls, finish, error


def check_schema(url, i, max_tokens, failures):
    body = {"messages": [{"role": "user", "content": f"Question {i}: is it sunny?"}],
            "stream": True, "max_tokens": max_tokens, "temperature": 0,
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "answer", "schema": SCHEMA}}}
    content, _, finish, error = stream(url, body)
    try:
        ok = error is None and finish == "stop" and matches(json.loads(content), SCHEMA)
    except ValueError:
        ok = False
    if not ok:
        failures.append(f"json_schema {i}: finish={finish} error={error} content={content!r}")


def check_tools(url, i, max_tokens, failures):
    body = {"messages": [{"role": "user", "content": f"Weather {i}?"}],
            "stream": True, "max_tokens": max_tokens, "temperature": 0,
            "tools": [TOOL], "tool_choice": "required", "parallel_tool_calls": False}
    _, calls, finish, error = stream(url, body)
    params = TOOL["function"]["parameters"]
    try:
        ok = (error is None and finish == "tool_calls" and len(calls) > 0 and
              all(c["name"] == "get_weather" and matches(json.loads(c["arguments"]), params)
                  for c in calls.values()))
    except ValueError:
        ok = False
    if not ok:
        failures.append(f"tool_choice {i}: finish={finish} error={error} calls={calls!r}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("n", type=int)
    p.add_argument("--max-tokens", type=int, default=200)
    a = p.parse_args()
    failures = []
    threads = [threading.Thread(target=f, args=(a.url, i, a.max_tokens, failures))
               for i in range(a.n) for f in (check_schema, check_tools)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for f in failures:
        print(f)
    print(f"structured: {len(threads) - len(failures)} valid of {len(threads)}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
