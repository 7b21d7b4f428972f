#!/usr/bin/env python3
"""Regenerates testdata/chat-templates/*.out with the reference Jinja engine (Python
jinja2, configured as Hugging Face configures it: trim_blocks, lstrip_blocks, a
raise_exception global). A development tool: the goldens are committed, so builds and
tests never need Python's jinja2. Usage: scripts/gen-chat-template-goldens.py"""
import json, pathlib, jinja2

DIR = pathlib.Path(__file__).resolve().parent.parent / "testdata" / "chat-templates"
SETS = json.loads((DIR / "messages.json").read_text())

def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)

env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
env.globals["raise_exception"] = raise_exception
for path in sorted(DIR.glob("*.jinja")):
    tmpl = env.from_string(path.read_text())
    for name, messages in SETS.items():
        ctx = {"messages": messages, "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": True}
        base = DIR / f"{path.stem}.{name}"
        for old in (base.with_suffix(base.suffix + ".out"), base.with_suffix(base.suffix + ".err")):
            old.unlink(missing_ok=True)
        try:
            out = tmpl.render(**ctx)
            base.with_suffix(base.suffix + ".out").write_bytes(out.encode())
        except jinja2.exceptions.TemplateError as e:
            base.with_suffix(base.suffix + ".err").write_text(str(e) + "\n")
