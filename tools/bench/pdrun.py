"""One run of the prefill/decode part (pd.py): fresh mockllm instances,
either all mixed (aggregated serving) or split into a prefill set and a
decode set in their roles, one prefixgate in front (CACHE_AWARE; a P/D
pool for the split), a measured pgload run and, beside it, a stream of
short prompts (the probe); what they measured, in model time.

Every instance is simulated with --interference (mockllm --help: a prefill
chunk lengthens the decode steps running beside it, as vLLM's chunked
prefill does): mixed instances suffer it from every prefill, decode
instances from the prompts they serve alone (conditional disaggregation)
and the last token of each pulled prompt. Every process is stopped on
every exit path; every wait is bounded.
"""
import json
import os
import subprocess
import time

import cpu
import fleet
import runs
from netutil import metric_family

PD_MIN_TOKENS = 256  # the gateway's pd-min-tokens (its default)
# pgload's end is bounded by its stop time + --timeout-ms + 1 s; this much
# more before a run is called hung and killed
SLACK_S = 60


class Config:
    """A fleet: name, label, protocol (None: aggregated) and how many of
    the n instances are prefill instances (the rest decode)."""

    def __init__(self, name, label, proto=None, prefills=0):
        self.name, self.label, self.proto, self.prefills = name, label, proto, prefills

    def roles(self, n):
        """{index: mockllm flags of that instance's role}."""
        if not self.proto:
            return {}
        side = "--kv-port" if self.proto == "vllm" else "--bootstrap-port"
        pd = ["--pd-protocol", self.proto]
        return {i: (["--role", "prefill", side, "0"] if i < self.prefills else
                    ["--role", "decode"]) + pd for i in range(n)}


def side_port(port):
    """A prefill instance's side port (--kv-port / --bootstrap-port 0: the
    one it took), from its mockllm_pd_info."""
    for k in metric_family(fleet.get(port, "/metrics"), "mockllm_pd_info"):
        if 'side_port="' in k:
            return int(k.split('side_port="', 1)[1].split('"', 1)[0])
    raise RuntimeError("127.0.0.1:%d shows no side port in mockllm_pd_info" % port)


def gateway_args(cfg, inst, capacity):
    """(backends, prefixgate flags) of the fleet."""
    args = ["--strategy", "cache_aware", "--cache-capacity", str(capacity)]
    if not cfg.proto:
        return inst.addrs(), args
    addrs = inst.addrs()
    pre = addrs[:cfg.prefills]
    if cfg.proto == "sglang":
        pre = ["%s@%d" % (a, side_port(p)) for a, p in zip(pre, inst.ports)]
    return [], args + ["--pool", "default:pd=" + cfg.proto,
                       "--pool", "default:prefill=" + ",".join(pre),
                       "--pool", "default:decode=" + ",".join(addrs[cfg.prefills:])]


def counters(ports):
    """[(prefix-cache hit tokens, query tokens, tokens brought by a KV
    transfer)] of each instance."""
    out = []
    for p in ports:
        m = fleet.get(p, "/metrics")
        out.append((fleet.prom(m, "vllm:prefix_cache_hits_total"),
                    fleet.prom(m, "vllm:prefix_cache_queries_total"),
                    fleet.prom(m, "vllm:external_prefix_cache_hits_total")))
    return out


def delta(before, after, idx, k):
    return sum(after[i][k] - before[i][k] for i in idx)


def hit_rate(before, after, idx):
    queries = delta(before, after, idx, 1)
    return delta(before, after, idx, 0) / queries if queries else None


def computed(before, after, n, serving):
    """Prompt tokens prefilled anywhere (neither cached where computed nor
    brought by a transfer) / prompt tokens served; serving: the instances
    every request reaches (all of an aggregated fleet, a decode set)."""
    every = range(n)
    served = delta(before, after, serving, 1)
    work = (delta(before, after, every, 1) - delta(before, after, every, 0) -
            delta(before, after, every, 2))
    return work / served if served else None


def machine_busy_ns():
    """CPU time every CPU spent busy so far (/proc/stat: all but idle and
    iowait), ns: counts processes that came and went between two readings,
    which a walk of /proc misses (a compiler run, a short test)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) * 1e9 / os.sysconf("SC_CLK_TCK")


def pd_counts(gw):
    m = fleet.get(gw.admin, "/metrics")
    return {k: int(fleet.prom(m, "prefixgate_pd_%s_total" % k))
            for k in ("pairs", "decode_alone", "prefill_failures", "decode_retries")}


def quantile(xs, q):
    """The q-quantile of xs (nearest rank), None if empty."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def short_ttft(csv_path, scale, limit=PD_MIN_TOKENS):
    """TTFT (model ms) of the successful requests of a pgload CSV whose
    prompt (the instance's count) is under limit tokens: n, p50, p90, p99."""
    t = [int(r["ttft_us"]) * scale / 1000.0 for r in fleet.read_csv(csv_path)
         if r["status"] == "200" and r["ttft_us"] and r["prompt_tokens"] and
         int(r["prompt_tokens"]) < limit]
    return {"n": len(t), "p50": quantile(t, 0.5), "p90": quantile(t, 0.9),
            "p99": quantile(t, 0.99)}


def eligible_hit(csv_path, limit=PD_MIN_TOKENS, held=0.8):
    """An aggregated run's hit rate over the requests a P/D gateway would
    have given a prefill instance: prompts of limit tokens or more of which
    the instance that served them held less than held (its cached tokens
    in the usage pgload records)."""
    hits = prompt = 0
    for r in fleet.read_csv(csv_path):
        if r["status"] != "200" or not r["prompt_tokens"]:
            continue
        p, c = int(r["prompt_tokens"]), int(r["cached_tokens"] or 0)
        if p >= limit and c < held * p:
            hits, prompt = hits + c, prompt + p
    return hits / prompt if prompt else None


class Probe:
    """The short prompts: a second pgload beside the measured one (its own
    conversations), at rate (wall) for duration s. A process of fleet's:
    stopped on every exit path."""

    def __init__(self, build, target, out, name, args, rate, duration, logdir):
        self.csv = os.path.join(out, name + "-short.csv")
        self.json = os.path.join(out, name + "-short.json")
        cmd = [os.path.join(build, "pgload"), "--target", target, "--json", self.json,
               "--csv", self.csv, "--quiet"] + list(args) + [
                   "--rate", "%g" % rate, "--duration", "%g" % duration,
                   "--label", name + "-short"]
        # its --timeout-ms (30 s) + 1 s bound its end; and some slack
        self.deadline = time.monotonic() + duration + 31 + SLACK_S
        self.proc = fleet.spawn(cmd, os.path.join(logdir, "pgload-%s-short.log" % name))

    def finish(self):
        """Its summary; an exception if it failed or hung (then killed)."""
        try:
            rc = self.proc.wait(max(0.1, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.stop()
            raise RuntimeError("the short prompts' pgload still running, killed")
        self.stop()
        if rc not in (0, 1):
            raise RuntimeError("the short prompts' pgload failed (%d)" % rc)
        with open(self.json) as f:
            return json.load(f)

    def stop(self):
        fleet.stop(self.proc, 5)


def run(build, out, name, cfg, n, inst_args, workload, timeout_s, scale=runs.SCALE,
        capacity=None, probe=None):
    """One run. workload: pgload's args with its load and stop (wall);
    timeout_s: when its run is called hung. probe: (pgload args, rate,
    duration) of the short prompts, or None. Figures in model time."""
    logdir = os.path.join(out, "logs")
    os.makedirs(logdir, exist_ok=True)
    t0 = time.monotonic()
    inst = fleet.Instances(build, n, logdir, ["--time-scale", "%g" % scale, "--interference"] +
                           list(inst_args), extra=cfg.roles(n))
    gw = prb = None
    try:
        backends, args = gateway_args(cfg, inst, capacity or runs.kv_capacity(inst_args))
        gw = fleet.Gateway(build, backends, logdir, args)
        target = "127.0.0.1:%d" % gw.port
        before = counters(inst.ports)
        if probe:
            pargs, prate, pdur = probe
            prb = Probe(build, target, out, name, pargs, prate, pdur, logdir)
        # the probe is not among ours: it may end before the run does; its
        # own CPU (its JSON) is taken off instead, as pgload's
        ours = dict.fromkeys([p.pid for p in inst.procs] + [gw.proc.pid, os.getpid()], "ours")
        c0, m0, w0 = cpu.cpu_ns_by_role(ours), machine_busy_ns(), time.monotonic()
        csv = os.path.join(out, name + ".csv")
        r = fleet.pgload(build, target, os.path.join(out, name + ".json"),
                         list(workload) + ["--label", name], logdir, csv, timeout=timeout_s)
        c1, m1, w1 = cpu.cpu_ns_by_role(ours), machine_busy_ns(), time.monotonic()
        short = prb.finish() if prb else None
        after = counters(inst.ports)
        res = runs.summarise(r, hit_rate(before, after, range(n)), scale)
        # how busy other jobs kept the machine (the noise in every figure):
        # all CPUs' busy time but that of this run's processes, the kernel
        # threads and the pgloads' own, in % of all CPUs
        mine = sum(c1[k] - c0[k] for k in ("ours", "kernel")) + sum(
            (x["cpu_user_s"] + x["cpu_sys_s"]) * 1e9 for x in (r, short) if x)
        other = m1 - m0 - mine
        res["others_busy_pct"] = max(0.0, other) / 1e9 / ((w1 - w0) * (os.cpu_count() or 1)) * 100
        res.update({"config": cfg.name, "csv": csv, "run_wall_s": time.monotonic() - t0,
                    "itl_ms": {k: v * scale for k, v in r["itl_ms"].items()},
                    "itl_max_ms": {k: v * scale for k, v in r["itl_max_ms"].items()},
                    "itl_gaps": r["itl_gaps"], "short_in_run": short_ttft(csv, scale)})
        dec = range(cfg.prefills, n)  # all of an aggregated fleet
        res["computed"] = computed(before, after, n, dec)
        if cfg.proto:
            pre = range(cfg.prefills)
            res["prefill_hit_rate"] = hit_rate(before, after, pre)
            res["decode_local_hit_rate"] = hit_rate(before, after, dec)
            res["pd"] = pd_counts(gw)
        else:
            res["prefill_hit_rate"] = res["kv_hit_rate"]
            res["eligible_hit_rate"] = eligible_hit(csv)
        if prb:
            res["probe"] = dict(short_ttft(prb.csv, scale), ok=short["ok"],
                                errors=short["errors"], csv=prb.csv)
        return res
    finally:
        if prb:
            prb.stop()
        if gw:
            gw.stop()
        inst.stop()
