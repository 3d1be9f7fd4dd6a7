"""The trace part's report (trace.py): a table per load with tracesim's
figures beside the real ones, the unequal fleet's shares, the slowed
instance's share by window, the gateway fleet, the targets as PASS/MISS
lines, and the TTFT-against-load plots. Pure but for reading the runs'
CSV files and drawing the plots: the runs are trace.py's."""
import shutil

import fleet
import plots
import tracerun
from tracerun import (AFTER, BASE_LOAD, BEFORE, FAST, HETERO_LOADS, LABELS, REFS, key,
                      SLOW_LOAD, WINDOW_S)

# the targets (trace.py's docstring)
TARGET_LOADS = (0.7, 0.9, 1.1)
VS_REF = 1.1  # CACHE_AWARE's mean and p99 TTFT <= this x the better reference's
VS_PA_LOAD, VS_PA = 0.9, 0.3  # at this load, its mean <= this x PREFIX_AWARE's
HIT_KEEP = 0.9  # its hit rate at every load >= this x its hit rate at BASE_LOAD
FAST_SHARE = 1.7  # fast instances' token share >= this x the fleet mean
SLOW_WITHIN_S = 60
FLEET_VS_ONE = 1.1


def pct(v):
    return "%.1f" % (100 * v)


def share_range(shares):
    return "%4s-%4s%%" % (pct(min(shares)), pct(max(shares))) if shares else "n/a"


def load_table(res, load, routers):
    runs_, sims = res["runs"], res["sim"].get("runs", {})
    rows = [(r, runs_.get(key(r, load)), sims.get(key(r, load))) for r in routers]
    rows = [x for x in rows if x[1] is not None or x[2] is not None]
    if not rows:
        return []
    lines = ["load %g: %s" % (load, rate_note(res, load)),
             "%-19s %6s %4s %7s %7s %7s %7s %6s %10s %11s %11s | %7s %7s %6s" % (
                 "router", "ok", "err", "mean", "p50", "p90", "p99", "hit", "waiting",
                 "req share", "tok share", "sim mean", "p99", "hit")]
    for r, x, s in rows:
        sim = ("%7.0f %7.0f %6.3f" % (s["ttft_ms"]["mean"], s["ttft_ms"]["p99"], s["hit_rate"])
               if s else "%7s %7s %6s" % ("-", "-", "-"))
        if x is None:
            lines.append("%-19s %s | %s" % (LABELS[r], "%92s" % "(failed or not run)", sim))
            continue
        t = x["ttft_ms"]
        wait = ("%4.1f/%-5.0f" % (x["waiting_mean"], x["waiting_max"])
                if x.get("waiting_mean") is not None else "n/a")
        lines.append("%-19s %6d %4d %7.0f %7.0f %7.0f %7.0f %6.3f %10s %11s %11s | %s" % (
            LABELS[r], x["ok"], x["errors"], t["mean"], t["p50"], t["p90"], t["p99"],
            x["hit_rate"], wait, share_range(x["share_requests"]),
            share_range(x["share_tokens"]), sim))
        if x["errors"]:
            lines.append("%19s %d requests failed" % ("", x["errors"]))
    lines += ref_note([x for r, x, _ in rows if r in REFS and x])
    return lines + [""]


def ref_note(xs):
    """What the reference router's own delay adds to its rows."""
    if not xs:
        return []
    n = xs[0]["ref"]["processes"]
    return ["  REF rows include refrouter.py's own delay (Python, %d process%s): mean decision "
            "%s model ms; the simulated columns have none" % (
                n, "es" if n > 1 else "", ", ".join(
                    "%.0f (%s at %g)" % (x["ref"]["mean_decision_ms"] * x["scale"],
                                         LABELS[x["router"]], x["load"]) for x in xs))]


def rate_note(res, load):
    n = res["config"]["requests"]
    k = res["config"]["time_scale"]
    span = tracerun.scheduled_s(n - 1, load, tracerun.fleet_tps(k))
    return ("%d requests over %.0f model s (%.1f req/s), %.0f s of wall time each; TTFT in "
            "model ms, waiting: requests an instance had waiting (mean/max), shares: min-max "
            "over the 8 instances" % (n, span * k, n / (span * k) if span else 0, span))


def fast_ratios(shares):
    """(the fast instances' mean token share / the fleet mean, / the others' mean)."""
    if not shares:
        return None, None
    fast = [shares[i] for i in range(len(shares)) if i in FAST]
    other = [shares[i] for i in range(len(shares)) if i not in FAST]
    fm = sum(fast) / len(fast)
    om = sum(other) / len(other)
    return fm / (1.0 / len(shares)), (fm / om if om else float("inf"))


def hetero_table(res):
    h, sims = res["hetero"], res["sim"].get("hetero", {})
    if not h:
        return []
    lines = ["Unequal fleet: instances 1 and 2 at --speed 2, C = 10 x 36,600 x K; each "
             "instance's share of prompt tokens (%); fast: the mean of instances 1-2's share "
             "against the fleet mean (1/8) and against the others' mean; in proportion to "
             "speed: 1.60 and 2.00",
             "%-19s %5s %s %9s %9s %7s %7s | %9s %9s" % (
                 "router", "load", " ".join("%5s" % ("i%d" % (i + 1)) for i in range(8)),
                 "fast/mean", "/others", "mean", "p99", "sim /mean", "/others")]
    for k, x in h.items():
        s = sims.get(k)
        sr = fast_ratios(s["share_tokens"]) if s else (None, None)
        sim = "%9s %9s" % tuple("%.2f" % v if v is not None else "-" for v in sr)
        router, load = k.split("@")
        if x is None:
            lines.append("%-19s %5s %s | %s" % (LABELS[router], load, "(failed)", sim))
            continue
        fr = fast_ratios(x["share_tokens"])
        lines.append("%-19s %5s %s %9.2f %9.2f %7.0f %7.0f | %s" % (
            LABELS[router], load, " ".join("%5s" % pct(v) for v in x["share_tokens"]),
            fr[0], fr[1], x["ttft_ms"]["mean"], x["ttft_ms"]["p99"], sim))
        if x["errors"]:
            lines.append("%19s %d requests failed" % ("", x["errors"]))
    lines += ref_note([x for k, x in h.items() if x and x["router"] in REFS])
    return lines + [""]


def windows(x):
    """The slowed instance's share of requests (and prompt tokens) in each
    window of WINDOW_S model s around the slowdown, from pgload's CSV:
    {"before": share in the BEFORE windows, "windows": [(k, requests,
    share, token share)], "first_below": the first k >= 0 whose share is
    below "before", or None}."""
    sl = x.get("slow") or {}
    if sl.get("at_s") is None:
        return None
    scale, inst = x["scale"], "i%d" % (sl["instance"] - 1)
    at = sl["at_s"] * scale
    bins = {}
    for row in fleet.read_csv(x["csv"]):
        if row["status"] != "200" or not row["backend"]:
            continue
        k = int((int(row["start_us"]) / 1e6 * scale - at) // WINDOW_S)
        if -BEFORE <= k < AFTER:
            b = bins.setdefault(k, [0, 0, 0, 0])  # requests, its, tokens, its tokens
            p = int(row["prompt_tokens"] or 0)
            mine = row["backend"] == inst
            b[0] += 1
            b[1] += mine
            b[2] += p
            b[3] += p * mine
    pre = [sum(b[i] for k, b in bins.items() if k < 0) for i in range(2)]
    before = pre[1] / pre[0] if pre[0] else None
    out = [(k, bins[k][0], bins[k][1] / bins[k][0], bins[k][3] / bins[k][2] if bins[k][2] else 0)
           for k in sorted(bins)]
    first = next((k for k, n, s, _ in out if k >= 0 and before is not None and s < before), None)
    return {"before": before, "windows": out, "first_below": first}


def slow_table(res):
    sl, sims = res["slow"], res["sim"].get("slow", {})
    if not sl:
        return []
    lines = []
    for k, x in sl.items():
        router = k.split("@")[0]
        if x is None:
            lines.append("%s: slowdown run failed" % LABELS[router])
            continue
        w = windows(x)
        x["windows"] = w
        s = x["slow"]
        if not lines:
            lines += ["Slowdown at load %g: instance %d set to %gx its speed once %g of the "
                      "requests were sent; its share by %d model s window (| marks the "
                      "slowdown; the first window after whose share of requests is below its "
                      "share in the %d s before)" % (x["load"], s["instance"], s["factor"],
                                                     s["fraction"], WINDOW_S,
                                                     WINDOW_S * BEFORE)]
        if w is None:
            lines.append("%-19s no slowdown: %s" % (LABELS[router], s.get("error")))
            continue
        first = w["first_below"]
        lines.append("%-19s at %.0f model s; share before %s%%; first window below: %s" % (
            LABELS[router], s["at_s"] * x["scale"],
            pct(w["before"]) if w["before"] is not None else "n/a",
            "+%d s" % (first * WINDOW_S) if first is not None else "none in the run"))
        lines.append("  %-17s %s" % ("requests %", row(w["windows"], 2)))
        lines.append("  %-17s %s" % ("prompt tokens %", row(w["windows"], 3)))
        sim = sims.get(k)
        if sim and sim.get("slow"):
            ws = [(i + sim["slow"]["first_window"], 1, None, v)
                  for i, v in enumerate(sim["slow"]["share_tokens"])]
            ws = [w for w in ws if -BEFORE <= w[0] < AFTER]
            lines.append("  %-17s %s" % ("simulated tok %", row(ws, 3)))
    return lines + [""]


def row(ws, col):
    out = []
    for w in ws:
        out.append(("| " if w[0] == 0 else "") + "%4s" % pct(w[col]))
    return " ".join(out)


def fleet_table(res):
    f, sims = res["fleet"], res["sim"]
    if not f:
        return []
    lines = ["Gateway fleet: %s; CACHE_AWARE at 0.9, each request to one gateway at random"
             % "4 gateways sharing state over NATS against 1",
             "%-9s %6s %4s %7s %7s %7s %6s %20s | %8s %7s %6s" % (
                 "gateways", "ok", "err", "mean", "p50", "p99", "hit", "gateway split",
                 "sim mean", "p99", "hit")]
    for k, x4 in f.items():
        x1 = res["runs"].get(k)
        for n, x, s in ((1, x1, sims.get("runs", {}).get(k)),
                        (4, x4, sims.get("fleet", {}).get(k))):
            sim = ("%8.0f %7.0f %6.3f" % (s["ttft_ms"]["mean"], s["ttft_ms"]["p99"],
                                          s["hit_rate"]) if s else "%8s %7s %6s" % ("-",) * 3)
            if x is None:
                lines.append("%-9d %-71s | %s" % (n, "(failed or not run)", sim))
                continue
            tg = sorted(x.get("targets", {}).values())
            tot = float(sum(tg)) or 1.0
            lines.append("%-9d %6d %4d %7.0f %7.0f %7.0f %6.3f %20s | %s" % (
                n, x["ok"], x["errors"], x["ttft_ms"]["mean"], x["ttft_ms"]["p50"],
                x["ttft_ms"]["p99"], x["hit_rate"],
                "-".join("%.0f" % (100 * v / tot) for v in tg) + "%" if n > 1 else "", sim))
            if x["errors"]:
                lines.append("%9s %d requests failed" % ("", x["errors"]))
    return lines + [""]


def verdict(ok, text):
    return "%s  %s" % ("PASS" if ok else "MISS", text)


def sim_vs_ref(S, load, fig):
    """The same comparison in tracesim (no router delays), as a suffix."""
    ca = S.get(key("cache_aware", load))
    refs = [S[key(r, load)] for r in REFS if S.get(key(r, load))]
    if not ca or not refs:
        return ""
    b = min(x["ttft_ms"][fig] for x in refs)
    return "; simulated: %.0f against %.0f (%.2fx)" % (ca["ttft_ms"][fig], b,
                                                        ca["ttft_ms"][fig] / b if b else 0)


def targets(res):
    R, S, out = res["runs"], res["sim"].get("runs", {}), []
    for load in TARGET_LOADS:
        ca = R.get(key("cache_aware", load))
        refs = [(r, R.get(key(r, load))) for r in REFS if R.get(key(r, load))]
        if not ca or not refs:
            continue
        for fig in ("mean", "p99"):
            name, best = min(refs, key=lambda x: x[1]["ttft_ms"][fig])
            v, b = ca["ttft_ms"][fig], best["ttft_ms"][fig]
            out.append(verdict(v <= VS_REF * b, "load %g: CACHE_AWARE %s TTFT %.0f ms <= %g x "
                               "the better reference's (%s, %.0f ms, its own delay %.0f) = "
                               "%.0f ms%s" % (load, fig, v, VS_REF, LABELS[name], b,
                                              best["ref"]["mean_decision_ms"] * best["scale"],
                                              VS_REF * b, sim_vs_ref(S, load, fig))))
    ca, pa = R.get(key("cache_aware", VS_PA_LOAD)), R.get(key("prefix_aware", VS_PA_LOAD))
    if ca and pa:
        v, b = ca["ttft_ms"]["mean"], pa["ttft_ms"]["mean"]
        out.append(verdict(v <= VS_PA * b, "load %g: CACHE_AWARE mean TTFT %.0f ms <= %g x "
                           "PREFIX_AWARE's %.0f ms = %.0f ms (%.2fx)" % (
                               VS_PA_LOAD, v, VS_PA, b, VS_PA * b, v / b if b else 0)))
    base = R.get(key("cache_aware", BASE_LOAD))
    if base:
        for load in sorted(l for l in (float(k.split("@")[1]) for k in R
                                       if k.startswith("cache_aware@")) if l != BASE_LOAD):
            x = R.get(key("cache_aware", load))
            if x:
                out.append(verdict(x["hit_rate"] >= HIT_KEEP * base["hit_rate"],
                                   "load %g: CACHE_AWARE hit rate %.3f >= %g x its %.3f at "
                                   "%g = %.3f" % (load, x["hit_rate"], HIT_KEEP,
                                                  base["hit_rate"], BASE_LOAD,
                                                  HIT_KEEP * base["hit_rate"])))
    for load in HETERO_LOADS:
        x = res["hetero"].get(key("cache_aware", load))
        if x:
            fm, fo = fast_ratios(x["share_tokens"])
            out.append(verdict(fm >= FAST_SHARE, "unequal fleet, load %g: CACHE_AWARE's fast "
                               "instances' token share %.2f x the fleet mean >= %g (%.2f x the "
                               "others' mean; in proportion to speed: 1.60 and 2.00)" % (
                                   load, fm, FAST_SHARE, fo)))
    x = res["slow"].get(key("cache_aware", SLOW_LOAD))
    if x and x.get("windows"):
        first = x["windows"]["first_below"]
        out.append(verdict(first is not None and first * WINDOW_S < SLOW_WITHIN_S,
                           "slowdown: CACHE_AWARE sends the slowed instance less than before "
                           "(%s%%) within %d s: first window below %s" % (
                               pct(x["windows"]["before"]), SLOW_WITHIN_S,
                               "+%d s" % (first * WINDOW_S) if first is not None else "none")))
    for k, x4 in res["fleet"].items():
        x1 = R.get(k)
        if x1 and x4:
            v, b = x4["ttft_ms"]["mean"], x1["ttft_ms"]["mean"]
            out.append(verdict(v <= FLEET_VS_ONE * b, "4 gateways over NATS, load 0.9: mean "
                               "TTFT %.0f ms <= %g x one gateway's %.0f ms = %.0f ms (p99 %.0f "
                               "against %.0f; hit %.3f against %.3f)" % (
                                   v, FLEET_VS_ONE, b, FLEET_VS_ONE * b, x4["ttft_ms"]["p99"],
                                   x1["ttft_ms"]["p99"], x4["hit_rate"], x1["hit_rate"])))
    return out


def plot(res, out, notes):
    if not shutil.which("gnuplot"):
        notes.append("plots: skipped: gnuplot is missing (tools/deps.sh gnuplot-nox)")
        return
    for fig in ("mean", "p99"):
        series = {}
        for k, x in res["runs"].items():
            if x is not None:
                router, load = k.split("@")
                series.setdefault(LABELS[router], []).append((float(load), x["ttft_ms"][fig]))
        series = {s: sorted(p) for s, p in series.items()}
        plots.curves(out, "trace-ttft-" + fig, "Mooncake trace, 8 instances: %s TTFT against "
                     "load" % fig, "load (of the fleet prefill capacity)",
                     [("%s TTFT (model ms)" % fig, series, True)], logx=False)


def report(res, out, notes):
    """The report's lines; the plots drawn into out, what was skipped added to notes."""
    c = res["config"]
    loads = sorted({float(k.split("@")[1]) for k in list(res["runs"]) +
                    list(res["sim"].get("runs", {}))})
    lines = ["Mooncake trace (%d requests of 12,031) on 8 mockllm instances at time scale %g "
             "(figures in model time); each instance caches %s tokens: together a third of "
             "the trace's distinct blocks; load RHO: the trace's pace scaled so the prefill "
             "work an infinite cache would leave is RHO x the fleet's capacity (8 x 36,600 "
             "tokens/s); \"sim\": tracesim, the same fleet and routers simulated" % (
                 c["requests"], c["time_scale"], "{:,}".format(c["kv_capacity_tokens"])), ""]
    for load in loads:
        lines += load_table(res, load, tracerun.ROUTERS)
    lines += hetero_table(res) + slow_table(res) + fleet_table(res)
    t = targets(res)
    if t:
        lines += ["Targets:"] + t + [""]
    plot(res, out, notes)
    lines += notes
    if "wall_s" in res:
        lines.append("trace part took %.0f s" % res["wall_s"])
    return lines
