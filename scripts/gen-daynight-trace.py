#!/usr/bin/env python3
"""Writes a synthetic day/night arrival trace as Pagoda JSONL (one request per line:
timestamp in unix seconds, input_len, output_len), which `pagoda bench --trace` replays and
`pagoda forecast import|backtest` read.

The rate follows a daily curve: a night trough, a morning rise (06:00-09:00), a working-day
plateau with a lunch dip, an evening fall (18:00-22:00); weekends (Saturday, Sunday) run at
--weekend-factor of it. Per-minute noise is log-normal, arrivals within a minute are Poisson,
and --bursts-per-day short bursts (5-15 minutes at 2-4x the rate) land at random times.
Lengths are log-normal. Seeded: the same flags write the same file.

Example: a week and a day, starting on a Monday, peaking at 0.1 request/s:
    scripts/gen-daynight-trace.py --days 8 --peak-rps 0.1 --out /tmp/daynight.jsonl
"""
import argparse
import datetime
import json
import math
import random
import sys


def daily_shape(hour):
    """0 at night, 1 on the working-day plateau; smooth in between."""

    def smooth(x):
        x = min(1.0, max(0.0, x))
        return x * x * (3 - 2 * x)

    rise = smooth((hour - 6.0) / 3.0)
    fall = 1.0 - smooth((hour - 18.0) / 4.0)
    lunch = 1.0 - 0.25 * math.exp(-((hour - 12.75) ** 2) / 0.3)
    return rise * fall * lunch


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=int, default=8, help="length of the trace in days (default 8)")
    ap.add_argument("--start", default="2026-11-23T00:00:00Z",
                    help="UTC start, ISO 8601 (default a Monday, 2026-11-23T00:00:00Z)")
    ap.add_argument("--peak-rps", type=float, default=0.1,
                    help="weekday plateau rate in requests/s (default 0.1)")
    ap.add_argument("--trough-rps", type=float, default=None,
                    help="night rate in requests/s (default a tenth of the peak)")
    ap.add_argument("--weekend-factor", type=float, default=0.4,
                    help="weekend rate as a fraction of the weekday's (default 0.4)")
    ap.add_argument("--noise", type=float, default=0.15,
                    help="per-minute log-normal noise, sigma (default 0.15)")
    ap.add_argument("--bursts-per-day", type=float, default=1.0,
                    help="mean number of short bursts a day (default 1)")
    ap.add_argument("--input-median", type=int, default=200, help="median prompt tokens")
    ap.add_argument("--output-median", type=int, default=100, help="median output tokens")
    ap.add_argument("--max-len", type=int, default=4000, help="cap on prompt and output tokens")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="-", help="output file (default stdout)")
    a = ap.parse_args()
    if a.days < 1 or a.peak_rps <= 0 or a.noise < 0 or not 0 <= a.weekend_factor <= 10:
        ap.error("--days must be >= 1, --peak-rps > 0, --noise >= 0, --weekend-factor in [0, 10]")
    trough = a.peak_rps / 10 if a.trough_rps is None else a.trough_rps
    if trough < 0 or trough > a.peak_rps:
        ap.error("--trough-rps must be in [0, --peak-rps]")
    try:
        start = datetime.datetime.fromisoformat(a.start.replace("Z", "+00:00"))
    except ValueError:
        ap.error(f"--start '{a.start}' is not an ISO 8601 time such as 2026-11-23T00:00:00Z")
    if start.tzinfo is None:
        start = start.replace(tzinfo=datetime.timezone.utc)
    t0 = start.timestamp()
    rng = random.Random(a.seed)
    minutes = a.days * 1440
    burst = [1.0] * minutes
    for day in range(a.days):
        n = sum(1 for _ in range(10) if rng.random() < a.bursts_per_day / 10)
        for _ in range(n):
            at = day * 1440 + rng.randrange(1440)
            factor = rng.uniform(2, 4)
            for m in range(at, min(minutes, at + rng.randint(5, 15))):
                burst[m] = factor
    out = sys.stdout if a.out == "-" else open(a.out, "w")
    count = 0
    for m in range(minutes):
        when = start + datetime.timedelta(minutes=m)
        hour = when.hour + when.minute / 60
        rate = trough + (a.peak_rps - trough) * daily_shape(hour)
        if when.weekday() >= 5:
            rate *= a.weekend_factor
        rate *= math.exp(rng.gauss(0, a.noise) - a.noise * a.noise / 2) * burst[m]
        # Poisson arrivals in the minute: exponential gaps.
        t = 0.0
        while True:
            t += rng.expovariate(rate) if rate > 0 else 60
            if t >= 60:
                break
            inp = min(a.max_len, max(1, int(rng.lognormvariate(math.log(a.input_median), 0.8))))
            outp = min(a.max_len, max(1, int(rng.lognormvariate(math.log(a.output_median), 0.6))))
            out.write(json.dumps({"timestamp": round(t0 + m * 60 + t, 3), "input_len": inp,
                                  "output_len": outp}) + "\n")
            count += 1
    if out is not sys.stdout:
        out.close()
    print(f"wrote {count} requests over {a.days} days from {start.isoformat()}"
          f" (peak {a.peak_rps} req/s, trough {trough} req/s)", file=sys.stderr)


if __name__ == "__main__":
    main()
