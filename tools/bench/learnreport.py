"""The learn part's report (learn.py): a table per section, then issue 36's
targets, one row each: what was measured, the target, the ratio of one to
the other and met/MISSED; under a MISSED row, the figures that show its
cause. Pure: the runs are learn.py's, their results its JSON's."""
import os

from flowreport import B_VS_ALONE, CRIT_VS_ALONE, TPUT_VS_OFF, f0
from tracerun import LABELS

TRACE_VS_REF = 1.1  # CACHE_AWARE's mean and p99 TTFT <= this x the better reference's
QUEUE_VS_REF = 1.5  # its busiest instance's queue <= this x the reference's
DL_MS = 50  # the deadline, learn.py's
DEADLINE_HALF = 0.5  # at least this share of 200s where the instances can meet it
LOSS_SHED = ("sheddable",)  # a 429 to these is no loss
ROW = "%-6s %-4s %-9s %-36s %10s %12s %6s %-6s %s"


def target(where, what, measured, bound, ok, r=None, note="", cause=""):
    """One target's row: where (section, speed, mode), what, the measured
    figure and the target (text), r (measured over the bound, or None),
    met/MISSED, a note; for a MISSED target, its cause below it."""
    lines = [(ROW % (where + (what, measured, bound, "-" if r is None else "%.2f" % r,
                              "met" if ok else "MISSED", note))).rstrip()]
    if cause and not ok:
        lines.append("%15s why: %s" % ("", cause))
    return {"ok": ok, "lines": lines}


def target_lines(rows):
    """The targets' table, rows: target()'s."""
    met = sum(1 for r in rows if r["ok"])
    return ["Targets (issue 36): %d met, %d MISSED" % (met, len(rows) - met),
            (ROW % ("", "S", "mode", "target", "measured", "target", "ratio", "", "")).rstrip(),
            ] + [line for r in rows for line in r["lines"]] + [
        "  (ratio: measured over the target's bound, at most 1.00 meeting an upper bound and "
        "at least 1.00 a lower one; S: the instances' speed, x the gateway's defaults; trace "
        "rows: load L)", ""]


def split(k):
    return k.split("|")


def tenant(r, name):
    return ((r or {}).get("tenants") or {}).get(name)


def p99(r, name):
    t = tenant(r, name)
    return t["ttft_ms"]["p99"] if t and t["ok"] else None


def lost(r):
    """Requests of a run not answered 200, less a sheddable request's 429."""
    n = 0
    for cfg in (r or {}).get("tenants_cfg", []):
        t = r["tenants"][cfg["name"]]
        n += t["failed_other"] + (0 if cfg["prio"] in LOSS_SHED else t["n429"])
    return n


def lost_cause(g):
    """Each run's lost requests by tenant and answer (learn.answer())."""
    parts = []
    for k, r in g.items():
        for cfg in (r or {}).get("tenants_cfg", []):
            n = dict(r["tenants"][cfg["name"]].get("not_ok") or {})
            if cfg["prio"] in LOSS_SHED:
                n.pop("429", None)
            if n:
                parts.append("run %s, %s: %s" % (k, cfg["name"], ", ".join(
                    "%s x%d" % kv for kv in sorted(n.items()))))
    return "; ".join(parts)


def gw_wait(r, name):
    a = (((r or {}).get("access") or {}).get("tenants") or {}).get(name) or {}
    return (a.get("wait_ms") or {}).get("p99")


def enqueued(r):
    fe = (r or {}).get("flow_end")
    return fe["pools"][0]["enqueued"] if fe else None


# --- 1. flow ---------------------------------------------------------------------
def flow_table(res):
    F = res["flow"]
    groups = sorted({tuple(split(k)[:2]) for k in F}, key=lambda g: (g[0], float(eval_speed(
        g[1]))))
    if not groups:
        return []
    lines = ["1. Flow control: 8 instances at speed S, tenant B at 0.109 of their prefill "
             "capacity, A at 10x B's rate (1.2x in all), unique chat prompts of S x 2,000 "
             "tokens, 32 output tokens; CACHE_AWARE, --flow-control's defaults; TTFT in wall "
             "ms (non-streamed: the whole answer)",
             "%-9s %-4s %-8s %-9s %5s %5s %4s %4s %6s %6s %6s %7s %6s %6s %7s" % (
                 "mode", "S", "run", "tenant", "reqs", "ok", "429", "lost", "mean", "p50", "p99",
                 "gw p99", "queued", "inst q", "out t/s")]
    for mode, sp in groups:
        for run in ("alone", "on", "off", "classes"):
            r = F.get("|".join((mode, sp, run)))
            if r is None:
                lines.append("%-9s %-4s %-8s (failed: see the notes)" % (mode, sp, run))
                continue
            for cfg in r["tenants_cfg"]:
                t = r["tenants"][cfg["name"]]
                tt = t["ttft_ms"]
                lines.append("%-9s %-4s %-8s %-9s %5d %5d %4d %4d %6s %6s %6s %7s %6s %6s %7.0f" % (
                    mode, sp, run, cfg["name"], t["requests"], t["ok"], t["n429"],
                    t["failed_other"] + (0 if cfg["prio"] in LOSS_SHED else t["n429"]),
                    f0(tt["mean"]), f0(tt["p50"]), f0(tt["p99"]), f0(gw_wait(r, cfg["name"])),
                    f0(enqueued(r)), f0(r["queue"].get("waiting_max")),
                    r["window"]["output_tokens_per_s"]))
        a = F.get("|".join((mode, sp, "alone")))
        if a and a.get("service_ms") is not None:
            lines.append("%-9s %-4s one mean service time (B's prefill alone) %.1f ms" % (
                mode, sp, a["service_ms"]))
    lines += ["  (gw p99: the tenant's wait in the gateway, p99, access log; queued: requests "
              "the gateway queued; inst q: the most requests waiting at one instance, sampled "
              "every 0.25 s; out t/s: output tokens/s in the saturated window, the last four "
              "fifths of the arrivals)", ""]
    return lines


def eval_speed(label):
    return 1 / 3.0 if label == "1/3" else float(label)


def flow_targets(res):
    F, out = res["flow"], []
    groups = sorted({tuple(split(k)[:2]) for k in F}, key=lambda g: (g[0], eval_speed(g[1])))
    for mode, sp in groups:
        g = {run: F.get("|".join((mode, sp, run))) for run in ("alone", "on", "off", "classes")}
        alone, on, off, cl = g["alone"], g["on"], g["off"], g["classes"]
        svc = (alone or {}).get("service_ms")
        where = ("flow", sp, mode)
        b0, b1 = p99(alone, "B"), p99(on, "B")
        if b0 is not None and b1 is not None and svc is not None:
            bound = B_VS_ALONE * b0 + svc
            out.append(target(where, "quiet p99, 10x noisy, <= %gx solo+svc" % B_VS_ALONE,
                              "%.0f ms" % b1, "<= %.0f ms" % bound, b1 <= bound, b1 / bound,
                              "solo %.0f, svc %.0f; %.2fx solo" % (b0, svc, b1 / b0),
                              quiet_cause(on, off, "B")))
        ls = [(k, lost(r)) for k, r in g.items() if r]
        if ls:
            n = sum(v for _, v in ls)
            out.append(target(where, "lost (not 200; sheddable 429s aside)", "%d" % n, "0",
                              n == 0, None, "of %d requests in 4 runs" % sum(
                                  t["requests"] for _, r in g.items() if r
                                  for t in r["tenants"].values()),
                              lost_cause(g)))
        c1 = p99(cl, "critical")
        if b0 is not None and c1 is not None and svc is not None:
            bound = CRIT_VS_ALONE * b0 + svc
            out.append(target(where, "critical p99, sheddable flood, <= %gx" % CRIT_VS_ALONE,
                              "%.0f ms" % c1, "<= %.0f ms" % bound, c1 <= bound, c1 / bound,
                              "%.2fx solo" % (c1 / b0), quiet_cause(cl, None, "critical")))
        w1, w0 = (r and r["window"]["output_tokens_per_s"] for r in (on, off))
        if w1 is not None and w0:
            bound = TPUT_VS_OFF * w0
            out.append(target(where, "completed work >= %gx no flow control" % TPUT_VS_OFF,
                              "%.0f tok/s" % w1, ">= %.0f" % bound, w1 >= bound, w1 / bound,
                              "off %.0f; %.2fx off" % (w0, w1 / w0), idle_cause(on)))
    return out


def quiet_cause(r, off, name):
    """What the figures show of a quiet tenant's p99 missed."""
    t = tenant(r, name)
    q = r["queue"]
    parts = ["%s waited in the gateway p99 %s ms (mean of all %s)" % (
        name, f0(gw_wait(r, name)), f0(((r.get("access") or {}).get("tenants", {}).get(
            name, {}).get("wait_ms") or {}).get("mean")))]
    parts.append("the gateway queued %s requests, the instances held at most %s waiting" % (
        f0(enqueued(r)), f0(q.get("waiting_max"))))
    parts.append("%s's p50 %s, p90 %s" % (name, f0(t["ttft_ms"]["p50"]), f0(t["ttft_ms"]["p90"])))
    if off and p99(off, name) is not None:
        parts.append("without flow control its p99 is %.0f" % p99(off, name))
    return "; ".join(parts)


def idle_cause(r):
    """How often the instances had nothing to prefill while work waited,
    and whether the gateway then counted its own requests there (requests
    past their prefill still holding their room) or none."""
    q = r["queue"]
    pct = lambda k: "-" if q.get(k) is None else "%.1f%%" % q[k]  # noqa: E731
    pred = q.get("idle_known_pred_ms")
    return ("while requests waited the instances had nothing to prefill %s of the time; at "
            "%s of those samples the gateway counted none of its requests there%s, at the rest "
            "it counted requests past their prefill; first tokens/s %.1f" % (
                pct("idle_pct"), pct("idle_known_pct"),
                "" if pred is None else " (its predicted wait there, median %.1f wall ms)" % pred,
                r["window"]["first_tokens_per_s"]))


# --- 2. deadline -----------------------------------------------------------------
def deadline_lines(res):
    D = res["deadline"]
    if not D:
        return [], []
    lines = ["2. Deadline %d ms (X-Prefixgate-Deadline-Ms) after a cold start: 4 instances "
             "at speed S, ~1,000-token prompts, 1 output token, half the fleet's capacity, "
             "flow control on" % DL_MS,
             "%-9s %-4s %9s %6s %9s %9s %6s %6s %9s %s" % (
                 "mode", "S", "lone TTFT", "reqs", "200 <=%d" % DL_MS, "200 late", "429", "other",
                 "past dl", "latest late TTFTs")]
    out = []
    for k in sorted(D, key=lambda k: (split(k)[0], eval_speed(split(k)[1]))):
        mode, sp = split(k)
        r = D[k]
        if r is None:
            lines.append("%-9s %-4s (failed: see the notes)" % (mode, sp))
            continue
        c = r["counts"]
        acc = ((r.get("access") or {}).get("tenants") or {}).get("D") or {}
        lines.append("%-9s %-4s %9.1f %6d %9d %9d %6d %6d %9s %s" % (
            mode, sp, r["lone_ttft_ms"], c["n"], c["ok_within"], c["ok_late"], c["n429"],
            c["other"], f0(acc.get("past_deadline")),
            ", ".join("%.0f" % v for v in sorted(ms for _, ms in c["late"])[-5:]) or "-"))
        where, bad = ("dl", sp, mode), c["ok_late"] + c["other"]
        out.append(target(where, "answers not 200 within %d ms nor 429" % DL_MS, "%d" % bad,
                          "0", bad == 0, None, "of %d; %d 200s late, %d other" % (
                              c["n"], c["ok_late"], c["other"]), late_cause(r)))
        if r["lone_ttft_ms"] < DL_MS:
            share = c["ok_within"] / float(c["n"]) if c["n"] else 0.0
            out.append(target(where, "200s within it (a lone one %.0f ms)" % r["lone_ttft_ms"],
                              "%.0f%%" % (100 * share), ">= %.0f%%" % (100 * DEADLINE_HALF),
                              share >= DEADLINE_HALF, share / DEADLINE_HALF,
                              "%d of %d" % (c["ok_within"], c["n"]),
                              "%d 429s; %s" % (c["n429"], late_cause(r))))
    lines += ["  (lone TTFT: a request alone on an instance at speed S; 200 <=%d, late: "
              "TTFT from pgload's send within %d ms or not; past dl: dispatched after the "
              "deadline, access log)" % (DL_MS, DL_MS), ""]
    return lines, out


def late_cause(r):
    """When the late 200s were sent (a cold start's first second, while the
    gateway has not measured the instances and tries them, or later), their
    TTFTs, and the other answers' statuses."""
    c = r["counts"]
    late = c["late"]
    first = sorted(ms for t, ms in late if t < 1.0)
    rest = sorted(ms for t, ms in late if t >= 1.0)
    parts = []
    if late:
        parts.append("late 200s: %d sent in the first second (TTFT median %s ms), %d later "
                     "(median %s, max %s ms)" % (
                         len(first), f0(first[len(first) // 2] if first else None), len(rest),
                         f0(rest[len(rest) // 2] if rest else None), f0(rest[-1] if rest else None)))
    a = r.get("access") or {}
    d = (a.get("tenants") or {}).get("D") or {}
    if late and d.get("late_200") is not None:
        parts.append("by the gateway's clock (its first byte to its first token) %d 200s "
                     "late: the rest is the time between pgload and the gateway on this "
                     "machine" % d["late_200"])
    if c.get("other_status"):
        parts.append("the others: " + ", ".join(
            "%s x%d" % (st, n) for st, n in sorted(c["other_status"].items())))
    if a.get("headless"):
        parts.append("the gateway refused %s of its 429s before their bodies were whole and "
                     "logged %s lines with no method (the rest of a refused body read as a "
                     "request on a connection kept open)" % (
                         f0(d.get("refused_short")), ", ".join(
                             "%s x%d" % kv for kv in sorted((a.get("headless") or {}).items()))
                         or "no"))
    return "; ".join(parts)


# --- 3. trace --------------------------------------------------------------------
def busiest(x):
    """(the most requests waiting at one instance in a sample, the largest
    instance's mean waiting)."""
    by = x.get("waiting_by_instance") or []
    return (x.get("waiting_max"), max((m for m, _ in by if m is not None), default=None))


def trace_lines(res):
    T, S = res["trace"], res["sim"]
    if not T:
        return [], []
    c = res["config"]
    lines = ["3. Trace replay: the Mooncake trace's first %d requests on 8 instances at speed "
             "S (decode 2.5 ms a token at speed 1), TTFT in wall ms (non-streamed: the whole "
             "answer); sim: tracesim, the same run (first token's TTFT; queue: most prefill "
             "tokens queued at one instance), at 2.5 ms a decoded token and at the calibrated "
             "25" % c["trace_requests"],
             "%-4s %-9s %-4s %-19s %5s %7s %7s %6s %5s %6s %11s | %7s %7s %7s | %7s %7s" % (
                 "load", "mode", "S", "router", "ok", "mean", "p99", "hit", "q max", "q mean",
                 "tok share", "sim mean", "p99", "queue", "25 mean", "p99")]
    groups = sorted({tuple(split(k)[:3]) for k in T},
                    key=lambda g: (float(g[0]), g[1], eval_speed(g[2])))
    for g in groups:
        for router in ("cache_aware", "ref-cache-first", "ref-predicted-ttft"):
            k = "|".join(g + (router,))
            x, sims = T.get(k), S.get(k) or {}
            s1, s2 = sims.get("2.5") or sims.get(2.5), sims.get("25.0") or sims.get(25.0)
            sim = "%7s %7s %7s | %7s %7s" % (
                f0(s1 and s1["ttft_ms"]["mean"]), f0(s1 and s1["ttft_ms"]["p99"]),
                f0(s1 and s1["max_queue_tokens"]), f0(s2 and s2["ttft_ms"]["mean"]),
                f0(s2 and s2["ttft_ms"]["p99"]))
            if x is None:
                lines.append("%-4s %-9s %-4s %-19s %59s | %s" % (g + (LABELS[router],
                                                                   "(failed or not run)", sim)))
                continue
            qm, qa = busiest(x)
            sh = x["share_tokens"]
            lines.append("%-4s %-9s %-4s %-19s %5d %7.0f %7.0f %6.3f %5s %6s %11s | %s" % (
                g + (LABELS[router], x["ok"], x["ttft_ms"]["mean"], x["ttft_ms"]["p99"],
                     x["hit_rate"], f0(qm), "%.1f" % qa if qa is not None else "-",
                     "%.1f-%.1f%%" % (100 * min(sh), 100 * max(sh)) if sh else "-", sim)))
            if x["errors"]:
                lines.append("%19s %d requests failed" % ("", x["errors"]))
    lines += ["  (q max: the most requests waiting at one instance in a sample, every 0.1 s; "
              "q mean: the busiest instance's mean; tok share: each instance's share of prompt "
              "tokens, min-max)", ""]
    return lines, trace_targets(res, groups)


def sim_ratio(S, g, fig, decode):
    """tracesim's CACHE_AWARE against its better reference, as a suffix."""
    def get(router):
        d = S.get("|".join(g + (router,))) or {}
        return d.get(decode) or d.get(float(decode))
    ca = get("cache_aware")
    refs = [x for x in (get(r) for r in ("ref-cache-first", "ref-predicted-ttft")) if x]
    if not ca or not refs:
        return ""
    if fig == "queue":
        b = min(x["max_queue_tokens"] for x in refs)
        return "; sim %.2fx" % (ca["max_queue_tokens"] / b) if b else ""
    b = min(x["ttft_ms"][fig] for x in refs)
    return "; sim %.2fx" % (ca["ttft_ms"][fig] / b) if b else ""


def trace_targets(res, groups):
    T, S, out = res["trace"], res["sim"], []
    for g in groups:
        ca = T.get("|".join(g + ("cache_aware",)))
        refs = [(r, T.get("|".join(g + (r,)))) for r in ("ref-cache-first", "ref-predicted-ttft")]
        refs = [(r, x) for r, x in refs if x]
        if not ca or not refs:
            continue
        where = ("tr " + g[0], g[2], g[1])
        for fig in ("mean", "p99"):
            name, best = min(refs, key=lambda x: x[1]["ttft_ms"][fig])
            v, b = ca["ttft_ms"][fig], best["ttft_ms"][fig]
            bound = TRACE_VS_REF * b
            out.append(target(where, "CACHE_AWARE %s TTFT <= %gx better ref" % (
                fig, TRACE_VS_REF), "%.0f ms" % v, "<= %.0f ms" % bound, v <= bound,
                v / bound if bound else None, "%s %.0f; %.2fx%s" % (
                    LABELS[name], b, v / b if b else 0, sim_ratio(S, g, fig, "2.5")),
                trace_cause(ca, best)))
        name, best = min(refs, key=lambda x: x[1]["ttft_ms"]["mean"])
        v, b = busiest(ca)[0], busiest(best)[0]
        if v is not None and b is not None:
            bound = QUEUE_VS_REF * max(b, 1)
            out.append(target(where, "busiest queue <= %gx the ref's" % QUEUE_VS_REF,
                              "%.0f reqs" % v, "<= %.1f" % bound, v <= bound, v / bound,
                              "%s %.0f (at least 1)%s" % (LABELS[name], b,
                                                         sim_ratio(S, g, "queue", "2.5")),
                              trace_cause(ca, best)))
    return out


def trace_cause(ca, ref):
    """The figures beside a trace target MISSED: hit rate, the busiest queue, spread."""
    sh, rs = ca["share_tokens"], ref["share_tokens"]
    return ("hit %.3f against %.3f; the busiest instance's mean queue %s against %s; token "
            "shares %.1f-%.1f%% against %.1f-%.1f%%" % (
                ca["hit_rate"], ref["hit_rate"], f0(busiest(ca)[1]), f0(busiest(ref)[1]),
                100 * min(sh), 100 * max(sh), 100 * min(rs), 100 * max(rs)))


def report(res, notes):
    c = res["config"]
    lines = ["Issue 36: the routing core learning what it is not told; instances at %s x the "
             "gateway's defaults, clients %s%s" % (
                 ", ".join("1/3" if abs(s - 1 / 3.0) < 1e-3 else "%g" % s for s in c["speeds"]),
                 " and ".join(c["modes"]), " (quick)" if c.get("quick") else ""), ""]
    la = res.get("load_avg") or {}
    if la:
        v = sorted(la.values())
        lines += ["the machine's load average during the runs: %.1f-%.1f (median %.1f) on %s" % (
            v[0], v[-1], v[len(v) // 2], "%d CPUs" % os.cpu_count()), ""]
    targets = flow_targets(res)
    lines += flow_table(res)
    for fn in (deadline_lines, trace_lines):
        ls, t = fn(res)
        lines += ls
        targets += t
    if targets:
        lines += target_lines(targets)
    lines += notes
    if "wall_s" in res:
        lines.append("learn part took %.0f s" % res["wall_s"])
    return lines
