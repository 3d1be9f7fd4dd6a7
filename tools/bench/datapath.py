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

Per-request cost ("requests"): what a request costs on each gateway
configuration of REQUEST_CONFIGS when responses are short streams, i.e. when
the connection set-up of a path shows. Closed loop: --req-clients clients,
each sending streamed chat completions back to back over a keep-alive
connection (build/pgload), --req-tokens output tokens each, mockllm running
--req-time-scale times faster so its own delays are tiny (TTFT 61.5 ms and
25 ms a token at scale 1 become 61.5 and 25 us at 1000). For each run:
requests/s, full-response latency p50/p99 (pgload's e2e, requests that
started and ended inside the window), CPU of every task (as above) per
request, and connections opened per request: backend (mockllm's accept
count; includes the gateway's health checks and metrics scrapes, ~1/s) and
client (prefixgate_connections_total). Ratios are against the "copy" row of
the same clients and tokens.

usage: datapath.py [--build DIR] [--gateway-bin PATH] [--only sse,bulk,requests]
                   [--streams 100,1000,2000] [--paths ...] [--duration S]
                   [--bulk-bytes N] [--req-clients 16,64] [--req-tokens 1,16]
                   [--req-configs ...] [--req-duration S] [--out DIR]
--gateway-bin: the prefixgate binary to measure (another build of it; the
other tools still come from --build). Needs root for sockmap/sockmsg
(skipped with the reason otherwise).
Raw results: <out>/datapath-<timestamp>.json; the tables go to stdout.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet  # noqa: E402
from cpu import cpu_ns, cpu_ns_by_role  # noqa: E402
from netutil import metric_samples  # noqa: E402

# Configurations of the per-request section: name -> (extra prefixgate
# arguments, None = no gateway: the client talks to mockllm; extra pgload
# arguments). Another configuration is one more line. The "-close" rows send
# "Connection: close" so the client reconnects for every request, as it must
# after a spliced response: they tell the client's reconnect from the
# backend's.
CLIENT_CLOSE = ["--header", "Connection: close"]
REQUEST_CONFIGS = {
    "direct": (None, []),
    "direct-close": (None, CLIENT_CLOSE),
    "copy": (["--data-path", "copy"], []),
    "copy-close": (["--data-path", "copy"], CLIENT_CLOSE),
    "sockmap": (["--data-path", "sockmap"], []),
    "sockmsg": (["--data-path", "sockmsg"], []),
}
REQUEST_BASELINE = "copy"
SECTIONS = ("sse", "bulk", "requests")


def start_gateway(build, args, backend, logdir, name, binary=None):
    """prefixgate (build's, or binary) with 2 workers and extra args;
    (process, port, admin port). Its pin directory is
    /sys/fs/bpf/pg-bench-<port> (stop_gateway)."""
    port, admin = fleet.free_port(), fleet.free_port()
    cmd = [binary or os.path.join(build, "prefixgate"), "--listen", "127.0.0.1:%d" % port,
           "--admin", "127.0.0.1:%d" % admin, "--workers", "2", "--backend", backend,
           "--bpf-pin-path", "/sys/fs/bpf/pg-bench-%d" % port] + list(args)
    p = fleet.spawn(cmd, os.path.join(logdir, "gateway-%s-%d.log" % (name, port)))
    try:
        fleet.wait_http(admin, proc=p)
    except RuntimeError:
        stop_gateway(p, port)
        raise RuntimeError("prefixgate %s did not start (exit %s, see %s)" % (
            " ".join(args), p.returncode, os.path.join(logdir, "gateway-%s-%d.log" % (name, port))))
    return p, port, admin


def stop_gateway(p, port):
    fleet.stop(p)
    # prefixgate keeps its maps pinned across restarts: a benchmark removes
    # the ones it made.
    shutil.rmtree("/sys/fs/bpf/pg-bench-%d" % port, ignore_errors=True)


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


def sample(text, name):
    """One Prometheus sample, name with its labels as printed; 0 if absent."""
    return metric_samples(text).get(name, 0.0)


def counters(mock_port, admin):
    """Backend connections accepted and chat requests received (mockllm),
    client connections accepted (prefixgate; mockllm's when direct)."""
    m = fleet.get(mock_port, "/metrics")
    c = {"backend_conns": sample(m, "mockllm_connections_accepted_total"),
         "requests": sample(m, 'mockllm_requests_total{path="/v1/chat/completions"}')}
    c["client_conns"] = (sample(fleet.get(admin, "/metrics"), "prefixgate_connections_total")
                         if admin else c["backend_conns"])
    return c


def pct(v, p):
    """Nearest-rank percentile p (0-100) of sorted v; None when empty."""
    if not v:
        return None
    return v[min(len(v) - 1, max(0, int(p / 100.0 * len(v) + 0.999999) - 1))]


def requests_run(build, target, mock_port, admin, clients, tokens, duration, warmup, roles,
                 logdir, client_args=()):
    """Closed loop of streamed chat completions for warmup + duration s;
    counts over the duration window only."""
    fd, csv_path = tempfile.mkstemp(prefix="pgload-", suffix=".csv", dir=logdir)
    os.close(fd)
    json_path = csv_path[:-4] + ".json"
    cmd = [os.path.join(build, "pgload"), "--target", target, "--concurrency", str(clients),
           "--max-tokens", str(tokens), "--workload", "fixed", "--body-bytes", "512",
           "--duration", "%.3f" % (warmup + duration + 1), "--timeout-ms", "10000",
           "--quiet", "--csv", csv_path, "--json", json_path] + list(client_args)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    start = time.monotonic()  # pgload's time 0, to a few ms
    try:
        roles = dict(roles)
        roles[p.pid] = "client"
        time.sleep(warmup)
        k0 = counters(mock_port, admin)
        c0, t0 = cpu_ns_by_role(roles), time.monotonic()
        time.sleep(duration)
        c1, t1 = cpu_ns_by_role(roles), time.monotonic()
        k1 = counters(mock_port, admin)
        _, err = p.communicate(timeout=warmup + duration + 30)
        if p.returncode not in (0, 1):
            raise RuntimeError("pgload failed: %s: %s" % (" ".join(cmd), err[-500:]))
        with open(json_path) as f:
            summary = json.load(f)
        lo, hi = (t0 - start) * 1e6, (t1 - start) * 1e6
        lat, errors = [], 0
        for row in fleet.read_csv(csv_path):
            begin = int(row["start_us"])
            end = begin + int(row["e2e_us"])
            if begin < lo or end > hi:
                continue
            if row["error"]:
                errors += 1
            else:
                lat.append(int(row["e2e_us"]))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for f in (csv_path, json_path):
            if os.path.exists(f):
                os.unlink(f)
    lat.sort()
    # The second scrape's own connection to mockllm is in its count.
    backend = k1["backend_conns"] - k0["backend_conns"] - 1
    client = k1["client_conns"] - k0["client_conns"] - (0 if admin else 1)
    n = k1["requests"] - k0["requests"]
    cpu = {k: (c1[k] - c0[k]) / 1e3 / max(1, n) for k in c1}
    total = sum(c1.values()) - sum(c0.values())
    return {"clients": clients, "tokens": tokens, "requests": n, "wall_s": t1 - t0,
            "req_per_s": n / (t1 - t0), "latency_n": len(lat), "errors": errors,
            "p50_us": pct(lat, 50), "p99_us": pct(lat, 99),
            "cpu_s": total / 1e9, "cpu_us_per_req": total / 1e3 / max(1, n),
            "cpu_us_per_req_by": cpu,
            "backend_conns": backend, "backend_conns_per_req": backend / max(1, n),
            "client_conns": client, "client_conns_per_req": client / max(1, n),
            "pgload": {k: summary.get(k) for k in ("requests", "errors", "errors_by_kind",
                                                   "retries", "connections_opened",
                                                   "hit_deadline")},
            "stderr": err[-500:]}


def requests_section(o, out, results):
    names = o.req_configs.split(",")
    for clients in [int(c) for c in o.req_clients.split(",")]:
        for tokens in [int(t) for t in o.req_tokens.split(",")]:
            for name in names:
                args, client_args = REQUEST_CONFIGS[name]
                mock = fleet.Instances(o.build, 1, out,
                                       ["--time-scale", str(o.req_time_scale)])
                gw = port = admin = None
                target = mock.addrs()[0]
                try:
                    if args is not None:
                        try:
                            gw, port, admin = start_gateway(o.build, args, target, out, name,
                                                            o.gateway_bin)
                        except RuntimeError as e:
                            print("skip %s: %s" % (name, e), flush=True)
                            results["requests_skipped"].append({"config": name,
                                                                "reason": str(e)})
                            continue
                        target = "127.0.0.1:%d" % port
                    roles = {p.pid: "backend" for p in mock.procs}
                    if gw:
                        roles[gw.pid] = "gateway"
                    r = requests_run(o.build, target, mock.ports[0], admin, clients, tokens,
                                     o.req_duration, o.req_warmup, roles, out, client_args)
                    r["config"] = name
                    r["args"] = args
                    r["client_args"] = client_args
                    results["requests"].append(r)
                    print(json.dumps(r), flush=True)
                finally:
                    if gw:
                        stop_gateway(gw, port)
                    mock.stop()
    base = {(r["clients"], r["tokens"]): r for r in results["requests"]
            if r["config"] == REQUEST_BASELINE}
    for r in results["requests"]:
        b = base.get((r["clients"], r["tokens"]))
        r["vs_" + REQUEST_BASELINE] = {
            k: (r[k] / b[k] if b and r[k] is not None and b[k] else None)
            for k in ("req_per_s", "p50_us", "p99_us", "cpu_us_per_req")}


def print_requests(results, o):
    def x(v):
        return "-" if v is None else "%.2f" % v

    def us(v):
        return "-" if v is None else "%.0f" % v

    print("\nper-request cost: closed loop, streamed chat completions, mockllm "
          "--time-scale %g, %g s each" % (o.req_time_scale, o.req_duration))
    print("| clients | tokens | config | req/s | latency p50 / p99 µs | CPU µs/req | "
          "of which gateway / backend / kernel / client | backend conns/req | "
          "client conns/req | x %s: req/s, p50, p99, CPU |" % REQUEST_BASELINE)
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results["requests"]:
        v = r["vs_" + REQUEST_BASELINE]
        by = r["cpu_us_per_req_by"]
        print("| %d | %d | %s | %.0f | %s / %s | %.1f | %s / %.1f / %.1f / %.1f | %.3f | %.3f "
              "| %s, %s, %s, %s |%s" % (
                  r["clients"], r["tokens"], r["config"], r["req_per_s"], us(r["p50_us"]),
                  us(r["p99_us"]), r["cpu_us_per_req"],
                  "%.1f" % by["gateway"] if "gateway" in by else "-", by["backend"],
                  by["kernel"], by["client"], r["backend_conns_per_req"],
                  r["client_conns_per_req"], x(v["req_per_s"]), x(v["p50_us"]),
                  x(v["p99_us"]), x(v["cpu_us_per_req"]),
                  " %d errors" % r["errors"] if r["errors"] else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--gateway-bin", help="the prefixgate binary to measure (default "
                    "BUILD/prefixgate; mockllm, pgload and ssebench still come from BUILD)")
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help="sections to run, of %s (default all)" % ",".join(SECTIONS))
    ap.add_argument("--streams", default="100,1000,2000")
    ap.add_argument("--paths", default="direct,copy,sockmap,sockmsg")
    ap.add_argument("--duration", type=float, default=8)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--bulk-bytes", type=int, default=1 << 30)
    ap.add_argument("--req-clients", default="16,64")
    ap.add_argument("--req-tokens", default="1,16")
    ap.add_argument("--req-configs", default=",".join(REQUEST_CONFIGS))
    ap.add_argument("--req-duration", type=float, default=10)
    ap.add_argument("--req-warmup", type=float, default=2)
    ap.add_argument("--req-time-scale", type=float, default=1000)
    ap.add_argument("--out")
    o = ap.parse_args()
    if o.gateway_bin and not os.access(o.gateway_bin, os.X_OK):
        ap.error("--gateway-bin: no executable %s" % o.gateway_bin)
    only = o.only.split(",")
    for sec in only:
        if sec not in SECTIONS:
            ap.error("--only: no section %s (have %s)" % (sec, ",".join(SECTIONS)))
    for name in o.req_configs.split(","):
        if name not in REQUEST_CONFIGS:
            ap.error("--req-configs: no configuration %s (have %s)" % (
                name, ",".join(REQUEST_CONFIGS)))
    out = o.out or os.path.join(o.build, "bench")
    os.makedirs(out, exist_ok=True)
    if not os.path.ismount("/sys/fs/bpf") and os.geteuid() == 0:
        subprocess.run(["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"], check=False)
    results = {"date": time.strftime("%Y-%m-%d %H:%M"), "uname": os.uname().release,
               "gateway": o.gateway_bin or os.path.join(o.build, "prefixgate"),
               "cpus": os.cpu_count(), "sections": only, "sse": [], "bulk": [],
               "requests": [], "requests_skipped": [],
               "requests_params": {"time_scale": o.req_time_scale, "body_bytes": 512,
                                   "duration_s": o.req_duration, "warmup_s": o.req_warmup,
                                   "configs": {n: REQUEST_CONFIGS.get(n)
                                               for n in o.req_configs.split(",")}}}
    runs = ([int(s) for s in o.streams.split(",")] if "sse" in only else []) + \
        (["bulk"] if "bulk" in only else [])
    for path in o.paths.split(",") if runs else []:
        if path in ("sockmap", "sockmsg") and os.geteuid() != 0:
            print("skip %s: not root" % path)
            continue
        for streams in runs:
            mock = fleet.Instances(o.build, 1, out)
            gw = None
            target = mock.addrs()[0]
            if path != "direct":
                gw, port, _ = start_gateway(o.build, ["--data-path", path], target, out, path,
                                            o.gateway_bin)
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
                    stop_gateway(gw, port)
                for p in mock.procs:
                    fleet.stop(p)
    if "requests" in only:
        requests_section(o, out, results)
    name = os.path.join(out, "datapath-%s.json" % time.strftime("%Y%m%d-%H%M%S"))
    with open(name, "w") as f:
        json.dump(results, f, indent=1)
    if "sse" in only:
        print("\n| streams | path | CPU µs/chunk | excess delay p50 / p99 µs | chunks/s |")
        print("|---|---|---|---|---|")
        for r in results["sse"]:
            print("| %d | %s | %.1f | %.0f / %.0f | %.0f |" % (
                r["streams"], r["path"], r["cpu_us_per_chunk"], r["p50_us"], r["p99_us"],
                r["chunks_per_s"]))
    if "bulk" in only:
        print("\n| bulk %d MiB | MiB/s | CPU-s per GiB (no client) | intact |"
              % (o.bulk_bytes >> 20))
        print("|---|---|---|---|")
        for r in results["bulk"]:
            print("| %s | %.0f | %.2f | %s |" % (r["path"], r["mib_s"], r["cpu_s_per_gib"],
                                                r["ok"]))
    if "requests" in only:
        print_requests(results, o)
    print("\nraw results: %s" % name)


if __name__ == "__main__":
    main()
