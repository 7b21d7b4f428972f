#!/usr/bin/env python3
"""Streams N completions at once through an OpenAI-compatible endpoint (temperature 0, a
distinct prompt each) and writes {index: {"text", "finish_reason", "error"}} as JSON. Used by
tests/fleet_scale_test.sh to compare streams that ran through a scale-down with an
undisturbed run.

Usage: stream_texts.py URL N MAX_TOKENS OUT.json [--started FILE] [--model NAME]
(--started: a file created once every stream has its first token.)
"""
import argparse
import http.client
import json
import threading
import urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("n", type=int)
ap.add_argument("max_tokens", type=int)
ap.add_argument("out")
ap.add_argument("--started")
ap.add_argument("--model", default="default")
a = ap.parse_args()
u = urllib.parse.urlparse(a.url)
results = {}
first = threading.Semaphore(0)


def one(i):
    r = {"text": "", "finish_reason": None, "error": None}
    got_first = False
    try:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        body = {"model": a.model, "prompt": f"Once upon a time {i} there was", "max_tokens": a.max_tokens,
                "temperature": 0, "stream": True}
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        resp = c.getresponse()
        if resp.status != 200:
            r["error"] = f"HTTP {resp.status}: {resp.read()[:200]!r}"
        else:
            for line in resp:
                line = line.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                ev = json.loads(line[6:])
                if "error" in ev:
                    r["error"] = str(ev["error"])
                    break
                for ch in ev.get("choices", []):
                    r["text"] += ch.get("text", "")
                    if ch.get("finish_reason"):
                        r["finish_reason"] = ch["finish_reason"]
                    if not got_first and ch.get("text"):
                        got_first = True
                        first.release()
    except Exception as e:  # noqa: BLE001 - reported, not raised
        r["error"] = repr(e)
    if not got_first:
        first.release()
    results[i] = r


threads = [threading.Thread(target=one, args=(i,)) for i in range(a.n)]
for t in threads:
    t.start()
for _ in range(a.n):
    first.acquire()
if a.started:
    open(a.started, "w").close()
for t in threads:
    t.join()
json.dump({str(k): results[k] for k in sorted(results)}, open(a.out, "w"), indent=1)
