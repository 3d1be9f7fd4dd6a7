"""One benchmark run: fresh simulated instances, one router (prefixgate with
a strategy, or HAProxy), an optional fast-forward warm-up, one measured
pgload run; what it measured, in model time. Shared by bench.py and demo.py.

Time scale. The instances run --time-scale SCALE times faster than the model
they simulate (sim.c), and pgload offers SCALE times the model's request rate,
so a run needs 1/SCALE of the wall time. Every latency reported here is the
measured one x SCALE and every rate the measured one / SCALE: model time.
What the simulation does not scale (loopback, the router, the host's
scheduling) is magnified by SCALE in those figures; the overhead benchmark
measures the routers at full speed instead.

Warm-up. The published runs lasted 30-60 minutes, long enough that the first
request for each document (a cold miss whatever the routing) does not count.
A one-minute run with thousands of documents would be mostly cold misses, so
each run starts with a warm-up: WARMUP requests of the same workload (other
draws: --first-index), through the same router and strategy, answered by the
instances in fast-forward (X-Mock-Chunks: 1 — cache lookup and insertion at
once, no simulated time), and not counted. The caches are then in the state a
long run of that strategy leaves them in; the instances' counters are read
after the warm-up and again at the end.
"""
import json
import os
import subprocess
import threading
import time

import fleet

SCALE = 4.0
# CACHE_AWARE with its RoutingConfig (prefixgate --routing-config): n=3 places
# what nothing cached places on the least recently sent of its anchor's first
# 3 ring candidates (CacheAwareConfig.NewConversationChoices; doc/routing.md, How it
# routes), where plain CACHE_AWARE (the default, 1) takes the first.
CA_VARIANTS = {"ca_n3": {"RoutingStrategy": "CACHE_AWARE",
                         "CacheAwareConfig": {"NewConversationChoices": 3}}}
# CACHE_AWARE and its variants, run wherever CACHE_AWARE is.
CA_STRATEGIES = ["cache_aware"] + list(CA_VARIANTS)
STRATEGIES = ["random", "least_outstanding_requests", "prefix_aware"] + CA_STRATEGIES + [
    "haproxy"]
LABELS = {"random": "RANDOM", "least_outstanding_requests": "LEAST_OUTSTANDING",
          "prefix_aware": "PREFIX_AWARE", "cache_aware": "CACHE_AWARE",
          "ca_n3": "CACHE_AWARE n=3", "haproxy": "HAProxy hash",
          "pa_t10": "PREFIX_AWARE ct=10", "pa_t1024": "PREFIX_AWARE ct=1024"}
# Strategies only some gateway builds have: the word prefixgate --help must show.
OPTIONAL = {"cache_aware": "cache_aware", "ca_n3": "new-conversation-choices"}
_SUPPORT = {}


def supported(build, strategy):
    """Whether this build of prefixgate has the strategy (asked once)."""
    word = OPTIONAL.get(strategy)
    if word is None:
        return True
    if build not in _SUPPORT:
        try:
            r = subprocess.run([os.path.join(build, "prefixgate"), "--help"],
                               capture_output=True, text=True, timeout=10)
            _SUPPORT[build] = r.stdout + r.stderr
        except (OSError, subprocess.TimeoutExpired):
            _SUPPORT[build] = ""
    return word in _SUPPORT[build]


def available(build, strategies):
    """(the strategies this gateway can run, a note on those it cannot)."""
    keep = [s for s in strategies if supported(build, s)]
    skip = [s for s in strategies if s not in keep]
    note = ("note: %s skipped: %s/prefixgate --help does not offer %s" % (
        ", ".join(LABELS.get(s, s) for s in skip), build,
        ", ".join("--strategy " + OPTIONAL[s] for s in skip)) if skip else None)
    return keep, note

# Workload (a), see doc/benchmarks.md "Workloads": 6,000 documents of 8,000 tokens, Zipf
# s=0.3; each instance caches 11,000,000 tokens (~1,360 documents).
FLEET_ARGS = ["--kv-capacity-tokens", "11000000"]
WL_SHARED = ["--workload", "shared-prefix", "--docs", "6000", "--zipf", "0.3",
             "--max-tokens", "16", "--seed", "7"]


# Conversation workloads with pgload --history server (its default) wait for
# each reply before the next turn, and a turn asks for its drawn assistant
# length: at mockllm's calibrated 25 ms/token a mean ~275-token reply (median
# 200) takes ~7 model seconds, and 64 conversations could offer only ~9 of
# (b)'s 20 req/s. For these runs the instances decode 10x faster instead:
# 2.5 ms/token, a mean reply in ~0.7 s, near replay mode's 16 tokens x 25 ms
# = 0.4 s, so the WORKLOADS rates stay reachable with the same conversations.
# TTFT (waiting + prefill + overhead, what the tables report) keeps its
# calibration: decode does not slow prefill in the model (sim.c), and the
# running count stays far below --max-num-seqs. Raising the conversations
# instead would have changed the workload (its concurrency, and the
# ConcurrencyThreshold overflow with ~7 s replies in flight).
CONV_WORKLOADS = ("multi-turn", "agentic", "short-chat")
CONV_DECODE_MS = 2.5


def last_flag(args, flag, default=None):
    """The value of the last `flag value` pair in args (the one that wins)."""
    args = list(args)
    value = default
    for a, v in zip(args, args[1:]):
        if a == flag:
            value = v
    return value


def server_history(workload):
    """Whether pgload's workload args re-send the server's replies."""
    if not set(workload) & set(CONV_WORKLOADS):
        return False
    # pgload's default is --history server
    return last_flag(workload, "--history", "server") != "replay"


def conv_inst_args(workload):
    """Instance flags a workload needs: fast decode for server history."""
    return ["--decode-ms-per-token", "%g" % CONV_DECODE_MS] if server_history(workload) else []


def kv_capacity(inst_args):
    """Each instance's --kv-capacity-tokens (the last one given wins)."""
    return last_flag(FLEET_ARGS + list(inst_args), "--kv-capacity-tokens")


def router(build, strategy, backends, logdir, prefix_length=None, threshold=None,
           cache_capacity=None, gw_args=()):
    if strategy == "haproxy":
        return fleet.HAProxy(backends, logdir, prefix_bytes=prefix_length or 4096)
    if strategy in CA_VARIANTS:
        rc = os.path.join(logdir, "routing-%s.json" % strategy)
        with open(rc, "w") as f:
            json.dump(CA_VARIANTS[strategy], f)
        args = ["--routing-config", rc]
    else:
        args = ["--strategy", "prefix_aware" if strategy.startswith("pa_") else strategy]
    if (strategy == "cache_aware" or strategy in CA_VARIANTS) and cache_capacity:
        # what the gateway models per backend = what each instance holds
        args += ["--cache-capacity", str(cache_capacity)]
    if prefix_length:
        args += ["--prefix-length", str(prefix_length)]
    if threshold:
        args += ["--concurrency-threshold", str(threshold)]
    return fleet.Gateway(build, backends, logdir, args + list(gw_args))


def summarise(r, kv_hit, scale=SCALE):
    """The pgload JSON summary converted to model time, plus the instances'
    KV hit rate over the measured part."""
    ms = lambda d: {k: (v * scale if v is not None else None) for k, v in d.items()}  # noqa
    return {
        "requests": r["requests"], "ok": r["ok"], "errors": r["errors"],
        "ttft_ms": ms(r["ttft_ms"]), "e2e_ms": ms(r["e2e_ms"]),
        "req_per_s": r["req_per_s"] / scale,
        "output_tokens_per_s": r["output_tokens_per_s"] / scale,
        "kv_hit_rate": kv_hit, "cached_ratio": r["cached_ratio"],
        "share_min_pct": r["share_min_pct"], "share_max_pct": r["share_max_pct"],
        "backends": r["backends"], "gen_cpu_pct": r["cpu_pct"],
        "gen_max_timer_lag_ms": r["max_timer_lag_ms"],
        "gen_arrivals_delayed": r["arrivals_delayed"], "wall_s": r["wall_s"],
    }


def run(build, outdir, name, strategy, workload, rate, duration, warmup=0, instances=7,
        inst_args=(), prefix_length=None, threshold=None, events=(), sample=False,
        scale=SCALE, gateways=1, gw_args=()):
    """Run one strategy on one workload; results (and raw CSV/JSON) in outdir.
    events: [(wall seconds into the measured run, fn(instances, router))].
    gateways > 1: that many independent routers (no shared state) in front
    of the same instances, each request sent to one of them at random.
    gw_args: more prefixgate flags (not for HAProxy)."""
    logdir = os.path.join(outdir, "logs")
    os.makedirs(logdir, exist_ok=True)
    inst = fleet.Instances(build, instances, logdir,
                           FLEET_ARGS + conv_inst_args(workload) +
                           ["--time-scale", "%g" % scale] + list(inst_args))
    rts = []
    try:
        for _ in range(gateways):
            rts.append(router(build, strategy, inst.addrs(), logdir, prefix_length, threshold,
                              kv_capacity(inst_args), gw_args))
    except Exception:
        for r in rts:
            r.stop()
        inst.stop()
        raise
    rt = rts[0]
    target = ",".join("127.0.0.1:%d" % r.port for r in rts)
    try:
        if warmup:
            fleet.pgload(build, target, os.path.join(outdir, name + "-warmup.json"),
                         workload + ["--concurrency", "16", "--requests", str(warmup),
                                     "--header", "X-Mock-Chunks: 1",
                                     "--first-index", "1000000000", "--label", "warmup"],
                         logdir)
        since = inst.counters()
        sampler = fleet.Sampler(rts) if sample and isinstance(rt, fleet.Gateway) else None
        timers = []
        if sampler:
            sampler.start()
        for at, fn in events:
            t = threading.Timer(at, fn, (inst, rt))
            t.daemon = True
            t.start()
            timers.append(t)
        csv = os.path.join(outdir, name + ".csv")
        r = fleet.pgload(build, target, os.path.join(outdir, name + ".json"),
                         workload + ["--rate", "%g" % (rate * scale), "--duration",
                                     "%g" % duration, "--label", name], logdir, csv)
        for t in timers:
            t.cancel()
        res = summarise(r, inst.kv_hit_rate(since), scale)
        res["strategy"], res["csv"], res["gateways"] = strategy, csv, gateways
        res["targets"] = r.get("targets", {})
        if len(res["backends"]) < instances:
            # pgload's share covers the instances it heard from; one that got
            # nothing has a 0% share
            res["share_min_pct"] = 0.0
        if sampler:
            peak = sampler.finish()
            res["in_flight_peak"] = peak
            res["in_flight_samples"] = sampler.samples
        return res
    finally:
        for r in rts:
            r.stop()
        inst.stop()


# --- what the replay parts (trace.py, flow.py, pd.py) share --------------------
def need_tools(ap, build, tools=("mockllm", "pgload", "prefixgate")):
    """ap.error unless every tool is built in build."""
    for tool in tools:
        if not os.access(os.path.join(build, tool), os.X_OK):
            ap.error("no %s/%s: build first (make -j2 all)" % (build, tool))


def write_lines(out, name, lines):
    """out/NAME.txt: a part's printed summary."""
    with open(os.path.join(out, name + ".txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def failed_or_lost(res, lines):
    """A run failed, or its summary says requests failed."""
    return res["failed"] or any("requests failed" in l for l in lines)


def standalone(what, opts, bench, failed=lambda res, lines: res["failed"]):
    """A part run on its own: results under --out (default
    <build>/bench/<date>), its summary printed; the exit status."""
    out = opts.out or os.path.join(opts.build, "bench", time.strftime("%Y-%m-%d-%H%M%S"))
    print("%s bench: results in %s" % (what, out), flush=True)
    res, lines = bench(opts, out)
    print()
    print("\n".join(lines))
    print("tables, raw results and plots: %s" % out)
    return 1 if failed(res, lines) else 0
