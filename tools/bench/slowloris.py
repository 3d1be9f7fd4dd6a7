#!/usr/bin/env python3
"""make bench, slowloris section: does a crowd of clients trickling their
request heads delay normal requests? Measures the latency of N sequential
normal requests through prefixgate with no slow connection open, then with
--slow connections (default 1,000) each sending a partial head and one
more byte every 200 ms, all within --header-timeout so none is cut off
during the measurement. Prints p50/p99 of both and their ratio; raw
numbers go to OUT/slowloris.json."""
import argparse
import http.client
import json
import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet  # noqa: E402


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def timed_requests(port, n):
    """n sequential requests on one keep-alive connection: latencies, ms."""
    out = []
    body = b"x" * 1024
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    for _ in range(n):
        t0 = time.perf_counter()
        c.request("POST", "/invocations", body=body)
        r = c.getresponse()
        r.read()
        out.append((time.perf_counter() - t0) * 1e3)
        assert r.status == 200, r.status
    c.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--slow", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=300)
    opts = ap.parse_args()
    out = opts.out or os.path.join(opts.build, "bench")
    os.makedirs(out, exist_ok=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, opts.slow + 1024), hard))
    inst = fleet.Instances(opts.build, 2, out)
    gw = fleet.Gateway(opts.build, inst.addrs(), out, ["--health-check-path", "none"])
    try:
        timed_requests(gw.port, 50)  # warm up pools
        quiet = timed_requests(gw.port, opts.requests)
        slow = []
        for _ in range(opts.slow):
            s = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
            s.sendall(b"POST /invocations HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            slow.append(s)
        loaded = []
        t_end = time.monotonic() + 8  # inside the 10 s header timeout
        while len(loaded) < opts.requests and time.monotonic() < t_end:
            for s in slow[len(loaded) % 20::20]:
                try:
                    s.sendall(b"a")
                except OSError:
                    pass
            loaded += timed_requests(gw.port, 10)
        for s in slow:
            s.close()
    finally:
        gw.stop()
        inst.stop()
    res = {"slow_connections": opts.slow, "requests": [len(quiet), len(loaded)],
           "quiet_ms": {"p50": pct(quiet, .5), "p99": pct(quiet, .99)},
           "with_slowloris_ms": {"p50": pct(loaded, .5), "p99": pct(loaded, .99)}}
    json.dump(res, open(os.path.join(out, "slowloris.json"), "w"), indent=1)
    print("slowloris: %d connections trickling their heads" % opts.slow)
    print("%-26s %9s %9s" % ("normal request latency", "p50", "p99"))
    print("%-26s %7.3fms %7.3fms" % ("no slow clients", res["quiet_ms"]["p50"], res["quiet_ms"]["p99"]))
    print("%-26s %7.3fms %7.3fms" % ("%d slow clients" % opts.slow,
                                      res["with_slowloris_ms"]["p50"], res["with_slowloris_ms"]["p99"]))
    print("ratio p50 %.2fx, p99 %.2fx" % (res["with_slowloris_ms"]["p50"] / res["quiet_ms"]["p50"],
                                         res["with_slowloris_ms"]["p99"] / res["quiet_ms"]["p99"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
