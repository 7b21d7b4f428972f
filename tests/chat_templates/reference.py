#!/usr/bin/env python3
"""Renders chat templates as Hugging Face transformers' apply_chat_template does, with
Python's jinja2 (Debian's python3-jinja2): an ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, the loopcontrols extension, a `generation` block tag that
outputs its body, transformers' tojson (json.dumps, ensure_ascii off, keys in order), and
the globals raise_exception and strftime_now (a fixed date). The chat fields are prepared
as vLLM prepares them (text parts joined with newlines, tool-call arguments parsed), and
the special tokens are the bundled model's.

Usage: reference.py TEMPLATE CONVERSATIONS.json DATE
Prints one JSON object: {conversation: {"text": ...} or {"error": ...}}."""
import datetime
import json
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(Extension):
    """{% generation %}...{% endgeneration %}: the body, unchanged."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


class Raised(jinja2.exceptions.TemplateError):
    """What raise_exception() raises: the template's own message."""


def raise_exception(message):
    raise Raised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def prepare(messages):
    out = []
    for m in messages:
        m = dict(m)
        if isinstance(m.get("content"), list):
            m["content"] = "\n".join(p["text"] for p in m["content"])
        for call in m.get("tool_calls") or []:
            args = call["function"].get("arguments")
            if isinstance(args, str):
                try:
                    call["function"]["arguments"] = json.loads(args)
                except ValueError:
                    pass
        out.append(m)
    return out


def make_env(date):
    """transformers' environment, with strftime_now at `date` (YYYY-MM-DD, local)."""
    now = datetime.datetime.strptime(date, "%Y-%m-%d")
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
    return env


def main():
    path, conv_path, date = sys.argv[1:4]
    env = make_env(date)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    with open(conv_path, encoding="utf-8") as f:
        conversations = json.load(f)
    results = {}
    try:
        template = env.from_string(source)
    except jinja2.exceptions.TemplateError as e:
        print(json.dumps({name: {"parse_error": str(e)} for name in conversations}))
        return
    for name, body in conversations.items():
        kwargs = dict(body.get("chat_template_kwargs") or {})
        try:
            text = template.render(
                messages=prepare(body["messages"]), tools=body.get("tools"),
                documents=body.get("documents"),
                add_generation_prompt=body.get("add_generation_prompt", True),
                bos_token="<s>", eos_token="</s>", unk_token="<unk>", **kwargs)
            results[name] = {"text": text}
        except Raised as e:
            results[name] = {"raised": str(e)}
        except Exception as e:  # jinja2's UndefinedError, TypeError, ...: an error all the same
            results[name] = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(results, ensure_ascii=False))


if __name__ == "__main__":
    main()
