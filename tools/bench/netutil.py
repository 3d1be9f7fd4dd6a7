"""Loopback helpers shared by the e2e tests (tests/e2e/harness.py) and the
benchmarks (tools/bench): free ports that no outgoing connection can take,
the body mockllm sends for X-Mock-Response-Bytes, reading a Prometheus
text (the gateway's /metrics, mockllm's), and an OTLP/HTTP receiver
standing for a trace collector (tests/e2e/test_otel.py keeps what it gets;
the quota benchmark drops it)."""
import http.server
import random
import socket
import threading
import time


def free_port():
    """A free loopback port below the kernel's ephemeral range, so that no
    outgoing connection (whose local port comes from that range) can take
    it between now and the moment a server binds it."""
    try:
        low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    lo, hi = max(1024, low - 12000), low
    for _ in range(200):
        port = random.randrange(lo, hi)
        if port in _GIVEN:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        _GIVEN.add(port)
        return port
    raise RuntimeError("no free port below %d" % low)


_GIVEN = set()


def mock_pattern(n):
    """The body mockllm sends for X-Mock-Response-Bytes: n."""
    out = bytearray()
    off = 0
    while len(out) < n:
        out += b"%015d\n" % off
        off += 16
    return bytes(out[:n])


def metric_samples(text):
    """{'name{labels}': value} of every sample line of a Prometheus text."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def metric_family(text, name):
    """{'name{labels}': value} of the samples of one family."""
    return {k: v for k, v in metric_samples(text).items() if k.split("{", 1)[0] == name}


def read_http_body(h):
    """A request's body from an http.server handler h, by Content-Length or
    chunked (as Node's OTLP exporter sends it)."""
    if h.headers.get("Transfer-Encoding", "").lower() != "chunked":
        return h.rfile.read(int(h.headers.get("Content-Length") or 0))
    body = b""
    while True:
        n = int(h.rfile.readline().split(b";")[0], 16)
        if n == 0:
            while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return body
        body += h.rfile.read(n)
        h.rfile.readline()


class OtlpReceiver:
    """An OTLP/HTTP collector on 127.0.0.1 (a free port, a thread per
    connection): a POST to /v1/traces with a JSON body is answered 200
    ({}) and its body handed to take(), anything else 400; delay_s: each
    answer that late (a slow collector). take() drops the body (a
    collector that accepts and discards); posts and bytes count what was
    accepted."""

    def __init__(self, delay_s=0.0):
        self.posts, self.bytes, self.lock = 0, 0, threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = read_http_body(self)
                if delay_s:
                    time.sleep(delay_s)
                ok = self.path == "/v1/traces" and \
                    self.headers["Content-Type"] == "application/json"
                if ok:
                    with outer.lock:
                        outer.posts += 1
                        outer.bytes += len(body)
                    outer.take(body)
                try:
                    self.send_response(200 if ok else 400)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                except OSError:
                    pass  # the gateway gave up waiting (a slow collector)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def take(self, body):
        """One accepted POST's body (bytes)."""

    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def close(self):
        self.server.shutdown()
        self.server.server_close()
