#!/usr/bin/env python3
"""KV re-layout under load (issue 12, acceptance 2): 64 concurrent greedy streams while the
block size changes 16 -> 48 -> 8 -> 32 through PUT /admin/config. Every request must
complete with the text of a run without changes; no errors; no KV block left in use; the
history and cache_config_info show every step. Prints one line per check and exits 1 on a
failure. Standard library only.

    relayout_under_load.py PORT [API_KEY]
"""
import json
import sys
import threading
import time
import urllib.request

PORT = int(sys.argv[1])
AUTH = {"Authorization": f"Bearer {sys.argv[2]}"} if len(sys.argv) > 2 else {}
BASE = f"http://127.0.0.1:{PORT}"
N = 64
failures = 0
finished = 0  # streams done (client side)
finished_lock = threading.Lock()


def check(name, cond, detail=""):
    global failures
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f"\n     {detail}"))
    failures += 0 if cond else 1


def call(method, path, body=None, timeout=300):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def stream(i, out):
    """One streamed greedy completion; out[i] = (text, finish_reason, error)."""
    body = {"prompt": f"Once upon a time there was a {['cat', 'dog', 'king', 'girl'][i % 4]} "
                      f"number {i}", "max_tokens": 300, "temperature": 0, "ignore_eos": True,
            "stream": True}
    req = urllib.request.Request(BASE + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", **AUTH})
    text, finish, err = "", None, None
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            for raw in r:
                line = raw.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                d = json.loads(line[6:])
                if "error" in d:
                    err = d["error"]["message"]
                    continue
                c = d["choices"][0]
                text += c.get("text", "")
                finish = c.get("finish_reason") or finish
    except Exception as e:  # noqa: BLE001 - reported as the request's error
        err = repr(e)
    out[i] = (text, finish, err)
    global finished
    with finished_lock:
        finished += 1


def run_all(during=None):
    global finished
    finished = 0
    out = [None] * N
    threads = [threading.Thread(target=stream, args=(i, out)) for i in range(N)]
    for t in threads:
        t.start()
    if during:
        during()
    for t in threads:
        t.join()
    return out


def running():
    _, text = call("GET", "/metrics")
    for line in text.splitlines():
        if line.startswith("pagoda_num_requests_running{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


changes = []


def change_block_sizes():
    # Wait until the load is running, then walk the block sizes with a pause between.
    deadline = time.time() + 30
    while running() < 4 and time.time() < deadline:
        time.sleep(0.01)
    for bs in (48, 8, 32):
        status, body = call("PUT", "/admin/config",
                            {"block_size": bs, "reason": f"relayout test to {bs}"})
        with finished_lock:
            in_flight = N - finished
        changes.append((bs, status, in_flight, body))
        time.sleep(0.05)


status, body = call("PUT", "/admin/config", {"block_size": 16, "reason": "relayout test base"})
check("start at block size 16", status == 200, body)
base = run_all()
check("baseline: every request completes", all(o and o[2] is None and o[1] == "length"
                                                 for o in base), str(base[:2]))
loaded = run_all(change_block_sizes)
check("three changes under load, all 200",
      [c[1] for c in changes] == [200, 200, 200], str([(c[0], c[1], c[3][:200]) for c in changes]))
check("the changes happened while requests ran", all(c[2] > 0 for c in changes),
      str([(c[0], c[2]) for c in changes]))
errors = [o[2] for o in loaded if o[2]]
check("no request failed", not errors, str(errors[:3]))
same = sum(1 for a, b in zip(base, loaded) if a and b and a[0] == b[0])
check(f"outputs equal the run without changes ({same}/{N})", same == N,
      next((f"{a[0][:80]!r} vs {b[0][:80]!r}" for a, b in zip(base, loaded) if a[0] != b[0]), ""))
_, hist = call("GET", "/admin/config/history?limit=5")
sizes = [v["value"]["block_size"] for v in json.loads(hist)["versions"]][:3]
check("history shows every step", sizes == [32, 8, 48], str(sizes))
_, metrics = call("GET", "/metrics")
check("cache_config_info follows the block size",
      'pagoda_cache_config_info{block_size="32"' in metrics, metrics[:200])
used = [l for l in metrics.splitlines() if l.startswith('pagoda_kv_cache_blocks{') and
        'state="used"' in l]
check("no KV block left in use", used and used[0].endswith(" 0"), str(used))
print(f"{3 if failures == 0 else 0} relayouts, {failures} failed checks")
sys.exit(1 if failures else 0)
