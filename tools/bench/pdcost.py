"""What the second leg of a prefill/decode pair costs the gateway (pd.py's
cost section): real time, no simulation, instances that answer at once.

The same gateway binary (CACHE_AWARE) serves the same requests three
ways: plain (a pool of 2 mixed instances: one exchange a request), vllm (a
P/D pool of 1 prefill + 1 decode instance: the prefill leg, its answer
parsed, the decode leg with its kv_transfer_params) and sglang (the same
pair: bootstrap fields added, both legs at once, the prefill's answer
drained). Every prompt is unique and over pd-min-tokens, so every P/D
request is a pair (checked against prefixgate_pd_pairs_total): pgload's
no-prefix workload, ~8,100-token prompts (a 32 KiB chat body), not
streamed, one output token, as the overhead part's requests.

Gateway time is CPU time: every task of the gateway's process (its
workers' user and system time, the loopback work its sends do in the
kernel), from /proc/*/task/*/schedstat (cpu.py), over a run at a fixed
rate, divided by the requests answered (overhead.rate_run); kernel
threads are shown beside it. Wall time cannot isolate it: a pair's
latency also holds a second exchange with an instance and the decode
instance's pull of the KV from the prefill instance (mockllm's side
connection), which are not the gateway's work. The second leg's cost is
the median over rounds of (P/D - plain) per request in the same round,
the paths' order rotated from round to round. The requests are alike, so
the mean per request over a run is the typical request's (its p50); the
latency at concurrency 1 is shown for scale (its p50 difference bounds
the gateway's share from above). Where valgrind is installed, the
gateway's user-space instructions per request under callgrind (its
workers' event loop, as instr.py counts them), which do not move with the
machine's load, for plain and vllm.
"""
import os
import shutil
import subprocess

import fleet
import instr
import overhead
import pdrun
from overhead import INSTANT

PATHS = ("plain", "vllm", "sglang")
# the pull of the KV at once too (its default is 27x the prefill rate)
PD_INSTANT = INSTANT + ["--kv-transfer-tokens-per-s", "1e12"]
WORKLOAD = ["--workload", "no-prefix", "--no-stream", "--max-tokens", "1", "--seed", "3"]
# prompt sizes (pgload --doc-tokens: the document, + 64 system and 50
# question tokens): 32 KiB bodies, the overhead part's, on which the
# target is judged; and 8 KiB
SIZES = (8000, 2000)
RATE = 300  # req/s: every path keeps up, with the instances' hashing of 32 KiB prompts
SECONDS = 5
ROUNDS = 3
C1_REQUESTS = 300
INSTR_REQUESTS, INSTR_WARMUP = 300, 50


def start(build, path, logdir, wrapper=(), ready_timeout=10.0, gw_args=()):
    """(instances, gateway) of one path."""
    if path == "plain":
        inst = fleet.Instances(build, 2, logdir, PD_INSTANT)
    else:
        side = "--kv-port" if path == "vllm" else "--bootstrap-port"
        inst = fleet.Instances(build, 2, logdir, PD_INSTANT + ["--pd-protocol", path], extra={
            0: ["--role", "prefill", side, "0"], 1: ["--role", "decode"]})
    try:
        args = ["--strategy", "cache_aware"] + list(gw_args)
        backends = inst.addrs()
        if path != "plain":
            pre = backends[0]
            if path == "sglang":
                pre += "@%d" % pdrun.side_port(inst.ports[0])
            args += ["--pool", "default:pd=" + path, "--pool", "default:prefill=" + pre,
                     "--pool", "default:decode=" + backends[1]]
            backends = []
        gw = fleet.Gateway(build, backends, logdir, args, bpf=not wrapper,
                           wrapper=wrapper, ready_timeout=ready_timeout)
    except Exception:
        inst.stop()
        raise
    return inst, gw


def pairs(gw):
    return int(fleet.prom(fleet.get(gw.admin, "/metrics"), "prefixgate_pd_pairs_total"))


def measure(build, out, logdir, time_factor=1.0, rounds=ROUNDS):
    """{size: {path: [per round {c1: pgload summary, rate: rate_run's}]}};
    raises if a P/D request was not a pair."""
    raw = {n: {p: [] for p in PATHS} for n in SIZES}
    started = {}
    try:
        for p in PATHS:
            started[p] = start(build, p, logdir)
        secs = SECONDS * time_factor
        for rnd in range(rounds):
            print("  pd: gateway cost, round %d of %d ..." % (rnd + 1, rounds), flush=True)
            k = rnd % len(PATHS)
            for p in PATHS[k:] + PATHS[:k]:
                inst, gw = started[p]
                for n in SIZES:
                    raw[n][p].append(one(build, out, logdir, gw, inst, p, n, rnd, secs))
    finally:
        for inst, gw in started.values():
            gw.stop()
            inst.stop()
    return raw


def one(build, out, logdir, gw, inst, path, size, rnd, secs):
    """One path's c=1 and fixed-rate runs in one round."""
    target = "127.0.0.1:%d" % gw.port
    js = os.path.join(out, "pd-cost-%s-%d-%%s-%d.json" % (path, size, rnd))
    n0 = pairs(gw) if path != "plain" else 0
    base = WORKLOAD + ["--doc-tokens", str(size), "--label", "pd-cost-" + path]
    # a first index of its own for each run: never a prompt seen before
    c1 = fleet.pgload(build, target, js % "c1", base + [
        "--concurrency", "1", "--requests", str(C1_REQUESTS),
        "--first-index", str(10 ** 6 * (2 * rnd + 1))], logdir, timeout=120)
    rate = overhead.rate_run(build, target, js % "rate", base + [
        "--rate", "%g" % RATE, "--duration", "%g" % secs,
        "--first-index", str(10 ** 6 * (2 * rnd + 2))], logdir, gw,
        [q.pid for q in inst.procs])
    if path != "plain" and pairs(gw) - n0 != c1["ok"] + rate["ok"]:
        raise RuntimeError("%s: %d pairs for %d requests answered" % (
            path, pairs(gw) - n0, c1["ok"] + rate["ok"]))
    return {"c1": c1, "rate": rate}


def instructions(build, logdir):
    """{path: user-space instructions per request} of plain and vllm under
    callgrind, or None (no valgrind)."""
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        return None
    res = {}
    for p in ("plain", "vllm"):
        print("  pd: gateway cost, %s under callgrind ..." % p, flush=True)
        dump = os.path.join(logdir, "callgrind-pd-%s.out" % p)
        inst, gw = start(build, p, logdir, wrapper=[
            "valgrind", "--tool=callgrind", "--callgrind-out-file=" + dump,
            "--toggle-collect=worker_main"], ready_timeout=180, gw_args=["--workers", "1"])
        try:
            target = "127.0.0.1:%d" % gw.port
            base = WORKLOAD + ["--doc-tokens", str(SIZES[0]), "--concurrency", "4"]
            fleet.pgload(build, target, os.path.join(logdir, "instr-warm.json"),
                         base + ["--requests", str(INSTR_WARMUP)], logdir, timeout=300)
            subprocess.run(["callgrind_control", "-z", str(gw.proc.pid)], check=True,
                           capture_output=True, timeout=60)
            r = fleet.pgload(build, target, os.path.join(logdir, "instr-run.json"),
                             base + ["--requests", str(INSTR_REQUESTS),
                                     "--first-index", "5000000"], logdir, timeout=300)
            subprocess.run(["callgrind_control", "-d", str(gw.proc.pid)], check=True,
                           capture_output=True, timeout=60)
            if r["ok"] != INSTR_REQUESTS:
                raise RuntimeError("%s under callgrind: %d of %d requests failed" % (
                    p, INSTR_REQUESTS - r["ok"], INSTR_REQUESTS))
        finally:
            gw.stop(timeout=30)
            inst.stop()
        dumps = sorted(f for f in os.listdir(logdir)
                       if f.startswith(os.path.basename(dump) + ".") and f[-1].isdigit())
        if not dumps:
            raise RuntimeError("callgrind wrote no dump for %s (see %s)" % (p, logdir))
        res[p] = instr.annotate(os.path.join(logdir, dumps[-1]), INSTR_REQUESTS, 1)[0]
    return res


def proxy_us(r):
    return r["rate"]["cpu_us_per_req_by"].get("proxy", 0.0)


def kernel_us(r):
    return r["rate"]["cpu_us_per_req_by"]["kernel"]


def c1_us(r):
    return r["c1"]["e2e_ms"]["p50"] * 1000


def summary(raw, instr_counts):
    """Per size and path the medians over rounds; per P/D path the second
    leg's: medians of the per-round differences with plain."""
    med = overhead.med
    res = {"sizes": {}, "instr_per_req": instr_counts}
    for n, paths in raw.items():
        out = res["sizes"][str(n)] = {}
        for p, rounds in paths.items():
            out[p] = {"gw_us": med([proxy_us(r) for r in rounds]),
                      "kernel_us": med([kernel_us(r) for r in rounds]),
                      "c1_p50_us": med([c1_us(r) for r in rounds]),
                      "other_busy_pct": med([r["rate"]["other_busy_pct"] for r in rounds]),
                      "ok": sum(r["c1"]["ok"] + r["rate"]["ok"] for r in rounds),
                      "errors": sum(r["c1"]["errors"] + r["rate"]["errors"] for r in rounds)}
            if p == "plain":
                continue
            pairs_ = list(zip(rounds, paths["plain"]))
            d = [proxy_us(a) - proxy_us(b) for a, b in pairs_]
            out[p].update({"leg_us": med(d), "leg_us_span": [min(d), max(d)],
                           "leg_kernel_us": med([kernel_us(a) - kernel_us(b) for a, b in pairs_]),
                           "leg_c1_p50_us": med([c1_us(a) - c1_us(b) for a, b in pairs_])})
    return res


def lines(res, rounds):
    out = ["Gateway cost of the second leg (real time, instances that answer at once): unique "
           "prompts, not streamed, 1 output token;",
           "CPU per request at %d req/s (the gateway's tasks; kernel threads apart), c=1: "
           "p50 of %d requests one at a time; medians of %d rounds" % (
               RATE, C1_REQUESTS, rounds),
           "%-7s %-7s %11s %11s %10s %14s %17s %12s %7s" % (
               "prompt", "path", "gateway CPU", "kernel thr.", "c=1 p50", "2nd leg CPU",
               "(rounds)", "2nd leg c=1", "others")]
    for n, paths in res["sizes"].items():
        for p, r in paths.items():
            leg = ("%11.1f us %8.0f-%-5.0f us %+9.0f us" % (
                r["leg_us"], r["leg_us_span"][0], r["leg_us_span"][1], r["leg_c1_p50_us"])
                   if "leg_us" in r else "%14s %17s %12s" % ("", "", ""))
            out.append("%-7s %-7s %8.1f us %8.1f us %7.0f us %s %6.0f%%" % (
                "%dk" % ((int(n) + 114) // 1000), p, r["gw_us"], r["kernel_us"], r["c1_p50_us"],
                leg, r["other_busy_pct"]))
            if r["errors"]:
                out.append("%15s %d requests failed" % ("", r["errors"]))
    ins = res.get("instr_per_req")
    if ins:
        out.append("user-space instructions per request under callgrind (8k-token prompts): "
                   "plain %.0f, vllm %.0f (+%.0f, %.2fx)" % (
                       ins["plain"], ins["vllm"], ins["vllm"] - ins["plain"],
                       ins["vllm"] / ins["plain"]))
    elif ins is None:
        out.append("instructions under callgrind: skipped (no valgrind, or not asked)")
    return out
