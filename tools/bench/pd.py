#!/usr/bin/env python3
"""make bench part "pd": prefill/decode disaggregation against aggregated
serving, at the same instance count and the same offered load (issue 27).

The fleets (pdrun.py): 4 mockllm instances at --time-scale 4 (latencies x
4 and rates / 4 are model time, as in the other parts), every one with
--interference (vLLM's chunked prefill: a prefill chunk of up to 2,048
tokens lengthens the decode steps beside it by its prefill time, +56 ms on
a 25 ms step), prefixgate with CACHE_AWARE in front:
  aggregated   4 mixed instances;
  vLLM 1:1     2 prefill + 2 decode instances, pd=vllm (the decode set
               CACHE_AWARE too, the gateway's default);
  vLLM 3:1 / 1:3, the other ratio, chosen per workload by where its work
               is: the trace is prefill-heavy (~12,000-token prompts, few
               cached: 3 prefill + 1 decode; 1 prefill + 3 decode queued
               its prompts for a minute at this load), the multi-turn
               chats decode-heavy (most of each prompt cached: 1 + 3; with
               3 + 1 one decode instance runs every stream);
  SGLang 1:1   2 + 2, pd=sglang (bootstrap ports from the prefill
               instances' mockllm_pd_info).
The workloads (pgload), each run through every fleet:
  multi-turn   160 live chats (pgload --workload multi-turn, the server's
               replies re-sent), user turns of median 400 tokens
               (lognormal, as pasted text; the default 60 leave the
               aggregated fleet almost no prefill to interfere with),
               replies of median 200, at 8 req/s for 120 s;
  trace        the Mooncake trace's first 1,200 requests (tracerun.py's
               fleet: prompt caching only, each instance's cache 2 x
               tracerun's, so that 4 hold what its 8 do) at 0.3 of the
               aggregated fleet's prefill capacity: busy (TTFT p50 ~1.3 x
               a lone prompt's, decode steps disturbed) and, since a 1:1
               split halves the prefill capacity, a load the 1:1 prefill
               set can still carry (0.4 buried it under its queue).
Beside each run, the probe: a second pgload of short chats (prompts under
pd-min-tokens, 256), 2 req/s, its own CSV.

Measured per run: ITL p50/p99 (every gap between content events of every
streamed reply, pgload), TTFT p50/p99, throughput, the KV hit rate of the
prefill instances (an aggregated fleet: all of them; the mocks'
vllm:prefix_cache_hits_total / _queries_total over the run) and the
decode instances' own, the prompt tokens prefilled anywhere per prompt
token served (the KV a decode instance pulled is not prefilled again),
the gateway's prefixgate_pd_pairs_total and _decode_alone_total (the
probe's requests among them), the probe's TTFT and how busy other jobs
kept the machine. Then the gateway cost of the second leg (pdcost.py).

Targets, PASS/MISS with the numbers, for each split against aggregated on
the same workload: ITL p99 <= 0.5 x aggregated's; prefill KV hit rate >=
aggregated's (beside it, the aggregated fleet's over the requests a P/D
gateway would have sent to a prefill instance: 256 tokens or more, less
than 80% cached); the second leg's gateway CPU <= 50 us a request on the
32 KiB prompts (vllm and sglang); short prompts: the probe's TTFT p50 and
p90 <= 1.05 x aggregated's (5% for run-to-run noise).

Output: pd.txt (the tables), pd.json (every figure), pd-itl-<workload>.png
(CDF of each request's largest gap between tokens, a line per fleet), each
run's pgload JSON and CSV, in the results directory (default
<build>/bench/<date>). About 10 minutes; a quick version (4 minutes):
  python3 tools/bench/pd.py --build build --time-factor 0.3 --no-instr
One workload: --workloads trace --cost-rounds 0; the cost alone:
--workloads none.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet  # noqa: E402
import pdcost  # noqa: E402
import pdrun  # noqa: E402
import plots  # noqa: E402
import runs  # noqa: E402
import tracerun  # noqa: E402
from pdrun import Config  # noqa: E402

INSTANCES = 4
AGG = Config("agg", "aggregated")
V11 = Config("vllm-1:1", "vLLM 1:1", "vllm", 2)
S11 = Config("sglang-1:1", "SGLang 1:1", "sglang", 2)
V31 = Config("vllm-3:1", "vLLM 3:1", "vllm", 3)
V13 = Config("vllm-1:3", "vLLM 1:3", "vllm", 1)
# multi-turn
MT_CONVERSATIONS, MT_USER_TOKENS, MT_RATE, MT_SECONDS = 160, 400, 8, 30
MT_CAPACITY = 3000000  # tokens an instance caches: every live chat fits
# trace
TRACE_REQUESTS, TRACE_LOAD = 1200, 0.3
TRACE_TIMEOUT_MS = 120000  # a reply runs to 2,000 tokens: 12.5 s at K 4
# the probe: short chats, all under pd-min-tokens
PROBE = ["--workload", "short-chat", "--conversations", "32", "--history-tokens", "160",
         "--seed", "11"]
PROBE_RATE = 2  # model req/s
# targets
ITL_GOAL, LEG_GOAL_US, SHORT_SLACK = 0.5, 50.0, 1.05
WORKLOADS = ("multi-turn", "trace")


def workload(opts, name):
    """(title, configs, instance flags, cache capacity, pgload args, wall
    seconds of arrivals, timeout s)."""
    k, tf = opts.time_scale, opts.time_factor
    if name == "multi-turn":
        secs = MT_SECONDS * tf
        args = ["--workload", "multi-turn", "--conversations", str(MT_CONVERSATIONS),
                "--user-tokens", str(MT_USER_TOKENS), "--seed", "7",
                "--rate", "%g" % (MT_RATE * k), "--duration", "%g" % secs]
        title = ("multi-turn: %d live chats, user turns median %d tokens, replies median 200, "
                 "%g req/s for %g s" % (MT_CONVERSATIONS, MT_USER_TOKENS, MT_RATE, secs * k))
        return (title, (AGG, V11, V13, S11), ["--kv-capacity-tokens", str(MT_CAPACITY)],
                MT_CAPACITY, args, secs, secs + 31 + pdrun.SLACK_S)
    n = max(2, int(TRACE_REQUESTS * tf))
    tps = tracerun.PREFILL_TPS * k * INSTANCES  # the aggregated fleet's, wall
    cap = tracerun.capacity() * tracerun.INSTANCES // INSTANCES
    span = tracerun.scheduled_s(n - 1, TRACE_LOAD, tps)
    args = ["--workload", "trace", "--trace", tracerun.TRACE, "--trace-requests", str(n),
            "--load", "%g" % TRACE_LOAD, "--capacity-tokens-per-s", "%g" % tps,
            "--max-conns", str(tracerun.MAX_CONNS), "--timeout-ms", str(TRACE_TIMEOUT_MS)]
    title = ("trace: Mooncake's first %d requests at %g of the aggregated fleet's prefill "
             "capacity, %.0f s of arrivals" % (n, TRACE_LOAD, span * k))
    return (title, (AGG, V11, V31, S11),
            ["--no-cache-output", "--kv-capacity-tokens", str(cap)], cap, args, span,
            span + TRACE_TIMEOUT_MS / 1000 + 1 + pdrun.SLACK_S)


def run_workload(opts, out, name, res):
    title, configs, inst_args, cap, args, secs, timeout = workload(opts, name)
    w = res["workloads"][name] = {"title": title, "runs": {}}
    for cfg in configs:
        if cfg.name not in opts.configs:
            continue
        run = "pd-%s-%s" % (name, cfg.name.replace(":", "_"))
        print("  pd: %s, %s ..." % (name, cfg.label), flush=True)
        try:
            r = pdrun.run(opts.build, out, run, cfg, INSTANCES, inst_args, args, timeout,
                          opts.time_scale, cap,
                          (PROBE, PROBE_RATE * opts.time_scale, secs))
        except Exception as e:  # one run failing must not lose the others
            res["failed"].append(run)
            res["notes"].append("%s: FAILED: %r (logs in %s)" % (
                run, e, os.path.join(out, "logs")))
            print("  pd: %s failed: %r" % (run, e), flush=True)
            continue
        r["label"] = cfg.label
        w["runs"][cfg.name] = r
        print("  pd: %s: ITL p99 %.1f ms, TTFT p50 %.0f ms, prefill hit %.3f, %d errors, "
              "%.0f s" % (cfg.label, r["itl_ms"]["p99"], r["ttft_ms"]["p50"],
                          r["prefill_hit_rate"] or 0, r["errors"], r["run_wall_s"]), flush=True)
        save_json(out, res)


def save_json(out, res):
    with open(os.path.join(out, "pd.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)


# --- the report ------------------------------------------------------------------
def fmt(v, f="%.0f", none="-"):
    return f % v if v is not None else none


def table(w):
    lines = [w["title"] + " (model time)",
             "%-11s %5s %4s %6s %7s %7s %7s %6s %6s %7s %6s %6s %6s %6s %6s %6s %6s %5s" % (
                 "fleet", "ok", "err", "req/s", "out t/s", "TTFT50", "TTFT99", "ITL50",
                 "ITL99", "x agg", "P hit", "D hit", "prefl", "pairs", "alone", "shrt50",
                 "shrt90", "oth%")]
    agg = w["runs"].get("agg")
    for name, r in w["runs"].items():
        probe = r.get("probe", {})
        ratio = (r["itl_ms"]["p99"] / agg["itl_ms"]["p99"]) if agg and name != "agg" else None
        pd = r.get("pd", {})
        lines.append(
            "%-11s %5d %4d %6.2f %7.0f %7.0f %7.0f %6.1f %6.1f %7s %6s %6s %6s %6s %6s %6s %6s "
            "%5.0f" % (r["label"], r["ok"], r["errors"], r["req_per_s"],
                       r["output_tokens_per_s"], r["ttft_ms"]["p50"], r["ttft_ms"]["p99"],
                       r["itl_ms"]["p50"], r["itl_ms"]["p99"], fmt(ratio, "%.2fx"),
                       fmt(r["prefill_hit_rate"], "%.3f"),
                       fmt(r.get("decode_local_hit_rate"), "%.3f"), fmt(r["computed"], "%.3f"),
                       fmt(pd.get("pairs"), "%d"), fmt(pd.get("decode_alone"), "%d"),
                       fmt(probe.get("p50")), fmt(probe.get("p90")), r["others_busy_pct"]))
        if r["errors"] or probe.get("errors"):
            lines.append("%11s %d requests failed (probe: %s)" % ("", r["errors"],
                                                                  probe.get("errors")))
    if agg and agg.get("eligible_hit_rate") is not None:
        lines.append("  aggregated's hit rate over the requests a P/D gateway gives a prefill "
                     "instance (>= 256 tokens, < 80%% cached): %.3f" % agg["eligible_hit_rate"])
    return lines


LEGEND = [
    "TTFT, ITL (every gap between tokens) in model ms; x agg: ITL p99 against aggregated's; P hit:",
    "the prefill instances' KV hit rate (aggregated: every instance's), D hit: the decode "
    "instances' own;",
    "prefl: prompt tokens prefilled anywhere / prompt tokens served; pairs, alone: the "
    "gateway's counts (the probe's",
    "short prompts among alone); shrt50/90: the probe's TTFT p50/p90 (model ms); oth%: other "
    "jobs' share of the machine."]


def verdict(ok):
    return "PASS" if ok else "MISS"


def targets(res):
    out = ["Targets (issue 27):"]
    for name, w in res["workloads"].items():
        agg = w["runs"].get("agg")
        if not agg:
            out.append("  %s: no aggregated run, nothing to compare" % name)
            continue
        for cfg, r in w["runs"].items():
            if cfg == "agg":
                continue
            ratio = r["itl_ms"]["p99"] / agg["itl_ms"]["p99"]
            out.append("  %s, %s: ITL p99 %.1f vs %.1f ms = %.2fx (<= %.1fx): %s" % (
                name, r["label"], r["itl_ms"]["p99"], agg["itl_ms"]["p99"], ratio, ITL_GOAL,
                verdict(ratio <= ITL_GOAL)))
            ph, ah = r["prefill_hit_rate"], agg["prefill_hit_rate"]
            out.append("  %s, %s: prefill KV hit rate %s vs %s (>=; aggregated's over what a "
                       "prefill would get: %s): %s" % (
                           name, r["label"], fmt(ph, "%.3f"), fmt(ah, "%.3f"),
                           fmt(agg.get("eligible_hit_rate"), "%.3f"),
                           verdict(ph is not None and ah is not None and ph >= ah)
                           if ah else "n/a (no hits on aggregated)"))
            p, a = r.get("probe", {}), agg.get("probe", {})
            if p.get("p50") is None or a.get("p50") is None:
                out.append("  %s, %s: short prompts: no probe figures" % (name, r["label"]))
                continue
            ok = p["p50"] <= SHORT_SLACK * a["p50"] and p["p90"] <= SHORT_SLACK * a["p90"]
            out.append("  %s, %s: short prompts' TTFT p50 %.0f vs %.0f ms, p90 %.0f vs %.0f "
                       "(p99 %.0f vs %.0f; <= %.2fx): %s" % (
                           name, r["label"], p["p50"], a["p50"], p["p90"], a["p90"], p["p99"],
                           a["p99"], SHORT_SLACK, verdict(ok)))
    cost = res.get("cost")
    if cost:
        big = cost["sizes"][str(pdcost.SIZES[0])]
        for p in pdcost.PATHS[1:]:
            out.append("  second leg (%s, 32 KiB prompts): %.1f us of gateway CPU a request "
                       "(<= %.0f us): %s" % (p, big[p]["leg_us"], LEG_GOAL_US,
                                             verdict(big[p]["leg_us"] <= LEG_GOAL_US)))
    return out


def plot_itl(out, name, w, scale):
    """CDF of each request's largest gap between tokens, a line per fleet."""
    plot = []
    for cfg, r in w["runs"].items():
        gaps = sorted(int(row["itl_max_us"]) * scale / 1000.0
                      for row in fleet.read_csv(r["csv"])
                      if row["status"] == "200" and row.get("itl_max_us"))
        if not gaps:
            continue
        dat = "pd-itl-%s-%s.dat" % (name, cfg.replace(":", "_"))
        with open(os.path.join(out, dat), "w") as f:
            for i, v in enumerate(gaps):
                f.write("%.3f %.5f\n" % (v, (i + 1) / len(gaps)))
        plot.append("'%s' using 1:2 with lines lw 2 title '%s'" % (dat, r["label"]))
    if plot:
        plots._draw(out, "pd-itl-" + name,
                    "set title '%s: each reply largest gap between tokens (model time)'\n"
                    "set logscale x\nset xlabel 'largest gap (ms)'\n"
                    "set ylabel 'fraction of requests'\nset grid\nset key bottom right\n"
                    "plot %s\n" % (name, ", ".join(plot)))


def busy(res):
    """How busy other jobs kept the machine during the runs (% of all its
    CPUs): [(what, mean, max)]."""
    out = []
    for name, w in res["workloads"].items():
        v = [r["others_busy_pct"] for r in w["runs"].values()]
        if v:
            out.append((name, sum(v) / len(v), max(v)))
    cost = res.get("cost")
    if cost:
        v = [r["other_busy_pct"] for paths in cost["sizes"].values() for r in paths.values()]
        out.append(("gateway cost", sum(v) / len(v), max(v)))
    return out


def report(res, out):
    c = res["config"]
    lines = ["Prefill/decode disaggregation: %d instances (mockllm --interference), "
             "CACHE_AWARE, time scale %g, time factor %g" % (
                 INSTANCES, c["time_scale"], c["time_factor"]),
             "%s, %s, %d CPUs: %s" % (res["started"], os.uname().nodename, os.cpu_count() or 1,
                                      res["command"])]
    b = busy(res)
    if b:
        lines.append("other jobs' CPU meanwhile (% of all CPUs, mean/max over the runs): " +
                     ", ".join("%s %.0f/%.0f%%" % x for x in b))
    lines.append("")
    for name, w in res["workloads"].items():
        lines += table(w) + [""]
        plot_itl(out, name, w, res["config"]["time_scale"])
    lines += LEGEND + [""]
    if res.get("cost"):
        lines += pdcost.lines(res["cost"], res["config"]["cost_rounds"]) + [""]
    lines += targets(res)
    lines += [""] + res["notes"] if res["notes"] else []
    lines += ["pd part took %.0f s" % res["wall_s"], ""]
    return lines


def bench_pd(opts, out):
    """The part: (results, lines of the report)."""
    os.makedirs(out, exist_ok=True)
    logdir = os.path.join(out, "logs")
    os.makedirs(logdir, exist_ok=True)
    t0 = time.monotonic()
    res = {"config": {"instances": INSTANCES, "time_scale": opts.time_scale,
                      "time_factor": opts.time_factor, "cost_rounds": opts.cost_rounds},
           "started": time.strftime("%Y-%m-%d %H:%M"), "command": opts.command,
           "workloads": {}, "failed": [], "notes": []}
    for name in opts.workloads:
        run_workload(opts, out, name, res)
    if opts.cost_rounds:
        try:
            raw = pdcost.measure(opts.build, out, logdir, opts.time_factor, opts.cost_rounds)
            ins = pdcost.instructions(opts.build, logdir) if opts.instr else False
            res["cost"] = pdcost.summary(raw, ins)
        except Exception as e:
            res["failed"].append("cost")
            res["notes"].append("cost: FAILED: %r (logs in %s)" % (e, logdir))
    res["wall_s"] = time.monotonic() - t0
    lines = report(res, out)
    save_json(out, res)
    runs.write_lines(out, "pd", lines)
    return res, lines


# --- options -------------------------------------------------------------------
def options(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--out", help="results directory (default <build>/bench/<date>)")
    ap.add_argument("--time-scale", type=float, default=runs.SCALE,
                    help="the instances' --time-scale K (default %(default)g)")
    ap.add_argument("--time-factor", type=float, default=1.0,
                    help="multiply the runs' lengths (the trace's requests, the chats' "
                    "seconds, the cost runs; 0.3: a quick run)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="of %(default)s, comma-separated; none: only the gateway cost")
    ap.add_argument("--configs", default="agg,vllm-1:1,vllm-3:1,vllm-1:3,sglang-1:1",
                    help="fleets, comma-separated (default %(default)s; the ratios each "
                    "workload runs are in this file's docstring)")
    ap.add_argument("--cost-rounds", type=int, default=pdcost.ROUNDS,
                    help="rounds of the gateway cost runs (0: none; default %(default)s)")
    ap.add_argument("--no-instr", dest="instr", action="store_false",
                    help="no callgrind runs (instructions per request)")
    o = ap.parse_args(argv)
    o.command = " ".join(["python3", "tools/bench/pd.py"] + list(
        sys.argv[1:] if argv is None else argv))
    o.workloads = [w for w in o.workloads.split(",") if w and w != "none"]
    o.configs = [c for c in o.configs.split(",") if c]
    if set(o.workloads) - set(WORKLOADS):
        ap.error("--workloads: of %s, or none" % ",".join(WORKLOADS))
    if not o.workloads and not o.cost_rounds:
        ap.error("nothing to run: --workloads none and --cost-rounds 0")
    if not o.time_scale > 0 or not o.time_factor > 0 or o.cost_rounds < 0:
        ap.error("--time-scale and --time-factor must be > 0, --cost-rounds >= 0")
    runs.need_tools(ap, o.build)
    return o


def from_bench(bench_opts, out):
    """bench.py's part "pd": the defaults, --time-factor passed on."""
    argv = ["--build", bench_opts.build, "--time-factor", "%g" % bench_opts.time_factor]
    opts = options(argv)
    opts.command = "tools/bench/bench.py's part pd, --time-factor %g" % bench_opts.time_factor
    return bench_pd(opts, out)


def main():
    return runs.standalone("pd", options(), bench_pd, failed=runs.failed_or_lost)


if __name__ == "__main__":
    sys.exit(main())
