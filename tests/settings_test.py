#!/usr/bin/env python3
"""Each setting declared once (issue 36): walks the settings table (`pagoda config settings
--format json`) and, for every setting, checks that the command-line flag, the TOML key of
`--config` and `PUT /admin/config` on a running replica accept the same values (units
included: "64MiB" is 67108864 bytes everywhere) and refuse the same bad values with the same
message. Settings fixed at start are refused by PUT /admin/config with a message naming the
flag. Also checks that docs/operations.md's settings table is the generated one.

    settings_test.py PAGODA_BIN SOURCE_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

BIN, SRC = sys.argv[1], sys.argv[2]
MODEL = os.path.join(SRC, "models", "stories260K.gguf")
TMP = tempfile.mkdtemp(prefix="pagoda-settings-")
failures = 0


def check(name, ok, detail=""):
    global failures
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))
    failures += 0 if ok else 1


def good_values(s):
    """Values each path must accept, as (flag text, TOML literal, JSON value, expected)."""
    t = s["type"]
    if t == "bool":
        return [("true", "true", True, True), ("false", "false", False, False)]
    if t == "choice":
        # "auto" is the backend's dtype: f32 on the CPU replica these runs start.
        return [(c, json.dumps(c), c, c if c != "auto" else "f32") for c in s["choices"]]
    if t == "bytes":
        return [("64MiB", '"64MiB"', "64MiB", 64 << 20), ("33554432", "33554432", 33554432, 32 << 20)]
    vals = s.get("choices") or [s["range"][0], s["default"]]
    return [(str(v), str(v), v, v) for v in dict.fromkeys(vals)]


def bad_values(s):
    """Values each path must refuse, as (flag text, TOML literal, JSON value)."""
    t = s["type"]
    if t == "bool":
        return [("maybe", '"maybe"', "maybe")]
    if t == "choice":
        return [("f8", '"f8"', "f8")]
    if t == "bytes":
        return [("4XB", '"4XB"', "4XB"), ("17TiB", '"17TiB"', "17TiB"), ("abc", '"abc"', "abc")]
    lo, hi = s["range"]
    out = [(str(lo - 1), str(lo - 1), lo - 1), (str(hi + 1), str(hi + 1), hi + 1)]
    if s.get("choices"):
        out.append((str(s["choices"][0] + 1), str(s["choices"][0] + 1), s["choices"][0] + 1))
    return out


def flag_args(s, text):
    if s["type"] == "bool":  # a flag without a value; false is its --no- form
        return [s["flag"]] if text == "true" else ["--no-" + s["flag"][2:]] if text == "false" else [f"{s['flag']}={text}"]
    return [s["flag"], text]


def dry_run(args):
    p = subprocess.run([BIN, "serve", "--dry-run", *args], capture_output=True, text=True, timeout=60)
    if p.returncode == 0:
        return json.loads(p.stdout), ""
    m = re.search(r"'[a-z_]+'[^\n]*?(?= \(see --help\)|$)", p.stderr, re.M)
    return None, m.group(0) if m else p.stderr.strip()


def toml_run(key, literal):
    path = os.path.join(TMP, "c.toml")
    with open(path, "w") as f:
        f.write(f"{key} = {literal}\n")
    return dry_run(["--config", path])


def request(port, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def start_server():
    log = open(os.path.join(TMP, "serve.log"), "w")
    p = subprocess.Popen([BIN, "serve", "-m", MODEL, "--port", "0", "--state-dir",
                          os.path.join(TMP, "state"), "--block-size-policy", "static",
                          "--automation", "paused", "--warmup", "off"],
                         stderr=log, stdout=subprocess.DEVNULL)
    for _ in range(400):
        text = open(log.name).read()
        m = re.search(r"listening url=http://127.0.0.1:(\d+)", text)
        if m:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}/ready", timeout=2).status == 200:
                    return p, int(m.group(1))
            except OSError:
                pass
        time.sleep(0.05)
    print(open(log.name).read())
    p.kill()
    sys.exit("server did not become ready")


def main():
    table = json.loads(subprocess.run([BIN, "config", "settings", "--format", "json"],
                                      capture_output=True, text=True, check=True).stdout)
    check("the table lists settings", len(table) >= 12, len(table))

    doc = open(os.path.join(SRC, "docs", "operations.md")).read()
    md = subprocess.run([BIN, "config", "settings", "--format", "markdown"], capture_output=True,
                        text=True, check=True).stdout
    m = re.search(r"<!-- settings:begin[^>]*-->\n(.*?)<!-- settings:end -->", doc, re.S)
    check("docs/operations.md's settings table is the generated one "
          "(regenerate: pagoda config settings --format markdown)", m and m.group(1) == md,
          "differs" if m else "no <!-- settings:begin --> block")

    server, port = start_server()
    try:
        for s in table:
            name, key = s["name"], s["toml_key"]
            for text, literal, jv, want in good_values(s):
                got, err = dry_run(flag_args(s, text))
                check(f"{name}: flag accepts {text}", got is not None and got[name] == want, err or got)
                got, err = toml_run(key, literal)
                check(f"{name}: TOML accepts {literal}", got is not None and got[name] == want, err or got)
                if s["live"] and name == "kv_cache_dtype" and jv in ("q8_0", "q4_0"):
                    # The bundled model's heads are 8 wide: a quantized row needs blocks of 32.
                    code, body = request(port, "PUT", "/admin/config", {name: jv})
                    msg = body.get("error", {}).get("message", "")
                    check(f"{name}: PUT /admin/config refuses {jv!r} for this model's head size",
                          code == 400 and "head dimension is 8" in msg, (code, msg))
                elif s["live"]:
                    code, body = request(port, "PUT", "/admin/config", {name: jv})
                    check(f"{name}: PUT /admin/config accepts {jv!r}",
                          code == 200 and body["value"][name] == want, (code, body))
            for text, literal, jv in bad_values(s):
                _, flag_msg = dry_run(flag_args(s, text))
                _, toml_msg = toml_run(key, literal)
                check(f"{name}: flag refuses {text}", flag_msg.startswith(f"'{name}'"), flag_msg)
                check(f"{name}: TOML refuses {literal} with the flag's message",
                      toml_msg == flag_msg, (toml_msg, flag_msg))
                if s["live"]:
                    code, body = request(port, "PUT", "/admin/config", {name: jv})
                    msg = body.get("error", {}).get("message", "")
                    check(f"{name}: PUT refuses {jv!r} with the flag's message",
                          code == 400 and msg == flag_msg, (code, msg, flag_msg))
            if not s["live"]:
                code, body = request(port, "PUT", "/admin/config", {name: good_values(s)[0][2]})
                msg = body.get("error", {}).get("message", "")
                check(f"{name}: PUT /admin/config refuses a setting fixed at start",
                      code == 400 and s["flag"] in msg and "restart" in msg, (code, msg))
    finally:
        server.terminate()
        server.wait(timeout=60)
    print(f"{failures} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
