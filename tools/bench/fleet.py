"""Process management for the demo and the benchmarks: simulated vLLM
instances (mockllm), prefixgate, the floor proxy, HAProxy, nginx and pgload
runs, all on loopback. Every process started is stopped on exit (atexit and
SIGINT/TERM), and nothing else is touched."""
import atexit
import csv
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from netutil import free_port, metric_family, metric_samples  # noqa: F401 (for the scripts too)

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
            p.wait()


atexit.register(_cleanup)
for _sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_sig, lambda s, f: (_cleanup(), os._exit(130)))


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
    if p in PROCS:
        PROCS.remove(p)
    return p.returncode


def http(port, path, method="GET", body=None, timeout=2.0):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method,
                                 data=body.encode() if body is not None else None)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read().decode()


def get(port, path, timeout=2.0):
    return http(port, path, timeout=timeout)


def wait_http(port, path="/health", timeout=10.0, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        try:
            get(port, path, 0.5)
            return True
        except urllib.error.HTTPError:
            return True  # it answers (a gateway's /health is 503 with no healthy backend)
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing answers on 127.0.0.1:%d%s" % (port, path))


def wait_tcp(port, timeout=10.0, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing listens on 127.0.0.1:%d" % port)


def prom(text, name):
    """Sum of every sample of one Prometheus metric."""
    return sum(metric_family(text, name).values())


def compare_bins(ap, specs, taken):
    """--compare-bin LABEL=PATH values as [(label, path)]: each label not one
    of taken (names the script's own rows use) nor given twice, each path an
    executable; ap.error() otherwise."""
    out = []
    for c in specs:
        label, _, path = c.partition("=")
        if not label or not path or label in taken or label in (l for l, _ in out):
            ap.error("--compare-bin: LABEL=PATH, LABEL a name of its own (%s)" % c)
        if not os.access(path, os.X_OK):
            ap.error("no executable %s" % path)
        out.append((label, path))
    return out


class Instances:
    """Simulated vLLM instances (fresh KV caches), more can be added.
    extra: {index: more flags for that instance only} (an unequal fleet)."""

    def __init__(self, build, n, logdir, args=(), extra=None):
        self.build, self.logdir, self.args = build, logdir, list(args)
        self.extra = dict(extra or {})
        self.ports, self.procs = [], []
        try:
            for _ in range(n):
                self.add()
        except Exception:
            self.stop()  # the ones already started
            raise

    def add(self):
        i, port = len(self.ports), free_port()
        p = spawn([os.path.join(self.build, "mockllm"), "--listen", "127.0.0.1:%d" % port,
                   "--id", "i%d" % i] + self.args + list(self.extra.get(i, ())),
                  os.path.join(self.logdir, "mockllm-%d.log" % port))
        try:
            wait_http(port, proc=p)
        except Exception:
            stop(p)
            raise
        self.ports.append(port)
        self.procs.append(p)
        return "127.0.0.1:%d" % port

    def addrs(self):
        return ["127.0.0.1:%d" % p for p in self.ports]

    def counters(self):
        """(prefix-cache hit tokens, query tokens) summed over every instance."""
        hits = queries = 0.0
        for p in self.ports:
            m = get(p, "/metrics")
            hits += prom(m, "vllm:prefix_cache_hits_total")
            queries += prom(m, "vllm:prefix_cache_queries_total")
        return hits, queries

    def kv_hit_rate(self, since=(0.0, 0.0)):
        hits, queries = self.counters()
        hits, queries = hits - since[0], queries - since[1]
        return hits / queries if queries else 0.0

    def stop(self):
        for p in self.procs:
            stop(p)


class Gateway:
    """prefixgate (build/prefixgate, or the binary given: another build of
    it); as root its state is in BPF maps under a private pin path, unless
    bpf is False. wrapper: a command it runs under (valgrind: instr.py,
    where the admin API does not come up: ready is then its listener's
    accepting), given ready_timeout seconds."""
    name = "prefixgate"

    def __init__(self, build, backends, logdir, args=(), binary=None, bpf=True, wrapper=(),
                 ready_timeout=10.0):
        self.port, self.admin = free_port(), free_port()
        cmd = list(wrapper) + [binary or os.path.join(build, "prefixgate"),
                               "--listen", "127.0.0.1:%d" % self.port,
                               "--admin", "127.0.0.1:%d" % self.admin]
        self.pin = None
        if os.geteuid() != 0 or not bpf:
            cmd.append("--no-bpf")
        else:
            self.pin = "/sys/fs/bpf/prefixgate-bench-%d" % self.port
            cmd += ["--bpf-pin-path", self.pin]
        for b in backends:
            cmd += ["--backend", b]
        self.proc = spawn(cmd + list(args), os.path.join(logdir, "prefixgate-%d.log" % self.port))
        try:
            if wrapper:
                wait_tcp(self.port, timeout=ready_timeout, proc=self.proc)
            else:
                wait_http(self.admin, timeout=ready_timeout, proc=self.proc)
        except Exception:
            self.stop()
            raise

    def in_flight(self):
        """{address: in-flight requests} from GET /backends."""
        return {b["address"]: b["in_flight"] for b in json.loads(get(self.admin, "/backends"))}

    def add_backend(self, addr):
        http(self.admin, "/backends", "POST", json.dumps({"address": addr}))

    def remove_backend(self, addr):
        http(self.admin, "/backends/" + addr, "DELETE")

    def stop(self, timeout=10):
        rc = stop(self.proc, timeout)
        # This private pin path dies with the process: remove what is left.
        if self.pin and os.path.isdir(self.pin):
            for f in os.listdir(self.pin):
                os.unlink(os.path.join(self.pin, f))
            os.rmdir(self.pin)
        return rc


class Floor:
    """build/floorproxy: one backend connection per client connection (the
    backends in turn), bytes copied both ways through io_uring, nothing
    parsed. The floor any userspace L7 proxy stands on; only for the
    overhead benchmark."""
    name = "floor"

    def __init__(self, build, backends, logdir, workers=None):
        self.port = free_port()
        cmd = [os.path.join(build, "floorproxy"), "--listen", "127.0.0.1:%d" % self.port]
        for b in backends:
            cmd += ["--backend", b]
        if workers:
            cmd += ["--workers", str(workers)]
        self.proc = spawn(cmd, os.path.join(logdir, "floorproxy-%d.log" % self.port))
        wait_tcp(self.port, proc=self.proc)

    def stop(self):
        return stop(self.proc)


class HAProxy:
    """HAProxy 2.6 hashing the first prefix_bytes of the request body onto a
    consistent-hash ring with bounded load (hash-balance-factor)."""
    name = "haproxy"

    def __init__(self, backends, logdir, prefix_bytes=4096, balance_factor=150, threads=2,
                 maxconn=None, tls=None):
        """tls: a TLS listener too, on self.tls_port: (a PEM file holding the
        chain and its key, TLS 1.2 cipher list, TLS 1.3 suites)."""
        self.port = free_port()
        cfg = os.path.join(logdir, "haproxy-%d.cfg" % self.port)
        servers = "".join("    server s%d %s maxconn 4096\n" % (i, b)
                          for i, b in enumerate(backends))
        tls_global = tls_bind = ""
        if tls:
            self.tls_port = free_port()
            # the same protocols and ciphers as prefixgate's defaults
            tls_global = ("    ssl-default-bind-ciphers %s\n    ssl-default-bind-ciphersuites "
                          "%s\n    ssl-default-bind-options ssl-min-ver TLSv1.2\n" %
                          (tls[1], tls[2]))
            tls_bind = "    bind 127.0.0.1:%d ssl crt %s alpn http/1.1\n" % (self.tls_port, tls[0])
        with open(cfg, "w") as f:
            f.write(HAPROXY_CFG % {"port": self.port, "bytes": prefix_bytes,
                                   "factor": balance_factor, "servers": servers,
                                   "threads": threads, "maxconn": maxconn or 8000,
                                   # HAProxy sizes its fd need at 2 a connection and
                                   # will not start above the hard limit: a larger
                                   # maxconn (idle clients: 1 fd each) warns instead.
                                   "limits": ("    no strict-limits\n" if maxconn else "") +
                                   tls_global, "tls_bind": tls_bind})
        self.proc = spawn(["haproxy", "-db", "-f", cfg],
                          os.path.join(logdir, "haproxy-%d.log" % self.port))
        try:
            wait_tcp(self.port, proc=self.proc)
        except Exception:
            stop(self.proc)
            raise

    def stop(self):
        return stop(self.proc)


class RefRouter:
    """refrouter.py (this directory): the reference router, which asks each
    mockllm instance what a request would meet there; rule cache-first or
    predicted-ttft, margin_s its --margin-s (wall-clock seconds)."""
    name = "refrouter"

    def __init__(self, backends, logdir, rule, margin_s=None):
        self.port = free_port()
        cmd = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            "refrouter.py"),
               "--listen", "127.0.0.1:%d" % self.port, "--rule", rule]
        if margin_s is not None:
            cmd += ["--margin-s", "%g" % margin_s]
        for b in backends:
            cmd += ["--backend", b]
        self.proc = spawn(cmd, os.path.join(logdir, "refrouter-%d.log" % self.port))
        try:
            wait_http(self.port, "/ref/stats", proc=self.proc)
        except Exception:
            stop(self.proc)
            raise

    def stats(self):
        return json.loads(get(self.port, "/ref/stats"))

    def stop(self):
        return stop(self.proc)


# http-buffer-request: wait for the body (up to tune.bufsize) before picking a
# server, so req.body is there to hash. 64 KiB buffers hold the prefix of any
# benchmark body; bytes(0,N) takes at most what was buffered. http-no-delay:
# without it HAProxy sends with MSG_MORE and the kernel holds small writes,
# so an SSE stream arrives all at once when it ends (TTFT = end-to-end).
HAPROXY_CFG = """global
    nbthread %(threads)d
    maxconn %(maxconn)d
%(limits)s    tune.bufsize 65536
defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s
    option http-buffer-request
    option http-no-delay
    http-reuse always
frontend fe
    bind 127.0.0.1:%(port)d
%(tls_bind)s    default_backend be
backend be
    balance hash req.body,bytes(0,%(bytes)d)
    hash-type consistent
    hash-balance-factor %(factor)d
%(servers)s"""


class Nginx:
    """nginx hashing the whole request body on a consistent ring (nginx has no
    body-prefix hash without modules): only for the overhead benchmark."""
    name = "nginx"

    def __init__(self, backends, logdir, workers=2, tls=None):
        """tls: a TLS listener too, on self.tls_port: (certificate chain
        file, key file, TLS 1.2 cipher list, TLS 1.3 suites)."""
        self.port = free_port()
        d = os.path.abspath(os.path.join(logdir, "nginx-%d" % self.port))
        os.makedirs(d, exist_ok=True)
        cfg = os.path.join(d, "nginx.conf")
        tls_server = ""
        if tls:
            self.tls_port = free_port()
            tls_server = NGINX_TLS % {"port": self.tls_port, "cert": tls[0], "key": tls[1],
                                      "ciphers": tls[2], "suites": tls[3]}
        with open(cfg, "w") as f:
            f.write(NGINX_CFG % {"port": self.port, "dir": os.path.abspath(d),
                                 "workers": workers, "tls": tls_server,
                                 "servers": "".join("        server %s;\n" % b for b in backends)})
        self.proc = spawn(["nginx", "-p", os.path.abspath(d), "-c", cfg, "-e", "stderr",
                           "-g", "daemon off;"], os.path.join(logdir, "nginx-%d.log" % self.port))
        wait_tcp(self.port, proc=self.proc)

    def stop(self):
        return stop(self.proc)


# $request_body is only set when the whole body sits in one memory buffer:
# client_body_buffer_size covers the 32 KiB benchmark body.
NGINX_CFG = """worker_processes %(workers)d;
pid %(dir)s/nginx.pid;
error_log stderr warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path %(dir)s/body;
    proxy_temp_path %(dir)s/proxy;
    fastcgi_temp_path %(dir)s/fastcgi;
    uwsgi_temp_path %(dir)s/uwsgi;
    scgi_temp_path %(dir)s/scgi;
    client_body_buffer_size 1m;
    client_max_body_size 16m;
    upstream be {
        hash $request_body consistent;
%(servers)s        keepalive 256;
    }
    server {
        listen 127.0.0.1:%(port)d;
%(tls)s        keepalive_requests 1000000;
        location / {
            proxy_pass http://be;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
}
"""

# The TLS listener of the same server (tls.py): the same protocols and
# ciphers as prefixgate's defaults; resumption by tickets (nginx's default).
NGINX_TLS = """        listen 127.0.0.1:%(port)d ssl;
        ssl_certificate %(cert)s;
        ssl_certificate_key %(key)s;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ciphers %(ciphers)s;
        ssl_conf_command Ciphersuites %(suites)s;
        ssl_prefer_server_ciphers on;
"""


class Sampler(threading.Thread):
    """Samples prefixgate's per-backend in-flight counts every period s;
    given several gateways, each sample is their sum per backend (what the
    instance itself has in flight from the whole fleet)."""

    def __init__(self, gws, period=0.1):
        super().__init__(daemon=True)
        self.gws = gws if isinstance(gws, (list, tuple)) else [gws]
        self.period = period
        self.samples = []  # (t, {addr: in_flight})
        self.halt = threading.Event()

    def run(self):
        t0 = time.monotonic()
        while not self.halt.is_set():
            try:
                total = {}
                for gw in self.gws:
                    for a, v in gw.in_flight().items():
                        total[a] = total.get(a, 0) + v
                self.samples.append((time.monotonic() - t0, total))
            except (OSError, ValueError):
                pass
            self.halt.wait(self.period)

    def finish(self):
        self.halt.set()
        self.join()
        peak = {}
        for _, m in self.samples:
            for a, v in m.items():
                peak[a] = max(peak.get(a, 0), v)
        return peak


def pgload(build, target, out_json, args, logdir, csv_path=None, timeout=None):
    """One pgload run; its JSON summary. timeout: seconds before it is
    killed and the run fails (default: none, pgload's own end bounds it)."""
    cmd = [os.path.join(build, "pgload"), "--target", target, "--json", out_json,
           "--quiet"] + list(args)
    if csv_path:
        cmd += ["--csv", csv_path]
    with open(os.path.join(logdir, "pgload.log"), "a") as log:
        log.write("$ %s\n" % " ".join(cmd))
        log.flush()
        # 1: some requests failed (counted in the JSON and reported); 2: no run
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            raise RuntimeError("pgload still running after %g s, killed: %s" % (
                timeout, " ".join(cmd)))
        if rc not in (0, 1):
            raise RuntimeError("pgload failed: %s (see %s/pgload.log)" % (" ".join(cmd), logdir))
    with open(out_json) as f:
        return json.load(f)


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def admin_request(port, method, path, body=None):
    """(status, text) of one admin API request."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request(method, path, body=body)
    r = c.getresponse()
    text = r.read().decode(errors="replace")
    c.close()
    return r.status, text
