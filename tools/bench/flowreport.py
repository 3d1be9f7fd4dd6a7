"""The flow part's report (flow.py): a table per run in model time, the
deadlines, the sweep, the overhead rounds, the targets as PASS/MISS lines
and the TTFT plot. Pure but for reading the runs' CSV files and drawing
the plot: the runs are flow.py's."""
import os

import fleet
import plots
from flowrun import OVERHEAD_PATHS, wall_ms
from overhead import med

# issue 26's targets
B_VS_ALONE = 1.3  # run 2: B's p99 TTFT <= this x run 1's
TPUT_VS_OFF = 0.95  # run 2: output tokens/s >= this x run 3's
CRIT_VS_ALONE = 1.1  # run 4: critical's p99 <= this x run 1's B p99
ADDED_P50_US = 5.0  # run 6: flow control adds at most this to the p50


def f0(v):
    return "-" if v is None else "%.0f" % v


def ratio(a, b):
    return a / b if a is not None and b else None


def fx(v):
    return "-" if v is None else "%.2fx" % v


def cpu_text(c):
    if not c:
        return "-"
    return "%.2f (gateway %.2f, instances %.2f, kernel threads %.2f, other %.2f)" % (
        sum(c.values()), c.get("gateway", 0), c.get("instances", 0), c.get("kernel", 0),
        c.get("other", 0))


def wtps(r):
    """A run's output tokens/s in its saturated window, or None."""
    return r["window"]["output_tokens_per_s"] if r else None


def p99(r, name):
    """A tenant's p99 TTFT in a run, or None."""
    t = ((r or {}).get("tenants") or {}).get(name)
    return t["ttft_ms"]["p99"] if t and t["ok"] else None


def config_lines(res):
    c = res["config"]
    k = c["time_scale"]
    b0, b1 = c["slices"]["B"]
    a0, a1 = c["slices"]["A"]
    return ["Flow control (issue 26): the Mooncake trace, 8 mockllm instances at time scale "
            "%g (caches: %d tokens each, a third of the trace's distinct blocks), CACHE_AWARE; "
            "model time throughout" % (k, c["kv_capacity_tokens"]),
            "tenant B: trace requests [%d, %d) at load %g; tenant A: [%d, %d) at %g (total "
            "%g x the fleet's prefill capacity); run 4: sheddable = A's slice, critical = "
            "B's" % (b0, b1, c["loads"]["B"], a0, a1, c["loads"]["A"],
                     c["loads"]["A"] + c["loads"]["B"]),
            "gateway durations (model ms -> the gateway's wall ms at K %g): InstanceQueueMs "
            "%g -> %d, --flow-starve-ms %g -> %d, sheddable deadline %g -> %d" % (
                k, c["queue_ms"], wall_ms(c["queue_ms"], k), c["starve_ms"],
                wall_ms(c["starve_ms"], k), c["deadline_ms"], wall_ms(c["deadline_ms"], k)),
            ""]


def run_table(k, title, r):
    if r is None:
        return [title, "  (failed: see the notes)", ""]
    lines = [title,
             "%-10s %-9s %6s %6s %5s %7s %7s %7s %7s %8s %8s %6s %7s" % (
                 "tenant", "class", "reqs", "ok", "429", "mean", "p50", "p90", "p99",
                 "wait avg", "wait p99", "hit", "out t/s")]
    acc = ((r.get("access") or {}).get("tenants")) or {}
    for cfg in r["tenants_cfg"]:
        n = cfg["name"]
        t = r["tenants"][n]
        tt = t["ttft_ms"]
        w = acc.get(n, {}).get("wait_ms", {})
        lines.append("%-10s %-9s %6d %6d %5d %7s %7s %7s %7s %8s %8s %6s %7.0f" % (
            n, cfg["prio"] or "standard", t["requests"], t["ok"], t["n429"], f0(tt["mean"]),
            f0(tt["p50"]), f0(tt["p90"]), f0(tt["p99"]), f0(w.get("mean")), f0(w.get("p99")),
            "%.3f" % t["hit_rate"] if t["hit_rate"] is not None else "-",
            t["out_tokens"] / r["makespan_s"] if r["makespan_s"] else 0))
        if t["failed_other"]:
            lines.append("%10s %d requests failed (not 429)" % ("", t["failed_other"]))
        bo, nb = acc.get(n, {}).get("wait_behind_own_ms"), acc.get(n, {}).get("wait_not_behind_ms")
        if cfg["load"] < 0.5 and bo and bo["n"] and r["flow"]:
            lines.append("%10s wait: %d that came while one of %s's own waited: mean %s, p99 %s; "
                         "the other %d: mean %s, p99 %s" % (
                             "", bo["n"], n, f0(bo["mean"]), f0(bo["p99"]), nb["n"],
                             f0(nb["mean"]), f0(nb["p99"])))
    q, w = r["queue"], r["window"]
    lines.append("  run: %.0f output tokens/s, %.2f requests/s completed over %.0f s; from %.0f "
                 "to %.0f s: %.0f output tokens/s, %.2f first tokens/s, %.0f prefill tokens/s "
                 "(%.0f%% of the fleet's)" % (
                     r["output_tokens_per_s"], r["req_per_s"], r["makespan_s"], w["from_s"],
                     w["to_s"], w["output_tokens_per_s"], w["first_tokens_per_s"],
                     w["prefill_tokens_per_s"],
                     100.0 * w["prefill_tokens_per_s"] * r["scale"] / r["capacity_tokens_per_s"]))
    lines.append("  fleet hit rate %.3f; instances' waiting requests mean %s, max %s; CPUs busy: "
                 "%s" % (r["hit_rate"], "%.1f" % q["waiting_mean"]
                         if q.get("waiting_mean") is not None else "-",
                         f0(q.get("waiting_max")), cpu_text(r.get("cpu"))))
    if q.get("idle_pct") is not None:
        lines.append("  while work waited (%d samples): instances idle %.1f%% of the time, %.1f%% "
                     "with none of the gateway's requests there (its predicted wait for them: "
                     "median %s wall ms%s)" % (
                         q["busy_samples"], q["idle_pct"], q["idle_known_pct"],
                         "%.1f" % q["idle_known_pred_ms"] if q["idle_known_pred_ms"] is not None
                         else "-", "; InstanceQueueMs %d wall ms" % wall_ms(
                             r["flow"]["queue_ms"], r["scale"]) if r["flow"] else ""))
    fe = r.get("flow_end")
    if fe:
        p = fe["pools"][0]
        lines.append("  gateway queue (GET /flow): mean %s, max %s waiting; enqueued %d, "
                     "dispatched %d, mean wait %s ms; expired %d, late %d, shed %d, refused %d, "
                     "gone %d, bypassed %d" % (
                         "%.1f" % q["queued_mean"] if q["queued_mean"] is not None else "-",
                         f0(q["queued_max"]), p["enqueued"], p["dispatched"],
                         f0(p["wait_ms_total"] * r["scale"] / p["dispatched"])
                         if p["dispatched"] else "-", p["expired"], p["late"], p["shed"],
                         p["refused"], p["gone"], p["bypassed"]))
    elif not r["flow"]:
        lines.append("  no flow control: nothing waits in the gateway")
    return lines + [""]


def deadline_lines(res):
    """Run 5: dispatched past the deadline, refused, against what reached
    the instances; from each run with a deadline."""
    out, total, found = [], 0, False
    for k, r in res["runs"].items():
        if not r or not r.get("access"):
            continue
        for cfg in r["tenants_cfg"]:
            if not cfg["deadline_ms"]:
                continue
            found = True
            a = r["access"]["tenants"][cfg["name"]]
            total += a["past_deadline"]
            out.append("  %s, %s (deadline %g model ms): %d lines, %d dispatched, %d refused "
                       "429 (pgload saw %d); dispatched past the deadline: %d; latest dispatch "
                       "at %s of the deadline" % (
                           k, cfg["name"], cfg["deadline_ms"], a["lines"], a["dispatched"],
                           a["refused_429"], r["tenants"][cfg["name"]]["n429"],
                           a["past_deadline"],
                           "%.0f%%" % (100 * a["latest_vs_deadline"])
                           if a["latest_vs_deadline"] is not None else "-"))
            disp = sum(x["dispatched"] for x in r["access"]["tenants"].values())
            out.append("  %s: requests the instances got %d, the access log's dispatched %d, "
                       "pgload's completed %d; access-log records dropped %d" % (
                           k, r["instance_requests"], disp, r["ok"],
                           r.get("dropped_log_records", 0)))
    if not found:
        return [], None
    return ["5. Deadlines (access log: dispatched = routed to an instance; past the deadline: "
            "queue_us + route_us, first byte to backend chosen, over it)"] + out + [""], total


def sweep_lines(res):
    c = res["config"]
    pts = [(c["queue_ms"], "on")] + [(q, "sweep-%g" % q) for q in c["sweep"]
                                     if q != c["queue_ms"]]
    pts = [(q, k) for q, k in sorted(pts) if res["runs"].get(k)]
    if len(pts) < 2:
        return [], None
    alone, off = res["runs"].get("alone"), res["runs"].get("off")
    lines = ["7. InstanceQueueMs sweep (run 2's load; ratios against run 1's B p99 and run 3's "
             "output tokens/s in the saturated window)",
             "%9s %7s %8s %8s %8s %9s %9s %7s %8s %7s %6s" % (
                 "model ms", "wall ms", "B p99", "vs alone", "A p99", "A mean", "out t/s",
                 "vs off", "hit", "queued", "idle")]
    best = None
    for q, k in pts:
        r = res["runs"][k]
        rb, rt = ratio(p99(r, "B"), p99(alone, "B")), ratio(wtps(r), wtps(off))
        fq = r["queue"]
        lines.append("%9g %7d %8s %8s %8s %9s %9.0f %7s %8.3f %7s %6s" % (
            q, wall_ms(q, c["time_scale"]), f0(p99(r, "B")), fx(rb), f0(p99(r, "A")),
            f0(r["tenants"]["A"]["ttft_ms"]["mean"]), wtps(r), fx(rt),
            r["hit_rate"], "%.0f" % fq["queued_mean"] if fq.get("queued_mean") is not None
            else "-", "%.1f%%" % fq["idle_pct"] if fq.get("idle_pct") is not None else "-"))
        ok = rb is not None and rb <= B_VS_ALONE and rt is not None and rt >= TPUT_VS_OFF
        if ok and (best is None or rb < best[1]):
            best = (q, rb, rt)
    if best:
        lines.append("  meets both targets with the lowest B p99: InstanceQueueMs %g model ms "
                     "(B %.2fx alone, %.2fx run 3's throughput)" % best)
    else:
        lines.append("  no point meets both the B p99 and the throughput target")
    return lines + [""], best


def overhead_lines(res):
    o = res.get("overhead")
    if not o:
        return [], None
    c = res["config"]["overhead"]
    lines = ["6. Overhead below saturation: CACHE_AWARE, 2 instances that answer at once, 1 KiB "
             "chat body, %g req/s for %g s per gateway and round, %d rounds (order rotated); "
             "real time, us" % (c["rate"], c["seconds"], len(o["off"])),
             "%-6s %s %9s %9s" % ("round", " ".join("%18s" % ("p50 " + p) for p in OVERHEAD_PATHS),
                                  "on-off", "copy-off")]
    d_on, d_aa = [], []
    for i in range(len(o["off"])):
        row = {p: o[p][i] for p in OVERHEAD_PATHS}
        d_on.append(row["on"]["p50_us"] - row["off"]["p50_us"])
        d_aa.append(row["off-copy"]["p50_us"] - row["off"]["p50_us"])
        lines.append("%-6d %s %+9.1f %+9.1f" % (i + 1, " ".join(
            "%18.1f" % row[p]["p50_us"] for p in OVERHEAD_PATHS), d_on[-1], d_aa[-1]))
    m = {p: med([x["p50_us"] for x in o[p]]) for p in OVERHEAD_PATHS}
    m99 = {p: med([x["p99_us"] for x in o[p]]) for p in OVERHEAD_PATHS}
    rl = {p: med([x["route_us"] for x in o[p] if x["route_us"] is not None] or [float("nan")])
          for p in OVERHEAD_PATHS}
    lines += ["%-6s %s" % ("median", " ".join("%18.1f" % m[p] for p in OVERHEAD_PATHS)),
              "p99 (median of rounds): %s" % ", ".join("%s %.0f" % (p, m99[p])
                                                      for p in OVERHEAD_PATHS),
              "the gateway's own routing latency (mean, median of rounds): %s" % ", ".join(
                  "%s %.2f" % (p, rl[p]) for p in OVERHEAD_PATHS),
              "added p50, on - off, per round: median %+.1f us (spread %+.1f to %+.1f); two "
              "identical gateways (copy - off): median %+.1f us (spread %+.1f to %+.1f)" % (
                  med(d_on), min(d_on), max(d_on), med(d_aa), min(d_aa), max(d_aa))]
    r_on = [a["route_us"] - b["route_us"] for a, b in zip(o["on"], o["off"])
            if a["route_us"] is not None and b["route_us"] is not None]
    r_aa = [a["route_us"] - b["route_us"] for a, b in zip(o["off-copy"], o["off"])
            if a["route_us"] is not None and b["route_us"] is not None]
    if r_on and r_aa:
        lines.append("routing latency, on - off, per round: median %+.2f us (spread %+.2f to "
                     "%+.2f); copy - off: median %+.2f us (spread %+.2f to %+.2f)" % (
                         med(r_on), min(r_on), max(r_on), med(r_aa), min(r_aa), max(r_aa)))
    errs = sum(x["errors"] for p in OVERHEAD_PATHS for x in o[p])
    if errs:
        lines.append("  %d requests failed" % errs)
    noise = max(abs(min(d_aa)), abs(max(d_aa)))
    return lines + [""], {"added_p50_us": med(d_on), "spread": [min(d_on), max(d_on)],
                          "aa_spread": [min(d_aa), max(d_aa)], "noise_us": noise,
                          "route_added_us": med(r_on) if r_on else None}


def target_lines(res, late_total, ov):
    rs = res["runs"]
    lines = ["Targets (issue 26)"]

    def line(what, figs, ok, note=""):
        lines.append("%-58s %-44s %s%s" % (what, figs, "-" if ok is None else
                                           "PASS" if ok else "MISS", note))

    alone, on, off, cl = (rs.get(k) for k in ("alone", "on", "off", "classes"))
    rb = ratio(p99(on, "B"), p99(alone, "B"))
    line("B's p99 TTFT, A at 10x, flow on <= %gx B alone" % B_VS_ALONE,
         "%s vs %s ms = %s" % (f0(p99(on, "B")), f0(p99(alone, "B")), fx(rb)),
         None if rb is None else rb <= B_VS_ALONE)
    ro = ratio(p99(off, "B"), p99(alone, "B"))
    lines.append("%-58s %-44s %s" % ("  (without flow control: B's p99 vs B alone)",
                                     "%s vs %s ms = %s" % (f0(p99(off, "B")), f0(p99(alone, "B")),
                                                           fx(ro)), "no target"))
    rt = ratio(wtps(on), wtps(off))
    line("output tokens/s (saturated), flow on >= %gx off" % TPUT_VS_OFF,
         "%s vs %s = %s" % (f0(wtps(on)), f0(wtps(off)), fx(rt)),
         None if rt is None else rt >= TPUT_VS_OFF)
    for what, key, fmt in (("first tokens/s (saturated)", "first_tokens_per_s", "%.2f"),
                           ("prefill tokens/s (saturated)", "prefill_tokens_per_s", "%.0f")):
        a_, b_ = (r and r["window"][key] for r in (on, off))
        lines.append("%-58s %-44s %s" % ("  (%s, flow on vs off)" % what, "%s vs %s = %s" % (
            "-" if a_ is None else fmt % a_, "-" if b_ is None else fmt % b_,
            fx(ratio(a_, b_))), "no target"))
    for what, key, fmt in (("output tokens/s", "output_tokens_per_s", "%.0f"),
                           ("requests/s", "req_per_s", "%.2f")):
        a_, b_ = (r and r[key] for r in (on, off))
        lines.append("%-58s %-44s %s" % ("  (%s over the whole run, flow on vs off)" % what,
                                         "%s vs %s = %s" % (
                                             "-" if a_ is None else fmt % a_,
                                             "-" if b_ is None else fmt % b_,
                                             fx(ratio(a_, b_))), "no target"))
    rc = ratio(p99(cl, "critical"), p99(alone, "B"))
    line("critical p99 TTFT, sheddable flood <= %gx alone" % CRIT_VS_ALONE,
         "%s vs %s ms = %s" % (f0(p99(cl, "critical")), f0(p99(alone, "B")), fx(rc)),
         None if rc is None else rc <= CRIT_VS_ALONE)
    nb = rs.get("classes-nostarve")
    rn = ratio(p99(nb, "critical"), p99(alone, "B"))
    if nb:
        lines.append("%-58s %-44s %s" % (
            "  (4b: --flow-starve-ms %g, past the deadline)" % nb["flow"]["starve_ms"],
            "%s vs %s ms = %s" % (f0(p99(nb, "critical")), f0(p99(alone, "B")), fx(rn)),
            "same target: " + ("-" if rn is None else "PASS" if rn <= CRIT_VS_ALONE
                               else "MISS")))
    line("requests dispatched past their deadline = 0",
         "-" if late_total is None else "%d" % late_total,
         None if late_total is None else late_total == 0)
    if ov:
        line("flow control's added p50 <= %g us" % ADDED_P50_US,
             "%+.1f us (rounds %+.1f to %+.1f)" % (ov["added_p50_us"], ov["spread"][0],
                                                  ov["spread"][1]),
             ov["added_p50_us"] <= ADDED_P50_US,
             " (within the noise: two identical gateways differ by up to %.1f us; the "
             "gateway's own routing latency: %s)" % (
                 ov["noise_us"], "-" if ov["route_added_us"] is None
                 else "%+.2f us" % ov["route_added_us"])
             if ov["noise_us"] >= abs(ov["added_p50_us"]) else "")
    else:
        line("flow control's added p50 <= %g us" % ADDED_P50_US, "not run", None)
    return lines


def cdf_plot(out, res):
    """B's TTFT CDF in runs 1-3 and critical's in runs 4 and 4b (model ms)."""
    rs = res["runs"]
    curves = [("alone", "B", "1. B alone"), ("on", "B", "2. B, A at 10x, flow on"),
              ("off", "B", "3. B, A at 10x, flow off"),
              ("classes", "critical", "4. critical, sheddable flood"),
              ("classes-nostarve", "critical", "4b. critical, starvation bound past the deadline")]
    plot = []
    for k, n, title in curves:
        r = rs.get(k)
        if not r:
            continue
        ttft = sorted(int(row["ttft_us"]) * r["scale"] / 1000.0
                      for row in fleet.read_csv(r["tenants"][n]["csv"])
                      if row["ttft_us"] and not row["error"])
        if not ttft:
            continue
        dat = "flow-ttft-%s.dat" % k
        with open(os.path.join(out, dat), "w") as f:
            for i, v in enumerate(ttft):
                f.write("%.3f %.5f\n" % (v, (i + 1) / len(ttft)))
        plot.append("'%s' using 1:2 with lines lw 2 title '%s'" % (dat, title))
    if plot:
        plots._draw(out, "flow-ttft",
                    "set title 'Flow control: the quiet tenant TTFT CDF (model time)'\n"
                    "set logscale x\nset xlabel 'TTFT (ms)'\nset ylabel 'fraction of requests'\n"
                    "set grid\nset key bottom right\nplot %s\n" % ", ".join(plot))


def report(res, out, notes):
    """The lines of flow.txt; the plot drawn into out."""
    lines = config_lines(res)
    for k, title in res["titles"].items():
        if not k.startswith("sweep-"):
            lines += run_table(k, title, res["runs"].get(k))
    dl, late_total = deadline_lines(res)
    sw, best = sweep_lines(res)
    for k, title in res["titles"].items():
        if k.startswith("sweep-"):
            lines += run_table(k, title, res["runs"].get(k))
    ol, ov = overhead_lines(res)
    lines += dl + sw + ol + target_lines(res, late_total, ov)
    res["targets"] = {"deadline_violations": late_total, "overhead": ov,
                      "sweep_best": best}
    lines += [""] + notes + ["flow part took %.0f s" % res.get("wall_s", 0)]
    try:
        cdf_plot(out, res)
    except (OSError, ValueError, KeyError) as e:
        lines.append("plot: skipped: %r" % e)
    return lines
