#!/usr/bin/env python3
"""make demo: 7 simulated vLLM instances behind prefixgate, a shared-prefix
workload (8,000-token documents with Zipf popularity plus short questions)
sent through RANDOM and then PREFIX_AWARE, each on fresh instances, and the
comparison printed. Every process it starts is stopped before it exits."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet  # noqa: E402

STRATEGIES = ["random", "least_outstanding_requests", "prefix_aware"]


def run(opts, strategy, logdir):
    inst = fleet.Instances(opts.build, opts.instances, logdir)
    gw = fleet.Gateway(opts.build, inst.addrs(), logdir, ["--strategy", strategy])
    out = os.path.join(logdir, "pgload-%s.json" % strategy)
    r = fleet.pgload(opts.build, "127.0.0.1:%d" % gw.port, out,
                     ["--workload", "shared-prefix", "--rate", str(opts.rate),
                      "--duration", str(opts.duration), "--docs", str(opts.docs),
                      "--max-tokens", "16", "--seed", "7", "--label", strategy], logdir)
    r["kv_hit_rate"] = inst.kv_hit_rate()
    gw.stop()
    inst.stop()
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--instances", type=int, default=7)
    ap.add_argument("--duration", type=int, default=25, help="seconds per strategy")
    ap.add_argument("--rate", type=float, default=8.0, help="requests per second")
    ap.add_argument("--docs", type=int, default=64)
    ap.add_argument("--strategies", default="random,prefix_aware")
    opts = ap.parse_args()
    logdir = os.path.join(opts.build, "demo")
    os.makedirs(logdir, exist_ok=True)
    print("prefixgate demo: %d simulated vLLM instances, %d documents of 8,000 tokens "
          "(Zipf), %.0f req/s for %d s per strategy" %
          (opts.instances, opts.docs, opts.rate, opts.duration))
    res = {}
    for s in opts.strategies.split(","):
        print("  running %s ..." % s, flush=True)
        res[s] = run(opts, s, logdir)
    print()
    print("%-28s %9s %9s %9s %8s %9s %14s" % ("strategy", "requests", "KV hit", "P50 TTFT",
                                             "P90 TTFT", "req/s", "instance share"))
    for s, r in res.items():
        print("%-28s %9d %9.2f %7.0fms %6.0fms %9.2f %6.1f-%.1f%%" % (
            s.upper(), r["ok"], r["kv_hit_rate"], r["ttft_ms"]["p50"], r["ttft_ms"]["p90"],
            r["req_per_s"], r["share_min_pct"], r["share_max_pct"]))
    if "random" in res and "prefix_aware" in res:
        a, b = res["prefix_aware"], res["random"]
        d50 = 100.0 * (a["ttft_ms"]["p50"] - b["ttft_ms"]["p50"]) / b["ttft_ms"]["p50"]
        print()
        print("PREFIX_AWARE vs RANDOM: KV hit rate %.2f vs %.2f, P50 TTFT %+.0f%%, "
              "instance share %.1f-%.1f%%" % (a["kv_hit_rate"], b["kv_hit_rate"], d50,
                                              a["share_min_pct"], a["share_max_pct"]))
    errors = sum(r["errors"] for r in res.values())
    if errors:
        print("demo: %d requests failed (logs in %s)" % (errors, logdir))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
