"""A raw-socket HTTP/1.1 backend that answers before reading the request
body, as vLLM's --api-key middleware (401) or Starlette's router (404) do,
and keeps the connection alive. Used by tests/e2e/test_boundary.py and by
make soak.

mode "skip":  a correct server: after its early answer it reads and discards
              the declared body (Content-Length or chunked), then parses the
              next request.
mode "naive": after its early answer it parses whatever follows the head as
              the next request (it does not track the body's framing).

A request with "Authorization: Bearer good..." (and a path not under /unknown)
has its body read and is answered 200 with a JSON echo: client (X-Client),
auth, path, len and sha256 of the body, its first bytes. Any other request is
answered at once, body unread: 404 under /unknown, else `code`; the JSON names
the client and auth the backend parsed. GET /health: 200. A head that is not
HTTP/1.1 gets 400 and a close; 64 KiB without a head end gets 431 and a close.

Every connection's received bytes and parsed heads are recorded; audit()
re-parses each byte log with correct framing and reports any request that
carries markers of more than one client, or bytes that are not requests."""
import hashlib
import json
import re
import socket
import threading
import time

HEAD_MAX = 65536
REQ_LINE = re.compile(rb"^([A-Z]+) (/\S*) HTTP/1\.([01])$")
MARKERS = [re.compile(rb"X-Client: ([A-Za-z0-9-]+)", re.I), re.compile(rb"tok-([A-Za-z0-9-]+)"),
           re.compile(rb"#([A-Za-z0-9-]+)#")]


class Closed(Exception):
    pass


class Conn:
    def __init__(self, cid, sock):
        self.id, self.sock = cid, sock
        self.data = bytearray()  # every byte received, in order
        self.heads = []          # one dict per parsed head
        self.closed = False
        self.problems = None     # audit at close (keep mode), data then freed


class EarlyBackend:
    def __init__(self, mode="skip", code=401, name="early", timeout=30.0, keep=None,
                 markers=None):
        """keep: log only the first `keep` bytes of each connection, audit a
        connection when it closes and free its log (long runs)."""
        assert mode in ("skip", "naive")
        self.mode, self.code, self.name, self.timeout = mode, code, name, timeout
        self.keep = keep
        self.markers = markers or MARKERS  # regexes whose group 1 names a client
        self.lock = threading.Lock()
        self.conns = []
        self.stopped = False
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(256)
        self.ls.settimeout(0.2)
        self.port = self.ls.getsockname()[1]
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def addr(self):
        return "127.0.0.1:%d" % self.port

    def stop(self):
        self.stopped = True
        self.thread.join(5)
        self.ls.close()
        with self.lock:
            for c in self.conns:
                try:
                    c.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _accept(self):
        while not self.stopped:
            try:
                s, _ = self.ls.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            s.settimeout(self.timeout)
            with self.lock:
                c = Conn(len(self.conns), s)
                self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    # --- one connection ---------------------------------------------------------
    def _serve(self, c):
        buf = bytearray()

        def fill():
            if self.stopped:
                raise Closed()
            d = c.sock.recv(65536)
            if not d:
                raise Closed()
            if self.keep is None or len(c.data) < self.keep:
                c.data += d
            buf.extend(d)

        def take(n):
            while len(buf) < n:
                fill()
            out = bytes(buf[:n])
            del buf[:n]
            return out

        def line():
            while b"\r\n" not in buf:
                if len(buf) > HEAD_MAX:
                    raise ValueError("line too long")
                fill()
            i = buf.index(b"\r\n")
            out = bytes(buf[:i])
            del buf[:i + 2]
            return out

        def body(h):
            """The body by its framing, de-chunked (ValueError: bad framing)."""
            if "chunked" in h.get("transfer-encoding", "").lower():
                out = bytearray()
                while True:
                    size = int(line().split(b";")[0], 16)
                    if size == 0:
                        while line():
                            pass
                        return bytes(out)
                    out += take(size)
                    if take(2) != b"\r\n":
                        raise ValueError("chunk not followed by CRLF")
            return take(int(h.get("content-length", "0")))

        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    if len(buf) > HEAD_MAX:
                        self._send(c, 431, {"error": "head too large"}, close=True)
                        return
                    fill()
                i = buf.index(b"\r\n\r\n")
                raw = bytes(buf[:i])
                del buf[:i + 4]
                lines = raw.split(b"\r\n")
                h = {}
                for ln in lines[1:]:
                    k, sep, v = ln.partition(b":")
                    if sep:
                        h[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
                rec = {"line": lines[0][:200].decode("latin-1"), "client": h.get("x-client"),
                       "auth": h.get("authorization"), "head_len": len(raw) + 4}
                c.heads.append(rec)
                m = REQ_LINE.match(lines[0])
                if not m or any(b":" not in ln for ln in lines[1:]):
                    rec["status"] = 400
                    self._send(c, 400, {"error": "bad request head", "client": rec["client"],
                                        "auth": rec["auth"], "line": rec["line"]}, close=True)
                    return
                path = m.group(2).decode()
                info = {"client": rec["client"], "auth": rec["auth"], "path": path, "conn": c.id,
                        "backend": self.name}
                if m.group(1) == b"GET" and path == "/health":
                    rec["status"] = 200
                    self._send(c, 200, {"ok": True})
                elif h.get("authorization", "").startswith("Bearer good") and \
                        not path.startswith("/unknown"):
                    b = body(h)
                    info.update(len=len(b), sha256=hashlib.sha256(b).hexdigest(),
                                head=b[:400].decode("latin-1"))
                    rec["status"] = 200
                    self._send(c, 200, info)
                else:
                    code = 404 if path.startswith("/unknown") else self.code
                    rec["status"] = code
                    self._send(c, code, dict(info, status=code))
                    if self.mode == "skip":
                        body(h)
        except (Closed, OSError, ValueError):
            pass
        finally:
            if self.keep is not None:
                c.problems = audit_bytes(bytes(c.data[:self.keep]), self.markers)
                c.data = bytearray()
            c.closed = True
            try:
                c.sock.close()
            except OSError:
                pass

    def _send(self, c, status, obj, close=False):
        b = json.dumps(obj).encode()
        head = "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n" \
               "X-Early-Backend: %s\r\n" % (status, len(b), self.name)
        if close:
            head += "Connection: close\r\n"
        c.sock.sendall(head.encode() + b"\r\n" + b)

    # --- what it saw ---------------------------------------------------------------
    def snapshot(self):
        with self.lock:
            return [(c.id, bytes(c.data), list(c.heads)) for c in self.conns]

    def audit(self):
        """Problems found in every connection's byte log (empty: all well framed)."""
        out = []
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            probs = c.problems
            if probs is None:
                data = bytes(c.data)
                probs = audit_bytes(data[:self.keep] if self.keep else data, self.markers)
            out += ["%s conn %d: %s" % (self.name, c.id, p) for p in probs]
        return out


def markers(b, rxs=MARKERS):
    ids = set()
    for rx in rxs:
        ids.update(x.decode() for x in rx.findall(b))
    return ids


def audit_bytes(data, rxs=MARKERS):
    """Parse one connection's bytes as a sequence of requests with correct
    framing. A request whose bytes name more than one client, or bytes that
    are no request, are problems; a last request cut short is not."""
    probs, pos, n = [], 0, len(data)
    while pos < n:
        end = data.find(b"\r\n\r\n", pos)
        if end < 0:
            ids = markers(data[pos:], rxs)
            if len(ids) > 1:
                probs.append("unfinished head at %d names clients %s" % (pos, sorted(ids)))
            break
        head = data[pos:end]
        lines = head.split(b"\r\n")
        if not REQ_LINE.match(lines[0]):
            probs.append("bytes at %d are not a request: %r" % (pos, head[:80]))
            break
        h = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(b":")
            h[k.strip().lower()] = v.strip()
        start, p = pos, end + 4
        if b"chunked" in h.get(b"transfer-encoding", b"").lower():
            bad = None
            while p < n:
                e = data.find(b"\r\n", p)
                if e < 0:
                    p = n
                    break
                try:
                    size = int(data[p:e].split(b";")[0], 16)
                except ValueError:
                    bad = data[p:p + 60]
                    break
                p = e + 2
                if size == 0:
                    t = data.find(b"\r\n\r\n", p - 2)
                    p = n if t < 0 else t + 4
                    break
                if p + size + 2 <= n and data[p + size:p + size + 2] != b"\r\n":
                    bad = data[p + size:p + size + 60]
                    break
                p += size + 2
            if bad is not None:
                probs.append("chunked body of request at %d (%s) broken by %r" %
                             (start, lines[0][:40], bad))
                break
        else:
            p = min(n, p + int(h.get(b"content-length", b"0") or 0))
        ids = markers(data[start:p], rxs)
        if len(ids) > 1:
            probs.append("request at %d (%r) carries bytes of clients %s" %
                         (start, lines[0][:40].decode("latin-1"), sorted(ids)))
        pos = p
    return probs


def wait_port(port, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False
