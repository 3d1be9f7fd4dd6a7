"""Process management for the demo and the benchmarks: simulated vLLM
instances (mockllm), prefixgate, and pgload runs, all on loopback. Every
process started is stopped on exit."""
import atexit
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

PROCS = []


def _cleanup():
    for p in PROCS:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 5
    for p in PROCS:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()


atexit.register(_cleanup)
for _sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_sig, lambda s, f: (_cleanup(), os._exit(130)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def spawn(cmd, log):
    p = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    PROCS.append(p)
    return p


def stop(p, timeout=10):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode


def get(port, path, timeout=2.0):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
        return r.read().decode()


def wait_http(port, path="/health", timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            get(port, path, 0.5)
            return True
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing answers on 127.0.0.1:%d%s" % (port, path))


def prom(text, name):
    """Sum of every sample of one Prometheus metric."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name)] in " {":
            total += float(line.rsplit(" ", 1)[1])
    return total


class Instances:
    """n simulated vLLM instances (fresh KV caches)."""

    def __init__(self, build, n, logdir, args=()):
        self.ports = [free_port() for _ in range(n)]
        self.procs = [spawn([os.path.join(build, "mockllm"), "--listen", "127.0.0.1:%d" % p,
                             "--id", "i%d" % i] + list(args),
                            os.path.join(logdir, "mockllm-%d.log" % i))
                      for i, p in enumerate(self.ports)]
        for p in self.ports:
            wait_http(p)

    def addrs(self):
        return ["127.0.0.1:%d" % p for p in self.ports]

    def kv_hit_rate(self):
        hits = queries = 0.0
        for p in self.ports:
            m = get(p, "/metrics")
            hits += prom(m, "vllm:prefix_cache_hits_total")
            queries += prom(m, "vllm:prefix_cache_queries_total")
        return hits / queries if queries else 0.0

    def stop(self):
        for p in self.procs:
            stop(p)


class Gateway:
    def __init__(self, build, backends, logdir, args=()):
        self.port, self.admin = free_port(), free_port()
        cmd = [os.path.join(build, "prefixgate"), "--listen", "127.0.0.1:%d" % self.port,
               "--admin", "127.0.0.1:%d" % self.admin]
        if os.geteuid() != 0:
            cmd.append("--no-bpf")
        else:
            cmd += ["--bpf-pin-path", "/sys/fs/bpf/prefixgate-bench-%d" % self.port]
        for b in backends:
            cmd += ["--backend", b]
        self.proc = spawn(cmd + list(args), os.path.join(logdir, "prefixgate-%d.log" % self.port))
        wait_http(self.admin)

    def stop(self):
        return stop(self.proc)


def pgload(build, target, out_json, args, logdir):
    cmd = [os.path.join(build, "pgload"), "--target", target, "--json", out_json,
           "--quiet"] + list(args)
    with open(os.path.join(logdir, "pgload.log"), "a") as log:
        subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=True)
    with open(out_json) as f:
        return json.load(f)


def admin_request(port, method, path, body=None):
    """(status, text) of one admin API request."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request(method, path, body=body)
    r = c.getresponse()
    text = r.read().decode(errors="replace")
    c.close()
    return r.status, text
