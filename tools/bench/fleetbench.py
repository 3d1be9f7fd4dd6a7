"""make bench part "fleet": 1, 2 and 4 prefixgate gateways in front of the
same 7 instances, pgload sending each request to one of them at random, as
an L4 balancer in front of a fleet of gateways would.

With shared state the gateways are what doc/fleets.md "Running a fleet" describes:
one nats-server (started here, loopback, a free port) carries their
in-flight counts and cache_aware's index decisions. Membership is the same
static --backend list on every gateway (etcd plays no part in the
per-request path, so it is left out of the figures). A build whose
prefixgate --help offers no --nats runs the gateways with no shared state,
and says so.

Reported per workload ((a) shared prefix, (b) multi-turn, (d) agentic) and
strategy (PREFIX_AWARE, CACHE_AWARE, CACHE_AWARE n=3): hit rate and P50/P90 TTFT against one
gateway; and on the hot prefix (ConcurrencyThreshold 10) the most requests
any instance had in flight, summed over the gateways' own counts, sampled
every 100 ms.
"""
import os
import shutil
import subprocess

import fleet
import runs
from netutil import free_port

GATEWAYS = (1, 2, 4)
FLEET_WORKLOADS = ("a", "b", "d")
STRATEGIES = ["prefix_aware"] + runs.CA_STRATEGIES
HOT_THRESHOLD = 10


class NatsServer:
    """nats-server on 127.0.0.1, a free port, no persistence."""

    def __init__(self, logdir):
        self.port = free_port()
        self.url = "nats://127.0.0.1:%d" % self.port
        self.proc = fleet.spawn(["nats-server", "-a", "127.0.0.1", "-p", str(self.port)],
                                os.path.join(logdir, "nats-%d.log" % self.port))
        fleet.wait_tcp(self.port, proc=self.proc)

    def stop(self):
        fleet.stop(self.proc)


def offers(build, flag):
    try:
        out = subprocess.run([os.path.join(build, "prefixgate"), "--help"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return flag in out


def bench_fleet(opts, out, workloads, hot):
    """workloads: bench.WORKLOADS; hot: the hot-prefix pgload arguments."""
    logdir = os.path.join(out, "logs")
    os.makedirs(logdir, exist_ok=True)
    shared = offers(opts.build, "--nats") and shutil.which("nats-server")
    nats = NatsServer(logdir) if shared else None
    gw_args = ["--nats", nats.url] if nats else []
    strategies = runs.available(opts.build, list(STRATEGIES))[0]
    res = {"shared": bool(nats), "workloads": {}, "hot": {}}
    mode = ("shared state over NATS (%s)" % nats.url if nats else
            "NO shared state (this build has no --nats, or nats-server is missing)")
    lines = ["Gateway fleets: 1, 2 and 4 gateways, %s; each request to one gateway at "
             "random" % mode,
             "%-6s %-14s %8s %8s %7s %9s %9s %12s %9s" % (
                 "wl", "strategy", "gateways", "requests", "KV hit", "P50 TTFT", "P90 TTFT",
                 "inst. share", "hit vs 1")]
    try:
        for key, title, args, rate, dur, warm, plen in workloads:
            if key not in FLEET_WORKLOADS or key not in opts.workloads:
                continue
            res["workloads"][key] = {}
            for s in strategies:
                by_n = {}
                for n in GATEWAYS:
                    print("  fleet: workload %s, %s, %d gateway(s) ..." % (
                        key, runs.LABELS[s], n), flush=True)
                    by_n[n] = runs.run(opts.build, out, "fleet-%s-%s-%dgw" % (key, s, n), s,
                                       args, rate, dur * opts.time_factor, warm,
                                       prefix_length=plen, gateways=n,
                                       gw_args=gw_args if n > 1 else ())
                    r, t = by_n[n], by_n[n]["ttft_ms"]
                    lines.append("%-6s %-14s %8d %8d %7.2f %7.0fms %7.0fms %5.1f-%4.1f%% %9s" % (
                        "(%s)" % key, runs.LABELS[s], n, r["ok"], r["kv_hit_rate"], t["p50"],
                        t["p90"], r["share_min_pct"], r["share_max_pct"],
                        "%+.2f" % (r["kv_hit_rate"] - by_n[1]["kv_hit_rate"]) if n > 1 else ""))
                    if r["errors"]:
                        lines.append("%6s %d requests failed" % ("", r["errors"]))
                res["workloads"][key][s] = by_n
        lines += ["", "Hot prefix through 1 and 4 gateways (ConcurrencyThreshold %d): the most "
                  "requests one instance had in flight, summed over the gateways' counts" %
                  HOT_THRESHOLD,
                  "%-14s %8s %7s %9s %9s %16s" % ("strategy", "gateways", "KV hit", "P50 TTFT",
                                                  "P99 TTFT", "peak in flight")]
        for s in strategies:
            for n in (1, 4):
                print("  fleet: hot prefix, %s, %d gateway(s) ..." % (runs.LABELS[s], n),
                      flush=True)
                r = runs.run(opts.build, out, "fleet-hot-%s-%dgw" % (s, n), s, hot, 24,
                             30 * opts.time_factor, 12000, inst_args=["--max-num-seqs", "16"],
                             threshold=HOT_THRESHOLD, sample=True, gateways=n,
                             gw_args=gw_args if n > 1 else ())
                r.pop("in_flight_samples", None)
                peak = max(r.get("in_flight_peak", {}).values(), default=None)
                res["hot"]["%s-%d" % (s, n)] = r
                lines.append("%-14s %8d %7.2f %7.0fms %7.0fms %16s" % (
                    runs.LABELS[s], n, r["kv_hit_rate"], r["ttft_ms"]["p50"],
                    r["ttft_ms"]["p99"], "n/a" if peak is None else
                    "%d (target <= %d)" % (peak, HOT_THRESHOLD + 2)))
                if r["errors"]:
                    lines.append("%14s %d requests failed" % ("", r["errors"]))
    finally:
        if nats:
            nats.stop()
    return res, lines + [""]
