#!/usr/bin/env python3
"""The chat-template corpus (testdata/chat-templates/corpus/*.jinja) rendered for every
conversation of testdata/chat-templates/conversations.json by Pagoda
(`pagoda model render-chat --chat-template T --format json`) and by Python's jinja2
configured as transformers configures it (reference.py), compared character for
character. A template that raises in jinja2 must fail in Pagoda too, with the template's
own message where it called raise_exception().

Usage: compare.py PAGODA_BINARY SOURCE_DIR [TEMPLATE_NAME ...]"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

DATE = "2026-07-26"


def first_difference(a, b):
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return i, a[max(0, i - 60):i + 60], b[max(0, i - 60):i + 60]


def main():
    binary, src = sys.argv[1], pathlib.Path(sys.argv[2])
    only = set(sys.argv[3:])
    corpus = src / "testdata" / "chat-templates" / "corpus"
    conv_path = src / "testdata" / "chat-templates" / "conversations.json"
    conversations = json.loads(conv_path.read_text(encoding="utf-8"))
    reference = pathlib.Path(__file__).with_name("reference.py")
    model = src / "models" / "stories260K.gguf"
    passed = failed = rendered = raised = 0
    templates = sorted(p for p in corpus.glob("*.jinja") if not only or p.stem in only)
    with tempfile.TemporaryDirectory() as tmp:
        for tpl in templates:
            ref = json.loads(subprocess.run(
                [sys.executable, str(reference), str(tpl), str(conv_path), DATE],
                check=True, capture_output=True, text=True).stdout)
            for name, body in conversations.items():
                body_file = pathlib.Path(tmp) / "body.json"
                body_file.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
                run = subprocess.run(
                    [binary, "model", "render-chat", "-m", str(model), "--chat-template",
                     str(tpl), "--messages", str(body_file), "--chat-template-date", DATE,
                     "--format", "json"], capture_output=True, text=True)
                want, ok, why = ref[name], True, ""
                if "text" in want:
                    rendered += 1
                    if run.returncode != 0:
                        ok, why = False, f"jinja2 renders it, Pagoda fails: {run.stderr.strip()}"
                    else:
                        got = json.loads(run.stdout)["prompt"]
                        if got != want["text"]:
                            i, a, b = first_difference(got, want["text"])
                            ok, why = False, f"differs at {i}:\n  pagoda: {a!r}\n  jinja2: {b!r}"
                else:
                    raised += 1
                    message = want.get("raised")
                    if run.returncode == 0:
                        ok, why = False, f"jinja2 raises ({want}), Pagoda renders"
                    elif message is not None and message not in run.stderr:
                        ok, why = False, f"raised {message!r}, Pagoda said {run.stderr.strip()!r}"
                label = f"{tpl.stem} / {name}"
                if ok:
                    passed += 1
                else:
                    failed += 1
                    print(f"FAIL {label}: {why}")
    print(f"chat templates: {len(templates)} templates x {len(conversations)} conversations: "
          f"{passed} identical ({rendered} rendered, {raised} raised in both), {failed} failed")
    if not only:  # the unit cases' expectations must still be what jinja2 renders
        check = subprocess.run([sys.executable, str(reference.with_name("unit_cases.py"))],
                               capture_output=True, text=True)
        print(check.stdout.strip())
        failed += check.returncode != 0
    if len(templates) < 20 and not only:
        print("FAIL the corpus must hold at least 20 templates")
        failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
