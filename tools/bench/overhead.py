"""The overhead part of make bench (bench.py --only overhead): what a router
adds to one request, against no proxy at all, the floor proxy, HAProxy and
nginx.

Paths: direct (pgload sends each request to one of the instances itself),
floor (build/floorproxy: bytes copied, nothing parsed; each client
connection to the next instance), prefixgate (default --data-path auto),
pg-copy (--data-path copy), haproxy (body-prefix hash, bounded loads),
nginx (hash of the whole body). 2 mockllm instances that answer at once
(each is one thread: every path gets both); a 32 KiB OpenAI chat body,
non-streaming, one output token.

Each round runs every path, in an order rotated from round to round:
  c=1      closed loop, one request at a time: p50/p99 latency; a path's
           added latency is its figure minus direct's in the same round;
  c=32     closed loop, 32 in flight: requests/s;
  rate     open loop at --overhead-rate req/s (one every path sustains):
           CPU per request = CPU time of every task of the proxy (its
           threads and child processes) plus every kernel thread
           (kworkers, ksoftirqd), from /proc/*/task/*/schedstat (cpu.py),
           over the whole pgload run, divided by the requests completed.
           "all" adds the instances and pgload: what the path costs the
           machine. "others": how busy every other process kept the
           machine meanwhile (other jobs: the noise in every figure).
           In the same window, counted per completed request by perf stat
           -p on the proxy's own tasks (cpu.PerfStat; no kernel threads):
           instructions retired, user and kernel (the kernel's include the
           softirq work run in the proxy's context: on loopback, receiving
           what it sends), io_uring submissions and context switches.
           Counts barely depend on what else runs on the machine, unlike
           time: they tell two builds apart on a busy one. Instructions
           need a hardware PMU (many VMs have none): if perf cannot count
           them, the report says why and prints "-".
Another build of prefixgate: --gateway-bin PATH runs it instead of
build/prefixgate; --compare-bin LABEL=PATH runs it too, as paths LABEL
(auto) and LABEL-copy in the same rounds (each round next to prefixgate
and pg-copy), with a table of its figures against this build's.
Reported: the median of the rounds (added latencies: the median of the
per-round differences; the CPU split: that of the median round), the spread (min-max), the ratios against HAProxy,
nginx and the floor, and PASS/MISS for each of issue 12's targets.
"""
import os
import time

import cpu
import fleet

INSTANT = ["--prefill-tokens-per-s", "1e9", "--ttft-overhead-ms", "0",
           "--decode-ms-per-token", "0"]
FIXED = ["--workload", "fixed", "--body-bytes", "32768", "--no-stream", "--max-tokens", "1",
         "--seed", "1"]
ROUNDS = 5
RATE = 2000  # req/s: well under the c=32 throughput of every path (the slowest, nginx: >= 3k)
ROUTERS = ("prefixgate", "pg-copy")


def start_paths(build, addrs, logdir, gateway_bin=None, compare=()):
    """[(name, proxy or None for direct)]; the floor only when it is built.
    compare: [(label, binary)], other builds of prefixgate, each as paths
    label and label-copy, beside prefixgate and pg-copy."""
    paths = [("direct", None)]
    if os.path.exists(os.path.join(build, "floorproxy")):
        paths.append(("floor", fleet.Floor(build, addrs, logdir)))
    builds = [("prefixgate", "pg-copy", gateway_bin)] + [
        (label, label + "-copy", binary) for label, binary in compare]
    for copy in (False, True):
        for auto_name, copy_name, binary in builds:
            paths.append((copy_name if copy else auto_name, fleet.Gateway(
                build, addrs, logdir, ["--data-path", "copy"] if copy else [], binary)))
    paths += [("haproxy", fleet.HAProxy(addrs, logdir, prefix_bytes=4096)),
              ("nginx", fleet.Nginx(addrs, logdir))]
    return paths


def rate_run(build, target, out_json, args, logdir, proxy, backend_pids):
    """pgload at a fixed rate; its summary plus CPU per completed request,
    in µs, by role: proxy (every task of its process tree), kernel (kernel
    threads), backend (the instances), client (pgload's own getrusage).
    other_busy_pct: how busy the machine was with everything else (other
    processes: other jobs), in % of all its CPUs. per_req: perf's counts
    of the proxy's tasks over the same run, per completed request (None:
    not counted here); instr_per_req: instructions, user + kernel."""
    roles = {pid: "backend" for pid in backend_pids}
    roles[os.getpid()] = "bench"
    tree = cpu.tree([proxy.proc.pid]) if proxy is not None else set()
    roles.update({pid: "proxy" for pid in tree})
    perf = cpu.PerfStat(tree).start()
    try:
        c0, t0 = cpu.cpu_ns_by_role(roles, others=True), time.monotonic()
        r = fleet.pgload(build, target, out_json, args, logdir)
        c1, t1 = cpu.cpu_ns_by_role(roles, others=True), time.monotonic()
    finally:
        counts = perf.stop()
    n = max(1, r["ok"])
    r["per_req"] = {e: None if v is None else v / n for e, v in counts.items()}
    r["perf_why"] = perf.why
    ins = [r["per_req"][e] for e in cpu.INSTRUCTIONS]
    r["instr_per_req"] = None if None in ins else sum(ins)
    ns = {k: c1[k] - c0.get(k, 0) for k in c1}
    client_ns = (r["cpu_user_s"] + r["cpu_sys_s"]) * 1e9  # pgload is among "other"
    r["other_busy_pct"] = max(0.0, ns.pop("other") - client_ns) / 1e9 / (
        (t1 - t0) * (os.cpu_count() or 1)) * 100
    ns.pop("bench")
    by = {k: v / 1e3 / n for k, v in ns.items()}
    by["client"] = client_ns / 1e3 / n
    r["cpu_us_per_req_by"] = by
    r["cpu_us_per_req"] = by.get("proxy", 0.0) + by["kernel"]
    r["cpu_all_us_per_req"] = sum(by.values())
    return r


def med(xs):
    xs = sorted(xs)
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2.0 if n else float("nan")


def med_counted(xs):
    """Median of the counted values (None: not counted); None if none was."""
    xs = [x for x in xs if x is not None]
    return med(xs) if xs else None


def span(xs):
    xs = [x for x in xs if x is not None]
    return [min(xs), max(xs)] if xs else None


def summarize(raw):
    """Per path: the medians and spreads over rounds of one run."""
    direct = raw["direct"]
    res = {}
    for name, rounds in raw.items():
        c1 = [r["c1"] for r in rounds]
        c32 = [r["c32"] for r in rounds]
        rt = [r["rate"] for r in rounds]
        add50 = [(a["e2e_ms"]["p50"] - d["c1"]["e2e_ms"]["p50"]) * 1e3
                 for a, d in zip(c1, direct)]
        add99 = [(a["e2e_ms"]["p99"] - d["c1"]["e2e_ms"]["p99"]) * 1e3
                 for a, d in zip(c1, direct)]
        rps = [b["req_per_s"] for b in c32]
        cpu_req = [x["cpu_us_per_req"] for x in rt]
        # The CPU split of the median round(s), so that its parts add up.
        mid = sorted(rt, key=lambda x: x["cpu_us_per_req"])
        mid = mid[(len(mid) - 1) // 2:len(mid) // 2 + 1]
        res[name] = {
            "p50_us": med([a["e2e_ms"]["p50"] * 1e3 for a in c1]),
            "p99_us": med([a["e2e_ms"]["p99"] * 1e3 for a in c1]),
            "added_p50_us": med(add50), "added_p99_us": med(add99),
            "rps_c32": med(rps),
            "cpu_us_per_req": med(cpu_req),
            "instr_per_req": med_counted([x["instr_per_req"] for x in rt]),
            "perf_why": {e: w for x in rt for e, w in x["perf_why"].items()},
            "per_req": {e: med_counted([x["per_req"][e] for x in rt])
                        for e in rt[0]["per_req"]},
            "cpu_all_us_per_req": med([x["cpu_all_us_per_req"] for x in mid]),
            "cpu_us_per_req_by": {k: med([x["cpu_us_per_req_by"][k] for x in mid])
                                  for k in rt[0]["cpu_us_per_req_by"]},
            "rate_achieved": med([x["req_per_s"] for x in rt]),
            "other_busy_pct": med([x["other_busy_pct"] for x in rt]),
            "rate_unsent": sum(x["arrivals_unsent"] for x in rt),
            "spread": {"added_p50_us": [min(add50), max(add50)],
                       "added_p99_us": [min(add99), max(add99)],
                       "rps_c32": [min(rps), max(rps)],
                       "cpu_us_per_req": [min(cpu_req), max(cpu_req)],
                       "instr_per_req": span([x["instr_per_req"] for x in rt])},
            "errors": sum(a["errors"] + b["errors"] + x["errors"]
                          for a, b, x in zip(c1, c32, rt)),
            "rounds": [{"added_p50_us": a50, "added_p99_us": a99, "rps_c32": q,
                        "cpu_us_per_req": x["cpu_us_per_req"],
                        "cpu_us_per_req_by": x["cpu_us_per_req_by"],
                        "instr_per_req": x["instr_per_req"], "per_req": x["per_req"],
                        "other_busy_pct": x["other_busy_pct"]}
                       for a50, a99, q, x in zip(add50, add99, rps, rt)],
            "gen_cpu_pct_c32": med([b["cpu_pct"] for b in c32]),
            "gen_lag_ms": max(max(a["max_timer_lag_ms"], b["max_timer_lag_ms"],
                                  x["max_timer_lag_ms"]) for a, b, x in zip(c1, c32, rt)),
        }
        # Sustained: the path completed (nearly) every arrival pgload drew;
        # requests/s over pgload's wall time also counts its drain.
        offered = sum(x["requests"] + x["arrivals_unsent"] for x in rt)
        res[name]["rate_sustained"] = sum(x["ok"] for x in rt) >= 0.98 * offered
    return res


def ratio(a, b):
    return a / b if b and b > 0 else float("nan")


# Whether a figure meets its goal, by the goal's operator (nan: never).
MEETS = {"<=": lambda v, g: v <= g, "<": lambda v, g: v < g, ">=": lambda v, g: v >= g}


def target_lines(res, routers=ROUTERS):
    """One line per router and target of issue 12: the figures, the ratio,
    PASS or MISS; for a target set against a peer, the floor proxy's own
    ratio beside it, and a MISS the floor misses too says so: that target
    asks for less than copying the bytes through user space costs here."""
    hp, ng, fl = res["haproxy"], res["nginx"], res.get("floor")
    lines = ["Targets (issue 12), from the medians above; floor: the floor proxy's own "
             "figure on the same target",
             "%-12s %-32s %22s %9s %8s %7s  %s" % ("router", "target", "figures", "ratio",
                                                   "goal", "floor", "result")]
    for name in routers:
        r = res[name]

        def vs(what, key, peer, fmt, op, goal, floor_too=True):
            """A target on r[key] / peer[key] (fmt: how a figure prints, its
            unit after it); the floor's own ratio beside it (floor_too, and
            a floor measured)."""
            num = fmt.split(" ")[0]
            return (what, ("%s vs %s" % (num, fmt)) % (r[key], peer[key]),
                    ratio(r[key], peer[key]), op, goal,
                    ratio(fl[key], peer[key]) if fl and floor_too else None)

        checks = [vs("added p50 (c=1) vs HAProxy", "added_p50_us", hp, "%.0f µs", "<=", 0.5),
                  vs("added p50 (c=1) vs nginx", "added_p50_us", ng, "%.0f µs", "<", 1.0),
                  ("added p99 (c=1)", "%.0f µs" % r["added_p99_us"], None, "<=", 100.0,
                   fl["added_p99_us"] if fl else None),
                  vs("req/s (c=32) vs HAProxy", "rps_c32", hp, "%.0f", ">=", 1.3),
                  vs("req/s (c=32) vs nginx", "rps_c32", ng, "%.0f", ">=", 1.0),
                  vs("CPU/req vs HAProxy", "cpu_us_per_req", hp, "%.1f µs", "<=", 0.6)]
        if fl:
            checks.append(vs("CPU/req vs floor", "cpu_us_per_req", fl, "%.1f µs", "<=", 1.3,
                             floor_too=False))
        for what, figs, x, op, goal, fx in checks:
            v = r["added_p99_us"] if x is None else x
            ok = MEETS[op](v, goal) and (r["rate_sustained"] or not what.startswith("CPU"))
            result = "PASS" if ok else "MISS"
            if not ok and fx is not None and not MEETS[op](fx, goal):
                result += " (the floor misses it too)"
            unit = " µs" if x is None else "x"
            lines.append("%-12s %-32s %22s %9s %8s %7s  %s" % (
                name, what, figs, "" if x is None else "%.2fx" % x, "%s %g%s" % (op, goal, unit),
                "" if fx is None else ("%.0f" if x is None else "%.2f") % fx + unit.strip(),
                result))
    if not fl:
        return lines + ["no floor proxy: build/floorproxy is not built (make)"]
    lines.append("Distance from the floor (no target): added p50 beyond the floor's, "
                 "req/s and CPU/req as multiples of the floor's")
    for n in list(routers) + ["haproxy", "nginx"]:
        lines.append("%-12s added p50 %+5.0f µs   req/s %5.2fx   CPU/req %5.2fx" % (
            n, res[n]["added_p50_us"] - fl["added_p50_us"],
            ratio(res[n]["rps_c32"], fl["rps_c32"]),
            ratio(res[n]["cpu_us_per_req"], fl["cpu_us_per_req"])))
    return lines


def fmt_count(v, digits=0):
    return "-" if v is None else "%.*f" % (digits, v)


def ratio_counted(a, b):
    return "-" if a is None or b is None else "%.2fx" % ratio(a, b)


def count_lines(res, rate):
    """Instructions and other counts per request, beside CPU per request."""
    hp, fl = res["haproxy"], res.get("floor") or {}
    lines = ["Counted per request in the same %g req/s runs (perf stat -p: the proxy's own "
             "tasks, no kernel threads; counts barely depend on other work on the machine)"
             % rate,
             "%-12s %9s %11s %7s %7s %8s %8s %10s %7s %7s" % (
                 "path", "CPU µs/req", "instr/req", "x HAP", "x floor", "k share",
                 "SQEs/req", "ctx-sw/req", "x HAP", "x floor")]
    for name, r in res.items():
        if name == "direct":
            continue
        pr = r["per_req"]
        k = pr.get("instructions:k")
        cs = pr.get("context-switches")
        lines.append("%-12s %10.1f %11s %7s %7s %8s %8s %10s %7s %7s" % (
            name, r["cpu_us_per_req"], fmt_count(r["instr_per_req"]),
            ratio_counted(r["instr_per_req"], hp["instr_per_req"]),
            ratio_counted(r["instr_per_req"], fl.get("instr_per_req")),
            "-" if k is None or not r["instr_per_req"] else "%.0f%%" % (
                100.0 * k / r["instr_per_req"]),
            fmt_count(pr.get("io_uring:io_uring_submit_req"), 2), fmt_count(cs, 2),
            ratio_counted(cs, hp["per_req"].get("context-switches")),
            ratio_counted(cs, fl.get("per_req", {}).get("context-switches"))))
    whys = {}
    for name, r in res.items():
        if name != "direct":
            for e, why in r["perf_why"].items():
                whys.setdefault((e, why), []).append(name)
    for (e, why), names in sorted(whys.items()):
        lines.append("%s not counted%s: %s" % (
            e, "" if len(names) == len(res) - 1 else " for " + ", ".join(names), why))
    return lines


def compare_lines(res, compare):
    """Each other build's figures against this build's, same data path:
    added latencies as the difference of the medians (per-round differences
    min-max), the others as the ratio of the medians (per-round ratios
    min-max). Both ends of a range on one side of 0 (or 1): the difference
    held in every round."""
    figs = (("added p50", "added_p50_us", "µs", False),
            ("added p99", "added_p99_us", "µs", False),
            ("req/s c=32", "rps_c32", "", True), ("CPU/req", "cpu_us_per_req", "µs", True),
            ("instr/req", "instr_per_req", "", True))
    lines = ["Builds side by side: each --compare-bin build against this one, same data path "
             "and rounds; latency: difference of medians (per-round differences min-max), "
             "else ratio of medians (per-round ratios min-max)"]
    for label, _ in compare:
        for other, this in ((label, "prefixgate"), (label + "-copy", "pg-copy")):
            a, b = res[other], res[this]
            cells = []
            for title, key, unit, as_ratio in figs:
                if a[key] is None or b[key] is None:
                    cells.append("%s -" % title)
                    continue
                pairs = [(x[key], y[key]) for x, y in zip(a["rounds"], b["rounds"])
                         if x.get(key) is not None and y.get(key) is not None]
                if as_ratio:
                    per = [ratio(x, y) for x, y in pairs]
                    cells.append("%s %.0f%s vs %.0f%s %.2fx (%.2f-%.2f)" % (
                        title, a[key], unit, b[key], unit, ratio(a[key], b[key]),
                        min(per), max(per)))
                else:
                    per = [x - y for x, y in pairs]
                    cells.append("%s %.0f vs %.0f%s %+.0f (%+.0f/%+.0f)" % (
                        title, a[key], b[key], unit, a[key] - b[key], min(per), max(per)))
            lines.append("%-12s vs %-10s %s" % (other, this, "; ".join(cells)))
    return lines


def report(res, rounds, secs, rate, routers=ROUTERS, compare=()):
    hp, ng, fl = res["haproxy"], res["nginx"], res.get("floor")
    lines = ["Overhead: 32 KiB OpenAI chat body (non-streaming), 2 instances answering at "
             "once, real time; median of %d rounds of %g s per load; prefixgate = default "
             "--data-path auto, pg-copy = --data-path copy, floor = build/floorproxy; added = minus direct, same round" % (rounds, secs),
             "%-12s %8s %8s %9s %9s %10s %7s %7s %7s" % (
                 "path", "p50 c=1", "p99 c=1", "added p50", "added p99", "req/s c=32",
                 "x HAP", "x nginx", "gen CPU")]
    for name, r in res.items():
        lines.append("%-12s %6.0fµs %6.0fµs %7.0fµs %7.0fµs %10.0f %6.2fx %6.2fx %6.0f%%" % (
            name, r["p50_us"], r["p99_us"], r["added_p50_us"], r["added_p99_us"], r["rps_c32"],
            ratio(r["rps_c32"], hp["rps_c32"]), ratio(r["rps_c32"], ng["rps_c32"]),
            r["gen_cpu_pct_c32"]))
        if r["errors"]:
            lines.append("%10s %d requests failed" % ("", r["errors"]))
    lines += ["",
              "CPU per request at %g req/s (open loop), µs: CPU/req = proxy (every task of its "
              "process tree) + kthreads (every kernel thread); all = + instances + pgload"
              % rate,
              "%-12s %7s %8s %8s %8s %7s %7s %9s %7s %8s %7s" % (
                  "path", "req/s", "proxy", "kthreads", "CPU/req", "x HAP", "x floor",
                  "instances", "pgload", "all", "others")]
    for name, r in res.items():
        by = r["cpu_us_per_req_by"]
        lines.append("%-12s %7.0f %8.1f %8.1f %8.1f %6.2fx %6.2fx %9.1f %7.1f %8.1f %6.0f%%" % (
            name, r["rate_achieved"], by.get("proxy", 0.0), by["kernel"], r["cpu_us_per_req"],
            ratio(r["cpu_us_per_req"], hp["cpu_us_per_req"]),
            ratio(r["cpu_us_per_req"], fl["cpu_us_per_req"]) if fl else float("nan"),
            by["backend"], by["client"], r["cpu_all_us_per_req"], r["other_busy_pct"]))
        if not r["rate_sustained"]:
            lines.append("%10s rate not sustained (%d arrivals never sent, or failed): its "
                         "CPU/req is not comparable" % ("", r["rate_unsent"]))
    busy = med([r["other_busy_pct"] for r in res.values()])
    lines.append("others: the rest of the machine (other processes) busy, %% of its CPUs "
                 "during these runs%s" % (
                     "" if busy < 10 else ": %.0f%%, so every figure here carries the noise "
                     "of other work (kernel threads included)" % busy))
    lines += [""] + count_lines(res, rate)
    lines += ["", "Spread over the %d rounds (min - max)" % rounds,
              "%-12s %15s %15s %15s %15s %19s" % ("path", "added p50 µs", "added p99 µs",
                                                  "req/s c=32", "CPU/req µs", "instr/req")]
    for name, r in res.items():
        if name == "direct":
            continue
        sp = r["spread"]
        lines.append("%-12s %15s %15s %15s %15s %19s" % (
            name, "%.0f - %.0f" % tuple(sp["added_p50_us"]),
            "%.0f - %.0f" % tuple(sp["added_p99_us"]), "%.0f - %.0f" % tuple(sp["rps_c32"]),
            "%.1f - %.1f" % tuple(sp["cpu_us_per_req"]),
            "%.0f - %.0f" % tuple(sp["instr_per_req"]) if sp["instr_per_req"] else "-"))
    if compare:
        lines += [""] + compare_lines(res, compare)
    return lines + [""] + target_lines(res, routers) + [""]


def bench_overhead(opts, out):
    """The routers at full speed (no time scale): instances answer at once.
    opts: build, time_factor, and optionally overhead_rounds, overhead_rate,
    gateway_bin (a prefixgate binary instead of build's), compare_bin
    ([(label, binary)]: other builds run beside it)."""
    rounds = getattr(opts, "overhead_rounds", None) or ROUNDS
    rate = getattr(opts, "overhead_rate", None) or RATE
    gateway_bin = getattr(opts, "gateway_bin", None)
    compare = list(getattr(opts, "compare_bin", None) or [])
    routers = list(ROUTERS) + [n for label, _ in compare for n in (label, label + "-copy")]
    secs = 4 * opts.time_factor
    logdir = os.path.join(out, "logs")
    os.makedirs(logdir, exist_ok=True)
    inst = fleet.Instances(opts.build, 2, logdir, INSTANT)
    addrs = inst.addrs()
    paths = []
    try:
        paths = start_paths(opts.build, addrs, logdir, gateway_bin, compare)
        raw = {n: [] for n, _ in paths}
        for rnd in range(rounds):
            print("  overhead round %d of %d ..." % (rnd + 1, rounds), flush=True)
            k = rnd % len(paths)
            for name, p in paths[k:] + paths[:k]:
                target = ",".join(addrs) if p is None else "127.0.0.1:%d" % p.port
                base = FIXED + ["--duration", "%g" % secs, "--label", name]
                js = os.path.join(out, "overhead-%s-%%s-%d.json" % (name, rnd))
                raw[name].append({
                    "c1": fleet.pgload(opts.build, target, js % "c1",
                                       base + ["--concurrency", "1"], logdir),
                    "c32": fleet.pgload(opts.build, target, js % "c32",
                                        base + ["--concurrency", "32"], logdir),
                    "rate": rate_run(opts.build, target, js % "rate",
                                     base + ["--rate", "%g" % rate], logdir, p,
                                     [q.pid for q in inst.procs])})
    finally:
        for _, p in paths:
            if p:
                p.stop()
        inst.stop()
    res = summarize(raw)
    res["params"] = {"rounds": rounds, "seconds": secs, "rate": rate, "body_bytes": 32768,
                     "gateway_bin": gateway_bin, "compare_bin": compare}
    lines = report({n: r for n, r in res.items() if n != "params"}, rounds, secs, rate,
                   routers, compare)
    return res, lines
