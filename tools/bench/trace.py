#!/usr/bin/env python3
"""make bench part "trace": the routers on a production trace (Mooncake's
hour of chat requests, data/README.md), replayed on real processes, with
the deterministic simulator (build/tracesim) beside every figure.

Why. CACHE_AWARE weighs each instance's queue in prefill work and learns
each instance's speed from first tokens, so that it keeps its cache hits
near saturation, where PREFIX_AWARE (SageMaker's rule) collapses to
RANDOM's hit rate. This part measures that on the trace, against the two
reference rules (refrouter.py), which see every instance's real cache and
queue: the bound of what a router that guesses can do.

The fleet and the load (tracerun.py): 8 mockllm instances at --time-scale
K (default 4), prompt caching only, each caching CAP = 182,790 distinct
blocks x 512 / 3 / 8 = 3,899,520 tokens: the instances' caches together
hold a third of the trace's distinct blocks (tracesim's fleet). pgload
replays the trace at --load RHO of the fleet's prefill capacity (C = 8 x
36,600 x K tokens/s, wall time), streamed, /v1/completions; latencies x K
are model time.

  1. Loads 0.7, 0.9, 1.1: RANDOM, LEAST_OUTSTANDING_REQUESTS, PREFIX_AWARE
     (PrefixLength 4096, ConcurrencyThreshold 10), CACHE_AWARE
     (--cache-capacity CAP), HAProxy hashing the body prefix, and the
     references cache-first and predicted-ttft; CACHE_AWARE also at 0.5
     (its hit rate there is the baseline of a target). A table per load:
     TTFT mean/p50/p90/p99 (model ms), hit rate, instances' queue (waiting,
     sampled every wall second: mean, max), each instance's share of
     requests and prompt tokens (min-max), errors, and tracesim's mean, p99
     and hit rate for the same router and load ("simulated").
  2. Unequal fleet: instances 1 and 2 at --speed 2 (C counts them twice: 10
     x 36,600 x K); CACHE_AWARE, LEAST_OUTSTANDING_REQUESTS and the
     references at 0.7 and 0.9: each instance's share of prompt tokens, the
     fast ones' against the fleet mean and against the others' mean.
  3. Slowdown: all at speed 1; once half the requests were sent (the
     scheduled wall time of that request), instance 3 is set to half its
     speed (POST /mock/speed); CACHE_AWARE and the references at 0.7:
     instance 3's share of requests by 10 model s windows around it (from
     pgload's per-request CSV), and the first window after whose share is
     below its share in the 30 s before.
  4. Fleet: 4 CACHE_AWARE gateways sharing state over NATS (fleetbench.py)
     in front of the same 8 instances, each request to one of them at
     random, at 0.9, against one gateway: mean and p99 TTFT, hit rate, and
     tracesim --gateways 4 beside it. The trace's requests come about ten
     at a time (its times are in 3 s steps): gateways deciding at the same
     instant cannot see each other's choices, which costs a fleet about 12%
     of its mean TTFT in tracesim (none with tracesim --spread). Measured
     on a busy 2-CPU machine (2026-12-03, load average 8-18): 1,435 and
     1,508 ms (one gateway in the same runs 2,635 and 1,823; the code
     before these fleet changes 4,461 and 2,530 for four gateways).
  5. Targets, PASS/MISS with the numbers: at 0.7, 0.9, 1.1 CACHE_AWARE's
     mean and p99 TTFT <= 1.1 x the better reference's; at 0.9 its mean <=
     0.3 x PREFIX_AWARE's; its hit rate at every load >= 0.9 x its hit rate
     at 0.5; unequal fleet: the fast instances' token share >= 1.7 x the
     fleet mean (in proportion to speed would be 1.6 x); slowdown: the
     slowed instance's share falls within 60 s; 4 gateways: mean TTFT <=
     1.1 x one gateway's.

The references run as REF_PROCS (2) refrouter.py processes, each request
to one of them (their rules keep no state: every decision asks the
instances). They are Python: relaying every streamed token (~300 streams
at 6.25 ms a token at K 4) makes a decision wait tens to hundreds of wall
ms on a shared 2-CPU machine, K times that in model time, and requests
decided while others are on their way see the same queues. Their rows say
how long a decision took, and each target against them gives tracesim's
comparison too, where no router has a delay. Measured on the whole trace
at 0.9 (2026-12-03): cache-first mean TTFT 2,741 ms at K 4 (decisions 285
model ms), 2,155 ms at K 2 (51 ms), tracesim 1,313; CACHE_AWARE at K 4
1,177 ms, tracesim 1,082. --time-scale 2 shrinks the references' handicap
for twice the wall time; it does not remove it.

Output: trace.txt (the tables) and trace.json (every figure), each run's
pgload JSON and CSV, trace-ttft-mean.png and trace-ttft-p99.png (TTFT
against load, a line per router, log y), all in the results directory
(default <build>/bench/<date>, as bench.py). A missing haproxy,
nats-server or gnuplot skips its rows with a note.

Wall time. A replay of the whole trace lasts 309.8 / (RHO x K) s (12,031
requests at 38.8 x RHO x K a second), then the last decodes (up to 2,000
tokens: 12.5 s at K 4) and whatever queue is left. Measured at K 4 on the
2-CPU development VM (2026-12-03): CACHE_AWARE at 0.9, 96 s (86 s of
arrivals); PREFIX_AWARE at 0.9, 118 s (its queues drain for 30 s). The
full part, 34 replays, takes about 65-70 minutes; it prints its own
estimate first. A quick version:
  python3 tools/bench/trace.py --build build --trace-requests 600 --loads 0.9
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleetbench  # noqa: E402
import runs  # noqa: E402
import tracerun  # noqa: E402
import tracereport  # noqa: E402
from tracerun import (BASE_LOAD, FAST, FAST_SPEED, FLEET_GATEWAYS, FLEET_LOAD,  # noqa: E402
                      HETERO_LOADS, HETERO_ROUTERS, LOADS, ROUTERS, SLOW, SLOW_LOAD,
                      SLOW_ROUTERS, key)

SIM_NAMES = {r: r for r in ROUTERS if r != "haproxy"}  # tracesim --strategy
DRAIN_S = 20  # a rough allowance per run for the last decodes and queues (estimate)


# --- the simulator ---------------------------------------------------------
def simulate(opts, out, router, load, speeds=None, slow=None, gateways=1):
    """tracesim's figures for one run (its JSON), or None (no such strategy
    or no tracesim). Instances are numbered from 1 there."""
    sim = os.path.join(opts.build, "tracesim")
    if router not in SIM_NAMES or not os.access(sim, os.X_OK):
        return None
    path = os.path.join(out, "sim-%s-%g%s.json" % (router, load, "-fast" if speeds else
                                                   "-slow" if slow else
                                                   "-%dgw" % gateways if gateways > 1 else ""))
    cmd = [sim, "--trace", tracerun.TRACE, "--strategy", SIM_NAMES[router], "--load",
           "%g" % load, "--json", path]
    if opts.trace_requests:
        cmd += ["--requests", str(tracerun.replayed(opts.trace_requests))]
    for i, f in (speeds or {}).items():
        cmd += ["--speed", "%d:%g" % (i + 1, f)]
    if slow:
        cmd += ["--slow", "%d:%g:%g" % (slow[0] + 1, slow[1], slow[2])]
    if gateways > 1:
        cmd += ["--gateways", str(gateways)]
    try:
        subprocess.run(cmd, capture_output=True, timeout=120, check=True)
        with open(path) as f:
            return json.load(f)
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        print("  tracesim %s at %g: %s" % (router, load, e), flush=True)
        return None


# --- the runs ----------------------------------------------------------------
class Part:
    """The part's state: options, results so far (saved after each run, so
    that what was measured survives a crash), notes."""

    def __init__(self, opts, out):
        self.opts, self.out = opts, out
        self.res = {"config": {
            "time_scale": opts.time_scale, "instances": tracerun.INSTANCES,
            "kv_capacity_tokens": tracerun.capacity(),
            "requests": tracerun.replayed(opts.trace_requests), "loads": opts.loads,
            "routers": opts.routers}, "runs": {}, "sim": {}, "hetero": {}, "slow": {},
            "fleet": {}, "failed": []}
        self.notes = []

    def run(self, section, k, name, router, load, **kw):
        """One replay into res[section][k], or None when it failed (noted)."""
        print("  trace: %s ..." % name, flush=True)
        try:
            r = tracerun.replay(self.opts, self.out, name, router, load, **kw)
        except Exception as e:  # one run failing must not lose the others
            self.res["failed"].append(name)
            self.notes.append("%s: FAILED: %r (logs in %s)" % (
                name, e, os.path.join(self.out, "logs")))
            print("  trace: %s failed: %r" % (name, e), flush=True)
            r = None
        else:
            print("  trace: %s: mean TTFT %.0f ms, p99 %.0f ms, hit %.3f, %d errors, %.0f s" % (
                name, r["ttft_ms"]["mean"], r["ttft_ms"]["p99"], r["hit_rate"], r["errors"],
                r["run_wall_s"]), flush=True)
        self.res[section][k] = r
        self.save_json()
        return r

    def save_json(self):
        with open(os.path.join(self.out, "trace.json"), "w") as f:
            json.dump(self.res, f, indent=1, default=str)


def plan(opts, with_fleet):
    """[(section, key, run name, router, load, replay kw)] in order."""
    p, rs = [], opts.routers
    if "cache_aware" in rs:
        p.append(("runs", key("cache_aware", BASE_LOAD), "cache_aware", BASE_LOAD, {}))
    p += [("runs", key(r, l), r, l, {}) for l in opts.loads for r in rs]
    if not opts.skip_hetero:
        fast = {i: FAST_SPEED for i in FAST}
        p += [("hetero", key(r, l), r, l, {"speeds": fast})
              for l in HETERO_LOADS for r in HETERO_ROUTERS if r in rs]
        p += [("slow", key(r, SLOW_LOAD), r, SLOW_LOAD, {"slow": SLOW})
              for r in SLOW_ROUTERS if r in rs]
    if with_fleet and "cache_aware" in rs:
        if FLEET_LOAD not in opts.loads:
            p.append(("runs", key("cache_aware", FLEET_LOAD), "cache_aware", FLEET_LOAD, {}))
        p.append(("fleet", key("cache_aware", FLEET_LOAD), "cache_aware", FLEET_LOAD,
                  {"gateways": FLEET_GATEWAYS}))
    names = {"runs": "trace-%s-%g", "hetero": "trace-fast-%s-%g", "slow": "trace-slow-%s-%g",
             "fleet": "trace-%dgw-%%s-%%g" % FLEET_GATEWAYS}
    seen = set()
    return [(s, k, names[s] % (r, l), r, l, kw) for s, k, r, l, kw in p
            if (s, k) not in seen and not seen.add((s, k))]


def expected_s(opts, runs_planned):
    n = tracerun.replayed(opts.trace_requests)
    total = 0.0
    for _, _, _, _, load, kw in runs_planned:
        total += tracerun.scheduled_s(n - 1, load, tracerun.fleet_tps(
            opts.time_scale, kw.get("speeds"))) + DRAIN_S
    return total


def fleet_ready(opts):
    """(whether the fleet run can be made, why it is skipped or None)."""
    if opts.skip_fleet:
        return False, None
    if not fleetbench.offers(opts.build, "--nats"):
        return False, "fleet: skipped: %s/prefixgate --help offers no --nats" % opts.build
    if not shutil.which("nats-server"):
        return False, "fleet: skipped: nats-server is missing (tools/deps.sh installs it)"
    return True, None


def bench_trace(opts, out):
    """The part: (results, lines of the report)."""
    os.makedirs(out, exist_ok=True)
    part = Part(opts, out)
    if "haproxy" in opts.routers and not shutil.which("haproxy"):
        opts.routers.remove("haproxy")
        part.notes.append("HAProxy: skipped: haproxy is missing (tools/deps.sh haproxy)")
    keep, note = runs.available(opts.build, opts.routers)
    opts.routers[:] = keep
    if note:
        part.notes.append(note)
    fleet_ok, note = fleet_ready(opts)
    if note:
        part.notes.append(note)
    todo = plan(opts, fleet_ok)
    if not os.access(os.path.join(opts.build, "tracesim"), os.X_OK):
        part.notes.append("simulated: skipped: no %s/tracesim" % opts.build)
    for n in part.notes:
        print("  trace: " + n, flush=True)
    print("  trace: %d replays of %d requests, about %.0f min" % (
        len(todo), tracerun.replayed(opts.trace_requests), expected_s(opts, todo) / 60),
        flush=True)
    t0 = time.monotonic()
    sims = part.res["sim"]
    for section, k, name, router, load, kw in todo:  # seconds each, before any replay
        sims.setdefault(section, {})[k] = simulate(opts, out, router, load, **kw)
    nats = None
    logdir = os.path.join(out, "logs")
    os.makedirs(logdir, exist_ok=True)
    try:
        for section, k, name, router, load, kw in todo:
            if section == "fleet":
                if nats is None:
                    try:
                        nats = fleetbench.NatsServer(logdir)
                    except Exception as e:
                        part.notes.append("fleet: skipped: nats-server did not start: %r" % e)
                        continue
                kw = dict(kw, gw_args=["--nats", nats.url])
            part.run(section, k, name, router, load, **kw)
    finally:
        if nats:
            nats.stop()
    part.res["wall_s"] = time.monotonic() - t0
    lines = tracereport.report(part.res, out, part.notes)
    part.save_json()
    runs.write_lines(out, "trace", lines)
    return part.res, lines


# --- options -------------------------------------------------------------------
def options(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--out", help="results directory (default <build>/bench/<date>)")
    ap.add_argument("--time-scale", type=float, default=runs.SCALE,
                    help="the instances' --time-scale K (default %(default)g)")
    ap.add_argument("--trace-requests", type=int, default=0,
                    help="replay only the trace's first N requests (default: all 12,031)")
    ap.add_argument("--loads", default=",".join("%g" % l for l in LOADS),
                    help="loads of the main runs, comma-separated (default %%(default)s; "
                    "CACHE_AWARE also runs at %g)" % BASE_LOAD)
    ap.add_argument("--only-routers", default=",".join(ROUTERS),
                    help="routers, comma-separated, of %(default)s")
    ap.add_argument("--skip-hetero", action="store_true",
                    help="no unequal-fleet and slowdown runs")
    ap.add_argument("--skip-fleet", action="store_true",
                    help="no %d-gateway run" % FLEET_GATEWAYS)
    o = ap.parse_args(argv)
    try:
        o.loads = [float(x) for x in o.loads.split(",")]
    except ValueError:
        ap.error("--loads: numbers, comma-separated")
    o.routers = [r for r in o.only_routers.split(",") if r]
    bad = [r for r in o.routers if r not in ROUTERS]
    if bad or not o.routers:
        ap.error("--only-routers: of %s (not %s)" % (",".join(ROUTERS), ",".join(bad)))
    if not all(l > 0 for l in o.loads) or not o.time_scale > 0:
        ap.error("--loads and --time-scale must be > 0")
    if o.trace_requests < 0 or 0 < o.trace_requests < 2:
        ap.error("--trace-requests: at least 2 (0: all)")
    runs.need_tools(ap, o.build)
    return o


def from_bench(bench_opts, out):
    """bench.py's part "trace": the defaults; --time-factor F < 1 replays the
    first F of the trace instead of all of it (a smoke run)."""
    argv = ["--build", bench_opts.build]
    if bench_opts.time_factor < 1:
        n = len(tracerun.facts()["times_ms"])
        argv += ["--trace-requests", str(max(2, int(n * bench_opts.time_factor)))]
    return bench_trace(options(argv), out)


def main():
    return runs.standalone("trace", options(), bench_trace, failed=runs.failed_or_lost)


if __name__ == "__main__":
    sys.exit(main())
