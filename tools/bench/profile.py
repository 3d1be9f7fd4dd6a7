#!/usr/bin/env python3
"""Where prefixgate's time goes under the overhead benchmark's load.

2 mockllm instances that answer at once, a 32 KiB OpenAI chat body
(non-streaming, one output token), pgload at concurrency 32 for --seconds;
`perf record -g` samples every thread of the gateway meanwhile. Printed and
saved (OUT/profile-DATAPATH.txt): the share of samples in the kernel and in
user space, the top symbols by self time, and the top call chains into the
kernel from the gateway's own code (which syscalls and completions cost).
Folded stacks (OUT/profile-DATAPATH.folded) feed any flame graph tool.

--vs-floor: where prefixgate's CPU goes beyond the floor proxy's. Each of
the floor (build/floorproxy) and prefixgate (--data-path DATAPATH) in
turn, open loop at --rate req/s (the overhead benchmark's CPU figure),
sampled at 4 kHz: the time per request by symbol (self), by frame on the
stack (inclusive: syscalls, io_uring operations, softirq), and in the
kernel and in user space, side by side with the difference. Saved as
OUT/profile-vs-floor-DATAPATH.txt.

usage: tools/bench/profile.py --build build [--out build/bench] [--seconds 8]
       [--data-path auto|copy] [--vs-floor [--rate 2000]] [--gateway-bin PATH]
       (needs root for perf and for the BPF paths; --gateway-bin: another
       build of prefixgate instead of build's)
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet  # noqa: E402
from overhead import FIXED, INSTANT  # noqa: E402


KERNEL_WORK = {
    "io_recv": "receive (io_uring recv)", "io_recvmsg": "receive (io_uring recv)",
    "io_send": "send (io_uring send)", "io_sendmsg": "send (io_uring sendmsg)",
    "io_accept": "accept", "io_connect": "connect", "io_poll_task_func": "poll",
    "net_rx_action": "softirq: packets in", "do_softirq": "softirq: packets in",
    "io_cqring_wait": "waiting for completions", "schedule": "scheduling",
    "__x64_sys_close": "close", "__sys_socket": "socket", "__x64_sys_bpf": "bpf(2)",
    "__x64_sys_getsockopt": "getsockopt", "__x64_sys_ioctl": "ioctl",
    "__x64_sys_io_uring_enter": "io_uring_enter (other)",
}


def perf_script(data):
    out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,ip,sym,dso"],
                         capture_output=True, text=True, check=True).stdout
    stacks, cur = [], []
    for line in out.splitlines():
        if not line.strip():
            if cur:
                stacks.append(cur)
            cur = []
            continue
        if not line.startswith(("\t", " ")):
            continue  # the sample's header line (comm tid)
        parts = line.split(None, 1)
        rest = parts[1] if len(parts) > 1 else "?"
        sym, _, dso = rest.rpartition(" (")
        cur.append((sym.split("+0x")[0] or "?", dso.rstrip(")")))
    if cur:
        stacks.append(cur)
    return stacks


def summarize(stacks, top=15):
    n = len(stacks) or 1
    kernel = sum(1 for s in stacks if s and "kernel" in s[0][1])
    self_sym = collections.Counter(s[0][0] for s in stacks if s)
    # Kernel samples by what the kernel was doing for the gateway: the
    # io_uring operation (or other entry) nearest the leaf that names one.
    via = collections.Counter()
    for s in stacks:
        if s and "kernel" in s[0][1]:
            via[next((KERNEL_WORK[f[0]] for f in s if f[0] in KERNEL_WORK), "other")] += 1
    lines = ["samples: %d; kernel %.1f%%, user space %.1f%%" % (
        len(stacks), 100.0 * kernel / n, 100.0 * (n - kernel) / n),
        "", "top symbols by self time:"]
    lines += ["  %5.1f%%  %s" % (100.0 * c / n, sym) for sym, c in self_sym.most_common(top)]
    lines += ["", "kernel time by what it did:"]
    lines += ["  %5.1f%%  %s" % (100.0 * c / n, sym) for sym, c in via.most_common(8)]
    return lines


def perf_unusable():
    """Why perf cannot sample call stacks here, or None if it can (Debian's
    wrapper has no perf for a kernel it does not ship; no root, no events)."""
    with tempfile.TemporaryDirectory() as d:
        try:
            r = subprocess.run(["perf", "record", "-g", "-o", os.path.join(d, "p"), "--", "true"],
                               capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            return str(e)
    lines = (r.stderr or r.stdout).strip().splitlines()
    return None if r.returncode == 0 else (lines[-1] if lines else "exit %d" % r.returncode)


def record(pid, data, hz):
    return subprocess.Popen(["perf", "record", "-g", "-F", str(hz), "-o", data, "-p", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def per_request(stacks, requests, hz, key):
    """{name: µs per request}: the samples key(stack) names, at hz."""
    c = collections.Counter()
    for s in stacks:
        for k in key(s):
            c[k] += 1
    return {k: v * 1e6 / hz / requests for k, v in c.items()}


def vs_floor(opts, out, logdir):
    """The floor and prefixgate at a fixed rate, profiled alike."""
    hz = 4000
    inst = fleet.Instances(opts.build, 2, logdir, INSTANT)
    runs = {}
    try:
        for name in ("floor", "prefixgate"):
            p = (fleet.Floor(opts.build, inst.addrs(), logdir) if name == "floor" else
                 fleet.Gateway(opts.build, inst.addrs(), logdir,
                               ["--data-path", opts.data_path], opts.gateway_bin))
            data = os.path.join(logdir, name + ".data")
            try:
                rec = record(p.proc.pid, data, hz)
                r = fleet.pgload(opts.build, "127.0.0.1:%d" % p.port,
                                 os.path.join(logdir, name + ".json"),
                                 FIXED + ["--rate", "%g" % opts.rate,
                                          "--duration", "%g" % opts.seconds], logdir)
                rec.send_signal(2)
                rec.wait(timeout=60)
            finally:
                p.stop()
            runs[name] = (max(1, r["ok"]), perf_script(data))
    finally:
        inst.stop()
    lines = ["floor vs prefixgate --data-path %s, 32 KiB chat bodies, %g req/s, %g s each; "
             "µs of CPU per request (the proxy's own tasks)" % (
                 opts.data_path, opts.rate, opts.seconds)]
    views = [("where: kernel or user space",
              lambda s: ["kernel" if s and "kernel" in s[0][1] else "user space"], 4),
             ("self time by symbol", lambda s: [s[0][0]] if s else [], 30),
             ("inclusive, by frame (syscalls, io_uring operations, softirq)",
              lambda s: set(f[0] for f in s), 30)]
    for title, key, top in views:
        fl, pg = (per_request(runs[n][1], runs[n][0], hz, key) for n in ("floor", "prefixgate"))
        lines += ["", title, "  %-44s %9s %11s %9s" % ("", "floor", "prefixgate", "beyond")]
        if title.startswith("where"):
            lines.append("  %-44s %9.1f %11.1f %+9.1f" % (
                "total", sum(fl.values()), sum(pg.values()), sum(pg.values()) - sum(fl.values())))
        for k in sorted(set(fl) | set(pg), key=lambda k: -max(fl.get(k, 0), pg.get(k, 0)))[:top]:
            lines.append("  %-44s %9.2f %11.2f %+9.2f" % (
                k[:44], fl.get(k, 0), pg.get(k, 0), pg.get(k, 0) - fl.get(k, 0)))
    print("\n".join(lines))
    path = os.path.join(out, "profile-vs-floor-%s.txt" % opts.data_path)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("saved %s" % path)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default=None)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--data-path", default="auto", choices=["auto", "copy"])
    ap.add_argument("--vs-floor", action="store_true")
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--gateway-bin", default=None)
    opts = ap.parse_args()
    out = opts.out or os.path.join(opts.build, "bench")
    os.makedirs(out, exist_ok=True)
    why = perf_unusable()
    if why:
        print("profile: SKIPPED: perf cannot record call stacks here (%s)" % why)
        return 0
    logdir = tempfile.mkdtemp(prefix="pg-profile-")
    if opts.vs_floor:
        return vs_floor(opts, out, logdir)
    inst = fleet.Instances(opts.build, 2, logdir, INSTANT)
    gw = fleet.Gateway(opts.build, inst.addrs(), logdir, ["--data-path", opts.data_path],
                       opts.gateway_bin)
    data = os.path.join(logdir, "perf.data")
    try:
        rec = record(gw.proc.pid, data, 2000)
        fleet.pgload(opts.build, "127.0.0.1:%d" % gw.port, os.path.join(logdir, "load.json"),
                     FIXED + ["--concurrency", "32", "--duration", "%g" % opts.seconds],
                     logdir)
        rec.send_signal(2)
        rec.wait(timeout=30)
        stacks = perf_script(data)
    finally:
        gw.stop()
        inst.stop()
    lines = ["prefixgate --data-path %s, 32 KiB chat bodies, c=32, %g s" % (
        opts.data_path, opts.seconds), ""] + summarize(stacks)
    print("\n".join(lines))
    base = os.path.join(out, "profile-%s" % opts.data_path)
    with open(base + ".txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    folded = collections.Counter(";".join(sym for sym, _ in reversed(s)) for s in stacks if s)
    with open(base + ".folded", "w") as f:
        for stack, c in folded.most_common():
            f.write("%s %d\n" % (stack, c))
    print("saved %s.txt and %s.folded" % (base, base))


if __name__ == "__main__":
    main()
