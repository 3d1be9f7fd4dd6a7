#!/usr/bin/env python3
"""make bench part "learn": what the routing core learns that it is not
told (issue 36's targets), on instances faster and slower than the
gateway's defaults, with clients that stream and clients that do not.

Speeds. Every mockllm instance runs at S times its calibration (--speed S,
--time-scale 1), S = 1/3, 1 and 3 (--speeds): the gateway's defaults
(36,600 prefill tokens/s, 61.5 ms of overhead, 25 ms a token) are then 3
times too fast, right, and 3 times too slow, and nothing tells it so.
Figures are wall ms, the real latency of an instance at that speed; no
time scale.
Modes. Streamed clients (pgload's default) and non-streamed ones (pgload
--no-stream): the gateway then never sees a first token, only each
answer's head when the answer is whole, and pgload's TTFT is the whole
answer's time (its first body byte).

  1. flow: flow.py's runs 1-4 at each speed and mode, on chats. 8
     instances; tenant B (a quiet one) at 0.109 of the fleet's prefill
     capacity, tenant A at 10x B's rate (1.09), together 1.2x; unique
     prompts (pgload --workload no-prefix) of S x 2,000 tokens and 32
     output tokens, Poisson arrivals for --flow-seconds: the same work in
     each instance's own time (every prefill takes 55 ms, the fleet sees
     the same requests per second), which the gateway's defaults misjudge
     by S. Runs: alone (B alone, flow control on), on (A + B, flow control
     on), off (A + B, no flow control), classes (A's requests sheddable
     with X-Prefixgate-Deadline-Ms SHED_DEADLINE_MS, B's critical, flow
     control on). The gateway: CACHE_AWARE, --flow-control with every
     default (the room in each instance's own units, --flow-starve-ms
     5,000), no --cache-capacity (flowrun.py runs it). One mean service
     time: B's prompt tokens not cached over the instance's true prefill
     rate, averaged over run alone (the time one request holds an
     instance's prefill; the overhead does not hold it).
  2. deadline: a cold start (fresh instances and gateway) with
     X-Prefixgate-Deadline-Ms 50 on every request, below the defaults'
     prediction of any request (61.5 ms of overhead alone); 4 instances,
     prompts of DL_PROMPT tokens, one output token (so that a non-streamed
     answer's head is its first token), Poisson at half the fleet's
     capacity for --deadline-seconds, flow control on. An answer counts as
     within the deadline when pgload's TTFT is. The instances can meet it
     where a lone request's TTFT (61.5 / S ms + DL_PROMPT / (36.6 x S) ms)
     is under 50 ms: at S = 3 (30 ms), not at 1 (89 ms) or 1/3 (266 ms).
  3. trace: trace.py's replay (tracerun.py: 8 instances, their caches a
     third of the trace's distinct blocks, CACHE_AWARE told that size as
     trace.py tells it) of the Mooncake trace's first --trace-requests
     requests at loads 0.7, 0.9 and 1.1 of the fleet's prefill capacity
     (--trace-loads), CACHE_AWARE and the two reference rules
     (refrouter.py), the instances' queues sampled every 0.1 s. Decode at
     TRACE_DECODE_MS a token at speed 1 (10x the calibration, as make
     bench's conversation workloads): the trace's answers run to 2,000
     tokens, 150 s at a third of the speed with 25 ms; prefill and TTFT
     keep their calibration. Beside each run, tracesim with the same
     routers, requests and load (--prior-speed 1/S, --no-stream for
     non-streamed clients): at --decode-ms TRACE_DECODE_MS as run, and at
     the calibrated 25 ms, where a non-streamed answer's head comes 10x
     later after its first token. tracesim's TTFT is always the first
     token's; its queue the most prefill tokens queued at an instance.

Targets (issue 36), one row each: measured, the target, their ratio,
met/MISSED and, under a MISSED row, what the figures show of its cause: flow, per speed and mode: B's p99 in run on <=
1.3 x its p99 in run alone + one mean service time; nothing lost (every
request answered 200, but a sheddable one's 429); critical's p99 in run
classes <= 1.1 x B's alone + one service time; the output tokens/s in the
saturated window of run on >= 0.95 x run off's. Deadline, per speed and
mode: every answer a 200 within the deadline or a 429; where the instances
can meet it, at least half 200s. Trace, per load, speed and mode:
CACHE_AWARE's mean and p99 TTFT <= 1.1 x the better reference's (the one
lower on that figure); the busiest instance's queue (the most requests
waiting at one instance in a sample) <= 1.5 x that of the reference better
on mean TTFT.

Output: learn.txt (the report), learn.json (every figure), each run's
pgload JSON and CSV, access logs and tracesim JSON, in the results
directory (default <build>/bench/<date>, as bench.py).

Wall time. The whole part (the defaults) takes about 20 minutes on the
2-CPU development VM, half of it at speed 1/3 (it prints its estimate
first); --quick, a smoke run, about 8 (flow 5 s a run, deadline 4 s, the
trace's first 100 requests at 0.9 only):
  python3 tools/bench/learn.py --build build --quick
One section, or a few, at one speed:
  python3 tools/bench/learn.py --build build --sections trace --speeds 3 --modes no-stream
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet  # noqa: E402
import flow  # noqa: E402
import flowrun  # noqa: E402
import learnreport  # noqa: E402
import runs  # noqa: E402
import tracerun  # noqa: E402
from flowrun import tenant  # noqa: E402
from learnreport import DL_MS  # noqa: E402

SECTIONS = ("flow", "deadline", "trace")
SPEEDS = (1 / 3.0, 1.0, 3.0)
MODES = ("stream", "no-stream")
MODE_ARGS = {"stream": [], "no-stream": ["--no-stream"]}
PREFILL_TPS = tracerun.PREFILL_TPS  # mockllm's calibrated prefill rate, speed 1
OVERHEAD_MS = 61.5  # mockllm's calibrated TTFT overhead, speed 1
PROMPT_EXTRA = 126  # pgload no-prefix: system message, question, template (tokens)
# 1. flow
FLOW_INSTANCES = 8
FLOW_PROMPT = 2000  # tokens at speed 1; S x this at speed S
FLOW_MAX_TOKENS = 32
FLOW_RUNS = ("alone", "on", "off", "classes")
SHED_DEADLINE_MS = 2000
FLOW_SECONDS, QUICK_FLOW_SECONDS = 8.0, 5.0
# 2. deadline
DL_INSTANCES, DL_PROMPT, DL_LOAD = 4, 1000, 0.5  # and learnreport.DL_MS
DL_SECONDS, QUICK_DL_SECONDS = 8.0, 4.0
# 3. trace
TRACE_ROUTERS = ("cache_aware",) + tracerun.REFS
TRACE_DECODE_MS, CALIBRATED_DECODE_MS = 2.5, 25.0
TRACE_REQUESTS, QUICK_TRACE_REQUESTS = 150, 100
TRACE_LOADS, QUICK_TRACE_LOADS = (0.7, 0.9, 1.1), (0.9,)
QUEUE_PERIOD_S = 0.1
START_S = 3  # a run's start-up and shut-down, roughly (the estimate)


def speed_label(s):
    return "1/3" if abs(s - 1 / 3.0) < 1e-3 else "%g" % s


def key(*parts):
    """A run's key in the results: its parts joined by | (a speed is 1/3)."""
    return "|".join(str(p) for p in parts)


def chat(prompt, rate, seconds, max_tokens):
    """pgload flags: unique chat prompts of about prompt tokens, Poisson."""
    return ["--workload", "no-prefix", "--doc-tokens", str(max(1, prompt - PROMPT_EXTRA)),
            "--max-tokens", str(max_tokens), "--rate", "%.3f" % rate,
            "--duration", "%g" % seconds]


def fleet_spec(n, s, extra=()):
    return {"instances": n, "args": ["--time-scale", "1", "--speed", "%g" % s] + list(extra),
            "tps": n * PREFILL_TPS * s, "cache_capacity": None}


class Part:
    """Options, results so far (saved after each run: what was measured
    survives a crash), notes."""

    def __init__(self, opts, out):
        self.opts, self.out = opts, out
        self.res = {"config": {
            "speeds": opts.speeds, "modes": opts.modes, "sections": opts.sections,
            "flow_seconds": opts.flow_seconds, "deadline_seconds": opts.deadline_seconds,
            "trace_requests": opts.trace_requests, "trace_loads": opts.trace_loads,
            "quick": opts.quick},
            "flow": {}, "deadline": {}, "trace": {}, "sim": {},
            "failed": [], "load_avg": {}}
        self.notes = []

    def attempt(self, section, k, what, fn):
        """res[section][k] = fn(), or None when it failed (noted)."""
        print("  learn: %s %s ..." % (section, what), flush=True)
        t0 = time.monotonic()
        try:
            r = fn()
        except Exception as e:  # one run failing must not lose the others
            self.res["failed"].append(key(section, k))
            self.notes.append("%s %s: FAILED: %r (logs in %s)" % (
                section, what, e, os.path.join(self.out, "logs")))
            print("  learn: %s %s failed: %r" % (section, what, e), flush=True)
            r = None
        self.res[section][k] = r
        self.res["load_avg"][key(section, k)] = os.getloadavg()[0]
        print("  learn: %s %s: %.0f s, load average %.1f" % (
            section, what, time.monotonic() - t0, os.getloadavg()[0]), flush=True)
        self.save()
        return r

    def save(self):
        with open(os.path.join(self.out, "learn.json"), "w") as f:
            json.dump(self.res, f, indent=1, default=str)

    def ns(self, **kw):
        """An options object for flowrun's and tracerun's replay()."""
        return SimpleNamespace(build=self.opts.build, time_scale=1.0,
                               gw_args=self.opts.gw_args.split(), **kw)


# --- 1. flow ---------------------------------------------------------------------
def flow_tenants(s, mode, seconds):
    """{run: [tenants]} of one speed and mode (flow.py's runs 1-4, on chats)."""
    prompt = int(round(FLOW_PROMPT * s))
    cap = FLOW_INSTANCES * PREFILL_TPS * s / prompt  # requests per wall s
    extra = MODE_ARGS[mode]

    def t(name, token, load, seed, prio=None, deadline=None):
        return tenant(name, token, 0, 0, load, seed, prio, deadline,
                      chat(prompt, load * cap, seconds, FLOW_MAX_TOKENS), seconds, extra)
    a = t("A", "learnbench-tenant-a", flow.LOAD_A, flow.SEED_A)
    b = t("B", "learnbench-tenant-b", flow.LOAD_B, flow.SEED_B)
    shed = t("sheddable", "learnbench-batch", flow.LOAD_A, flow.SEED_A, "sheddable",
             SHED_DEADLINE_MS)
    crit = t("critical", "learnbench-chat", flow.LOAD_B, flow.SEED_B, "critical")
    return {"alone": [b], "on": [a, b], "off": [a, b], "classes": [shed, crit]}


def service_ms(csv_path, s):
    """Mean prompt tokens not cached over the instance's prefill rate, ms,
    of a run's completed requests (pgload's CSV)."""
    own = [int(r["prompt_tokens"]) - max(0, int(r["cached_tokens"]))
           for r in fleet.read_csv(csv_path) if r["status"] == "200" and r["prompt_tokens"]]
    return 1000.0 * sum(own) / len(own) / (PREFILL_TPS * s) if own else None


def answer(r):
    """How a pgload CSV row was answered: its status, or no answer and why."""
    if r["status"] != "0":
        return r["status"]
    return "no answer in 30 s" if r["error"] == "timeout" else "no answer (%s)" % r["error"]


def not_ok(csv_path):
    """{answer(): n} of a pgload CSV's requests not answered 200."""
    n = {}
    for r in fleet.read_csv(csv_path):
        if r["status"] != "200" or r["error"]:
            n[answer(r)] = n.get(answer(r), 0) + 1
    return n


def run_flow(part, s, mode):
    on = {"queue_ms": None, "starve_ms": None}  # every default
    spec = fleet_spec(FLOW_INSTANCES, s)
    for k, tenants in flow_tenants(s, mode, part.opts.flow_seconds).items():
        name = "learn-flow-%s-%s-%s" % (mode, speed_label(s).replace("/", "_"), k)
        r = part.attempt("flow", key(mode, speed_label(s), k), "%s, speed %s, %s" % (
            k, speed_label(s), mode), lambda: flowrun.replay(
                part.ns(), part.out, name, tenants, None if k == "off" else on, spec))
        if r and k == "alone":
            r["service_ms"] = service_ms(r["tenants"]["B"]["csv"], s)
        for t in (r or {}).get("tenants", {}).values():
            t["not_ok"] = not_ok(t["csv"])


# --- 2. deadline -----------------------------------------------------------------
def deadline_counts(csv_path, limit_ms):
    """{n, ok_within, ok_late, n429, other, other_status: {status: n},
    late: [(sent s, TTFT ms)]} of one pgload CSV. A request's TTFT counts from when pgload sent it (its
    first byte, where the deadline counts from), not from its scheduled
    arrival: on a busy machine pgload sends late, and that is not the
    gateway's."""
    c = {"n": 0, "ok_within": 0, "ok_late": 0, "n429": 0, "other": 0, "other_status": {},
         "late": []}
    for r in fleet.read_csv(csv_path):
        c["n"] += 1
        if r["status"] == "429":
            c["n429"] += 1
        elif r["status"] == "200" and not r["error"] and r["ttft_us"]:
            ms = (int(r["ttft_us"]) - int(r["queue_us"])) / 1000.0
            if ms <= limit_ms:
                c["ok_within"] += 1
            else:
                c["ok_late"] += 1
                c["late"].append(((int(r["start_us"]) + int(r["queue_us"])) / 1e6, ms))
        else:
            c["other"] += 1
            c["other_status"][answer(r)] = c["other_status"].get(answer(r), 0) + 1
    return c


def run_deadline(part, s, mode):
    seconds = part.opts.deadline_seconds
    rate = DL_LOAD * DL_INSTANCES * PREFILL_TPS * s / DL_PROMPT
    t = tenant("D", "learnbench-deadline", 0, 0, DL_LOAD, 1, None, DL_MS,
               chat(DL_PROMPT, rate, seconds, 1), seconds, MODE_ARGS[mode])
    name = "learn-deadline-%s-%s" % (mode, speed_label(s).replace("/", "_"))

    def go():
        r = flowrun.replay(part.ns(), part.out, name, [t], {"queue_ms": None,
                                                            "starve_ms": None},
                           fleet_spec(DL_INSTANCES, s))
        r["counts"] = deadline_counts(r["tenants"]["D"]["csv"], DL_MS)
        r["lone_ttft_ms"] = OVERHEAD_MS / s + 1000.0 * DL_PROMPT / (PREFILL_TPS * s)
        return r
    part.attempt("deadline", key(mode, speed_label(s)), "speed %s, %s" % (
        speed_label(s), mode), go)


# --- 3. trace ----------------------------------------------------------------------
def simulate(part, router, load, s, mode, decode_ms):
    """tracesim's JSON for one run, or None."""
    sim = os.path.join(part.opts.build, "tracesim")
    if not os.access(sim, os.X_OK):
        return None
    path = os.path.join(part.out, "sim-%s-%g-%s-%s-%g.json" % (
        router, load, mode, speed_label(s).replace("/", "_"), decode_ms))
    cmd = [sim, "--trace", tracerun.TRACE, "--strategy", router, "--load", "%g" % load,
           "--requests", str(part.opts.trace_requests), "--prior-speed", "%g" % (1.0 / s),
           "--decode-ms", "%g" % decode_ms, "--json", path] + MODE_ARGS[mode]
    try:
        subprocess.run(cmd, capture_output=True, timeout=300, check=True)
        with open(path) as f:
            return json.load(f)
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        part.notes.append("tracesim %s: %s" % (" ".join(cmd[1:]), e))
        return None


def run_trace(part, load, s, mode):
    speeds = {i: s for i in range(tracerun.INSTANCES)}
    for router in TRACE_ROUTERS:
        k = key(load, mode, speed_label(s), router)
        part.res["sim"][k] = {d: simulate(part, router, load, s, mode, d)
                              for d in (TRACE_DECODE_MS, CALIBRATED_DECODE_MS)}
        name = "learn-trace-%s-%g-%s-%s" % (router, load, mode, speed_label(s).replace("/", "_"))
        part.attempt("trace", k, "%s at %g, speed %s, %s" % (
            router, load, speed_label(s), mode), lambda: tracerun.replay(
                part.ns(trace_requests=part.opts.trace_requests), part.out, name, router, load,
                speeds=speeds, inst_args=["--decode-ms-per-token", "%g" % TRACE_DECODE_MS],
                pgload_args=MODE_ARGS[mode], queue_period=QUEUE_PERIOD_S))


# --- the part ------------------------------------------------------------------------
def longest_answer(n):
    """The most output tokens of one of the trace's first n requests."""
    with gzip.open(tracerun.TRACE, "rt") as f:
        return max(json.loads(line)["output_length"] for line, _ in zip(f, range(n)))


def expected_s(opts):
    """A rough estimate of the part's wall time."""
    t, sp = 0.0, opts.speeds
    nm = len(opts.modes)
    if "flow" in opts.sections:  # the backlog of 1.2x, then 32 tokens decoded
        t += nm * sum(len(FLOW_RUNS) * (START_S + 1.2 * opts.flow_seconds + 0.8 / s)
                      for s in sp)
    if "deadline" in opts.sections:
        t += nm * len(sp) * (START_S + opts.deadline_seconds)
    if "trace" in opts.sections:
        n = opts.trace_requests
        out = longest_answer(n) * TRACE_DECODE_MS / 1000.0  # at speed 1, s
        for load in opts.trace_loads:
            for s in sp:
                tps = tracerun.fleet_tps(1.0, {i: s for i in range(tracerun.INSTANCES)})
                t += nm * len(TRACE_ROUTERS) * (START_S + tracerun.scheduled_s(
                    n - 1, load, tps) + out / s)
    return t


def bench_learn(opts, out):
    """The part: (results, lines of the report)."""
    os.makedirs(out, exist_ok=True)
    part = Part(opts, out)
    print("  learn: sections %s, speeds %s, modes %s: about %.0f min" % (
        ",".join(opts.sections), ",".join(speed_label(s) for s in opts.speeds),
        ",".join(opts.modes), expected_s(opts) / 60), flush=True)
    t0 = time.monotonic()
    for mode in opts.modes:
        for s in opts.speeds:
            if "flow" in opts.sections:
                run_flow(part, s, mode)
            if "deadline" in opts.sections:
                run_deadline(part, s, mode)
    if "trace" in opts.sections:
        for load in opts.trace_loads:
            for mode in opts.modes:
                for s in opts.speeds:
                    run_trace(part, load, s, mode)
    part.res["wall_s"] = time.monotonic() - t0
    lines = learnreport.report(part.res, part.notes)
    part.save()
    runs.write_lines(out, "learn", lines)
    return part.res, lines


# --- options -------------------------------------------------------------------------
def floats(ap, name, text):
    try:
        v = [1 / 3.0 if x.strip() == "1/3" else float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        ap.error("%s: numbers (or 1/3), comma-separated" % name)
    if not all(x > 0 for x in v):
        ap.error("%s: above 0" % name)
    return v


def options(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--out", help="results directory (default <build>/bench/<date>)")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run, about 8 minutes: shorter runs, the trace's first %d "
                    "requests at 0.9 only (unless given)" % QUICK_TRACE_REQUESTS)
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help="of %(default)s, comma-separated")
    ap.add_argument("--speeds", default="1/3,1,3",
                    help="the instances' speeds, x the gateway's defaults (default %(default)s)")
    ap.add_argument("--modes", default=",".join(MODES), help="of %(default)s")
    ap.add_argument("--flow-seconds", type=float, default=FLOW_SECONDS,
                    help="flow: each tenant's arrivals, wall s (default %%(default)g; quick %g)"
                    % QUICK_FLOW_SECONDS)
    ap.add_argument("--deadline-seconds", type=float, default=DL_SECONDS,
                    help="deadline: arrivals, wall s (default %%(default)g; quick %g)"
                    % QUICK_DL_SECONDS)
    ap.add_argument("--trace-requests", type=int, default=TRACE_REQUESTS,
                    help="trace: the trace's first N requests (default %%(default)s; quick %d)"
                    % QUICK_TRACE_REQUESTS)
    ap.add_argument("--trace-loads", default=",".join("%g" % l for l in TRACE_LOADS),
                    help="trace: loads (default %(default)s; quick 0.9)")
    ap.add_argument("--gw-args", default="",
                    help="more prefixgate flags for every gateway of the flow and deadline "
                    "sections, space-separated")
    o = ap.parse_args(argv)
    given = set(a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:]))
    if o.quick:
        for flag, attr, v in (("--flow-seconds", "flow_seconds", QUICK_FLOW_SECONDS),
                              ("--deadline-seconds", "deadline_seconds", QUICK_DL_SECONDS),
                              ("--trace-requests", "trace_requests", QUICK_TRACE_REQUESTS),
                              ("--trace-loads", "trace_loads",
                               ",".join("%g" % l for l in QUICK_TRACE_LOADS)),
):
            if flag not in given:
                setattr(o, attr, v)
    o.sections = [x for x in o.sections.split(",") if x]
    o.modes = [x for x in o.modes.split(",") if x]
    if not o.sections or set(o.sections) - set(SECTIONS):
        ap.error("--sections: of %s" % ",".join(SECTIONS))
    if not o.modes or set(o.modes) - set(MODES):
        ap.error("--modes: of %s" % ",".join(MODES))
    o.speeds = floats(ap, "--speeds", o.speeds)
    o.trace_loads = floats(ap, "--trace-loads", o.trace_loads)
    if not (o.flow_seconds > 0 and o.deadline_seconds > 0):
        ap.error("--flow-seconds, --deadline-seconds: above 0")
    if not 2 <= o.trace_requests <= len(tracerun.facts()["times_ms"]):
        ap.error("--trace-requests: 2 to %d" % len(tracerun.facts()["times_ms"]))
    runs.need_tools(ap, o.build, ("mockllm", "pgload", "prefixgate", "tracesim"))
    return o


def from_bench(bench_opts, out):
    """bench.py's part "learn": the defaults; --time-factor F < 1: --quick."""
    argv = ["--build", bench_opts.build] + (["--quick"] if bench_opts.time_factor < 1 else [])
    return bench_learn(options(argv), out)


def main():
    return runs.standalone("learn", options(), bench_learn, failed=runs.failed_or_lost)


if __name__ == "__main__":
    sys.exit(main())
