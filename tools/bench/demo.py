#!/usr/bin/env python3
"""make demo: 7 simulated vLLM instances behind prefixgate, two workloads,
each strategy on fresh instances (see runs.py), the comparison printed:

  shared prefix  6,000 documents of 8,000 tokens with mild Zipf popularity
                 plus 50-token questions, after a fast-forward warm-up;
                 RANDOM and PREFIX_AWARE.
  agentic        every request opens with the same ~12,000-token tools +
                 system block, then 64 live multi-turn conversations re-send
                 their history; RANDOM, PREFIX_AWARE and CACHE_AWARE (skipped
                 with a note when this prefixgate has no cache_aware).

  real engines   two llamaserve engines (llama.cpp, a generated random-weight
                 model, 2 slots and one CPU thread each): 20 questions about
                 4 documents of ~1,800 tokens, RANDOM, PREFIX_AWARE and
                 CACHE_AWARE, the engines' own cached tokens (bench part
                 "real" is the full comparison); where the engine cannot
                 run, one line says why.

About three and a half minutes in all. Every process it starts is stopped
before it exits."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engines  # noqa: E402
import real  # noqa: E402
import realwl  # noqa: E402
import runs  # noqa: E402
from runs import LABELS  # noqa: E402

AGENTIC = ["--workload", "agentic", "--system-tokens", "10000", "--tools", "4",
           "--conversations", "64", "--seed", "7"]


def table(res):
    print("%-14s %9s %7s %9s %9s %8s %15s" % ("strategy", "requests", "KV hit", "P50 TTFT",
                                            "P90 TTFT", "req/s", "instance share"))
    for s, r in res.items():
        print("%-14s %9d %7.2f %7.0fms %7.0fms %8.2f %8.1f-%.1f%%" % (
            LABELS[s], r["ok"], r["kv_hit_rate"], r["ttft_ms"]["p50"], r["ttft_ms"]["p90"],
            r["req_per_s"], r["share_min_pct"], r["share_max_pct"]))


def versus(res, a, b="random"):
    """One line: strategy a against b, or None when either did not run."""
    if a not in res or b not in res:
        return None
    x, y = res[a], res[b]
    p50 = lambda r: r["ttft_ms"]["p50"]  # noqa: E731
    return ("%s vs %s: KV hit rate %.2f vs %.2f, P50 TTFT %+.0f%%, instance share "
            "%.1f-%.1f%%" % (LABELS[a], LABELS[b], x["kv_hit_rate"], y["kv_hit_rate"],
                             100.0 * (p50(x) - p50(y)) / p50(y) if p50(y) else float("nan"),
                             x["share_min_pct"], x["share_max_pct"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--duration", type=float, default=22,
                    help="shared prefix: wall seconds per strategy")
    ap.add_argument("--rate", type=float, default=20.0,
                    help="shared prefix: requests per model second")
    ap.add_argument("--scale", type=float, default=8.0,
                    help="instances run this many times faster (results in model time)")
    ap.add_argument("--strategies", default="random,prefix_aware",
                    help="shared prefix: strategies")
    ap.add_argument("--agentic-duration", type=float, default=8,
                    help="agentic: wall seconds per strategy")
    ap.add_argument("--agentic-rate", type=float, default=16.0,
                    help="agentic: requests per model second")
    ap.add_argument("--agentic-strategies", default="random,prefix_aware,cache_aware")
    ap.add_argument("--workloads", default="shared,agentic,real")
    ap.add_argument("--real-strategies", default="random,prefix_aware,cache_aware")
    opts = ap.parse_args()
    out = os.path.join(opts.build, "demo")
    os.makedirs(out, exist_ok=True)
    wls = opts.workloads.split(",")
    print("prefixgate demo: 7 simulated vLLM instances (Llama-3.1-70B-like timing, 11M-token "
          "prefix cache each); model time: instances run %gx faster, figures scaled back"
          % opts.scale)
    t0 = time.monotonic()
    runs_ = []
    if "shared" in wls:
        runs_.append(("shared prefix", "6,000 documents x 8,000 tokens (Zipf s=0.3) + 50-token "
                      "questions, %g req/s, %g s per strategy" % (
                          opts.rate, opts.duration * opts.scale),
                      "demo-", runs.WL_SHARED, opts.rate, opts.duration, 18000,
                      opts.strategies.split(",")))
    if "agentic" in wls:
        runs_.append(("agentic", "~12,000-token tools + system block on every request, then "
                      "64 live multi-turn chats, %g req/s, %g s per strategy" % (
                          opts.agentic_rate, opts.agentic_duration * opts.scale),
                      "demo-agentic-", AGENTIC, opts.agentic_rate, opts.agentic_duration, 0,
                      opts.agentic_strategies.split(",")))
    done = []
    for name, desc, prefix, wl, rate, dur, warm, strategies in runs_:
        strategies, note = runs.available(opts.build, strategies)
        print("\n%s: %s" % (name, desc))
        if note:
            print("  " + note)
        res = {}
        for s in strategies:
            print("  running %s ..." % LABELS[s], flush=True)
            res[s] = runs.run(opts.build, out, prefix + s, s, wl, rate, dur, warmup=warm,
                              scale=opts.scale)
        print()
        table(res)
        done.append((name, res))
    allres = [r for _, res in done for r in res.values()]
    g = max((r["gen_cpu_pct"] for r in allres), default=0)
    lag = max((r["gen_max_timer_lag_ms"] for r in allres), default=0)
    print("\n(load generator: at most %.0f%% of a CPU, worst timer lag %.1f ms; raw results "
          "in %s; %.0f s)" % (g, lag, out, time.monotonic() - t0))
    print()
    for name, res in done:
        lines = [v for v in (versus(res, "prefix_aware"), versus(res, "cache_aware")) if v]
        if "cache_aware" in res and "prefix_aware" in res:
            lines.append(versus(res, "cache_aware", "prefix_aware"))
        for line in lines or ["nothing to compare"]:
            print("%-14s %s" % (name + ":", line))
        if name == "agentic" and "cache_aware" not in res:
            print("%-14s CACHE_AWARE not run (this prefixgate has no cache_aware)" % "")
    errors = sum(r["errors"] for r in allres)
    if "real" in wls:
        errors += real_engines(opts, out)
    if errors:
        print("demo: %d requests failed (logs in %s)" % (errors, os.path.join(out, "logs")))
        return 1
    return 0


def real_engines(opts, out):
    """The short real-engine comparison; the requests that failed."""
    why = engines.missing(opts.build, "large")
    if why:
        print("\nreal engines: not run: %s (then: python3 tools/bench/real.py --build %s)" % (
            why, opts.build))
        return 0
    ro = real.options(["--build", opts.build, "--strategies", opts.real_strategies])
    print("\nreal engines: 2 llamaserve engines (llama.cpp, random-weight model, 2 slots and "
          "one CPU thread each), 20 questions about %d documents of ~1,800 tokens, 2 in "
          "flight; times are real" % realwl.DOCUMENTS)
    cal = real.calibrate(ro, os.path.join(out, "logs"))
    reqs = realwl.docs(1, requests=20)
    res = {}
    for s in ro.strategies:
        print("  running %s ..." % LABELS[s], flush=True)
        res[s] = real.one_run(ro, out, "real", s, reqs, False, ro.concurrency, cal)[0]
    print("%-14s %9s %9s %9s %14s" % ("strategy", "P50 TTFT", "P90 TTFT", "cached",
                                       "engine share"))
    for s, r in res.items():
        print("%-14s %7.0fms %7.0fms %9.2f %6.1f-%.1f%%" % (
            LABELS[s], r["ttft_p50"], r["ttft_p90"], r["cached_share"], r["share_min"],
            r["share_max"]))
    return sum(r["errors"] for r in res.values())


if __name__ == "__main__":
    sys.exit(main())
