#!/usr/bin/env python3
"""make bench: the full benchmark, in one run, on loopback.

  1. Workloads (a) shared prefix, (b) multi-turn, (c) no prefix, (d) agentic
     (a ~12,000-token tools + system block shared by every request, then
     multi-turn conversations), (e) short chats (whole history under the
     PrefixLength) on 7 simulated vLLM instances through RANDOM,
     LEAST_OUTSTANDING_REQUESTS, PREFIX_AWARE, CACHE_AWARE (prefixgate) and
     HAProxy hashing the body prefix: P50/P90 TTFT, KV hit rate from the
     instances' /metrics, throughput, per-instance share; a TTFT CDF per
     workload, one line per strategy.
  2. Hot prefix (one document takes 50% of traffic): ConcurrencyThreshold 10
     versus 1024 (no overflow) versus CACHE_AWARE versus RANDOM; in-flight
     sampled from /backends.
  3. Scale event: an 8th instance added, later one removed, PREFIX_AWARE,
     CACHE_AWARE and RANDOM, on (a) (every document already cached
     somewhere) and on (d) (conversations keep starting): hit rate per bin
     from pgload's per-request CSV and the new instance's share, one plot
     per workload.
  4. Two gateways: workloads (b) and (d) through two prefixgate processes
     that share nothing (own ports, own BPF pin paths) in front of the same
     instances, pgload sending each request to one of them at random;
     PREFIX_AWARE and CACHE_AWARE hit rate with two gateways against one.
  5. Gateway fleets (fleetbench.py): 1, 2 and 4 gateways sharing state
     over NATS, (a), (b) and (d) with PREFIX_AWARE and CACHE_AWARE, and the
     hot prefix's peak in flight per instance summed over the gateways.
  6. Trace (trace.py, part "trace"): the Mooncake production trace (an
     hour of chat requests, tools/bench/data) replayed on 8 instances whose
     caches together hold a third of its distinct blocks, at loads 0.7, 0.9
     and 1.1 of their prefill capacity, through every router above and the
     two reference rules (refrouter.py); an unequal fleet, an instance
     slowed halfway, 4 gateways over NATS; tracesim's figures beside each
     and PASS/MISS against the targets. About 70 minutes; on its own, and
     shorter: trace.py --trace-requests 600 --loads 0.9 (trace.py --help).
  7. Flow control (flow.py, part "flow"): two tenants on the trace's fleet
     (8 instances), B at 0.109 of the prefill capacity and A at 10x B's
     rate, 1.2x in all: B's p99 TTFT with flow control on against B alone
     and against flow control off, the completed tokens/s on against off;
     a sheddable flood with a deadline against critical traffic, requests
     dispatched past their deadline (access log); flow control's added p50
     below saturation; an InstanceQueueMs sweep; PASS/MISS against issue
     26's targets. About 12 minutes; on its own, and shorter: flow.py
     --quick (flow.py --help).
  8. Prefill/decode disaggregation (pd.py, part "pd"): 4 instances with
     mockllm --interference, aggregated against a 1:1 prefill/decode split
     (vLLM and SGLang protocols) and one other ratio, on multi-turn chats
     and the Mooncake trace at the same load: inter-token latency, the
     prefill instances' KV hit rate, short prompts' TTFT, and the gateway
     CPU of the second leg; PASS/MISS against issue 27's targets. About 10
     minutes; on its own, and shorter: pd.py --time-factor 0.3 --no-instr
     (pd.py --help).
  9. Real engines (real.py, part "real"): two llamaserve engines
     (llama.cpp through node-llama-cpp, a generated random-weight model, 2
     slots and one CPU thread each) behind RANDOM, LEAST_OUTSTANDING,
     PREFIX_AWARE, CACHE_AWARE and HAProxy, multi-turn chats and shared
     documents (two questions in flight, and one at a time) over 3 seeds:
     TTFT p50/p90, the engines' own cached-token share against the ideal,
     instance shares; the same workloads on mockllm given the engines'
     speed and slots, the two orderings side by side. About 15 minutes on
     an idle machine (the engines' speed moves with its load); on its own,
     and shorter: real.py --quick --seeds 1.
 10. Learning (learn.py, part "learn"): issue 36's targets with instances
     at 1/3, 1 and 3 times the gateway's defaults (it is told nothing) and
     clients that stream and that do not: flow control's runs on chats (a
     quiet tenant beside a 10x one at 1.2x capacity, a sheddable flood,
     throughput against no flow control), a deadline below the default
     prediction after a cold start, the trace replay at 0.7, 0.9, 1.1
     against the reference rules (tracesim beside it); PASS/MISS against
     the targets. About 20 minutes; on its own, and shorter: learn.py
     --quick (learn.py --help).
 11. Overhead (overhead.py): direct vs the floor proxy vs prefixgate vs
     HAProxy vs nginx, 32 KiB OpenAI body, instances that answer at once;
     added p50/p99 at concurrency 1, throughput at concurrency 32, CPU per
     request at a fixed rate; medians of --overhead-rounds rounds, ratios
     and PASS/MISS against issue 12's targets. On its own:
     bench.py --only overhead [--time-factor 0.25] [--overhead-rounds 3];
     another build of prefixgate beside this one, in the same rounds:
     --compare-bin before=../old/build/prefixgate.
 12. Quotas and traces (quota.py, part "quota"): issue 33's targets: what
     tracing at --otlp-sample 0.01 and 1 and a quota never reached add to
     the gateway's p50 (small bodies, c=1, requests mixed at random, against the
     same gateway with neither) and to its instructions a request
     (callgrind); a tenant held to rpm=N sending 2N for 3 minutes through
     1 gateway and through 4 over NATS, its 200s against N. About 6
     minutes; on its own, and shorter: quota.py --quick.
CACHE_AWARE needs a gateway with --strategy cache_aware (and
--cache-capacity, set to the instances' --kv-capacity-tokens); with an older
build its rows are skipped with a note.
Raw results, the tables and PNG plots go to build/bench/<date>/; with
--results DIR (make bench gives doc/results) each part's summary is also
written to DIR/PART.txt with the command that made it (results.py). Latencies
are in model time (see runs.py: instances run SCALE times faster).
"""
import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet  # noqa: E402
import plots  # noqa: E402
import results as kept  # noqa: E402
import fleetbench  # noqa: E402
import flow  # noqa: E402
import learn  # noqa: E402
import pd  # noqa: E402
import real  # noqa: E402
import runs  # noqa: E402
import overhead  # noqa: E402
import quota  # noqa: E402
import trace  # noqa: E402  (this directory's trace.py: first on sys.path, before the stdlib's)
from overhead import FIXED, INSTANT, bench_overhead  # noqa: E402,F401
from runs import LABELS, SCALE  # noqa: E402

WORKLOADS = [
    # key, title, pgload args, model req/s, wall s, warm-up requests, PrefixLength
    ("a", "(a) shared prefix: 6,000 docs x 8,000 tokens, Zipf s=0.3, +50-token question",
     runs.WL_SHARED, 20, 75, 18000, None),
    # (b), (d), (e): each turn re-sends the reply the instance generated for
    # the previous one (pgload --history server; runs.py gives these runs
    # fast decode so the rate is reachable). The figures before 2026-12-01 were
    # measured with "--history replay --max-tokens 16" (the conversation's
    # own assistant text, never generated) and prompt-only caching.
    ("b", "(b) multi-turn: 64 live ShareGPT-style chats, 2-12 turns, whole history each turn",
     ["--workload", "multi-turn", "--conversations", "64", "--history", "server",
      "--seed", "7"], 20, 30, 0, 1024),
    ("c", "(c) no shared prefix (control): unique 8,000-token prompts",
     ["--workload", "no-prefix", "--max-tokens", "16", "--seed", "7"], 16, 25, 0, None),
    # Every request opens with the same ~12,000 tokens (4 tools + a
    # 10,000-token system message), longer than PrefixLength: only the
    # conversation after it differs. Once an instance holds the block, a
    # request's uncached part is its history (RANDOM) or its last turn.
    ("d", "(d) agentic: ~12,000-token tools+system block on every request, then 64 live "
     "multi-turn chats",
     ["--workload", "agentic", "--system-tokens", "10000", "--tools", "4",
      "--conversations", "64", "--history", "server", "--seed", "7"], 16, 30, 0, None),
    # Whole history <= 800 tokens (3,200 bytes) < the 4,096-character
    # PrefixLength: each turn of a conversation has a new prefix key.
    ("e", "(e) short chats: 128 live ShareGPT-like chats, 2-6 turns, history <= 800 tokens",
     ["--workload", "short-chat", "--conversations", "128", "--history-tokens", "800",
      "--history", "server", "--seed", "7"], 24, 25, 0, None),
]
TWO_GATEWAYS = ("b", "d")

HOT = ["--workload", "hot-prefix", "--docs", "6000", "--zipf", "0.3", "--hot-share", "0.5",
       "--max-tokens", "64", "--seed", "7"]


def pct(a, b):
    return 100.0 * (a - b) / b if b else float("nan")


def conversation_stats(csv_path, server=True, block=16):
    """From pgload's per-request CSV: how many follow-up turns of a
    conversation (same group) changed instance, and the hit rate's bound for
    this workload: every follow-up finding all it can cached, nothing else.
    server (pgload --history server, instances caching their output): the
    full blocks of its previous turn's prompt + reply, which it re-sends as
    its prefix (prompt + completion tokens, the last token's KV never
    computed: (p + c - 1) // 16 blocks); replay: the previous prompt's
    blocks ((p - 1) // 16), as the replayed assistant text differs from what
    the instance generated. The new user turn, a partial last block and a
    conversation's first turn can never hit."""
    import csv
    prev, last = {}, {}
    total = bound = moved = follow = 0
    try:
        rows = sorted(csv.DictReader(open(csv_path)), key=lambda r: int(r["start_us"]))
    except (OSError, KeyError, ValueError):
        return None
    for r in rows:
        if r.get("status") != "200" or r.get("group", "") == "":
            continue
        g, p = r["group"], int(r["prompt_tokens"])
        total += p
        if g in prev:
            bound += (prev[g] - 1) // block * block
        prev[g] = p + (max(int(r["completion_tokens"] or 0), 0) if server else 0)
        if g in last:
            follow += 1
            moved += last[g] != r["backend"]
        last[g] = r["backend"]
    if not total or not follow:
        return None
    return {"bound": bound / total, "moved": moved, "follow_ups": follow}


def workload_table(title, res, rate, duration):
    lines = ["%s; open loop %g req/s for %g s (model time)" % (title, rate, duration * SCALE),
             "%-19s %8s %7s %9s %9s %7s %12s %8s %8s %8s %11s" % (
                 "strategy", "requests", "KV hit", "P50 TTFT", "P90 TTFT", "req/s",
                 "inst. share", "P50 vs R", "P90 vs R", "req/s vs R", "gen CPU/lag")]
    base = res.get("random")
    for s, r in res.items():
        t = r["ttft_ms"]
        d = ("%+7.0f%% %+7.0f%% %+9.1f%%" % (pct(t["p50"], base["ttft_ms"]["p50"]),
                                               pct(t["p90"], base["ttft_ms"]["p90"]),
                                               pct(r["req_per_s"], base["req_per_s"]))
             if base and s != "random" else "%8s %8s %10s" % ("", "", ""))
        lines.append("%-19s %8d %7.2f %7.0fms %7.0fms %7.2f %5.1f-%4.1f%% %s %4.0f%%/%.0fms" % (
            LABELS[s], r["ok"], r["kv_hit_rate"], t["p50"], t["p90"], r["req_per_s"],
            r["share_min_pct"], r["share_max_pct"], d, r["gen_cpu_pct"],
            r["gen_max_timer_lag_ms"]))
        if r["errors"]:
            lines.append("%19s %d requests failed" % ("", r["errors"]))
    conv = {s: r.get("conversations") for s, r in res.items() if r.get("conversations")}
    if conv:
        any_s = next(iter(conv.values()))
        # Without a block shared across conversations, the hit rate cannot
        # pass the bound; with one (agentic) it can, so it is not printed.
        bound = ("hit-rate bound %.2f (every follow-up turn finds its previous prompt%s "
                 "cached); " % (any_s["bound"], " and reply" if any_s.get("server") else "")
                 ) if not any_s.get("shared") else ""
        lines.append("  conversations: %sfollow-up turns that changed instance, of %d:" % (
            bound, any_s["follow_ups"]))
        lines.append("  " + ", ".join("%s %d" % (LABELS[s], c["moved"]) for s, c in conv.items()))
    return lines


def bench_workloads(opts, out):
    results, lines = {}, []
    for key, title, args, rate, dur, warm, plen in WORKLOADS:
        if key not in opts.workloads:
            continue
        res = {}
        for s in opts.strategies:
            print("  workload %s, %s ..." % (key, s), flush=True)
            res[s] = runs.run(opts.build, out, "%s-%s" % (key, s), s, args, rate,
                              dur * opts.time_factor, warm, prefix_length=plen)
            if res[s] and set(args) & set(runs.CONV_WORKLOADS):
                server = runs.server_history(args)
                res[s]["conversations"] = conversation_stats(
                    os.path.join(out, "%s-%s.csv" % (key, s)), server)
                if res[s]["conversations"]:
                    res[s]["conversations"]["shared"] = "agentic" in args
                    res[s]["conversations"]["server"] = server
        results[key] = res
        lines += workload_table(title, res, rate, dur * opts.time_factor) + [""]
        plots.ttft_cdf(out, key, title, res)
        plots.shares(out, key, title, res)
    return results, lines


def gateway_decisions(rt):
    """{decision: requests} from the gateway's prefixgate_requests_total."""
    d = {}
    for k, v in fleet.metric_family(fleet.get(rt.admin, "/metrics"),
                                    "prefixgate_requests_total").items():
        if 'decision="' in k:
            dec = k.split('decision="', 1)[1].split('"', 1)[0]
            d[dec] = d.get(dec, 0) + v
    return d


def bench_hot(opts, out):
    """ConcurrencyThreshold on a hot prefix. Instances run at most 16
    sequences (--max-num-seqs): the hot instance saturates when it alone
    takes the hot document's 50%."""
    res = {}
    for name, strat, thr in (("random", "random", None), ("pa_t10", "pa_t10", 10),
                             ("pa_t1024", "pa_t1024", 1024)) + tuple(
                                 (s, s, None) for s in runs.CA_STRATEGIES):
        if not runs.supported(opts.build, strat):
            continue
        print("  hot prefix, %s ..." % LABELS[name], flush=True)
        res[name] = runs.run(opts.build, out, "hot-" + name, strat, HOT, 24,
                             30 * opts.time_factor, 12000, inst_args=["--max-num-seqs", "16"],
                             threshold=thr, sample=True)
    lines = ["Hot prefix: document 0 takes 50%% of 24 req/s, 64 output tokens, instances "
             "run at most 16 sequences; %g s (model time)" % (30 * opts.time_factor * SCALE),
             "%-21s %7s %9s %9s %9s %12s %18s" % ("strategy", "KV hit", "P50 TTFT", "P90 TTFT",
                                                 "P99 TTFT", "inst. share",
                                                 "peak in-flight max")]
    for name, r in res.items():
        t = r["ttft_ms"]
        peak = r.get("in_flight_peak", {})
        lines.append("%-21s %7.2f %7.0fms %7.0fms %7.0fms %5.1f-%4.1f%% %18s" % (
            LABELS[name], r["kv_hit_rate"], t["p50"], t["p90"], t["p99"], r["share_min_pct"],
            r["share_max_pct"], max(peak.values()) if peak else "n/a"))
    plots.hot_inflight(out, res)
    for r in res.values():
        r.pop("in_flight_samples", None)
    return res, lines + [""]


def scale_rows(csv_path):
    """A scale run's pgload records, in order of arrival."""
    return sorted(fleet.read_csv(csv_path), key=lambda r: int(r["start_us"]))


def hit_series(rows, bin_s=1.0):
    """[(bin start in model s, cached/prompt tokens in that bin)], by arrival."""
    bins = {}
    for row in rows:
        if row["error"] or not row["prompt_tokens"] or int(row["prompt_tokens"]) <= 0:
            continue
        b = int(int(row["start_us"]) / 1e6 / bin_s)
        c, p = bins.get(b, (0, 0))
        bins[b] = (c + int(row["cached_tokens"]), p + int(row["prompt_tokens"]))
    return [(b * bin_s * SCALE, c / p) for b, (c, p) in sorted(bins.items()) if p]


def dip_recovery(series, t_event, baseline_window, tol=0.03, t_end=None):
    """Baseline (mean hit rate before the event), the lowest 3-bin moving
    average after it (up to t_end: the next event), and the model seconds
    until the moving average is back within tol of the baseline (None: not
    within the window). Also the lowest moving average in the baseline
    window: the noise floor of these bins."""
    before = [h for t, h in series if t_event - baseline_window <= t < t_event]
    base = sum(before) / len(before) if before else 0.0
    after = [(t, h) for t, h in series if t >= t_event and (t_end is None or t < t_end)]
    ma = [(after[i][0], sum(h for _, h in after[i:i + 3]) / 3) for i in range(len(after) - 2)]
    low = min((h for _, h in ma), default=base)
    rec = None
    hit_low = False
    for t, h in ma:
        if h <= low + 1e-9:
            hit_low = True
        if hit_low and h >= base - tol:
            rec = t - t_event
            break
    return base, low, rec


def new_instance_share(rows, t_add, window, since=0.0):
    """Share of the requests (rows: scale_rows) arriving from since to
    window model s after t_add that went to an instance no request went to
    before t_add."""
    before, n, new = set(), 0, 0
    for row in rows:
        t = int(row["start_us"]) / 1e6 * SCALE
        if t < t_add:
            before.add(row["backend"])
        elif t_add + since <= t < t_add + window and not row["error"]:
            n += 1
            new += row["backend"] not in before
    return new / n if n else 0.0


# The scale event's workloads: (a), whose documents are all cached somewhere
# before the event, and (d), where conversations keep starting.
SCALE_WORKLOADS = ("a", "d")


def scale_workloads():
    """key -> (pgload args, model req/s, warm-up requests, PrefixLength)."""
    return {w[0]: (w[2], w[3], w[5], w[6]) for w in WORKLOADS if w[0] in SCALE_WORKLOADS}


def bench_scale(opts, out):
    f = opts.time_factor
    t_add, t_del, dur = 20 * f, 60 * f, 100 * f
    res = {}

    def add(inst, rt):
        rt.add_backend(inst.add())

    def remove(inst, rt):
        rt.remove_backend(inst.addrs()[0])

    lines, results = [], {}
    for key, (args, rate, warm, plen) in scale_workloads().items():
        if key not in opts.scale_workloads:
            continue
        res = {}
        tag = "" if key == "a" else "-" + key  # (a)'s files keep their old names
        for s in runs.available(opts.build, ["random", "prefix_aware"] + runs.CA_STRATEGIES)[0]:
            print("  scale event (%s), %s ..." % (key, LABELS[s]), flush=True)
            name = "scale%s-%s" % (tag, s)
            r = runs.run(opts.build, out, name, s, args, rate, dur, warm,
                         prefix_length=plen, events=[(t_add, add), (t_del, remove)])
            rows = scale_rows(r["csv"])
            ser = hit_series(rows)
            r["series"] = ser
            r["add"] = dip_recovery(ser, t_add * SCALE, 10 * f * SCALE, t_end=t_del * SCALE)
            r["remove"] = dip_recovery(ser, t_del * SCALE, 10 * f * SCALE)
            r["new_share"] = new_instance_share(rows, t_add * SCALE, 60)
            r["new_share_end"] = new_instance_share(rows, t_add * SCALE, 60, since=45)
            res[s] = r
        lines += ["Scale event, workload (%s), %g req/s: 8th instance added at %g s, instance "
                  "0 removed at %g s (model time; hit rate per %g model s, 3-bin moving "
                  "average)" % (key, rate, t_add * SCALE, t_del * SCALE, SCALE),
                  "%-14s %-8s %9s %9s %10s %18s" % ("strategy", "event", "hit before",
                                                    "lowest", "dip", "recovered (model s)")]
        for s, r in res.items():
            for ev in ("add", "remove"):
                base, low, rec = r[ev]
                lines.append("%-14s %-8s %9.2f %9.2f %10.2f %18s" % (
                    LABELS[s], ev, base, low, base - low,
                    "%.0f" % rec if rec is not None else "not in window"))
        lines.append("  the new instance's share of requests in the 60 model s after it "
                     "joined (and in the last 15 of them): " +
                     ", ".join("%s %.1f%% (%.1f%%)" % (LABELS[s], 100 * r["new_share"],
                                                       100 * r["new_share_end"])
                               for s, r in res.items()))
        lines.append("")
        plots.scale_series(out, res, t_add * SCALE, t_del * SCALE,
                           suffix=tag)
        results[key] = res
    return results, lines


def bench_two_gateways(opts, out):
    """Workloads (b) and (d) through two gateways that share no state. The
    one-gateway figures are the workloads part's when it ran in this bench."""
    strategies = runs.available(opts.build, ["prefix_aware"] + runs.CA_STRATEGIES)[0]
    one = opts.measured.get("workloads", {})
    res, lines = {}, []
    for key, title, args, rate, dur, warm, plen in WORKLOADS:
        if key not in TWO_GATEWAYS or key not in opts.workloads:
            continue
        res[key] = {}
        lines += ["Two gateways, no shared state: %s; open loop %g req/s for %g s (model "
                  "time), each request to one of the gateways at random" % (
                      title, rate, dur * opts.time_factor * SCALE),
                  "%-14s %8s %8s %7s %9s %9s %12s %12s %10s" % (
                      "strategy", "gateways", "requests", "KV hit", "P50 TTFT", "P90 TTFT",
                      "inst. share", "gw split", "hit vs 1")]
        for s in strategies:
            r1 = one.get(key, {}).get(s)
            if r1 is None:
                print("  two gateways: workload %s, %s, one gateway ..." % (key, LABELS[s]),
                      flush=True)
                r1 = runs.run(opts.build, out, "%s-%s" % (key, s), s, args, rate,
                              dur * opts.time_factor, warm, prefix_length=plen)
            print("  two gateways: workload %s, %s, two gateways ..." % (key, LABELS[s]),
                  flush=True)
            r2 = runs.run(opts.build, out, "%s-%s-2gw" % (key, s), s, args, rate,
                          dur * opts.time_factor, warm, prefix_length=plen, gateways=2)
            res[key][s] = {"one": r1, "two": r2}
            for n, r in ((1, r1), (2, r2)):
                t = r["ttft_ms"]
                tg = sorted(r.get("targets", {}).values())
                tot = float(sum(tg)) or 1.0
                split = "-".join("%.0f" % (100.0 * v / tot) for v in tg) + "%" if n > 1 else ""
                lines.append("%-14s %8d %8d %7.2f %7.0fms %7.0fms %5.1f-%4.1f%% %12s %10s" % (
                    LABELS[s], n, r["ok"], r["kv_hit_rate"], t["p50"], t["p90"],
                    r["share_min_pct"], r["share_max_pct"], split,
                    "%+.2f" % (r2["kv_hit_rate"] - r1["kv_hit_rate"]) if n > 1 else ""))
                if r["errors"]:
                    lines.append("%14s %d requests failed" % ("", r["errors"]))
        lines.append("")
    return res, lines


# make bench runs every part
PARTS = ("workloads", "hot", "scale", "twogw", "fleet", "trace", "flow", "pd", "real", "learn",
         "overhead", "quota")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--out", help="results directory (default build/bench/<date>)")
    ap.add_argument("--results", metavar="DIR",
                    help="also write each part's summary to DIR/PART.txt, with the command "
                    "that made it (make bench: doc/results)")
    ap.add_argument("--parts", "--only", dest="parts",
                    default=",".join(PARTS),
                    help="parts to run, comma-separated, of %s (default: all)" % ",".join(PARTS))
    ap.add_argument("--workloads", default="a,b,c,d,e")
    ap.add_argument("--scale-workloads", default=",".join(SCALE_WORKLOADS),
                    help="scale: the workloads of the scale event, of %s (default %%(default)s)"
                    % ",".join(SCALE_WORKLOADS))
    ap.add_argument("--strategies", default=",".join(runs.STRATEGIES))
    ap.add_argument("--time-factor", type=float, default=1.0,
                    help="multiply every run's duration (0.2: a quick smoke run)")
    ap.add_argument("--overhead-rounds", type=int, default=overhead.ROUNDS,
                    help="overhead: rounds, of which the median is reported (default %(default)s)")
    ap.add_argument("--overhead-rate", type=float, default=overhead.RATE,
                    help="overhead: req/s of the CPU-per-request runs (default %(default)s)")
    ap.add_argument("--gateway-bin", help="overhead: the prefixgate binary to measure "
                    "(default BUILD/prefixgate; the other tools still come from BUILD)")
    ap.add_argument("--compare-bin", action="append", default=[], metavar="LABEL=PATH",
                    help="overhead: another prefixgate binary measured in the same rounds, as "
                    "paths LABEL (auto) and LABEL-copy, with its figures against this build's; "
                    "may be repeated")
    quota.add_args(ap)
    opts = ap.parse_args()
    quota.check(ap, opts)
    opts.compare_bin = fleet.compare_bins(ap, opts.compare_bin, (
        "direct", "floor", "prefixgate", "pg-copy", "haproxy", "nginx"))
    if opts.gateway_bin is not None and not os.access(opts.gateway_bin, os.X_OK):
        ap.error("no executable %s" % opts.gateway_bin)
    for part in opts.parts.split(","):
        if part not in PARTS:
            ap.error("--only/--parts: no part %s (have %s)" % (part, ",".join(PARTS)))
    if opts.overhead_rounds < 1 or opts.overhead_rate <= 0:
        ap.error("--overhead-rounds must be >= 1 and --overhead-rate > 0")
    opts.workloads = opts.workloads.split(",")
    opts.scale_workloads = opts.scale_workloads.split(",")
    if set(opts.scale_workloads) - set(scale_workloads()):
        ap.error("--scale-workloads: of %s" % ",".join(scale_workloads()))
    opts.strategies, note = runs.available(opts.build, opts.strategies.split(","))
    opts.measured = {}  # each part's results so far (opts.results: --results DIR)
    parts = opts.parts.split(",")
    for tool in ("haproxy", "nginx", "gnuplot"):
        if not shutil.which(tool):
            print("bench: %s is missing (make bench installs it: tools/deps.sh haproxy "
                  "nginx-light gnuplot-nox)" % tool)
            return 1
    stamp = time.strftime("%Y-%m-%d-%H%M%S")
    out = opts.out or os.path.join(opts.build, "bench", stamp)
    os.makedirs(out, exist_ok=True)
    t0 = time.monotonic()
    print("prefixgate bench: results in %s" % out, flush=True)
    scale = ("instances at time scale %g (latencies and rates in model time)" % SCALE
             if parts != ["overhead"] else "overhead only (real time)")
    results, lines = {}, ["prefixgate bench, %s, %s, %d CPUs; %s" % (
        time.strftime("%Y-%m-%d %H:%M"), os.uname().nodename, os.cpu_count(), scale), ""]
    if note:
        print("bench: " + note, flush=True)
        lines += [note, ""]
    results = opts.measured
    failed = []
    for part, fn in (("workloads", bench_workloads), ("hot", bench_hot),
                     ("scale", bench_scale), ("twogw", bench_two_gateways),
                     ("fleet", lambda o, d: fleetbench.bench_fleet(o, d, WORKLOADS, HOT)),
                     ("trace", trace.from_bench), ("flow", flow.from_bench),
                     ("pd", pd.from_bench), ("real", real.from_bench),
                     ("learn", learn.from_bench),
                     ("overhead", bench_overhead), ("quota", quota.from_bench)):
        if part not in parts:
            continue
        try:
            results[part], ls = fn(opts, out)
            lines += ls
            if opts.results:
                kept.publish(opts.results, part, "\n".join(ls), part_command(part))
        except Exception as e:  # one part failing must not lose the others
            failed.append(part)
            lines += ["%s: FAILED: %r (logs in %s)" % (part, e, os.path.join(out, "logs")), ""]
        save(out, lines, results)  # what is measured so far survives a crash
    lines.append("bench took %.0f s" % (time.monotonic() - t0))
    text = save(out, lines, results)
    print()
    print(text, end="")
    print("raw results, tables and plots: %s" % out)
    return 1 if failed or "requests failed" in text else 0


def part_command(part):
    """The command that runs one part as this run ran it: this command
    line with its --parts and its own --out/--results left out."""
    args, skip = [], False
    for a in sys.argv[1:]:
        if skip:
            skip = False
        elif a in ("--parts", "--only", "--out", "--results"):
            skip = True
        elif not a.startswith(("--parts=", "--only=", "--out=", "--results=")):
            args.append(a)
    return " ".join(["python3 tools/bench/bench.py"] + args + ["--parts", part])


def save(out, lines, results):
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "results.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    return text


if __name__ == "__main__":
    sys.exit(main())
