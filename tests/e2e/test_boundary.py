#!/usr/bin/env python3
"""Request boundaries when a backend answers before reading the body (vLLM's
--api-key 401, Starlette's 404): a pooled backend connection must never owe
body bytes, so no client's bytes end up inside another client's request and
no client gets another's response. One gateway worker (--workers 1), so every
client shares one pool; bodies far longer than --prefix-length (1024, its
minimum), by Content-Length and chunked. Each client marks its headers
(X-Client: ID, Authorization: Bearer tok-ID) and its body (#ID#...); the
backends echo what they parsed, and record every byte they receive, which is
re-parsed with correct framing afterwards (earlybackend.audit_bytes).

After an early answer the client connection must either be closed with
"Connection: close" on the response, or stay usable: the next request on it
is answered, and is its own. TAP output; every wait is bounded.

usage: test_boundary.py --build DIR [--tools DIR] --mode shm|bpf [-k SUBSTRING]
"""
import hashlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import Fleet, connect, free_port, http_get, run_suite, wait_until  # noqa: E402
from earlybackend import EarlyBackend  # noqa: E402  (tools/bench, via harness)

TESTS = []
GW_ARGS = ["--workers", "1", "--prefix-length", "1024", "--health-check-path", "none",
           "--metrics-scrape-interval", "0", "--first-byte-timeout", "4000"]
PARTIAL = 8192      # body bytes a "partial" client sends before it reads the answer
READ_S = 10.0       # a response not complete within this is missing


def test(fn):
    TESTS.append(fn)
    return fn


# --- clients ---------------------------------------------------------------------
def body_of(cid, size):
    m = b"#%s#" % cid.encode()
    return (m * (size // len(m) + 1))[:size]


def request(cid, path, size, chunked, auth=None, body=None):
    """(head, body on the wire, body) of one marked request."""
    auth = auth or "Bearer tok-" + cid
    body = body_of(cid, size) if body is None else body
    head = "POST %s HTTP/1.1\r\nHost: gw\r\nX-Client: %s\r\nAuthorization: %s\r\n" % (
        path, cid, auth)
    if chunked:
        head += "Transfer-Encoding: chunked\r\n\r\n"
        wire = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 16384]), body[i:i + 16384])
                        for i in range(0, len(body), 16384)) + b"0\r\n\r\n"
    else:
        head += "Content-Length: %d\r\n\r\n" % len(body)
        wire = body
    return head.encode(), wire, body


class Client:
    def __init__(self, port):
        self.s = connect(OPTS, port, READ_S)
        self.buf = b""
        self.send_error = None

    def send(self, data):
        self.s.sendall(data)

    def send_quiet(self, data, piece=65536, pause=0.003):
        """Send data as an uploader slower than loopback: in pieces, paced."""
        try:
            for i in range(0, len(data), piece):
                self.s.sendall(data[i:i + piece])
                time.sleep(pause)
        except OSError as e:
            self.send_error = e

    def _fill(self, deadline):
        self.s.settimeout(max(0.05, deadline - time.monotonic()))
        d = self.s.recv(65536)
        if not d:
            raise EOFError("connection closed")
        self.buf += d

    def _line(self, deadline):
        while b"\r\n" not in self.buf:
            self._fill(deadline)
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln

    def _take(self, n, deadline):
        while len(self.buf) < n:
            self._fill(deadline)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def response(self, timeout=READ_S):
        """(status, headers, body) of the next response."""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buf:
            self._fill(deadline)
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        h = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            h[k.strip().lower()] = v.strip()
        if "chunked" in h.get("transfer-encoding", ""):
            body = b""
            while True:
                n = int(self._line(deadline).split(b";")[0], 16)
                if n == 0:
                    while self._line(deadline):
                        pass
                    break
                body += self._take(n, deadline)
                self._take(2, deadline)
        else:
            body = self._take(int(h.get("content-length", "0")), deadline)
        return status, h, body

    def eof(self, timeout=5.0):
        """None once the peer closed, else the bytes it sent meanwhile (b"": still open)."""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self._fill(deadline)
        except EOFError:
            return None if not self.buf else self.buf
        except ConnectionResetError:
            return None
        except (socket.timeout, OSError):
            pass
        return self.buf

    def close(self):
        self.s.close()


def check(cid, resp, status, body=None):
    """Why this response is not `cid`'s own answer of `status` (None: it is)."""
    st, h, b = resp
    try:
        j = json.loads(b)
    except ValueError:
        j = {}
    if j.get("client") != cid:
        return "%s got a %s response naming client %r: %r" % (cid, st, j.get("client"), b[:160])
    if st != status:
        return "%s: status %s, expected %s: %r" % (cid, st, status, b[:160])
    if body is not None and (j.get("len") != len(body) or
                             j.get("sha256") != hashlib.sha256(body).hexdigest()):
        return "%s: echo of %s bytes, sent %d" % (cid, j.get("len"), len(body))
    return None


def exchange(port, cid, path, size, chunked, status, good=False, partial=False,
             follow=True, auth=None, follow_path="/v1/echo"):
    """One request (answered early unless good), then, if the connection is
    kept alive, one more good request on it. A list of problems."""
    probs = []
    auth = auth or ("Bearer good" if good else None)
    head, wire, body = request(cid, path, size, chunked, auth)
    try:
        c = Client(port)
    except OSError as e:
        return ["%s: connect: %s" % (cid, e)]
    sender = None
    try:
        if partial:
            c.send(head + wire[:PARTIAL])
        else:
            sender = threading.Thread(target=c.send_quiet, args=(head + wire,), daemon=True)
            sender.start()
        try:
            resp = c.response()
        except (OSError, EOFError, ValueError) as e:
            return ["%s: no response (%s: %s)" % (cid, type(e).__name__, e)]
        p = check(cid, resp, status, body if good else None)
        if p:
            probs.append(p)
        if resp[1].get("connection", "").lower() == "close":
            extra = c.eof()
            if extra:
                probs.append("%s: bytes after a Connection: close response: %r" % (cid, extra[:80]))
            return probs
        if not follow:
            return probs
        try:
            if partial:
                c.send(wire[PARTIAL:])
            elif sender:
                sender.join(READ_S)
                if sender.is_alive():
                    return probs + ["%s: keep-alive connection stopped reading the body" % cid]
            h2, w2, b2 = request(cid, follow_path, 3000, chunked, "Bearer good")
            c.send(h2 + w2)
            p = check(cid, c.response(), 200, b2)
        except (OSError, EOFError, ValueError) as e:
            p = ("%s: connection closed after a %s response without Connection: close (%s)" %
                 (cid, resp[0], type(e).__name__))
        if p:
            probs.append(p)
        return probs
    finally:
        c.close()


def run_clients(jobs, concurrent):
    """Run exchange() for each kwargs dict, sequentially or all at once."""
    probs = []
    lock = threading.Lock()

    def one(kw):
        p = exchange(**kw)
        with lock:
            probs.extend(p)

    if not concurrent:
        for kw in jobs:
            one(kw)
        return probs
    ts = [threading.Thread(target=one, args=(kw,), daemon=True) for kw in jobs]
    for t in ts:
        t.start()
    deadline = time.monotonic() + 90
    for t in ts:
        t.join(max(0.1, deadline - time.monotonic()))
    if any(t.is_alive() for t in ts):
        probs.append("clients still running after 90 s")
    return probs


def report(probs):
    if probs:
        raise AssertionError("\n".join(p[:240] for p in probs[:7]) +
                             "\n%d problem(s), the first %d above" % (len(probs), min(7, len(probs))))


def gateway(opts, backend_addrs):
    f = Fleet(opts, 0, start_gateway=False)
    try:
        f.start_gateway(GW_ARGS, backends=[], extra_backends=backend_addrs)
    except Exception:
        f.stop_quietly()
        raise
    return f


def scenario(opts, mode, code, chunked, concurrent, partial, clients=10, rounds=2, seed=1):
    """Bad clients (long bodies, answered early) and good ones, one worker."""
    be = EarlyBackend(mode, code)
    f = gateway(opts, [be.addr()])
    probs = []
    try:
        rng = random.Random(seed)
        jobs = []
        for r in range(rounds):
            for i in range(clients):
                cid = "c%d-%d" % (i, r)
                if i % 3 == 2:
                    jobs.append(dict(port=f.port, cid=cid, path="/v1/echo", good=True,
                                     size=rng.randint(2048, 128 << 10), chunked=chunked,
                                     status=200))
                else:
                    unknown = i % 3 == 1 and r % 2 == 1
                    jobs.append(dict(port=f.port, cid=cid, chunked=chunked,
                                     path="/unknown/x" if unknown else "/v1/score",
                                     size=rng.choice([64 << 10, 256 << 10, 1 << 20]),
                                     status=404 if unknown else code, partial=partial))
        if concurrent:
            for r in range(rounds):
                probs += run_clients(jobs[r * clients:(r + 1) * clients], True)
        else:
            probs += run_clients(jobs, False)
        # A last client after everything: the pool must still be sound.
        probs += run_clients([dict(port=f.port, cid="last", path="/v1/echo", good=True,
                                   size=5000, chunked=chunked, status=200)], False)
    finally:
        be.stop()
        f.stop()
    report(probs + be.audit())


# --- tests -------------------------------------------------------------------------
@test
def test_cl_naive_sequential(opts):
    """Content-Length bodies, a backend that does not skip unread bodies;
    each bad client sends 8 KiB, reads its 401, then decides."""
    scenario(opts, "naive", 401, False, concurrent=False, partial=True, clients=8, rounds=1)


@test
def test_chunked_naive_sequential(opts):
    scenario(opts, "naive", 413, True, concurrent=False, partial=True, clients=8, rounds=1)


@test
def test_cl_naive_concurrent(opts):
    scenario(opts, "naive", 401, False, concurrent=True, partial=True, clients=12, seed=2)


@test
def test_cl_skip_concurrent(opts):
    """A correct backend (skips what it did not read); clients send whole bodies."""
    scenario(opts, "skip", 401, False, concurrent=True, partial=False, clients=12, seed=3)


@test
def test_chunked_skip_concurrent(opts):
    scenario(opts, "skip", 401, True, concurrent=True, partial=False, clients=12, seed=4)


@test
def test_skip_partial_sequential(opts):
    scenario(opts, "skip", 413, False, concurrent=False, partial=True, clients=8, rounds=1)


@test
def test_pipelined(opts):
    """A long-body request answered early and a second request, pipelined on
    one connection: the second is answered and its own, or the first
    response says Connection: close and nothing else follows."""
    be = EarlyBackend("skip", 401)
    f = gateway(opts, [be.addr()])
    probs = []
    try:
        for i, chunked in enumerate([False, True, False, True]):
            cid = "p%d" % i
            h1, w1, _ = request(cid, "/v1/score", (256 << 10) * (i + 1), chunked)
            h2, w2, b2 = request(cid, "/v1/echo", 4000, chunked, "Bearer good")
            c = Client(f.port)
            t = threading.Thread(target=c.send_quiet, args=(h1 + w1 + h2 + w2,), daemon=True)
            t.start()
            try:
                r1 = c.response()
                p = check(cid, r1, 401)
                if r1[1].get("connection", "").lower() == "close":
                    extra = c.eof()
                    if extra:  # only a response to our own second request may follow
                        c.buf = extra
                        p = p or check(cid, c.response(2), 200, b2)
                else:
                    p = p or check(cid, c.response(), 200, b2)
            except (OSError, EOFError, ValueError) as e:
                p = "%s: pipelined request unanswered, no Connection: close (%s)" % (
                    cid, type(e).__name__)
            if p:
                probs.append(p)
            t.join(READ_S)
            c.close()
            # a bystander on the same worker's pool
            probs += exchange(f.port, "q%d" % i, "/v1/echo", 2000, chunked, 200, good=True,
                              follow=False)
    finally:
        be.stop()
        f.stop()
    report(probs + be.audit())


@test
def test_smuggle_sized_body(opts):
    """An attacker sizes an early-answered body to end inside its own next
    request, whose body holds requests of its own: with the bytes the gateway
    owes, the backend would run them and hand the victim's request (head and
    all) to the attacker's smuggled request as its body."""
    be = EarlyBackend("skip", 401)
    f = gateway(opts, [be.addr()])
    probs = []
    try:
        body2_len = 3000
        hv, wv, bv = request("victim", "/v1/echo", 100, False, "Bearer good-victim-secret")
        ha2, _, _ = request("a2", "/v1/echo", body2_len, False, "Bearer good")
        # calibrate: how long the gateway's forwarded heads are
        for cid, hd, b in (("victim", hv, bv), ("a2", ha2, body_of("a2", body2_len))):
            c = Client(f.port)
            c.send(hd + b)
            p = check(cid, c.response(), 200, b)
            c.close()
            assert not p, "calibration: " + p
        seen = {h["client"]: h["head_len"] for _, _, hs in be.snapshot() for h in hs}
        s1 = (b"POST /v1/smuggled HTTP/1.1\r\nHost: s\r\nX-Client: a2\r\n"
              b"Authorization: Bearer tok-a2\r\nContent-Length: 0\r\n\r\n")
        s2 = (b"POST /v1/smuggled HTTP/1.1\r\nHost: s\r\nX-Client: a2\r\n"
              b"Authorization: Bearer good\r\nContent-Length: %d\r\n\r\n" % (seen["victim"] + 100))
        filler = body_of("a2", body2_len - len(s1) - len(s2))
        body2 = filler + s1 + s2
        owed = seen["a2"] + len(filler)  # A1's unread tail: a2's head and filler
        h1, w1, _ = request("a1", "/v1/score", PARTIAL + owed, False)
        c = Client(f.port)
        c.send(h1 + w1[:PARTIAL])
        p = check("a1", c.response(), 401)
        c.close()
        if p:
            probs.append(p)
        c = Client(f.port)
        c.send(ha2 + body2)
        try:
            p = check("a2", c.response(), 200, body2)
        except (OSError, EOFError, ValueError) as e:
            p = "a2: no response (%s)" % type(e).__name__
        c.close()
        if p:
            probs.append(p)
        probs += exchange(f.port, "victim", "/v1/echo", 100, False, 200, follow=False,
                          auth="Bearer good-victim-secret")
        ran = [h["line"] for _, _, hs in be.snapshot() for h in hs if "smuggled" in h["line"]]
        if ran:
            probs.append("the backend ran %d request(s) the gateway forwarded only as body: %s"
                         % (len(ran), ran[0]))
    finally:
        be.stop()
        f.stop()
    report(probs + be.audit())


class RawBackend:
    """Reads one request per connection (head, then Content-Length or chunked
    body through its last chunk and trailers), records its raw bytes, and
    answers with a head of its own that lists X-Internal in Connection."""

    REPLY = (b"HTTP/1.1 200 OK\r\nConnection: X-Internal, keep-alive\r\n"
             b"X-Internal: backend-only\r\nKeep-Alive: timeout=5\r\nX-Public: 1\r\n"
             b"Content-Length: 0002\r\n\r\nok")

    def __init__(self):
        self.ls = socket.create_server(("127.0.0.1", 0))
        self.ls.settimeout(10)
        self.port = self.ls.getsockname()[1]
        self.seen = []
        self.t = threading.Thread(target=self._serve, daemon=True)
        self.t.start()

    def _serve(self):
        try:
            while True:
                s, _ = self.ls.accept()
                s.settimeout(10)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += s.recv(65536)
                head = data.split(b"\r\n\r\n", 1)[0].lower()
                if b"transfer-encoding: chunked" in head:
                    while not data.endswith(b"\r\n0\r\n\r\n"):
                        data += s.recv(65536)
                elif b"content-length:" in head:
                    n = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
                    while len(data) < len(head) + 4 + n:
                        data += s.recv(65536)
                self.seen.append(data)
                s.sendall(self.REPLY)
                s.close()
        except OSError:
            pass

    def stop(self):
        self.ls.close()


@test
def test_what_crosses(opts):
    """Fields named in Connection and hop-by-hop fields are removed both
    ways; framing reaches the backend in canonical form; chunk extensions
    and request trailers never do."""
    be = RawBackend()
    f = gateway(opts, ["127.0.0.1:%d" % be.port])
    h = (b"POST /v1/score HTTP/1.1\r\nHost: gw\r\nConnection: X-Secret, keep-alive\r\n"
         b"X-Secret: s3cr3t\r\nKeep-Alive: 5\r\nTE: trailers\r\nX-Kept: yes\r\n")
    cases = [
        (h + b"Content-Length: 0005\r\n\r\nhello",
         h.replace(b"Connection: X-Secret, keep-alive\r\nX-Secret: s3cr3t\r\nKeep-Alive: 5\r\n"
                   b"TE: trailers\r\n", b"") + b"Content-Length: 5\r\n\r\nhello"),
        (h + b"Transfer-Encoding: Chunked\r\nTrailer: X-Auth\r\n\r\n0005;ext=1\r\nhello\r\n"
         b"0\r\nContent-Length: 99\r\nHost: evil\r\nTransfer-Encoding: chunked\r\n"
         b"X-Auth: t\r\n\r\n",
         h.replace(b"Connection: X-Secret, keep-alive\r\nX-Secret: s3cr3t\r\nKeep-Alive: 5\r\n"
                   b"TE: trailers\r\n", b"") +
         b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
    ]
    probs = []
    try:
        for i, (raw, want) in enumerate(cases):
            c = Client(f.port)
            c.send(raw)
            st, hd, body = c.response()
            c.close()
            if st != 200 or body != b"ok":
                probs.append("case %d: %s %r" % (i, st, body))
            if "x-internal" in hd or "keep-alive" in hd or hd.get("x-public") != "1" or \
                    hd.get("content-length") != "2":
                probs.append("case %d: response head reached the client as %r" % (i, hd))
            got = wait_until(lambda: len(be.seen) > i, 5) and be.seen[i]
            # identity fields the gateway adds (doc/security.md "Request identity")
            want = want.replace(b"X-Kept: yes\r\n", b"X-Kept: yes\r\nX-Forwarded-For: 127.0.0.1\r\n"
                                b"X-Request-Id: ID\r\n")
            got = got and re.sub(rb"X-Request-Id: [0-9a-f]{16}-[0-9a-f]{16}\r\n",
                                 b"X-Request-Id: ID\r\n", got)
            if got != want:
                probs.append("case %d: the backend got\n%r\nwant\n%r" % (i, got, want))
    finally:
        f.stop()
        be.stop()
    report(probs)


def uvicorn_python():
    for py in (sys.executable, "/usr/bin/python3"):
        if py and shutil.which(py) and subprocess.run(
                [py, "-c", "import uvicorn, starlette"], capture_output=True).returncode == 0:
            return py
    return None


@test
def test_uvicorn_api_key(opts):
    """uvicorn + Starlette shaped like vLLM --api-key: 401 and 404 before the
    body is read, good clients' bodies echoed; no 5xx, nothing mixed."""
    py = uvicorn_python()
    if not py:
        return "SKIP uvicorn not installed (python3-uvicorn, python3-starlette)"
    port = free_port()
    log = open(os.path.join(opts.build, "e2e-tmp", "uvicorn-%d.log" % port), "w") \
        if os.path.isdir(os.path.join(opts.build, "e2e-tmp")) else subprocess.DEVNULL
    p = subprocess.Popen([py, "-m", "uvicorn", "early_app:app", "--host", "127.0.0.1",
                          "--port", str(port), "--no-access-log"], cwd=HERE,
                         stdout=log, stderr=subprocess.STDOUT)
    f = None
    probs = []
    try:
        if not wait_until(lambda: p.poll() is not None or http_get(port, "/health", 0.5)[0] == 200,
                          15) or p.poll() is not None:
            raise AssertionError("uvicorn did not start")
        f = gateway(opts, ["127.0.0.1:%d" % port])
        rng = random.Random(7)
        for rnd in range(3):
            jobs = []
            for i in range(10):
                cid = "u%d-%d" % (i, rnd)
                chunked = (i + rnd) % 2 == 1
                size = rng.choice([64 << 10, 300 << 10, 1 << 20])
                kind = i % 5
                if kind == 0:    # good, echoed
                    jobs.append(dict(cid=cid, path="/v1/score", size=rng.randint(1000, 200000),
                                     chunked=chunked, status=200, good=True))
                elif kind == 1:  # good key, unknown path: 404 from the router
                    jobs.append(dict(cid=cid, path="/v1/nope", size=size, chunked=chunked,
                                     status=404, auth="Bearer good"))
                elif kind == 2:  # chat, bad key (the gateway buffers these whole)
                    jobs.append(dict(cid=cid, path="/v1/chat/completions", size=size,
                                     chunked=chunked, status=401))
                else:            # bad key, a raw path: streamed past the key
                    jobs.append(dict(cid=cid, path="/v1/score", size=size,
                                     chunked=chunked, status=401, partial=kind == 4))
            for j in jobs:
                j.update(port=f.port, follow_path="/v1/score")
            probs += run_clients(jobs, True)
        probs += run_clients([dict(port=f.port, cid="ulast", path="/v1/score", size=5000,
                                   chunked=False, status=200, good=True,
                                   follow_path="/v1/score")], False)
    finally:
        if f:
            f.stop()
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    report(probs)


# The suite's options (run_suite's): --tls makes the clients speak HTTPS.
OPTS = None


def remember(opts):
    global OPTS
    OPTS = opts


def main():
    return run_suite(TESTS, setup=remember)


if __name__ == "__main__":
    sys.exit(main())
