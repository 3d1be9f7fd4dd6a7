#!/usr/bin/env python3
"""make bench, part "real": the routers in front of real engines.

Two llamaserve engines (llama.cpp through node-llama-cpp, tools/llamaserve;
the large random-weight model, one CPU thread each), 2 slots of --ctx
tokens each, behind RANDOM, LEAST_OUTSTANDING_REQUESTS, PREFIX_AWARE,
CACHE_AWARE (prefixgate, PrefixLength 1024) and HAProxy (the body's first
1,024 bytes hashed), fresh engines for every run, on two workloads
(realwl.py), each over several seeds (--seeds):

  chats  4 conversations, more than one engine's 2 slots hold, of 5 turns
         (~600 tokens at the first, ~1,600-2,100 at the last), round-robin,
         2 requests in flight;
  docs   40 questions about 4 documents of ~1,800 tokens, as many as the
         two engines' slots: the fleet can hold them all, one engine cannot
         (with one more, as this part had until 2026-12-07, no placement
         could, and the ideal, a slot for each, was out of every router's
         reach), 2 in flight;
  docs1  the same questions one at a time: two questions about one
         document in flight on one engine are computed in two slots, the
         second cold, evicting a document; one at a time shows what
         placement alone gives.

For each: TTFT p50/p90 (the client's, from send to first streamed token),
the engines' own cached-token share (usage.prompt_tokens_details) against
the ideal, and the engines' shares of requests. The ideal is measured: the
same requests, one at a time, to one engine with a slot for every
conversation or document, each finding everything earlier requests left.

The same workloads then run on mockllm instances given the engines' speed
(prefill rate, TTFT overhead and decode step measured on a fresh engine
first), their KV size and their cache: 2 slots of one sequence each, a
slot chosen by longest common prefix (mockllm --slots, llama.cpp's), so
that the two orderings of the strategies can be set side by side.
(mockllm's vLLM-like block cache, --mock-blocks, holds any three of these
conversations where an engine holds two: PREFIX_AWARE's 3-1 placements
then hit on mockllm and miss on the engines.)

On its own: python3 tools/bench/real.py --build build [--seeds 1,2,3]
[--quick] (real.py --help).
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engines  # noqa: E402
import fleet  # noqa: E402
import realrun  # noqa: E402
import realwl  # noqa: E402
import runs  # noqa: E402
from runs import LABELS  # noqa: E402

STRATEGIES = ["random", "least_outstanding_requests", "prefix_aware", "cache_aware", "haproxy"]
PREFIX_LENGTH = 1024
# mockllm runs this many times faster than the engines it stands for; its
# TTFTs are multiplied back (runs.py's model time)
MOCK_SCALE = 4.0
# name: (requests of a seed, in order?, requests in flight (None: --concurrency), title)
WORKLOADS = {
    "chats": (lambda seed, q: realwl.chats(seed, turns=3 if q else 5), True, None,
              "chats: 4 conversations x %s turns round-robin, ~1,600-2,100 tokens at the last "
              "turn, %d in flight"),
    "docs": (lambda seed, q: realwl.docs(seed, requests=16 if q else 40), False, None,
             "docs: %%s questions about %d documents of ~1,800 tokens, %%d in flight"
             % realwl.DOCUMENTS),
    # the same questions one at a time: what placement alone gives, without
    # two questions about one document meeting on an engine (the second is
    # computed cold in another slot, evicting a document)
    "docs1": (lambda seed, q: realwl.docs(seed, requests=16 if q else 40), False, 1,
              "docs1: the same %%s questions about %d documents, %%d in flight"
              % realwl.DOCUMENTS),
}


def options(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--out", help="results directory (default build/bench/<date>)")
    ap.add_argument("--seeds", default="1,2,3", help="workload seeds (default %(default)s)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="of %s (default: all)" % ",".join(WORKLOADS))
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--size", default="large", help="the model: small or large (%(default)s)")
    ap.add_argument("--slots", type=int, default=2, help="slots per engine (%(default)s)")
    ap.add_argument("--ctx", type=int, default=3072, help="tokens per slot (%(default)s)")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--no-mock", action="store_true", help="leave out the mockllm comparison")
    ap.add_argument("--mock-blocks", dest="mock_slots", action="store_false",
                    help="mockllm with vLLM's block cache (--max-num-seqs) instead of "
                    "llama.cpp's slots (--slots, a sequence per slot)")
    ap.add_argument("--quick", action="store_true",
                    help="fewer requests (chats 3 turns, docs 16), for a smoke run")
    opts = ap.parse_args(argv)
    opts.seeds = [int(s) for s in opts.seeds.split(",")]
    opts.workloads = opts.workloads.split(",")
    opts.strategies = runs.available(opts.build, opts.strategies.split(","))[0]
    return opts


def gateway(opts, strategy, addrs, logdir, capacity):
    return runs.router(opts.build, strategy, addrs, logdir, prefix_length=PREFIX_LENGTH,
                       cache_capacity=capacity if strategy == "cache_aware" else None)


def calibrate(opts, logdir):
    """A fresh engine's speed: a cold document, then the same document with
    another question (all but the question cached): prefill tokens/s, the
    TTFT's fixed part, the decode step, and characters per token."""
    e = engines.Engine(opts.build, logdir, "cal", size=opts.size, parallel=1, ctx=opts.ctx)
    try:
        q = realwl.docs(99, documents=1, requests=4, max_tokens=32)
        recs = [realrun.send(e.port, r["body"]) for r in q]
    finally:
        e.stop()
    cold, hot = recs[0], recs[-1]
    new = hot["prompt"] - hot["cached"]
    rate = (cold["prompt"] - new) / max(1e-3, (cold["ttft_ms"] - hot["ttft_ms"]) / 1000.0)
    over = max(1.0, hot["ttft_ms"] - 1000.0 * new / rate)
    decode = (hot["e2e_ms"] - hot["ttft_ms"]) / max(1, hot["completion"] - 1)
    chars = sum(len(m["content"]) for m in json.loads(q[0]["body"])["messages"])
    return {"rate": rate, "overhead_ms": over, "decode_ms": decode,
            "chars_per_token": chars / float(cold["prompt"])}


def mock_args(opts, cal):
    """mockllm flags for an instance like one engine: its speed and KV in
    mockllm's 4-character tokens, its slots as its running sequences."""
    per = cal["chars_per_token"] / 4.0
    seqs = ["--slots", str(opts.slots)] if opts.mock_slots else ["--max-num-seqs",
                                                                str(opts.slots)]
    return ["--prefill-tokens-per-s", "%.0f" % (cal["rate"] * per),
            "--ttft-overhead-ms", "%.1f" % cal["overhead_ms"],
            "--decode-ms-per-token", "%.2f" % cal["decode_ms"],
            "--kv-capacity-tokens", "%d" % (opts.slots * opts.ctx * per),
            "--time-scale", "%g" % MOCK_SCALE] + seqs


def one_run(opts, out, kind, strategy, reqs, ordered, inflight, cal):
    logdir = os.path.join(out, "logs")
    os.makedirs(logdir, exist_ok=True)
    if kind == "real":
        fl = engines.Engines(opts.build, 2, logdir, size=opts.size, parallel=opts.slots,
                             ctx=opts.ctx)
        ids = ["e0", "e1"]
        capacity = int(opts.slots * opts.ctx * cal["chars_per_token"] / 4)
    else:
        fl = fleet.Instances(opts.build, 2, logdir, mock_args(opts, cal))
        ids = ["i0", "i1"]
        capacity = int(opts.slots * opts.ctx * cal["chars_per_token"] / 4)
    learned = None
    try:
        rt = gateway(opts, strategy, fl.addrs(), logdir, capacity)
        try:
            recs = realrun.drive(rt.port, reqs, inflight, ordered)
            if strategy == "cache_aware":
                learned = [b["load"] for b in json.loads(fleet.get(rt.admin, "/backends"))]
        finally:
            rt.stop()
    finally:
        fl.stop()
    summ = realrun.summary(scaled(recs, kind), ids)
    summ["learned"] = learned
    return summ, recs


def scaled(recs, kind):
    """mockllm's latencies in the time of the engines it stands for."""
    if kind == "real":
        return recs
    return [dict(r, **{k: r[k] * MOCK_SCALE for k in ("ttft_ms", "e2e_ms")
                       if r.get(k) is not None}) for r in recs]


def ideal(opts, out, kind, reqs, cal):
    """The cached share when every request finds all that earlier ones
    left: one engine (instance) with a slot for each group, one request
    at a time."""
    logdir = os.path.join(out, "logs")
    groups = len({r["group"] for r in reqs})
    if kind == "real":
        fl = engines.Engine(opts.build, logdir, "ideal", size=opts.size, parallel=groups,
                            ctx=opts.ctx)
        port = fl.port
    else:
        args = mock_args(opts, cal)
        args[args.index("--slots" if opts.mock_slots else "--max-num-seqs") + 1] = str(groups)
        args[args.index("--kv-capacity-tokens") + 1] = "%d" % (
            groups * opts.ctx * cal["chars_per_token"])
        fl = fleet.Instances(opts.build, 1, logdir, args)
        port = fl.ports[0]
    try:
        recs = realrun.drive(port, reqs, 1, True)
    finally:
        fl.stop()
    return realrun.summary(recs)["cached_share"]


def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def table(title, res, ideals, cal_gw=None):
    """res: {strategy: [summary per seed]}; medians over the seeds."""
    lines = [title, "%-18s %9s %9s %8s %8s %9s %12s %s" % (
        "strategy", "P50 TTFT", "P90 TTFT", "cached", "/ideal", "P50 vs R", "inst. share",
        "cached share per seed")]
    ideal_m = med(ideals)
    base = med([s["ttft_p50"] for s in res.get("random", [])])
    for strat, ss in res.items():
        p50, p90 = med([s["ttft_p50"] for s in ss]), med([s["ttft_p90"] for s in ss])
        share = med([s["cached_share"] for s in ss])
        ratio = med([s["cached_share"] / i if i else float("nan") for s, i in zip(ss, ideals)])
        lines.append("%-18s %7.0fms %7.0fms %8.2f %8.2f %9s %5.1f-%4.1f%% %s" % (
            LABELS[strat], p50, p90, share, ratio,
            "%.2fx" % (p50 / base) if base == base and base and strat != "random" else "",
            min(s["share_min"] for s in ss), max(s["share_max"] for s in ss),
            " ".join("%.2f" % s["cached_share"] for s in ss)))
        errs = sum(s["errors"] for s in ss)
        if errs:
            lines.append("%18s %d requests failed" % ("", errs))
    lines.append("  ideal cached share (one engine, a slot per group, one request at a time): "
                 "%s; median %.2f" % (" ".join("%.2f" % i for i in ideals), ideal_m))
    learned = [b for s in res.get("cache_aware", []) for b in (s.get("learned") or [])
               if b.get("speed_learned")]
    if learned and cal_gw:
        lines.append("  CACHE_AWARE's learned speeds at the end of each run: %s tokens/s, "
                     "overhead %s ms; one engine alone: %.0f tokens/s, %.0f ms (tokens of 4 "
                     "bytes, the gateway's)" % (
                         "-".join("%.0f" % f(b["prefill_tokens_per_s"] for b in learned)
                                  for f in (min, max)),
                         "-".join("%.0f" % f(b["ttft_overhead_ms"] for b in learned)
                                  for f in (min, max)), cal_gw[0], cal_gw[1]))
    return lines


def order(res, key):
    return [s for s, _ in sorted(res.items(), key=lambda kv: key(kv[1]))]


def bench_real(opts, out):
    why = engines.missing(opts.build, opts.size)
    if why:
        return {"failed": True}, ["real: not run: %s" % why, ""]
    os.makedirs(out, exist_ok=True)
    logdir = os.path.join(out, "logs")
    os.makedirs(logdir, exist_ok=True)
    print("  real: calibrating an engine ...", flush=True)
    cal = calibrate(opts, logdir)
    lines = ["Real engines: 2 llamaserve (llama.cpp, node-llama-cpp 3.21.1, CPU, 1 thread "
             "each), the %s random-weight model, %d slots x %d tokens each; seeds %s; "
             "medians over the seeds" % (opts.size, opts.slots, opts.ctx,
                                         ",".join(map(str, opts.seeds))),
             "  one engine measured: %.0f prefill tokens/s, TTFT overhead %.0f ms, decode "
             "%.1f ms/token, %.2f characters/token" % (cal["rate"], cal["overhead_ms"],
                                                        cal["decode_ms"],
                                                        cal["chars_per_token"]), ""]
    results = {"calibration": cal}
    kinds = ["real"] + ([] if opts.no_mock else ["mock"])
    for wl in opts.workloads:
        make, ordered, inflight, title = WORKLOADS[wl]
        inflight = inflight or opts.concurrency
        n = len(make(opts.seeds[0], opts.quick))
        for kind in kinds:
            res, ideals = {}, []
            for seed in opts.seeds:
                reqs = make(seed, opts.quick)
                print("  real: %s, %s, seed %d, ideal ..." % (wl, kind, seed), flush=True)
                ideals.append(ideal(opts, out, kind, reqs, cal))
                for s in opts.strategies:
                    print("  real: %s, %s, seed %d, %s ..." % (wl, kind, seed, LABELS[s]),
                          flush=True)
                    summ, recs = one_run(opts, out, kind, s, reqs, ordered, inflight, cal)
                    res.setdefault(s, []).append(summ)
                    with open(os.path.join(out, "real-%s-%s-%d-%s.json" % (
                            wl, kind, seed, s)), "w") as f:
                        json.dump({"summary": summ, "requests": recs}, f, indent=1)
            results["%s-%s" % (wl, kind)] = {"strategies": res, "ideal": ideals}
            what = ("llamaserve engines" if kind == "real" else
                    "mockllm instances given the engines' speed, KV size and %d %s" % (
                        opts.slots, "slots (--slots)" if opts.mock_slots else "sequences"))
            cal_gw = (cal["rate"] * cal["chars_per_token"] / 4.0, cal["overhead_ms"]) \
                if kind == "real" else None
            lines += table("%s; %s (%d requests a seed)" % (
                title % (n // 4 if wl == "chats" else n, inflight), what, n), res, ideals,
                cal_gw)
            lines.append("")
        rr, mm = results.get("%s-real" % wl), results.get("%s-mock" % wl)
        if rr and mm:
            for what, sign, key in (
                    ("P50 TTFT", " < ", lambda ss: med([s["ttft_p50"] for s in ss])),
                    ("cached share", " > ", lambda ss: -med([s["cached_share"] for s in ss]))):
                a = order(rr["strategies"], key)
                b = order(mm["strategies"], key)
                lines.append("  %s, %s: engines %s; mockllm %s%s" % (
                    wl, what, sign.join(LABELS[s] for s in a), sign.join(LABELS[s] for s in b),
                    " (same order)" if a == b else " (another order)"))
            lines.append("")
    return results, lines


def from_bench(bench_opts, out):
    """bench.py's part "real": the defaults."""
    return bench_real(options(["--build", bench_opts.build]), out)


def main():
    opts = options()
    return runs.standalone("real", opts, bench_real,
                           failed=lambda res, lines: res.get("failed") or any(
                               "requests failed" in l for l in lines))


if __name__ == "__main__":
    sys.exit(main())
