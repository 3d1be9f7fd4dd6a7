#!/usr/bin/env python3
"""make bench part "flow": flow control (--flow-control, issue 26) with two
tenants on the Mooncake trace, replayed on real processes.

Why. Past saturation a gateway without flow control sends every request on
at once: one tenant's burst fills the instances' queues and every tenant's
time to first token grows with it. With flow control the excess waits in
the gateway, where requests are ordered by class, then fairly between
tenants, and refused once past their deadline. This part measures what
that buys and what it costs, against issue 26's targets.

The fleet and the load (flowrun.py): tracerun.py's fleet (8 mockllm at
--time-scale K, default 4, caches together holding a third of the trace's
distinct blocks), one CACHE_AWARE prefixgate, one pgload per tenant, all at
once. Tenant B replays the trace's first requests [0, NB) at load 0.109 of
the fleet's prefill capacity; tenant A the next [NB, N) at 1.09, ten times
B's rate: together 1.2x the capacity. NB is chosen so that both slices
last as long in wall time (A takes the rest of the first N requests,
--requests, 10,000 by default). Each tenant's block ids are its own text
(SEED_A, SEED_B).
Durations given to the gateway are the model's / K (flowrun.py):
InstanceQueueMs 50 model ms (--queue-ms), --flow-starve-ms 5,000 (its
default, --starve-ms), deadlines.

  1. alone: B alone, flow control on.
  2. flow on: A + B, flow control on.
  3. flow off: A + B, no flow control (SageMaker's behaviour): the
     throughput baseline, and B's TTFT without flow control.
  4. classes: a sheddable flood (A's slice at 1.09, X-Prefixgate-Priority:
     sheddable, X-Prefixgate-Deadline-Ms: 10,000 model ms, --deadline-ms)
     and critical traffic (B's slice at 0.109: run 1 is its baseline), flow
     control on; 429s counted.
     4b. The same with --flow-starve-ms twice the deadline: no sheddable
     request is ever starved. A sheddable request that has waited
     --flow-starve-ms goes before the critical ones waiting, one such
     request each --flow-starve-ms a worker (lib/flow.h: the starvation
     bound); under a flood that outlasts the bound there always is one, so
     run 4 shows what the bound costs critical traffic, 4b the same without
     it.
  5. deadlines: from run 4's access log (and every run's), requests with a
     deadline that were dispatched after it: queue_us + route_us (first
     byte to backend chosen) past the deadline; and those refused 429;
     the requests the instances got against those the gateway dispatched.
  6. overhead: the gateway's p50 latency with flow control on and off (and
     a second gateway with it off: the noise), --overhead-rounds rounds of
     --overhead-s s at --overhead-rate req/s, instances that answer at once.
  7. sweep: run 2 again at each InstanceQueueMs of --sweep (model ms:
     25, 100, 200; run 2's 50 is one more point): B's p99 and the
     throughput against each. 200 model ms is 50 wall ms at K 4: the
     default as the gateway would take it in a run that did not scale it.

Per run, a table in model time: per tenant TTFT mean/p50/p90/p99, 429s,
wait in the gateway (access log: mean, p99), hit rate (its own cached
tokens / prompt tokens); for the run, output tokens and requests completed
per model second, over the whole run (all tenants, first start to last
completion) and in the saturated window (flowrun.py: the last four fifths
of the arrivals; the fleet's prefill tokens/s there against its
capacity), the fleet's hit rate, the gateway's queue (GET /flow: mean,
max) and its counters, the instances' waiting requests, the instances
idle while work waited (sampled: those with nothing to prefill, and of
those the ones the gateway knew it had no request on), the CPUs busy.

Throughput. Every request of runs 2 and 3 completes, so over the whole run
both complete the same tokens, and the ratio of their rates is that of
their lengths, which ends with the last long decodes (up to 2,000 tokens:
50 model s): it says when the longest outputs were dispatched more than
how fast the fleet worked. The target is taken in the saturated window,
where the fleet's rate is its capacity less what flow control loses
(instances idle while requests wait, cache hits missed); the whole-run
ratio is given beside it.

Targets (issue 26), PASS/MISS with the numbers: run 2's B p99 TTFT <= 1.3 x
run 1's; run 2's output tokens/s in the saturated window >= 0.95 x run
3's; run 4's critical p99 <= 1.1 x run 1's B p99; 0 requests dispatched
past their deadline; run 6: flow control adds <= 5 us to the p50.

Output: flow.txt (the tables), flow.json (every figure), each pgload's
JSON and CSV, each run's access log, flow-ttft.png (B's and critical's
TTFT CDF in runs 1-4b), in the results directory (default
<build>/bench/<date>, as bench.py).

Wall time. A and B's slices last 54 s at K 4 with 10,000 requests, then
the backlog of 1.2x and the last decodes (up to 2,000 tokens: 12.5 s at
K 4): 60-100 s a run; 5 runs, 3 sweep points and the overhead rounds take
about 12 minutes on the 2-CPU development VM (it prints its estimate
first). Quick (about 4 minutes: 3,000 requests, no sweep, 3 overhead
rounds of 3 s):
  python3 tools/bench/flow.py --build build --quick
One run, or a few (--only), with other gateway flags (--gw-args):
  python3 tools/bench/flow.py --build build --only on,off --gw-args \
      "--metrics-scrape-interval 1000"
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flowreport  # noqa: E402
import flowrun  # noqa: E402
import runs  # noqa: E402
import tracerun  # noqa: E402
from flowrun import tenant  # noqa: E402

LOAD_B, LOAD_A = 0.109, 1.09  # of the fleet's prefill capacity
# The tenants' pgload --seed: the text of a block id differs between them,
# so neither finds the other's prompts cached. With one text, A (ten times
# faster through the trace) sends the later turns of B's conversations
# before B does, and B finds a third of its blocks cached by A: a hit rate
# B alone never sees, which would flatter every comparison with run 1.
SEED_B, SEED_A = 1, 2
QUEUE_MS = 50  # model ms: FlowControlConfig.InstanceQueueMs's default
STARVE_MS = 5000  # model ms: --flow-starve-ms's default
DEADLINE_MS = 10000  # model ms: the sheddable flood's deadline
STARVE_PAST = 2  # run 4b: --flow-starve-ms this x the deadline
SWEEP = (25, 100, 200)  # model ms, beside run 2's 50
REQUESTS = 10000  # of the trace's 12,031: the part fits in about 12 minutes
OVERHEAD_ROUNDS, OVERHEAD_RATE, OVERHEAD_S = 6, 500, 4.0
QUICK_REQUESTS = 3000
RUNS = ("alone", "on", "off", "classes", "classes-nostarve")  # and sweep-Q
DRAIN_S = 25  # a rough allowance per run: start-up, the backlog, the last decodes


def slices(total, ratio=LOAD_A / LOAD_B):
    """(NB, NA): B replays [0, NB), A [NB, NB + NA) of the trace, NB + NA =
    total, NB the largest whose wall span x ratio (A's pace is ratio times
    B's) is at most A's slice's span."""
    t = tracerun.facts()["times_ms"][:total]
    nb = 2
    while nb + 1 < total - 2 and (t[nb] - t[0]) * ratio <= t[-1] - t[nb + 1]:
        nb += 1
    return nb, total - nb


def plan(opts):
    """[(key, title, tenants, flow)] in order; flow: None (off) or the
    gateway's settings in model ms."""
    nb, na = slices(opts.requests)
    a = tenant("A", "flowbench-tenant-a", nb, na, LOAD_A, SEED_A)
    b = tenant("B", "flowbench-tenant-b", 0, nb, LOAD_B, SEED_B)
    shed = tenant("sheddable", "flowbench-batch", nb, na, LOAD_A, SEED_A, "sheddable",
                  opts.deadline_ms)
    crit = tenant("critical", "flowbench-chat", 0, nb, LOAD_B, SEED_B, "critical")

    def on(q):
        return {"queue_ms": q, "starve_ms": opts.starve_ms}

    p = [("alone", "1. B alone, flow control on", [b], on(opts.queue_ms)),
         ("on", "2. A (10x B's rate) + B, flow control on", [a, b], on(opts.queue_ms)),
         ("off", "3. A + B, flow control off", [a, b], None),
         ("classes", "4. sheddable flood + critical, flow control on", [shed, crit],
          on(opts.queue_ms)),
         ("classes-nostarve", "4b. as 4, --flow-starve-ms %g model ms: past the deadline, no "
          "sheddable request ever counts as starved" % (STARVE_PAST * opts.deadline_ms),
          [shed, crit], {"queue_ms": opts.queue_ms,
                         "starve_ms": STARVE_PAST * opts.deadline_ms})]
    p += [("sweep-%g" % q, "7. sweep: A + B, InstanceQueueMs %g model ms" % q, [a, b], on(q))
          for q in opts.sweep if q != opts.queue_ms]
    return [x for x in p if not opts.only or x[0] in opts.only]


def expected_s(opts, todo):
    tps = tracerun.fleet_tps(opts.time_scale)
    total = 0.0
    for _, _, tenants, _ in todo:
        total += max(tracerun.scheduled_s(t["start"] + t["n"] - 1, t["load"], tps) -
                     tracerun.scheduled_s(t["start"], t["load"], tps) for t in tenants) + DRAIN_S
    return total + opts.overhead_rounds * 3 * (opts.overhead_s + 1) + 5


class Part:
    """The part's state: options, results so far (saved after each run, so
    that what was measured survives a crash), notes."""

    def __init__(self, opts, out):
        self.opts, self.out = opts, out
        nb, na = slices(opts.requests)
        self.res = {"config": {
            "time_scale": opts.time_scale, "instances": tracerun.INSTANCES,
            "kv_capacity_tokens": tracerun.capacity(), "requests": opts.requests,
            "slices": {"B": [0, nb], "A": [nb, nb + na]}, "loads": {"A": LOAD_A, "B": LOAD_B},
            "queue_ms": opts.queue_ms, "starve_ms": opts.starve_ms,
            "deadline_ms": opts.deadline_ms, "sweep": opts.sweep, "gw_args": opts.gw_args,
            "overhead": {"rounds": opts.overhead_rounds, "rate": opts.overhead_rate,
                         "seconds": opts.overhead_s}},
            "runs": {}, "titles": {}, "overhead": None, "failed": []}
        self.notes = []

    def fail(self, name, e):
        self.res["failed"].append(name)
        self.notes.append("%s: FAILED: %r (logs in %s)" % (name, e,
                                                           os.path.join(self.out, "logs")))
        print("  flow: %s failed: %r" % (name, e), flush=True)

    def run(self, k, title, tenants, flow):
        print("  flow: %s ..." % title, flush=True)
        self.res["titles"][k] = title
        try:
            r = flowrun.replay(self.opts, self.out, "flow-" + k, tenants, flow)
        except Exception as e:  # one run failing must not lose the others
            self.fail(k, e)
            r = None
        else:
            print("  flow: %s: %s; %.0f output tokens/s, hit %.3f, %.0f s" % (
                k, ", ".join("%s p99 %.0f ms (%d ok, %d x 429)" % (
                    n, t["ttft_ms"]["p99"] or 0, t["ok"], t["n429"])
                    for n, t in r["tenants"].items()),
                r["output_tokens_per_s"], r["hit_rate"], r["run_wall_s"]), flush=True)
        self.res["runs"][k] = r
        self.save_json()

    def save_json(self):
        with open(os.path.join(self.out, "flow.json"), "w") as f:
            json.dump(self.res, f, indent=1, default=str)


def bench_flow(opts, out):
    """The part: (results, lines of the report)."""
    os.makedirs(out, exist_ok=True)
    part = Part(opts, out)
    todo = plan(opts)
    print("  flow: %d runs of %d requests and %d overhead rounds, about %.0f min" % (
        len(todo), opts.requests, opts.overhead_rounds, expected_s(opts, todo) / 60),
        flush=True)
    t0 = time.monotonic()
    for k, title, tenants, flow in todo:
        part.run(k, title, tenants, flow)
    if opts.overhead_rounds:
        print("  flow: 6. overhead, %d rounds ..." % opts.overhead_rounds, flush=True)
        try:
            part.res["overhead"] = flowrun.overhead_rounds(opts, out)
        except Exception as e:
            part.fail("overhead", e)
    part.res["wall_s"] = time.monotonic() - t0
    lines = flowreport.report(part.res, out, part.notes)
    part.save_json()
    runs.write_lines(out, "flow", lines)
    return part.res, lines


# --- options -------------------------------------------------------------------
def options(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--out", help="results directory (default <build>/bench/<date>)")
    ap.add_argument("--time-scale", type=float, default=runs.SCALE,
                    help="the instances' --time-scale K (default %(default)g)")
    ap.add_argument("--requests", type=int, default=REQUESTS,
                    help="trace requests A and B share, the trace's first (default "
                    "%(default)s; 0: all 12,031)")
    ap.add_argument("--queue-ms", type=float, default=QUEUE_MS,
                    help="InstanceQueueMs, model ms (default %(default)g)")
    ap.add_argument("--starve-ms", type=float, default=STARVE_MS,
                    help="--flow-starve-ms, model ms (default %(default)g)")
    ap.add_argument("--deadline-ms", type=float, default=DEADLINE_MS,
                    help="run 4: the sheddable flood's deadline, model ms (default %(default)g)")
    ap.add_argument("--sweep", default=",".join("%g" % q for q in SWEEP),
                    help="run 2 again at these InstanceQueueMs, model ms, comma-separated "
                    "(default %(default)s; empty: none)")
    ap.add_argument("--overhead-rounds", type=int, default=OVERHEAD_ROUNDS,
                    help="run 6: rounds (default %(default)s; 0: none)")
    ap.add_argument("--overhead-rate", type=float, default=OVERHEAD_RATE,
                    help="run 6: req/s (default %(default)g)")
    ap.add_argument("--overhead-s", type=float, default=OVERHEAD_S,
                    help="run 6: seconds per gateway and round (default %(default)g)")
    ap.add_argument("--gw-args", default="",
                    help="more prefixgate flags for every run's gateway, space-separated "
                    "(not the overhead rounds')")
    ap.add_argument("--only", default="",
                    help="only these runs, comma-separated, of %s, sweep-Q (default: all)"
                    % ",".join(RUNS))
    ap.add_argument("--quick", action="store_true",
                    help="%d requests, no sweep, 3 overhead rounds of 3 s (unless given)"
                    % QUICK_REQUESTS)
    o = ap.parse_args(argv)
    given = set(a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:]))
    if o.quick:
        if "--requests" not in given:
            o.requests = QUICK_REQUESTS
        if "--sweep" not in given:
            o.sweep = ""
        if "--overhead-rounds" not in given:
            o.overhead_rounds = 3
        if "--overhead-s" not in given:
            o.overhead_s = 3.0
    n = len(tracerun.facts()["times_ms"])
    if o.requests == 0:
        o.requests = n
    if not 100 <= o.requests <= n:
        ap.error("--requests: 100 to %d (0: all)" % n)
    try:
        o.sweep = [float(x) for x in o.sweep.split(",") if x]
    except ValueError:
        ap.error("--sweep: numbers, comma-separated")
    o.gw_args = o.gw_args.split()
    o.only = [x for x in o.only.split(",") if x]
    bad = [x for x in o.only if x not in RUNS and not x.startswith("sweep-")]
    if bad:
        ap.error("--only: no run %s (have %s, sweep-Q)" % (",".join(bad), ",".join(RUNS)))
    if not (o.time_scale > 0 and o.queue_ms > 0 and o.starve_ms > 0 and o.deadline_ms > 0
            and all(q > 0 for q in o.sweep)):
        ap.error("--time-scale, --queue-ms, --starve-ms, --deadline-ms, --sweep: > 0")
    if o.overhead_rounds < 0 or o.overhead_rate <= 0 or o.overhead_s <= 0:
        ap.error("--overhead-rounds >= 0, --overhead-rate and --overhead-s > 0")
    runs.need_tools(ap, o.build)
    return o


def from_bench(bench_opts, out):
    """bench.py's part "flow": the defaults; --time-factor F < 1 replays the
    first F of the trace, without the sweep, 3 overhead rounds (a smoke run)."""
    argv = ["--build", bench_opts.build]
    if bench_opts.time_factor < 1:
        n = len(tracerun.facts()["times_ms"])
        argv += ["--quick", "--requests", str(max(100, int(n * bench_opts.time_factor)))]
    return bench_flow(options(argv), out)


def main():
    return runs.standalone("flow", options(), bench_flow)


if __name__ == "__main__":
    sys.exit(main())
