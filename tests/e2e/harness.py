"""Test fleet for prefixgate's end-to-end tests: mockllm instances and one
prefixgate, real processes on loopback, torn down after each test."""
import contextlib
import http.client
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "..", "tools", "bench"))
from netutil import free_port, metric_family, metric_samples, mock_pattern  # noqa: E402,F401
import tlsutil  # noqa: E402


def tls_pki(opts):
    """--tls: the test CA and the gateway's certificate (made once per run)."""
    return tlsutil.server_pki(os.path.join(opts.build, "e2e-tmp", "pki-%d" % os.getpid()))


def metric_value(f, name, **labels):
    """The value of the sample of fleet f's /metrics named name with these
    labels (among others), 0 if absent."""
    return sample_value(f.metrics(), name, **labels)


def sample_value(text, name, **labels):
    """The value of the sample of a /metrics text named name with these
    labels (among others), 0 if absent."""
    want = name + "{" + ",".join('%s="%s"' % kv for kv in sorted(labels.items())) + "}" \
        if labels else name
    for k, v in metric_samples(text).items():
        if k == want or (labels and k.startswith(name + "{") and
                         all('%s="%s"' % kv in k for kv in labels.items())):
            return float(v)
    return 0.0


def plain_only(fn):
    """Mark a test that never speaks to the gateway's listener (only to
    the admin API): left out of a --tls run, which could not change it."""
    fn.plain_only = True
    return fn


def shm_only(fn):
    """Mark a test that a --mode bpf run on --data-path auto (the suites'
    default) could not change: none of its answers streams (auto carries
    only streamed answers in the kernel; the rest take the copy path, as
    with --no-bpf), it reads no pinned map and restarts nothing on a pin
    path, and the routing state it checks is the same memory behind the
    same pointers in both modes (BPF array maps mmapped, or shared memory;
    no BPF program reads them). Left out of such a run (the shm run checks
    it); run on an explicit --data-path, which carries every answer."""
    fn.shm_only = True
    return fn


def tls_client_context(opts):
    """--tls: the one client context (trusting the test CA) all connections
    share: making one per connection cost 4 ms of CPU, seconds for the
    suites' thousands of connections."""
    if not getattr(opts, "tls_ctx", None):
        opts.tls_ctx = tlsutil.client_context(tls_pki(opts).ca)
    return opts.tls_ctx


class TlsSocket:
    """A client's TLS connection that a sending thread and a reading thread
    may use at once, as the suites do with plain sockets (an ssl.SSLSocket
    may not be: OpenSSL's object is not safe for a read and a write at the
    same time). OpenSSL works on memory BIOs under a lock, only ever for
    the time of a record; the TCP socket's reads and writes are the
    threads' own. Speaks sendall, recv, settimeout and close."""

    def __init__(self, raw, ctx, server_hostname):
        import ssl
        import threading
        self.ssl = ssl
        self.raw = raw
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_hostname=server_hostname)
        self.lock = threading.Lock()      # the SSLObject
        self.send_lock = threading.Lock()  # encrypted bytes leave in order
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._push()
                d = raw.recv(65536)
                if not d:
                    raise ConnectionResetError("closed during the TLS handshake")
                self.inc.write(d)
        self._push()

    def _push(self):
        data = self.out.read()
        if data:
            self.raw.sendall(data)

    def sendall(self, data):
        with self.send_lock:
            with self.lock:
                self.obj.write(data)
                out = self.out.read()
            self.raw.sendall(out)

    def recv(self, n):
        while True:
            with self.lock:
                try:
                    return self.obj.read(n)
                except self.ssl.SSLWantReadError:
                    pass
                except (self.ssl.SSLZeroReturnError, self.ssl.SSLEOFError):
                    return b""
            d = self.raw.recv(65536)
            with self.lock:
                if d:
                    self.inc.write(d)
                else:
                    self.inc.write_eof()

    def settimeout(self, t):
        self.raw.settimeout(t)

    def close(self):
        self.raw.close()


def connect(opts, port, timeout=10):
    """A client connection to the gateway's port: over TLS with --tls
    (handshake done; the test CA trusted), else plain TCP."""
    import socket
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if getattr(opts, "tls", False):
        s = TlsSocket(s, tls_client_context(opts), "gw.test")
    return s


@contextlib.contextmanager
def running(f, *others):
    """The body with fleet f up; then f stopped, others (collectors,
    receivers) closed, and the gateway's exit code 0."""
    try:
        yield f
    finally:
        rc = f.stop()
        for o in others:
            o.close()
    assert rc == 0, rc


def words(n, salt):
    """n words of a prompt, deterministic from salt (test_learn, test_replay:
    the same salt, the same prompt)."""
    vocab = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    return " ".join(vocab[(i * 7 + salt) % 8] + str((i * 31 + salt) % 97) for i in range(n))


def wait_until(pred, timeout=5.0, step=0.02):
    """Poll pred() until it returns a truthy value or timeout seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            return v
        time.sleep(step)


def http_get(port, path, timeout=5.0, headers=None):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, body
    except OSError:
        return None, b""


class Fleet:
    """N mockllm backends behind one prefixgate."""

    def __init__(self, opts, n=3, gw_args=(), mock_args=None, start_gateway=True,
                 admin_token=None):
        self.opts = opts
        # sent as "Authorization: Bearer" on admin requests (--admin-token)
        self.admin_token = admin_token
        self.pins = set()  # bpf mode: pin dirs this fleet's gateways used
        self.tmp = os.path.join(opts.build, "e2e-tmp", str(os.getpid()))
        os.makedirs(self.tmp, exist_ok=True)
        self.mocks = {}  # name -> (port, Popen)
        self.gw = None
        self.pin = None
        try:
            for i in range(n):
                self.add_mock("b%d" % i, (mock_args or {}).get(i, []))
            if start_gateway:
                self.start_gateway(gw_args)
        except Exception:
            self.stop_quietly()  # a failed start leaves no process behind
            raise

    # --- processes ---------------------------------------------------------
    def add_mock(self, name, args=()):
        # Port 0: mockllm binds a free port itself and logs it (no race with
        # other processes picking ports).
        path = os.path.join(self.tmp, "mock-%s.log" % name)
        log = open(path, "w")
        p = subprocess.Popen([os.path.join(self.opts.tools, "mockllm"), "--listen",
                              "127.0.0.1:0", "--id", name] + list(args),
                             stdout=log, stderr=subprocess.STDOUT)

        def logged_port():
            m = re.search(r"listening on \S+ port (\d+)", open(path).read())
            return int(m.group(1)) if m else None

        port = wait_until(logged_port, 5)
        if not port:
            p.kill()
            raise RuntimeError("mockllm %s did not start" % name)
        self.mocks[name] = (port, p)
        ok = wait_until(lambda: http_get(port, "/health", 0.5)[0] == 200, 5)
        if not ok:
            raise RuntimeError("mockllm %s did not start" % name)
        return port

    def kill_mock(self, name):
        port, p = self.mocks[name]
        p.kill()
        p.wait(5)

    def addr(self, name):
        return "127.0.0.1:%d" % self.mocks[name][0]

    def name_of(self, addr):
        for n, (port, _) in self.mocks.items():
            if addr == "127.0.0.1:%d" % port:
                return n
        return None

    def admin_headers(self):
        return {"Authorization": "Bearer " + self.admin_token} if self.admin_token else {}

    def start_gateway(self, args=(), backends=None, extra_backends=(), pin=None, wrap=()):
        """Start prefixgate; pin: reuse that --bpf-pin-path (bpf mode); wrap:
        a command that runs it (e.g. setpriv ..., ending in an exec of it:
        the process is the gateway's)."""
        self.port = free_port()
        self.admin_port = free_port()
        cmd = list(wrap) + [os.path.join(self.opts.build, "prefixgate"),
               "--listen", "127.0.0.1:%d" % self.port,
               "--admin", "127.0.0.1:%d" % self.admin_port, "--workers", "2"]
        if self.opts.mode == "shm":
            cmd.append("--no-bpf")
        else:
            self.pin = pin or "/sys/fs/bpf/pg-e2e-%d-%d" % (os.getpid(), self.port)
            self.pins.add(self.pin)
            cmd += ["--bpf-pin-path", self.pin]
        if getattr(self.opts, "data_path", None):
            cmd += ["--data-path", self.opts.data_path]
        for name in (backends if backends is not None else list(self.mocks)):
            cmd += ["--backend", self.addr(name)]
        for addr in extra_backends:
            cmd += ["--backend", addr]
        if getattr(self.opts, "tls", False):
            # requests go to the TLS listener; the plain one stays beside it
            pki = tls_pki(self.opts)
            self.plain_port, self.port = self.port, free_port()
            cmd += ["--tls-listen", "127.0.0.1:%d" % self.port,
                    "--tls-cert", pki.path("server.pem"), "--tls-key", pki.path("server.key")]
        cmd += list(args)
        self.gw_log = os.path.join(self.tmp, "gateway-%d.log" % self.port)
        self.gw = subprocess.Popen(cmd, stdout=open(self.gw_log, "w"), stderr=subprocess.STDOUT)
        # Started once the admin API answers (503: no backend healthy yet).
        if not wait_until(lambda: http_get(self.admin_port, "/health", 0.5,
                                           self.admin_headers())[0] in (200, 503), 5):
            raise RuntimeError("prefixgate did not start:\n" + open(self.gw_log).read()[-2000:])

    def stop(self):
        rc = None
        if self.gw:
            self.gw.send_signal(signal.SIGTERM)
            try:
                rc = self.gw.wait(10)
            except subprocess.TimeoutExpired:
                self.gw.kill()
                self.gw.wait()
                rc = "hung"
        for port, p in self.mocks.values():
            p.kill()
            p.wait(5)
        # Maps stay pinned after prefixgate exits (for bpftool): remove ours.
        for pin in self.pins:
            shutil.rmtree(pin, ignore_errors=True)
        # Under ASan/UBSan (make test-asan) a report in the log fails the test.
        log = self.log()
        for marker in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
            if marker in log:
                raise AssertionError("sanitizer report in prefixgate's log:\n" +
                                     log[log.index(marker) - 200:][:3000])
        return rc

    def stop_quietly(self):
        """Stop every process started so far, reporting nothing."""
        if self.gw and self.gw.poll() is None:
            self.gw.kill()
            self.gw.wait()
        for port, p in self.mocks.values():
            p.kill()
            p.wait(5)

    def log(self):
        return open(self.gw_log).read() if self.gw else ""

    # --- traffic -----------------------------------------------------------
    def request(self, method, path, body=None, headers=None, conn=None, timeout=20):
        own = conn is None
        if own:
            conn = self.connection(timeout)
        if isinstance(body, str):
            body = body.encode()
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        if own:
            conn.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def connection(self, timeout=20):
        """An http.client connection to the gateway (HTTPS with --tls)."""
        if getattr(self.opts, "tls", False):
            return http.client.HTTPSConnection(
                "127.0.0.1", self.port, timeout=timeout,
                context=tls_client_context(self.opts))
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def post(self, path, body, headers=None, conn=None):
        return self.request("POST", path, body, headers, conn)

    def admin(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.admin_port, timeout=10)
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        c.request(method, path, body=body, headers=self.admin_headers())
        r = c.getresponse()
        data = r.read()
        c.close()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data.decode(errors="replace")

    def backends(self):
        return {b["address"]: b for b in self.admin("GET", "/backends")[1]}

    def dry_run(self, body, path=None, key=None):
        q = []
        if path:
            q.append("path=" + path)
        if key:
            q.append("key=" + key)
        st, r = self.admin("POST", "/route" + ("?" + "&".join(q) if q else ""), body)
        assert st == 200, "dry run: %s %s" % (st, r)
        return r

    def idle(self, timeout=5.0):
        """True once every backend's in-flight count is back to 0."""
        return wait_until(lambda: all(b["in_flight"] == 0 for b in self.backends().values()),
                          timeout)

    def metrics(self):
        return http_get(self.admin_port, "/metrics", 5.0, self.admin_headers())[1].decode()

    def counter(self, name):
        """The value of one unlabelled sample of /metrics, as an int."""
        v = metric_samples(self.metrics()).get(name)
        assert v is not None, "no metric %s" % name
        return int(v)


def check_echo(status, headers, body_sent):
    """mockllm echoes the length and CRC-32 of the body it received."""
    assert status == 200, "status %s" % status
    assert int(headers["x-body-length"]) == len(body_sent), \
        "length %s != %d" % (headers["x-body-length"], len(body_sent))
    assert int(headers["x-body-crc32"], 16) == zlib.crc32(body_sent), "crc mismatch"


def read_responses(s, n):
    """n Content-Length responses in a row from socket s, as (status,
    headers, body). One buffered reader for all of them: a reader made per
    response (http.client.HTTPResponse(s)) reads ahead, and swallows the
    next response whenever both arrived before the first was read."""
    fp = s.makefile("rb")
    out = []
    try:
        for _ in range(n):
            line = fp.readline()
            assert line.startswith(b"HTTP/1."), "status line %r" % line[:80]
            headers = {}
            while True:
                h = fp.readline().strip()
                if not h:
                    break
                k, v = h.split(b":", 1)
                headers[k.strip().lower().decode()] = v.strip().decode()
            body = fp.read(int(headers["content-length"]))
            out.append((int(line.split()[1]), headers, body))
    finally:
        fp.close()  # the socket stays open
    return out


# The user the --user tests become (created if missing: ensure_user).
TEST_USER = "prefixgate-test"


def ensure_user():
    """The test user's pwd entry, creating it if needed; or a SKIP reason."""
    if os.geteuid() != 0:
        return None, "SKIP not root: --user needs root to drop from"
    try:
        return pwd.getpwnam(TEST_USER), None
    except KeyError:
        pass
    p = subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", TEST_USER], capture_output=True, text=True, timeout=20)
    if p.returncode != 0:
        return None, "SKIP useradd %s failed: %s" % (TEST_USER, p.stderr.strip())
    return pwd.getpwnam(TEST_USER), None


def task_status(pid):
    """{tid: {field: value}} of every thread of pid."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            text = open("/proc/%d/task/%s/status" % (pid, tid)).read()
        except OSError:
            continue
        out[tid] = dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)
    return out


# The packaged systemd unit (tools/packaging/prefixgate.service).
UNIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                    "packaging", "prefixgate.service")


def unit_settings(text=None):
    """{key: [value, ...]} of the packaged unit's settings (or of text)."""
    out = {}
    for line in (text if text is not None else open(UNIT).read()).splitlines():
        if line and not line.startswith(("#", "[")) and "=" in line:
            k, _, v = line.partition("=")
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def unit_writable(text=None):
    """The directories the unit lets prefixgate write (ProtectSystem=strict
    makes the rest read-only): ReadWritePaths=, and /var/lib/X and
    /var/log/X for StateDirectory=X and LogsDirectory=X."""
    u = unit_settings(text)
    return ([p for v in u.get("ReadWritePaths", []) for p in v.split()] +
            ["/var/lib/" + d for v in u.get("StateDirectory", []) for d in v.split()] +
            ["/var/log/" + d for v in u.get("LogsDirectory", []) for d in v.split()])


def unit_dirs_wrap(make=True):
    """A command prefix (for start_gateway's wrap, or a command line) that
    runs a program in a mount namespace of its own where /var/lib and
    /var/log are empty, as the host's are not touched, and, when make, hold
    the unit's StateDirectory= and LogsDirectory= as systemd makes them
    (owned by root, mode 0755). Needs root and unshare (util-linux)."""
    dirs = [d for d in unit_writable() if d.startswith(("/var/lib/", "/var/log/"))]
    script = "mount -t tmpfs -o mode=0755 none /var/lib && " \
             "mount -t tmpfs -o mode=0755 none /var/log && "
    if make:
        script += "mkdir -m 0755 %s && " % " ".join(dirs)
    return ["unshare", "-m", "sh", "-c", script + 'exec "$@"', "sh"]


def have_bpf():
    if os.geteuid() != 0:
        return "not root: BPF maps need CAP_BPF"
    if not shutil.which("bpftool"):
        return "bpftool not installed"
    return None


class SickBackend:
    """A backend whose /health answers per `mode`: "ok" (200), "error" (503)
    or "hang" (never answers). Other paths answer 200 with X-Backend-Id."""

    def __init__(self, name="sick"):
        import http.server
        import threading

        outer = self
        self.mode = "ok"
        self.name = name

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                if self.path == "/health" and outer.mode == "hang":
                    time.sleep(3)
                    return
                code = 503 if self.path == "/health" and outer.mode == "error" else 200
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.send_header("X-Backend-Id", outer.name)
                self.end_headers()
                self.wfile.write(b"ok")

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                self.rfile.read(n)
                self.do_GET()

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def addr(self):
        return "127.0.0.1:%d" % self.port

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


def have_cgroup2(path=None):
    """None if cgroup v2 is mounted at path -- by default at one of the places
    the gateway probes for its sockops program (--bpf-cgroup) -- else why not."""
    paths = [path] if path else ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
    try:
        for line in open("/proc/mounts"):
            f = line.split()
            if len(f) > 2 and f[1] in paths and f[2] == "cgroup2":
                return None
    except OSError:
        pass
    return "no cgroup v2 at %s (the sockmsg path attaches a sockops program there)" % \
        " or ".join(paths)


class TestTimeout(Exception):
    pass


def read_reply(sock):
    """(status, headers, body) of one response with a Content-Length, read
    from sock (its timeout bounds the wait); None if it closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        b = sock.recv(65536)
        if not b:
            return None
        data += b
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    h = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    n = int(h.get("content-length", "0"))
    while len(rest) < n:
        b = sock.recv(65536)
        if not b:
            break
        rest += b
    return int(lines[0].split()[1]), h, rest[:n]


def run_suite(tests, add_args=None, setup=None, modes=("shm", "bpf"), limit_s=120):
    """The TAP runner every e2e script shares: common options (--build,
    --tools, --mode, -k SUBSTRING, plus add_args(parser), then setup(opts)),
    tests in order,
    each under a SIGALRM time limit. A test returning "SKIP why" is reported
    as a skip, never as a pass; in bpf mode without root/bpftool every test
    skips, saying why. Returns the exit status (1 if any test failed)."""
    import argparse
    import sys
    import traceback

    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--tools")
    if modes:
        ap.add_argument("--mode", choices=modes, default=modes[0])
    ap.add_argument("--tls", action="store_true",
                    help="clients speak HTTPS to the gateway's TLS listener (a test CA made now)")
    ap.add_argument("-k", default="")
    if add_args:
        add_args(ap)
    opts = ap.parse_args()
    opts.tools = opts.tools or opts.build
    if not modes:
        opts.mode = "shm"
    if setup:
        setup(opts)
    label = (getattr(opts, "label", None) or opts.mode) + ("+tls" if opts.tls else "")
    # --tls runs the tests whose clients use the gateway's listener; one
    # that speaks only to the admin API (plain HTTP) would check again what
    # the plain run checks (marked by plain_only)
    # --mode bpf on auto leaves out the tests marked shm_only (the kernel
    # paths carry none of their answers)
    bpf_auto = opts.mode == "bpf" and getattr(opts, "data_path", None) in (None, "auto")
    picked = [t for t in tests if opts.k in t.__name__ and
              not (opts.tls and getattr(t, "plain_only", False))]
    chosen = [t for t in picked if not (bpf_auto and getattr(t, "shm_only", False))]
    print("1..%d" % len(chosen))
    if len(chosen) < len(picked):
        print("# left out in bpf mode on --data-path auto (shm_only: no answer streams, "
              "no pinned map read; the shm run checks them): %s"
              % ", ".join(t.__name__ for t in picked if t not in chosen))
    sys.stdout.flush()
    skip_all = have_bpf() if opts.mode == "bpf" else None
    if not skip_all and getattr(opts, "data_path", None) == "sockmsg":
        skip_all = have_cgroup2()

    def on_alarm(sig, frame):
        raise TestTimeout("test exceeded its %d s limit" % limit_s)

    signal.signal(signal.SIGALRM, on_alarm)
    failed = 0
    for i, t in enumerate(chosen, 1):
        name = "%s [%s]" % (t.__name__, label) if modes else t.__name__
        if skip_all:
            print("ok %d - %s # SKIP %s" % (i, name, skip_all))
            continue
        t0 = time.monotonic()
        signal.alarm(limit_s)
        try:
            r = t(opts)
            signal.alarm(0)
            if isinstance(r, str) and r.startswith("SKIP"):
                print("ok %d - %s # %s" % (i, name, r))
            else:
                print("ok %d - %s (%.1fs)" % (i, name, time.monotonic() - t0))
        except Exception:  # noqa: BLE001
            signal.alarm(0)
            failed += 1
            print("not ok %d - %s" % (i, name))
            for line in traceback.format_exc().splitlines()[-10:]:
                print("# " + line)
        sys.stdout.flush()
    return 1 if failed else 0
