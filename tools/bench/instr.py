#!/usr/bin/env python3
"""User-space instructions per request of the gateway, under callgrind.

This VM has no PMU (perf counts no instructions), and CPU time on a shared
2-CPU machine moves by 10-20% from one run to the next; an instruction
count does not. One worker, --no-bpf (callgrind does not follow the BPF
side, which is in the kernel anyway), 2 mockllm instances that answer at
once, the overhead benchmark's 32 KiB chat body; --warmup requests, the
counters zeroed, then --requests at concurrency 4, and the counters dumped.
Only the worker's event loop (worker_main and what it calls) is counted:
the control and admin threads' timed work would grow with the run's wall
time, which valgrind stretches.
Printed and saved (OUT/instr-LABEL.txt): instructions per request, and the
gateway's functions by inclusive instructions per request (callgrind counts
`rep movsb` once per byte moved, so a copy weighs more here than in time).
Another build of prefixgate beside this one: --compare-bin LABEL=PATH; this
build with more flags: --variant LABEL='FLAGS' (e.g. flow='--flow-control':
what flow control costs a request while nothing waits).

usage: tools/bench/instr.py --build build [--out build/bench] [--requests 2000]
       [--warmup 200] [--top 25] [--compare-bin old=../old/build/prefixgate]
       [--variant flow='--flow-control']
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet  # noqa: E402
from overhead import FIXED, INSTANT  # noqa: E402


def callgrind(build, binary, inst, logdir, warmup, requests, out_file, args=()):
    """Run binary (with args) under callgrind for warmup + requests; the
    dump's path."""
    gw = fleet.Gateway(build, inst.addrs(), logdir, ["--workers", "1"] + list(args), binary,
                       bpf=False,
                       wrapper=["valgrind", "--tool=callgrind",
                                "--callgrind-out-file=" + out_file,
                                "--toggle-collect=worker_main"], ready_timeout=120)
    p = gw.proc
    try:
        target = "127.0.0.1:%d" % gw.port
        fleet.pgload(build, target, os.path.join(logdir, "warm.json"),
                     FIXED + ["--concurrency", "4", "--requests", str(warmup)], logdir)
        subprocess.run(["callgrind_control", "-z", str(p.pid)], check=True,
                       capture_output=True, timeout=60)
        r = fleet.pgload(build, target, os.path.join(logdir, "run.json"),
                         FIXED + ["--concurrency", "4", "--requests", str(requests)], logdir)
        subprocess.run(["callgrind_control", "-d", str(p.pid)], check=True,
                       capture_output=True, timeout=60)
        if r["ok"] != requests:
            raise RuntimeError("%d of %d requests failed" % (requests - r["ok"], requests))
    finally:
        gw.stop(timeout=30)
    dumps = sorted(f for f in os.listdir(os.path.dirname(out_file))
                   if f.startswith(os.path.basename(out_file) + ".") and f[-1].isdigit())
    if not dumps:
        raise RuntimeError("callgrind wrote no dump (see %s)" % logdir)
    return os.path.join(os.path.dirname(out_file), dumps[-1])


def annotate(dump, requests, top):
    """(instructions per request, [(per request, function)]) by inclusive cost."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--auto=no", dump],
                         capture_output=True, text=True, check=True).stdout
    total, rows, seen = None, [], set()
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([\s\d.]+%\)\s+(.*)$", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", "")) / requests
        name = m.group(2)
        if name.startswith("PROGRAM TOTALS"):
            total = n
            continue
        # "file:function [object]" twice over for inlined files: keep one
        fn = name.split(" [")[0].rsplit(":", 1)[-1]
        if fn in seen or fn in ("clone", "start_thread"):
            continue
        seen.add(fn)
        rows.append((n, fn))
    return total, rows[:top]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--compare-bin", action="append", default=[], metavar="LABEL=PATH")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL=FLAGS",
                    help="this build again with more flags (split at spaces)")
    opts = ap.parse_args()
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        sys.exit("instr.py: valgrind is not installed (tools/deps.sh valgrind installs it)")
    out = opts.out or os.path.join(opts.build, "bench")
    os.makedirs(out, exist_ok=True)
    bins = [("prefixgate", os.path.join(opts.build, "prefixgate"), [])]
    bins += [(l, b, []) for l, b in fleet.compare_bins(ap, opts.compare_bin, ("prefixgate",))]
    for v in opts.variant:
        label, eq, flags = v.partition("=")
        if not eq or not label or label in [b[0] for b in bins]:
            ap.error("--variant %s: expected a new LABEL=FLAGS" % v)
        bins.append((label, bins[0][1], flags.split()))
    logdir = tempfile.mkdtemp(prefix="pg-instr-")
    inst = fleet.Instances(opts.build, 2, logdir, INSTANT)
    totals = {}
    try:
        for label, binary, args in bins:
            print("  %s under callgrind ..." % label, flush=True)
            dump = callgrind(opts.build, binary, inst, logdir, opts.warmup, opts.requests,
                             os.path.join(logdir, "callgrind-%s.out" % label), args)
            total, rows = annotate(dump, opts.requests, opts.top)
            totals[label] = total
            lines = ["%s: %s%s, one worker, --no-bpf, 32 KiB chat bodies, %d requests" % (
                label, binary, "".join(" " + a for a in args), opts.requests),
                "user-space instructions per request: %.0f" % total, "",
                "inclusive instructions per request, by function:"]
            lines += ["  %9.0f  %s" % (n, fn) for n, fn in rows]
            print("\n".join(lines) + "\n")
            with open(os.path.join(out, "instr-%s.txt" % label), "w") as f:
                f.write("\n".join(lines) + "\n")
    finally:
        inst.stop()
        shutil.rmtree(logdir, ignore_errors=True)
    if len(totals) > 1:
        base = totals["prefixgate"]
        for label, t in totals.items():
            if label != "prefixgate":
                print("%s: %.0f instructions per request, prefixgate %.0f (%.2fx)" % (
                    label, t, base, base / t))
    print("saved %s/instr-*.txt" % out)


if __name__ == "__main__":
    main()
