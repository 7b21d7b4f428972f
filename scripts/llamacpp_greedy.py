#!/usr/bin/env python3
"""llama-server's greedy continuation, one token per request, streamed: the server's text
parser can refuse a random model's bytes after it has sent the token (HTTP 500), so each
token is read from the first streamed chunk. Used by scripts/moe-parity.sh and
scripts/hf-parity.sh.

  llamacpp_greedy.py PORT N PROMPT_IDS [--ban LO-HI]   -> N comma-separated ids"""
import json
import sys
import urllib.request

port, n, ids = sys.argv[1], int(sys.argv[2]), [int(x) for x in sys.argv[3].split(",")]
bias = []
if "--ban" in sys.argv:  # ids the continuation may not use (logit_bias false)
    lo, hi = map(int, sys.argv[sys.argv.index("--ban") + 1].split("-"))
    bias = [[t, False] for t in range(lo, hi + 1)]
out = []
for _ in range(n):
    body = {"prompt": ids + out, "n_predict": 1, "temperature": 0, "return_tokens": True,
            "cache_prompt": False, "stream": True, "logit_bias": bias}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    got = None
    for line in urllib.request.urlopen(req):
        line = line.decode().strip()
        if line.startswith("data: ") and json.loads(line[6:]).get("tokens"):
            got = json.loads(line[6:])["tokens"][0]
            break
    if got is None:
        sys.exit(f"llama-server gave no token after {ids + out}")
    out.append(got)
print(",".join(map(str, out)))
