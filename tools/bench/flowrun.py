"""One run of the flow part (flow.py) on real processes, and its overhead
rounds: what each measured, in model time.

A run. The trace fleet of tracerun.py: 8 fresh mockllm instances at
--time-scale K, prompt caching only, caches that together hold a third of
the trace's distinct blocks; one CACHE_AWARE prefixgate (--cache-capacity
as the instances' caches), with --flow-control or without, writing an
access log; one pgload --workload trace process per tenant, all started at
once, each replaying its own slice of the trace (--trace-start,
--trace-requests) at its own --load of the fleet's prefill capacity, with
its own headers: Authorization: Bearer TOKEN (the tenant), X-Request-Id
(the same for all of a tenant's requests: how the access log's lines are
told apart, as a token's label is its hash), X-Prefixgate-Priority and
X-Prefixgate-Deadline-Ms when it has them, and its own pgload --seed (the
text of a block id), so that no tenant finds another's prompts cached.

Gateway durations in model time. The gateway measures the instances in
wall time, and they run K times faster than the model: every duration it
is given, InstanceQueueMs, a deadline, --flow-starve-ms, is the model's
divided by K (rounded to the millisecond, at least 1), and whatever it
reports in wall time is multiplied by K here.

Figures per tenant: pgload's summary (runs.summarise: TTFT x K; its
cached_ratio, the tenant's own hit rate), 429s from its CSV, its lines of
the access log: queue_us, the time waited in the gateway, also split by
whether another of the tenant's requests was waiting when it came (its
requests go in order: a burst waits for itself); requests dispatched and
refused; for a tenant with a deadline, those dispatched after it
(queue_us + route_us, the time from the request's first byte to its
backend chosen, past the deadline).

Per run: output tokens and requests completed per model second, over the
whole run (every tenant's, from the first pgload's start to the last
one's last completion) and in the saturated window (WINDOW: from a fifth
of the arrivals' span to the last arrival; a request's output tokens
spread evenly from its first token to its end), there also the requests
whose prefill ended and the prompt tokens those prefilled; the fleet's
hit rate (the instances' counters); the requests that reached an
instance (theirs); the gateway's queue (GET /flow: mean, max; its
counters at the end); the instances' waiting requests; the instances
idle while work waited (nothing to prefill, sampled every quarter wall
second), and of those the ones the gateway knew had none of its
requests (its room check took them for full); the CPU time of the
gateway, the instances, the kernel's threads and everything else
(pgload, other jobs) while the tenants ran: on 2 CPUs the instances'
timers run late when the CPUs are busy, and every lag counts K times.

The overhead rounds: 2 mockllm instances that answer at once, CACHE_AWARE
gateways with flow control off, on, and off again (a copy: how far apart
two identical gateways land, the noise), a 1 KiB chat body, one output
token, not streamed, open loop at a fixed rate; per round each gateway in
turn (the order rotated), its p50 and p99 latency from pgload and its own
mean routing latency (prefixgate_routing_latency_microseconds over the
round). Real time, nothing scaled.

Every process is stopped on every exit path; every wait is bounded.
"""
import datetime
import json
import os
import subprocess
import threading
import time

import cpu
import fleet
import overhead
import runs
import tracerun
from netutil import metric_family

INSTANCE_ARGS = ["--no-cache-output"]  # with --time-scale and --kv-capacity-tokens
MAX_CONNS = tracerun.MAX_CONNS  # per pgload process
SAMPLE_S = 0.25  # the instances' queues and the gateway's, this often (Sampler)
MATCH_BODY = json.dumps({"model": "m", "prompt": "x", "max_tokens": 1})
# a 1 KiB chat body, one output token, not streamed (the overhead rounds)
SMALL = ["--workload", "fixed", "--body-bytes", "1024", "--no-stream", "--max-tokens", "1",
         "--seed", "1"]
OVERHEAD_PATHS = ("off", "on", "off-copy")
# The saturated window, in fractions of the arrivals' span: past the first
# fifth (the instances' queues filling), to the last arrival.
WINDOW = (0.2, 1.0)
WRAP_US = 2 ** 32 / 1000.0  # route_us wraps here (access(): a negative remainder)


def wall_ms(model_ms, scale):
    """A gateway duration: the model's, in wall ms (at least 1)."""
    return max(1, int(round(model_ms / scale)))


def tenant(name, token, start, n, load, seed, prio=None, deadline_ms=None, workload=None,
           span_s=None, extra=()):
    """A tenant of a run: its slice of the trace [start, start + n), its
    load (of the fleet's prefill capacity), its pgload --seed (the text of
    each block id), its class and deadline (model ms) if it sends them.
    workload: pgload's workload and load flags instead of the trace's slice
    (start and n then unused), whose arrivals last span_s wall s; extra:
    more pgload flags (--no-stream)."""
    return {"name": name, "token": token, "start": start, "n": n, "load": load,
            "seed": seed, "prio": prio, "deadline_ms": deadline_ms,
            "workload": list(workload) if workload else None, "span_s": span_s,
            "extra": list(extra)}


def trace_fleet(scale):
    """The fleet of a run (replay()): tracerun.py's, at time scale K."""
    return {"instances": tracerun.INSTANCES, "args": [
        "--time-scale", "%g" % scale, "--kv-capacity-tokens", str(tracerun.capacity())] +
        INSTANCE_ARGS, "tps": tracerun.fleet_tps(scale), "cache_capacity": tracerun.capacity()}


def tenant_span(t, tps):
    """How long a tenant's arrivals last, wall s."""
    if t.get("workload"):
        return t["span_s"]
    return (tracerun.scheduled_s(t["start"] + t["n"] - 1, t["load"], tps) -
            tracerun.scheduled_s(t["start"], t["load"], tps))


def tenant_args(t, tps):
    """pgload's flags for a tenant's requests, less its output files."""
    if t.get("workload"):
        return list(t["workload"])
    return ["--workload", "trace", "--trace", tracerun.TRACE, "--trace-start", str(t["start"]),
            "--trace-requests", str(t["n"]), "--load", "%g" % t["load"],
            "--capacity-tokens-per-s", "%g" % tps]


def request_id(t):
    return "flowbench-" + t["name"]


def headers(t, scale):
    h = ["Authorization: Bearer " + t["token"], "X-Request-Id: " + request_id(t)]
    if t["prio"]:
        h.append("X-Prefixgate-Priority: " + t["prio"])
    if t["deadline_ms"]:
        h.append("X-Prefixgate-Deadline-Ms: %d" % wall_ms(t["deadline_ms"], scale))
    return [a for v in h for a in ("--header", v)]


def gateway_args(flow, scale, alog, cache_capacity):
    """prefixgate's flags: CACHE_AWARE as tracerun's (--cache-capacity
    unless None), the access log and, flow: {"queue_ms", "starve_ms"} in
    model ms (None: the gateway's default), or None (off)."""
    args = ["--strategy", "cache_aware", "--access-log", alog]
    if cache_capacity:
        args += ["--cache-capacity", str(cache_capacity)]
    if flow:
        args.append("--flow-control")
        if flow.get("queue_ms") is not None:
            args += ["--flow-instance-queue-ms", str(wall_ms(flow["queue_ms"], scale))]
        if flow.get("starve_ms") is not None:
            args += ["--flow-starve-ms", str(wall_ms(flow["starve_ms"], scale))]
    return args


class Sampler(threading.Thread):
    """Every period s: each instance's prefill queue (mockllm's POST
    /mock/match: queue_tokens, the prefill still ahead; waiting), the
    gateway's view of it (GET /backends: its own requests there before
    their first token, its predicted wait) and, flow: the gateway's queue
    (GET /flow: its first pool's requests waiting, by class)."""

    def __init__(self, gw, ports, flow, period=SAMPLE_S):
        super().__init__(daemon=True)
        self.gw, self.ports, self.flow, self.period = gw, ports, flow, period
        self.samples = []  # (gateway queued or None, [(queue_tokens, waiting, own, pred_ms)])
        self.halt = threading.Event()

    def sample(self):
        queued = None
        if self.flow:
            queued = json.loads(fleet.get(self.gw.admin, "/flow", 1.0))["pools"][0]["queued"]
        view = {b["address"]: b["load"] for b in json.loads(fleet.get(self.gw.admin,
                                                                       "/backends", 1.0))}
        row = []
        for p in self.ports:
            m = json.loads(fleet.http(p, "/mock/match/v1/completions", "POST", MATCH_BODY, 1.0))
            v = view["127.0.0.1:%d" % p]
            row.append((m["queue_tokens"], m["waiting"], v["prefill_queue_requests"],
                        v["predicted_wait_ms"]))
        return queued, row

    def run(self):
        while not self.halt.wait(self.period):
            try:
                self.samples.append(self.sample())
            except (OSError, ValueError, KeyError, IndexError):
                pass  # a sample lost, not the run

    def finish(self):
        """The instances' waiting requests (mean, max); the gateway's queue
        (mean, max); and, over the samples where work waited (in the
        gateway, or at an instance), the instances with nothing to prefill
        (idle_pct of instance samples), of those the ones the gateway
        counted none of its own requests at (idle_known_pct), and their
        predicted wait as the gateway saw it (median, wall ms)."""
        self.halt.set()
        self.join(5)
        flat = [x for _, row in self.samples for x in row]
        q = [s[0] for s in self.samples if s[0] is not None]
        busy = [row for g, row in self.samples if (g or 0) > 0 or any(x[1] for x in row)]
        idle = [x for row in busy for x in row if x[0] == 0]
        known = sorted(x[3] for x in idle if x[2] == 0)
        n = sum(len(row) for row in busy)
        return {"waiting_mean": sum(x[1] for x in flat) / len(flat) if flat else None,
                "waiting_max": max(x[1] for x in flat) if flat else None,
                "samples": len(self.samples),
                "queued_mean": sum(q) / len(q) if q else None, "queued_max": max(q) if q else None,
                "busy_samples": len(busy),
                "idle_pct": 100.0 * len(idle) / n if n else None,
                "idle_known_pct": 100.0 * len(known) / n if n else None,
                "idle_known_pred_ms": known[len(known) // 2] if known else None}


def pgloads(build, target, jobs, logdir, timeout):
    """Run one pgload per job [(name, args, json path, csv path)] at once;
    [(its JSON summary, its start in s after the first one's)]. Each is
    killed, and the run fails, past timeout s."""
    procs, out = [], []
    try:
        for name, args, js, csv in jobs:
            cmd = [os.path.join(build, "pgload"), "--target", target, "--json", js,
                   "--csv", csv, "--quiet"] + list(args)
            log = os.path.join(logdir, "pgload-%s.log" % name)
            with open(log, "w") as f:
                f.write("$ %s\n" % " ".join(cmd))
            procs.append((fleet.spawn(cmd, log + ".out"), time.monotonic(), cmd))
        end = time.monotonic() + timeout
        for p, _, cmd in procs:
            try:
                rc = p.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise RuntimeError("pgload still running after %g s, killed: %s" % (
                    timeout, " ".join(cmd)))
            if rc not in (0, 1):  # 1: some requests failed (counted); 2: no run
                raise RuntimeError("pgload failed (%d): %s (see %s)" % (rc, " ".join(cmd),
                                                                        logdir))
        t0 = min(t for _, t, _ in procs)
        for (_, _, js, _), (_, t, _) in zip(jobs, procs):
            with open(js) as f:
                out.append((json.load(f), t - t0))
        return out
    finally:
        for p, _, _ in procs:
            fleet.stop(p)


def csv_counts(rows):
    """(responses 429, other failures, output tokens of the requests
    completed) of a pgload CSV's rows."""
    n429 = other = tokens = 0
    for row in rows:
        if row["status"] == "429":
            n429 += 1
        elif row["error"]:
            other += 1
        else:
            tokens += max(0, int(row["completion_tokens"] or 0))
    return n429, other, tokens


def window(rows_at, w0, w1, scale):
    """What the fleet completed between wall s w0 and w1 of the run (the
    first pgload's clock), per model second: output tokens (each request's
    spread evenly from its first token to its end), first tokens (requests
    whose prefill ended) and the prompt tokens those prefilled (not
    cached). rows_at: [(a pgload CSV's rows, its start offset s)]."""
    tokens = firsts = prefill = 0.0
    for rows, off in rows_at:
        for r in rows:
            if r["error"] or not r["ttft_us"]:
                continue
            s = off + int(r["start_us"]) / 1e6
            a, b = s + int(r["ttft_us"]) / 1e6, s + int(r["e2e_us"]) / 1e6
            n = max(0, int(r["completion_tokens"] or 0))
            if w0 <= a < w1:
                firsts += 1
                prefill += max(0, int(r["prompt_tokens"]) - max(0, int(r["cached_tokens"])))
            if b > a:
                tokens += n * max(0.0, min(b, w1) - max(a, w0)) / (b - a)
            elif w0 <= a < w1:
                tokens += n
    d = (w1 - w0) * scale
    return {"from_s": w0 * scale, "to_s": w1 * scale, "output_tokens_per_s": tokens / d,
            "first_tokens_per_s": firsts / d, "prefill_tokens_per_s": prefill / d}


def pctl(xs, p):
    """Nearest-rank percentile of xs (sorted), as pgload's."""
    if not xs:
        return None
    k = min(len(xs), max(1, int(p / 100.0 * len(xs) + 0.999999)))
    return xs[k - 1]


def access(path, tenants, scale):
    """Per tenant (by X-Request-Id), from the access log: lines, statuses,
    requests dispatched to an instance and refused 429, their wait in the
    gateway (model ms: mean, p50, p99, max) and, with a deadline, those
    dispatched after it (queue_us + route_us > its deadline in wall us),
    its 200s whose first token came after it by the gateway's clock (late_200:
    ttft_us, from its first byte) and the latest dispatch against the
    deadline; refused_short: its 429s
    logged with less than half the bytes in of any of its dispatched
    requests (refused before their bodies were read whole). headless: the lines of no
    request id and no method, by status (what the gateway parsed as a
    request where none began).

    route_us of a request that waited is the time from its first byte to
    its backend chosen less queue_us, and queue_us counts from the worker's
    millisecond clock when it was queued, which can be earlier than its
    first byte: the difference is then negative, and written as its 32-bit
    nanosecond remainder (/1000: 4,294,9xx us). Such a value is read as the
    negative number it stands for (route_wrapped counts them); queue_us +
    route_us is the time from first byte to dispatch either way."""
    ids = {request_id(t): t for t in tenants}
    per = {t["name"]: {"lines": 0, "status": {}, "dispatched": 0, "refused_429": 0,
                       "waits": [], "past_deadline": 0, "late_200": 0, "latest_vs_deadline": None,
                       "route_wrapped": 0, "bytes_429": [], "bytes_min": None}
           for t in tenants}
    other, headless = 0, {}
    try:
        f = open(path)
    except OSError:
        return None
    with f:
        for line in f:
            try:
                x = json.loads(line)
            except ValueError:
                other += 1
                continue
            t = ids.get(x.get("request_id"))
            if t is None:
                other += 1
                if not x.get("method"):
                    headless[str(x.get("status"))] = headless.get(str(x.get("status")), 0) + 1
                continue
            d = per[t["name"]]
            d["lines"] += 1
            st = str(x["status"])
            d["status"][st] = d["status"].get(st, 0) + 1
            route = x["route_us"]
            if route >= WRAP_US / 2:
                route -= WRAP_US
                d["route_wrapped"] += 1
            if x["backend"]:
                d["dispatched"] += 1
                if d["bytes_min"] is None or x["bytes_in"] < d["bytes_min"]:
                    d["bytes_min"] = x["bytes_in"]
                d["waits"].append((started_ms(x["time"]), x["queue_us"]))
                if t["deadline_ms"]:
                    limit = wall_ms(t["deadline_ms"], scale) * 1000.0
                    used = x["queue_us"] + route
                    d["past_deadline"] += used > limit
                    d["late_200"] += x["status"] == 200 and x["ttft_us"] > limit
                    v = used / limit
                    if d["latest_vs_deadline"] is None or v > d["latest_vs_deadline"]:
                        d["latest_vs_deadline"] = v
            elif x["status"] == 429:
                d["refused_429"] += 1
                d["bytes_429"].append(x["bytes_in"])
    for d in per.values():
        short = d.pop("bytes_429")
        d["refused_short"] = (sum(1 for b in short if 2 * b < d["bytes_min"])
                              if d["bytes_min"] is not None else None)
        sw = d.pop("waits")
        d["wait_ms"] = wait_stats([q for _, q in sw], scale)
        behind, alone = behind_own(sw)
        d["wait_behind_own_ms"] = wait_stats(behind, scale)
        d["wait_not_behind_ms"] = wait_stats(alone, scale)
    return {"tenants": per, "other_lines": other, "headless": headless}


def started_ms(when):
    """The access log's time (its request's start, UTC, ms) in epoch ms."""
    t = datetime.datetime.strptime(when, "%Y-%m-%dT%H:%M:%S.%fZ")
    return t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000.0


def wait_stats(us, scale):
    """Waits in wall us as model ms: n, mean, p50, p99, max, how many waited."""
    ms = sorted(v / 1000.0 * scale for v in us)
    return {"n": len(ms), "mean": sum(ms) / len(ms) if ms else None, "p50": pctl(ms, 50),
            "p99": pctl(ms, 99), "max": ms[-1] if ms else None,
            "waited": sum(1 for v in ms if v > 0)}


def behind_own(sw):
    """[(start ms, queue us)] of one tenant's dispatched requests split in
    (the waits of those that arrived while another of the tenant's waited
    in the gateway, the others'): within a class, the tenant's requests
    go in its order, so a burst waits for itself."""
    behind, alone, until = [], [], None
    for start, q in sorted(sw):
        (behind if until is not None and start < until else alone).append(q)
        end = start + q / 1000.0
        until = end if until is None or end > until else until
    return behind, alone


def replay(opts, out, name, tenants, flow, fleet_spec=None):
    """One run: tenants (tenant()) at once through one gateway, flow
    control as gateway_args'. fleet_spec: {"instances", "args" (mockllm's
    flags), "tps" (their prefill tokens per wall s), "cache_capacity" (the
    gateway's, or None)}, default trace_fleet(K). Results in model time; raw
    JSON, CSV and the access log in out."""
    scale = opts.time_scale
    logdir = os.path.join(out, "logs")
    os.makedirs(logdir, exist_ok=True)
    spec = fleet_spec or trace_fleet(scale)
    tps = spec["tps"]
    span = max(tenant_span(t, tps) for t in tenants)
    alog = os.path.join(out, name + "-access.jsonl")
    if os.path.exists(alog):
        os.unlink(alog)
    t_start = time.monotonic()
    inst = fleet.Instances(opts.build, spec["instances"], logdir, spec["args"])
    gw = sampler = None
    try:
        gw = fleet.Gateway(opts.build, inst.addrs(), logdir,
                           gateway_args(flow, scale, alog, spec["cache_capacity"]) +
                           opts.gw_args)
        before = tracerun.counters(inst.ports)
        sampler = Sampler(gw, inst.ports, flow)
        sampler.start()
        jobs = []
        for t in tenants:
            label = "%s-%s" % (name, t["name"])
            jobs.append((label, tenant_args(t, tps) +
                         ["--max-conns", str(MAX_CONNS), "--seed", str(t["seed"]),
                          "--label", label] + headers(t, scale) + t.get("extra", []),
                         os.path.join(out, label + ".json"), os.path.join(out, label + ".csv")))
        roles = {gw.proc.pid: "gateway"}
        roles.update({p.pid: "instances" for p in inst.procs})
        c0, t0 = cpu.cpu_ns_by_role(roles, others=True), time.monotonic()
        loads = pgloads(opts.build, "127.0.0.1:%d" % gw.port, jobs, logdir,
                        span + tracerun.PGLOAD_SLACK_S)
        c1, t1 = cpu.cpu_ns_by_role(roles, others=True), time.monotonic()
        after = tracerun.counters(inst.ports)
        res = {"queue": sampler.finish(),
               "flow_end": json.loads(fleet.get(gw.admin, "/flow")) if flow else None}
        # CPU time while the tenants ran, in CPUs (1.0: one CPU all along)
        # (processes that ended meanwhile take their time with them: "other"
        # can come out below 0, shown as 0)
        res["cpu"] = {k: max(0.0, (c1[k] - c0.get(k, 0)) / 1e9 / (t1 - t0)) for k in c1}
        res["dropped_log_records"] = fleet.prom(fleet.get(gw.admin, "/metrics"),
                                                "prefixgate_access_log_dropped_total")
    finally:
        if sampler:
            sampler.halt.set()
        if gw:
            gw.stop()  # the access log drained and closed
        inst.stop()
    res.update(figures(tenants, jobs, loads, before, after, scale, span))
    res["access"] = access(alog, tenants, scale)
    res.update({"name": name, "flow": flow, "scale": scale, "tenants_cfg": tenants,
                "capacity_tokens_per_s": tps, "replay_s": span,
                "run_wall_s": time.monotonic() - t_start})
    return res


def figures(tenants, jobs, loads, before, after, scale, span):
    """Per tenant and for the run: completed work (over the whole run, and
    in the window of WINDOW of the arrivals' span), the fleet's hit rate,
    the requests the instances got."""
    d = [tuple(a - b for a, b in zip(x, y)) for x, y in zip(after, before)]
    hits, queries, reqs = (sum(c[k] for c in d) for k in range(3))
    per, tokens, ok, end, rows_at = {}, 0, 0, 0.0, []
    for t, job, (r, offset) in zip(tenants, jobs, loads):
        rows = fleet.read_csv(job[3])
        rows_at.append((rows, offset))
        s = runs.summarise(r, r.get("cached_ratio"), scale)
        s["hit_rate"] = s.pop("kv_hit_rate")
        s["n429"], s["failed_other"], s["out_tokens"] = csv_counts(rows)
        s["csv"], s["start_offset_s"] = job[3], offset
        per[t["name"]] = s
        tokens += s["out_tokens"]
        ok += r["ok"]
        end = max(end, offset + r["wall_s"])
    return {"tenants": per, "hit_rate": hits / queries if queries else 0.0,
            "instance_requests": reqs, "ok": ok, "makespan_s": end * scale,
            "output_tokens_per_s": tokens / (end * scale) if end else 0.0,
            "req_per_s": ok / (end * scale) if end else 0.0,
            "window": window(rows_at, WINDOW[0] * span, WINDOW[1] * span, scale)}


# --- run 6: the gateway's own cost, flow control on and off -------------------
def route_latency(port):
    """(sum in us, count) of the gateway's prefixgate_routing_latency_microseconds."""
    m = fleet.get(port, "/metrics")
    s = metric_family(m, "prefixgate_routing_latency_microseconds_sum")
    c = metric_family(m, "prefixgate_routing_latency_microseconds_count")
    return sum(s.values()), sum(c.values())


def overhead_rounds(opts, out):
    """Run 6: rounds x each gateway in turn at opts.overhead_rate req/s for
    opts.overhead_s s. {path: [per round {p50_us, p99_us, route_us, ...}]}."""
    logdir = os.path.join(out, "logs")
    os.makedirs(logdir, exist_ok=True)
    inst = fleet.Instances(opts.build, 2, logdir, overhead.INSTANT)
    gws = {}
    try:
        for p in OVERHEAD_PATHS:
            args = ["--strategy", "cache_aware"] + (["--flow-control"] if p == "on" else [])
            gws[p] = fleet.Gateway(opts.build, inst.addrs(), logdir, args)
        res = {p: [] for p in OVERHEAD_PATHS}
        for rnd in range(opts.overhead_rounds):
            order = OVERHEAD_PATHS[rnd % 3:] + OVERHEAD_PATHS[:rnd % 3]
            for p in order:
                gw = gws[p]
                s0, c0 = route_latency(gw.admin)
                js = os.path.join(out, "flow-overhead-%s-%d.json" % (p, rnd))
                r = fleet.pgload(opts.build, "127.0.0.1:%d" % gw.port, js, SMALL + [
                    "--rate", "%g" % opts.overhead_rate, "--duration", "%g" % opts.overhead_s,
                    "--header", "Authorization: Bearer flowbench-overhead",
                    "--timeout-ms", "5000", "--label", "overhead-" + p], logdir,
                    timeout=opts.overhead_s + 30)
                s1, c1 = route_latency(gw.admin)
                res[p].append({"p50_us": r["e2e_ms"]["p50"] * 1e3,
                               "p99_us": r["e2e_ms"]["p99"] * 1e3,
                               "route_us": (s1 - s0) / (c1 - c0) if c1 > c0 else None,
                               "ok": r["ok"], "errors": r["errors"],
                               "req_per_s": r["req_per_s"],
                               "gen_lag_ms": r["max_timer_lag_ms"]})
            print("  flow: overhead round %d: p50 %s" % (rnd + 1, ", ".join(
                "%s %.1f us" % (p, res[p][-1]["p50_us"]) for p in OVERHEAD_PATHS)), flush=True)
        return res
    finally:
        for gw in gws.values():
            gw.stop()
        inst.stop()
