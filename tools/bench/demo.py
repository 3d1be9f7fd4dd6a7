#!/usr/bin/env python3
"""make demo: 7 simulated vLLM instances behind prefixgate, workload (a) —
6,000 documents of 8,000 tokens with mild Zipf popularity plus 50-token
questions — sent through RANDOM and then PREFIX_AWARE, each on fresh
instances after a fast-forward warm-up (see runs.py), and the comparison
printed. About a minute in all. Every process it starts is stopped before it
exits."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runs  # noqa: E402
from runs import LABELS  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--duration", type=float, default=22, help="wall seconds per strategy")
    ap.add_argument("--rate", type=float, default=20.0, help="requests per model second")
    ap.add_argument("--scale", type=float, default=8.0,
                    help="instances run this many times faster (results in model time)")
    ap.add_argument("--strategies", default="random,prefix_aware")
    opts = ap.parse_args()
    out = os.path.join(opts.build, "demo")
    os.makedirs(out, exist_ok=True)
    print("prefixgate demo: 7 simulated vLLM instances (Llama-3.1-70B-like timing, 11M-token "
          "prefix cache each),\n  6,000 documents x 8,000 tokens (Zipf s=0.3) + 50-token "
          "questions, %g req/s, %g s per strategy\n  (model time: instances run %gx faster, "
          "figures scaled back)" % (opts.rate, opts.duration * opts.scale, opts.scale))
    t0 = time.monotonic()
    res = {}
    for s in opts.strategies.split(","):
        print("  running %s ..." % LABELS[s], flush=True)
        res[s] = runs.run(opts.build, out, "demo-" + s, s, runs.WL_SHARED, opts.rate,
                          opts.duration, warmup=18000, scale=opts.scale)
    print()
    print("%-14s %9s %7s %9s %9s %8s %15s" % ("strategy", "requests", "KV hit", "P50 TTFT",
                                            "P90 TTFT", "req/s", "instance share"))
    for s, r in res.items():
        print("%-14s %9d %7.2f %7.0fms %7.0fms %8.2f %8.1f-%.1f%%" % (
            LABELS[s], r["ok"], r["kv_hit_rate"], r["ttft_ms"]["p50"], r["ttft_ms"]["p90"],
            r["req_per_s"], r["share_min_pct"], r["share_max_pct"]))
    g = max(r["gen_cpu_pct"] for r in res.values())
    lag = max(r["gen_max_timer_lag_ms"] for r in res.values())
    print("(load generator: at most %.0f%% of a CPU, worst timer lag %.1f ms; raw results "
          "in %s; %.0f s)" % (g, lag, out, time.monotonic() - t0))
    errors = sum(r["errors"] for r in res.values())
    if "random" in res and "prefix_aware" in res:
        a, b = res["prefix_aware"], res["random"]
        d50 = 100.0 * (a["ttft_ms"]["p50"] - b["ttft_ms"]["p50"]) / b["ttft_ms"]["p50"]
        print()
        print("PREFIX_AWARE vs RANDOM: KV hit rate %.2f vs %.2f, P50 TTFT %+.0f%%, "
              "instance share %.1f-%.1f%%" % (a["kv_hit_rate"], b["kv_hit_rate"], d50,
                                              a["share_min_pct"], a["share_max_pct"]))
    if errors:
        print("demo: %d requests failed (logs in %s)" % (errors, os.path.join(out, "logs")))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
