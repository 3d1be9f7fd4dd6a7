#!/usr/bin/env python3
"""Data-path benchmark: direct (no proxy), copy, sockmap and sockmsg on
loopback, SSE streams (mockllm, ~200-byte events every 20 ms a stream) at
several concurrencies and one bulk response.

For each run: CPU of every task of mockllm, prefixgate, the client and every
kernel thread (kworkers, ksoftirqd) from /proc/*/task/*/schedstat over the
measurement window — not /proc/stat, whose 250 Hz tick falls into step with
20 ms timers — divided by the events delivered; per-event excess delay
p50/p99 (gap to the previous event beyond 20 ms, from build/ssebench);
events/s.
Bulk: one response of --bulk-bytes, its MiB/s and CPU-seconds per GiB.

usage: datapath.py [--build DIR] [--streams 100,1000,2000] [--paths ...]
                   [--duration S] [--bulk-bytes N] [--out DIR]
Needs root for sockmap/sockmsg (skipped with the reason otherwise).
Raw results: <out>/datapath-<timestamp>.json; the table goes to stdout.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet  # noqa: E402


def ppid(pid):
    try:
        with open("/proc/%s/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def cpu_ns(pids=None):
    """CPU time, ns, of every task of the given processes plus every kernel
    thread (kworkers, ksoftirqd: where redirected bytes are sent); of every
    task on the machine when pids is None. Softirq time is charged to the
    task it interrupts, so on a machine shared with other jobs both figures
    carry some of their work: run it on a quiet machine."""
    total = 0
    for d in glob.glob("/proc/[0-9]*"):
        pid = d.rsplit("/", 1)[1]
        if pids is not None and int(pid) not in pids and int(pid) != 2 and ppid(pid) != 2:
            continue
        for f in glob.glob(d + "/task/[0-9]*/schedstat"):
            try:
                with open(f) as fh:
                    total += int(fh.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return total


def start_gateway(build, path, backend, logdir):
    port, admin = fleet.free_port(), fleet.free_port()
    cmd = [os.path.join(build, "prefixgate"), "--listen", "127.0.0.1:%d" % port,
           "--admin", "127.0.0.1:%d" % admin, "--workers", "2", "--backend", backend,
           "--data-path", path, "--bpf-pin-path", "/sys/fs/bpf/pg-bench-%d" % port]
    p = fleet.spawn(cmd, os.path.join(logdir, "gateway-%s-%d.log" % (path, port)))
    fleet.wait_http(admin, proc=p)
    return p, port


def sse_run(build, target, streams, duration, warmup, pids):
    cmd = [os.path.join(build, "ssebench"), "--target", target, "--conns", str(streams),
           "--chunks", "100000", "--interval-ms", "20", "--duration-s", str(duration),
           "--warmup-s", str(warmup)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = set(pids) | {p.pid}
    time.sleep(warmup)
    c0, t0 = cpu_ns(pids), time.monotonic()
    time.sleep(duration)
    c1, t1 = cpu_ns(pids), time.monotonic()
    out, err = p.communicate(timeout=duration + 60)
    r = json.loads(out.strip().splitlines()[-1])
    r["cpu_s"] = (c1 - c0) / 1e9
    r["wall_s"] = t1 - t0
    r["cpu_us_per_chunk"] = (c1 - c0) / 1e3 / max(1, r["chunks"])
    r["stderr"] = err[-500:]
    return r


def bulk_run(target, nbytes, pids):
    p = subprocess.Popen(["curl", "-s", "-o", "/dev/null", "-w", "%{size_download} %{time_total}",
                        "-X", "POST", "-d", "x", "-H", "X-Mock-Response-Bytes: %d" % nbytes,
                        "http://%s/invocations" % target],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = set(pids) | {p.pid}
    c0 = cpu_ns(pids)
    out, _ = p.communicate(timeout=300)
    c1 = cpu_ns(pids)  # curl is gone by now: its CPU is not counted
    size, secs = out.split()
    size, secs = int(size), float(secs)
    return {"bytes": size, "ok": size == nbytes, "seconds": secs,
            "mib_s": size / secs / 2 ** 20, "cpu_s_per_gib": (c1 - c0) / 1e9 / (size / 2 ** 30)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--streams", default="100,1000,2000")
    ap.add_argument("--paths", default="direct,copy,sockmap,sockmsg")
    ap.add_argument("--duration", type=float, default=8)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--bulk-bytes", type=int, default=1 << 30)
    ap.add_argument("--out")
    o = ap.parse_args()
    out = o.out or os.path.join(o.build, "bench")
    os.makedirs(out, exist_ok=True)
    if not os.path.ismount("/sys/fs/bpf") and os.geteuid() == 0:
        subprocess.run(["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"], check=False)
    results = {"date": time.strftime("%Y-%m-%d %H:%M"), "uname": os.uname().release,
               "cpus": os.cpu_count(), "sse": [], "bulk": []}
    for path in o.paths.split(","):
        if path in ("sockmap", "sockmsg") and os.geteuid() != 0:
            print("skip %s: not root" % path)
            continue
        for streams in [int(s) for s in o.streams.split(",")] + ["bulk"]:
            mock = fleet.Instances(o.build, 1, out)
            gw = None
            target = mock.addrs()[0]
            if path != "direct":
                gw, port = start_gateway(o.build, path, target, out)
                target = "127.0.0.1:%d" % port
            pids = [p.pid for p in mock.procs] + ([gw.pid] if gw else [])
            try:
                if streams == "bulk":
                    r = bulk_run(target, o.bulk_bytes, pids)
                    r["path"] = path
                    results["bulk"].append(r)
                else:
                    r = sse_run(o.build, target, streams, o.duration, o.warmup, pids)
                    r["path"] = path
                    r["streams"] = streams
                    results["sse"].append(r)
                print(json.dumps(r), flush=True)
            finally:
                if gw:
                    fleet.stop(gw)
                    # prefixgate keeps its maps pinned across restarts: a
                    # benchmark removes the ones it made.
                    shutil.rmtree("/sys/fs/bpf/pg-bench-%d" % port, ignore_errors=True)
                for p in mock.procs:
                    fleet.stop(p)
    name = os.path.join(out, "datapath-%s.json" % time.strftime("%Y%m%d-%H%M%S"))
    with open(name, "w") as f:
        json.dump(results, f, indent=1)
    print("\n| streams | path | CPU µs/chunk | excess delay p50 / p99 µs | chunks/s |")
    print("|---|---|---|---|---|")
    for r in results["sse"]:
        print("| %d | %s | %.1f | %.0f / %.0f | %.0f |" % (
            r["streams"], r["path"], r["cpu_us_per_chunk"], r["p50_us"], r["p99_us"],
            r["chunks_per_s"]))
    print("\n| bulk %d MiB | MiB/s | CPU-s per GiB (no client) | intact |" % (o.bulk_bytes >> 20))
    print("|---|---|---|---|")
    for r in results["bulk"]:
        print("| %s | %.0f | %.2f | %s |" % (r["path"], r["mib_s"], r["cpu_s_per_gib"], r["ok"]))
    print("\nraw results: %s" % name)


if __name__ == "__main__":
    main()
