"""HTTP/1.1 messages for the benchmarks' Python proxies (refrouter.py):
heads parsed into fields and framing, body framing found in bytes as they
arrive (so a relay can pass chunked bytes through unchanged and still know
where an answer ends), chunked request bodies read to their exact end, and
JSON error answers. No I/O beyond asyncio stream reads; standard library
only."""
import asyncio
import json
import re

HEAD_MAX = 65536  # a longer request head: 431
LINE_MAX = 4096  # a longer chunk-size or trailer line: malformed
BODY_MAX = 64 << 20  # a larger request body: 413 (mockllm's limit)
HOP = {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
       b"transfer-encoding", b"upgrade", b"proxy-authenticate", b"proxy-authorization"}
HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")
REASONS = {400: "Bad Request", 404: "Not Found", 413: "Payload Too Large",
           431: "Request Header Fields Too Large", 502: "Bad Gateway"}


class BadMessage(Exception):
    """A malformed message; status is what to answer (or report)."""

    def __init__(self, status, msg):
        super().__init__(msg)
        self.status = status


class Head:
    """A parsed message head: the first line's three parts, the fields as
    (lowercase name, value, raw line), the framing of its body."""

    def __init__(self, raw):
        lines = raw[:-4].split(b"\r\n")
        self.start = lines[0].split(b" ", 2)
        if len(self.start) == 2:
            self.start.append(b"")  # a status line without a reason phrase
        if len(self.start) != 3 or not self.start[0] or not self.start[1]:
            raise BadMessage(400, "malformed first line")
        self.fields = []
        conn, te, cl = [], [], set()  # one pass: this runs ~10 times a request
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip():
                raise BadMessage(400, "malformed header line")
            name, value = name.lower(), value.strip()
            self.fields.append((name, value, line))
            if name == b"content-length":
                cl.add(value)
            elif name == b"transfer-encoding":
                te.append(value)
            elif name == b"connection":
                conn += [t.strip() for t in value.lower().split(b",") if t.strip()]
        self.conn_tokens = set(conn)
        if te and cl:
            raise BadMessage(400, "both Transfer-Encoding and Content-Length")
        self.chunked = bool(te)
        if te and te[-1].lower().split(b",")[-1].strip() != b"chunked":
            raise BadMessage(400, "a transfer coding other than chunked")
        self.length = None
        if cl:
            v = cl.pop()
            if cl or not v.isdigit():
                raise BadMessage(400, "bad Content-Length")
            self.length = int(v)

    def closes(self):
        """Whether the sender closes the connection after this message."""
        return b"close" in self.conn_tokens or (
            self.start[0] == b"HTTP/1.0" and b"keep-alive" not in self.conn_tokens)

    def get(self, name):
        for n, v, _ in self.fields:
            if n == name:
                return v
        return None

    def kept_lines(self, drop=(), keep=()):
        """The raw field lines, in order, less the hop-by-hop ones (but
        `keep`) and `drop`."""
        hop = (HOP | self.conn_tokens | set(drop)) - set(keep)
        return [line for n, _, line in self.fields if n not in hop]


class Framing:
    """Where a body ends, found in bytes as they arrive. kind: "length"
    (n bytes), "chunked", "close" (until the peer closes) or "none".
    feed(data) returns how many bytes of data are body (any rest follows
    it); with dechunk, the payload bytes go to self.payload."""

    SIZE, DATA, DATA_END, TRAILER = range(4)

    def __init__(self, kind, length=0, dechunk=False):
        self.kind, self.left, self.dechunk = kind, length, dechunk
        self.state, self.line, self.payload = Framing.SIZE, b"", []
        self.done = kind == "none" or (kind == "length" and length == 0)

    def feed(self, data):
        if self.kind == "chunked":
            return self._chunked(data)
        take = len(data) if self.kind == "close" else min(self.left, len(data))
        if self.kind == "length":
            self.left -= take
            self.done = self.left == 0
        if self.dechunk:
            self.payload.append(data[:take])
        return take

    def _chunked(self, data):
        pos, n = 0, len(data)
        while pos < n and not self.done:
            if self.state == Framing.DATA:
                take = min(self.left, n - pos)
                if self.dechunk:
                    self.payload.append(data[pos:pos + take])
                pos += take
                self.left -= take
                if self.left == 0:
                    self.state, self.left = Framing.DATA_END, 2
            elif self.state == Framing.DATA_END:
                take = min(self.left, n - pos)
                if data[pos:pos + take] != b"\r\n"[2 - self.left:2 - self.left + take]:
                    raise BadMessage(502, "chunk data not followed by CRLF")
                pos += take
                self.left -= take
                if self.left == 0:
                    self.state = Framing.SIZE
            else:  # a chunk-size or trailer line
                nl = data.find(b"\n", pos)
                if nl == -1:
                    self.line += data[pos:]
                    if len(self.line) > LINE_MAX:
                        raise BadMessage(502, "chunk line too long")
                    return n
                line = (self.line + data[pos:nl]).rstrip(b"\r")
                self.line, pos = b"", nl + 1
                if self.state == Framing.TRAILER:
                    self.done = not line
                    continue
                size = line.split(b";", 1)[0].strip()
                if not HEX.fullmatch(size):
                    raise BadMessage(502, "bad chunk size")
                self.left = int(size, 16)
                self.state = Framing.DATA if self.left else Framing.TRAILER
        return pos


async def read_head(reader):
    """A head, leading empty lines skipped; None at a clean end of stream."""
    while True:
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            if e.partial.strip():
                raise BadMessage(400, "connection closed inside a head")
            return None
        except asyncio.LimitOverrunError:
            raise BadMessage(431, "head too long")
        raw = raw.lstrip(b"\r\n")
        if len(raw) > HEAD_MAX:
            raise BadMessage(431, "head too long")
        if raw:
            return Head(raw)


async def read_chunked_body(reader):
    """A chunked request body, de-chunked (read exactly to its end, so what
    follows stays for the next request)."""
    parts, total = [], 0
    while True:
        line = (await reader.readuntil(b"\r\n"))[:-2]
        size = line.split(b";", 1)[0].strip()
        if not HEX.fullmatch(size):
            raise BadMessage(400, "bad chunk size")
        if int(size, 16) == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass
            return b"".join(parts)
        total += int(size, 16)
        if total > BODY_MAX:
            raise BadMessage(413, "request body over %d bytes" % BODY_MAX)
        parts.append(await reader.readexactly(int(size, 16)))
        if await reader.readexactly(2) != b"\r\n":
            raise BadMessage(400, "chunk data not followed by CRLF")


def split_addr(spec):
    host, sep, port = spec.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError("want ADDR:PORT, not %r" % spec)
    return host.strip("[]"), int(port)


def error_response(status, msg, close):
    body = json.dumps({"object": "error", "message": "refrouter: " + msg,
                       "type": REASONS.get(status, "Error").replace(" ", "") + "Error",
                       "param": None, "code": status}).encode() + b"\n"
    return b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n" % (
        status, REASONS.get(status, "Error").encode(), len(body),
        b"Connection: close\r\n" if close else b"") + body
