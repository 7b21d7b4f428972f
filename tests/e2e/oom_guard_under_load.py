#!/usr/bin/env python3
"""OOM guard under load (issue 12, acceptance 3). The server runs with a stable first version
(--stable-window 1s), static block size and room for 64 streams. Under continuous load from
64 clients the KV memory is cut to a tenth through PUT /admin/config: the guard must see the
starved pool and roll back to the last stable version by itself, with the signal in the
reason; every request completes. Then the same cut in dry-run mode is only recorded, and
turning automation back on lets the guard act. Standard library only.

    oom_guard_under_load.py PORT
"""
import json
import sys
import threading
import time
import urllib.request

PORT = int(sys.argv[1])
BASE = f"http://127.0.0.1:{PORT}"
CLIENTS = 64
failures = 0
results = []  # (finish_reason, error) per request
lock = threading.Lock()
stop = threading.Event()


def check(name, cond, detail=""):
    global failures
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f"\n     {detail}"))
    failures += 0 if cond else 1


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read().decode() or "null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode() or "null")


def client(i):
    while not stop.is_set():
        body = {"prompt": f"Once upon a time there was a girl number {i}", "max_tokens": 400,
                "temperature": 0, "ignore_eos": True}
        try:
            status, d = call("POST", "/v1/completions", body)
            err = None if status == 200 else f"HTTP {status}: {d}"
            finish = d["choices"][0]["finish_reason"] if status == 200 else None
        except Exception as e:  # noqa: BLE001 - reported as the request's error
            err, finish = repr(e), None
        with lock:
            results.append((finish, err))


def wait_for(what, pred, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    check(what, False, f"not within {seconds} s")
    return None


def config():
    return call("GET", "/admin/config")[1]


def metric(name, labels=""):
    with urllib.request.urlopen(BASE + "/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") and labels in line:
                return float(line.rsplit(" ", 1)[1])
    return None


v1 = wait_for("the first version turns stable", lambda: config()["stable"] and config(), 20)
full = v1["value"]["kv_cache_memory"]
threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
for t in threads:
    t.start()
wait_for("the load runs", lambda: (metric("pagoda_num_requests_running") or 0) >= 32, 30)

# 1. The cut: the guard rolls back on its own, to version 1's value, with the reason.
status, cut = call("PUT", "/admin/config", {"kv_cache_memory": full // 10, "reason": "cut"})
check("the cut is applied under load", status == 200, str(cut))
back = wait_for("the guard rolls back", lambda: (c := config())["source"] == "oom_guard" and c, 60)
if back:
    check("back to the stable value", back["value"]["kv_cache_memory"] == full, str(back))
    check("the reason names the version and the signal",
          back["reason"].startswith(f"rollback to version {v1['id']}: OOM guard: ") and
          ("KV blocks free" in back["reason"] or "preemptions per minute" in back["reason"]),
          back["reason"])
    # Read once: the guard records the rollback in the same critical section that applies
    # it, so a reader that sees the new version sees its record too.
    _, ev = call("GET", "/admin/events?kind=oom_rollback&limit=5")
    check("the audit log has the rollback with its signals",
          ev["events"] and ev["events"][0]["detail"]["new_version"] == back["id"] and
          ev["events"][0]["detail"]["signals"], json.dumps(ev)[:300])
check("pagoda_config_rollbacks_total{reason=oom_guard} is 1",
      metric("pagoda_config_rollbacks_total", 'reason="oom_guard"') == 1)

# 2. Dry-run: the same cut is only recorded; back to on, the guard acts.
time.sleep(1)
check("automation to dry-run",
      call("PUT", "/admin/automation", {"mode": "dry-run", "reason": "test"}) ==
      (200, {"mode": "dry-run"}))
status, cut2 = call("PUT", "/admin/config", {"kv_cache_memory": full // 10, "reason": "cut 2"})
check("the second cut is applied", status == 200, str(cut2))


def dry_run_recorded():
    _, ev = call("GET", "/admin/events?kind=oom_signal&limit=20")
    return any(e["detail"].get("version") == cut2.get("id") and
               e["detail"].get("automation") == "dry-run" for e in ev["events"])


wait_for("dry-run records what the guard would do", dry_run_recorded, 30)
check("and changes nothing", config()["id"] == cut2.get("id"))
_, hist = call("GET", "/admin/config/history?limit=10")
check("the version the guard left is not a rollback target",
      [v["stable"] for v in hist["versions"] if v["id"] == cut["id"]] == [False], str(hist)[:300])
call("PUT", "/admin/automation", {"mode": "on", "reason": "test"})
again = wait_for("on again: the guard rolls back",
                 lambda: (c := config())["source"] == "oom_guard" and c["id"] > cut2["id"] and c,
                 60)
check("back to the stable value again", again and again["value"]["kv_cache_memory"] == full)

stop.set()
for t in threads:
    t.join()
errors = [r[1] for r in results if r[1]]
check(f"every request completed ({len(results)} requests)",
      results and not errors and all(r[0] == "length" for r in results), str(errors[:3]))
time.sleep(1.5)
check("no KV block left in use", metric("pagoda_kv_cache_blocks", 'state="used"') == 0)
print(f"{len(results)} requests, {failures} failed checks")
sys.exit(1 if failures else 0)
