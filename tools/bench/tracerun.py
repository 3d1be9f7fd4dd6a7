"""One replay of the Mooncake trace (data/README.md) on real processes, for
trace.py: 8 fresh mockllm instances, one router or several in front of them,
one pgload --workload trace run, and what it measured, in model time.

The fleet. Eight instances at mockllm's default calibration (36,600 prefill
tokens/s, 61.5 ms TTFT overhead, 25 ms a decoded token), at --time-scale K
(runs.py: a latency measured x K is the model's). --no-cache-output: the
trace's prompts are block ids, never the text an instance generated, so
caching output would only crowd out prompt blocks. Each instance's KV cache,
CAP = distinct blocks x 512 / 3 / 8 tokens (3,899,520 for the whole file's
182,790 blocks): the instances' caches together hold a third of the trace's
distinct blocks, tracesim's default (--cache-frac 1/3), so the simulator and
the real run share a fleet. CACHE_AWARE's gateway is told the same CAP
(--cache-capacity): what it models per backend is what each one holds.

The load. pgload replays the trace at its own times compressed by S = RHO x
C x D / W (pgload --help): C is the fleet's prefill capacity in wall time,
36,600 x K x the instances' speeds summed, so at RHO = 1 the prefill work a
single infinite cache would leave equals what the fleet can do. No warm-up
(unlike runs.py): the replay starts on empty caches, as tracesim's does, so
its first minutes are cold for every router alike.

Figures. TTFT from pgload's JSON x K; the hit rate, each instance's share of
requests and of prompt tokens from the instances' own counters
(vllm:prefix_cache_hits_total / _queries_total and mockllm_requests_total
deltas over the run); the queue, every instance's
vllm:num_requests_waiting sampled once a wall second (mean over samples and
instances, and the max). Every process is stopped on every exit path and
every wait is bounded.
"""
import gzip
import json
import os
import threading
import time

import fleet
import runs
from netutil import metric_family

TRACE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                     "mooncake-conversation.jsonl.gz")
INSTANCES = 8
BLOCK = 512  # tokens of one trace block id
PREFILL_TPS = 36600  # mockllm's calibrated prefill rate (model time)
CACHE_SHARE = 3  # the caches together hold 1/CACHE_SHARE of the distinct blocks
MAX_CONNS = 4096
# A reference router is this many refrouter.py processes, pgload sending each
# request to one of them at random. Its rules keep no state (every decision
# asks the instances), so two processes are the same router; one Python loop
# relaying every SSE event (~300 streams at 6.25 ms a token at K 4) lags,
# and its lag counts K times in model time.
REF_PROCS = 2
# pgload ends a run by its last arrival + its trace timeout (600 s) + 1 s;
# this much more before the run is called hung and killed.
PGLOAD_SLACK_S = 660
ROUTERS = ("random", "least_outstanding_requests", "prefix_aware", "cache_aware", "haproxy",
           "ref-cache-first", "ref-predicted-ttft")
REFS = ("ref-cache-first", "ref-predicted-ttft")
# The part's runs (trace.py's docstring)
LOADS = (0.7, 0.9, 1.1)
BASE_LOAD = 0.5  # CACHE_AWARE's hit rate here is the baseline of a target
HETERO_ROUTERS = ("cache_aware", "least_outstanding_requests") + REFS
HETERO_LOADS = (0.7, 0.9)
FAST, FAST_SPEED = (0, 1), 2.0  # instances 1 and 2 (indices 0, 1) twice as fast
SLOW_ROUTERS = ("cache_aware",) + REFS
SLOW_LOAD = 0.7
SLOW = (2, 0.5, 0.5)  # instance 3 to half speed once half the requests were sent
WINDOW_S, BEFORE, AFTER = 10, 3, 9  # model s; windows before / from the slowdown
FLEET_GATEWAYS, FLEET_LOAD = 4, 0.9
LABELS = dict(runs.LABELS, **{"ref-cache-first": "REF cache-first",
                              "ref-predicted-ttft": "REF predicted-TTFT"})
_FACTS = {}


def key(router, load):
    """A run's key in the results: ROUTER@LOAD."""
    return "%s@%g" % (router, load)


def facts(path=TRACE):
    """The trace's arrival times (ms), W (prompt tokens one infinite prefix
    cache would not hold, walking it in order), D (its span, s) and distinct
    block ids, computed as data/README.md does (pgload prints the same)."""
    if path not in _FACTS:
        times, seen, work = [], set(), 0
        with gzip.open(path, "rt") as f:
            for line in f:
                r = json.loads(line)
                times.append(r["timestamp"])
                ids, k = r["hash_ids"], 0
                while k < len(ids) and ids[k] in seen:
                    k += 1
                work += r["input_length"] - min(k * BLOCK, r["input_length"])
                seen.update(ids)
        _FACTS[path] = {"times_ms": times, "W": work, "D_s": (times[-1] - times[0]) / 1000.0,
                        "distinct_blocks": len(seen)}
    return _FACTS[path]


def capacity():
    """Each instance's --kv-capacity-tokens (and the gateway's --cache-capacity)."""
    return facts()["distinct_blocks"] * BLOCK // CACHE_SHARE // INSTANCES


def fleet_tps(scale, speeds=None):
    """C: the fleet's prefill tokens per wall second."""
    return PREFILL_TPS * scale * sum((speeds or {}).get(i, 1.0) for i in range(INSTANCES))


def speedup(load, tps):
    f = facts()
    return load * tps * f["D_s"] / f["W"]


def scheduled_s(index, load, tps):
    """Wall seconds after pgload's start at which it sends the request index."""
    t = facts()["times_ms"]
    return (t[index] - t[0]) / 1000.0 / speedup(load, tps)


def replayed(requests):
    return min(requests or len(facts()["times_ms"]), len(facts()["times_ms"]))


def start_router(build, router, addrs, logdir, scale, gw_args=()):
    """The router's processes: one, or REF_PROCS for a reference."""
    if router not in REFS:
        return [runs.router(build, router, addrs, logdir, cache_capacity=capacity(),
                            gw_args=gw_args)]
    procs = []
    try:
        for _ in range(REF_PROCS):
            # the rule's one-second margin, in model time (refrouter --help)
            procs.append(fleet.RefRouter(addrs, logdir, router[len("ref-"):],
                                         margin_s=1.0 / scale))
    except Exception:
        for p in procs:
            p.stop()
        raise
    return procs


def counters(ports):
    """[(prefix-cache hit tokens, query tokens, /v1/completions requests)]
    of each instance."""
    out = []
    for p in ports:
        m = fleet.get(p, "/metrics")
        req = metric_family(m, "mockllm_requests_total")
        out.append((fleet.prom(m, "vllm:prefix_cache_hits_total"),
                    fleet.prom(m, "vllm:prefix_cache_queries_total"),
                    req.get('mockllm_requests_total{path="/v1/completions"}', 0.0)))
    return out


class QueueSampler(threading.Thread):
    """Every instance's vllm:num_requests_waiting, once every period s."""

    def __init__(self, ports, period=1.0):
        super().__init__(daemon=True)
        self.ports, self.period = ports, period
        self.samples = []  # [waiting of each instance]
        self.halt = threading.Event()

    def run(self):
        while not self.halt.wait(self.period):
            try:
                self.samples.append([fleet.prom(fleet.get(p, "/metrics", 1.0),
                                                "vllm:num_requests_waiting")
                                     for p in self.ports])
            except (OSError, ValueError):
                pass  # a sample lost, not the run

    def finish(self):
        """Waiting requests over the samples and instances (mean, max), and
        each instance's own (by_instance: [(mean, max)])."""
        self.halt.set()
        self.join(5)
        flat = [v for s in self.samples for v in s]
        cols = [[s[i] for s in self.samples] for i in range(len(self.ports))]
        return {"waiting_mean": sum(flat) / len(flat) if flat else None,
                "waiting_max": max(flat) if flat else None, "samples": len(self.samples),
                "waiting_by_instance": [(sum(c) / len(c), max(c)) if c else (None, None)
                                        for c in cols]}


class SlowDown(threading.Thread):
    """POST /mock/speed {"factor": F} to one instance at_s wall seconds into
    pgload's replay. pgload's clock starts when it sends request 0 (due at
    once), so its start is taken as the moment the first request reaches an
    instance, polled every 20 ms; at_s is then the slowdown's time on
    pgload's clock (its CSV's start_us / 1e6), within ~20 ms."""

    def __init__(self, ports, index, factor, at_s, wait_start_s=120.0):
        super().__init__(daemon=True)
        self.ports, self.index, self.factor, self.at_s = ports, index, factor, at_s
        self.wait_start_s = wait_start_s
        self.halt = threading.Event()
        self.done_at_s = self.error = None

    def requests_seen(self):
        n = 0
        for p in self.ports:
            fam = metric_family(fleet.get(p, "/metrics", 1.0), "mockllm_requests_total")
            n += sum(v for k, v in fam.items() if "completions" in k)  # match or completion
        return n

    def run(self):
        try:
            base, deadline = self.requests_seen(), time.monotonic() + self.wait_start_s
            while self.requests_seen() == base:
                if time.monotonic() > deadline or self.halt.wait(0.02):
                    self.error = "no request reached the instances"
                    return
            t0 = time.monotonic()
            if self.halt.wait(max(0.0, t0 + self.at_s - time.monotonic())):
                return
            fleet.http(self.ports[self.index], "/mock/speed", "POST",
                       json.dumps({"factor": self.factor}))
            self.done_at_s = time.monotonic() - t0
        except (OSError, ValueError) as e:
            self.error = "POST /mock/speed: %s" % e

    def stop(self):
        self.halt.set()
        self.join(5)


def replay(opts, out, name, router, load, speeds=None, slow=None, gateways=1, gw_args=(),
           inst_args=(), pgload_args=(), queue_period=1.0):
    """One run. speeds: {instance index: --speed F}; slow: (index, factor,
    fraction of the requests sent) for a slowdown partway; gateways > 1:
    that many routers (gw_args: their prefixgate flags), pgload sending each
    request to one of them at random; inst_args, pgload_args: more flags
    for every instance, for pgload (--no-stream); the instances' queues
    sampled every queue_period wall s. Results in model time; raw JSON and
    CSV in out."""
    scale, n = opts.time_scale, replayed(opts.trace_requests)
    logdir = os.path.join(out, "logs")
    os.makedirs(logdir, exist_ok=True)
    tps = fleet_tps(scale, speeds)
    span = scheduled_s(n - 1, load, tps)
    t_start = time.monotonic()
    inst = fleet.Instances(opts.build, INSTANCES, logdir,
                           ["--time-scale", "%g" % scale, "--no-cache-output",
                            "--kv-capacity-tokens", str(capacity())] + list(inst_args),
                           extra={i: ["--speed", "%g" % f] for i, f in (speeds or {}).items()})
    rts, sampler, slower = [], None, None
    try:
        for _ in range(gateways):
            rts += start_router(opts.build, router, inst.addrs(), logdir, scale, gw_args)
        before = counters(inst.ports)
        sampler = QueueSampler(inst.ports, queue_period)
        sampler.start()
        if slow:
            index, factor, frac = slow
            slower = SlowDown(inst.ports, index, factor,
                              scheduled_s(int(frac * n), load, tps))
            slower.start()
        args = ["--workload", "trace", "--trace", TRACE, "--load", "%g" % load,
                "--capacity-tokens-per-s", "%g" % tps, "--max-conns", str(MAX_CONNS),
                "--label", name] + list(pgload_args)
        if opts.trace_requests:
            args += ["--trace-requests", str(n)]
        csv = os.path.join(out, name + ".csv")
        r = fleet.pgload(opts.build, ",".join("127.0.0.1:%d" % rt.port for rt in rts),
                         os.path.join(out, name + ".json"), args, logdir, csv,
                         timeout=span + PGLOAD_SLACK_S)
        after = counters(inst.ports)
        queue = sampler.finish()
        keep_gateway_state(rts, os.path.join(logdir, name))
        res = figures(r, before, after, scale)
        res.update(queue)
        res.update({"router": router, "load": load, "scale": scale, "csv": csv,
                    "gateways": gateways, "speeds": {str(i + 1): f for i, f in
                                                     (speeds or {}).items()},
                    "capacity_tokens_per_s": tps, "replay_s": span,
                    "targets": r.get("targets", {})})
        if router in REFS:
            st = [rt.stats() for rt in rts]
            n = sum(s["decisions"] for s in st)
            res["ref"] = {k: sum(s[k] for s in st) for k in ("decisions", "passed_over",
                                                             "no_match", "bad_gateway")}
            res["ref"]["processes"] = len(st)
            res["ref"]["mean_decision_ms"] = sum(
                s["mean_decision_ms"] * s["decisions"] for s in st) / n if n else 0.0
        if slower:
            slower.join(5)
            res["slow"] = {"instance": slow[0] + 1, "factor": slow[1], "fraction": slow[2],
                           "at_s": slower.done_at_s, "error": slower.error}
        res["run_wall_s"] = time.monotonic() - t_start
        return res
    finally:
        if slower:
            slower.stop()
        if sampler:
            sampler.halt.set()
        for rt in rts:
            rt.stop()
        inst.stop()


def keep_gateway_state(rts, stem):
    """Each prefixgate's /metrics and /backends as the run ended (its learned
    speeds, queues, prediction error, fleet counters), in STEM-gwI-*.txt:
    what the figures alone do not explain."""
    for i, rt in enumerate(rt for rt in rts if isinstance(rt, fleet.Gateway)):
        for path in ("/metrics", "/backends"):
            try:
                text = fleet.get(rt.admin, path, 5.0)
            except OSError:
                continue
            with open("%s-gw%d-%s.txt" % (stem, i, path.strip("/")), "w") as f:
                f.write(text)


def figures(r, before, after, scale):
    """pgload's summary in model time (runs.summarise) and the instances'
    counters over the run: hit rate, shares of requests and prompt tokens."""
    d = [tuple(a - b for a, b in zip(x, y)) for x, y in zip(after, before)]
    hits, queries, reqs = (sum(c[k] for c in d) for k in range(3))
    res = runs.summarise(r, hits / queries if queries else 0.0, scale)
    res["hit_rate"] = res.pop("kv_hit_rate")
    res["share_requests"] = [c[2] / reqs if reqs else 0.0 for c in d]
    res["share_tokens"] = [c[1] / queries if queries else 0.0 for c in d]
    res["trace"] = r.get("trace", {})
    return res
