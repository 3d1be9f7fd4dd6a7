"""The reference router's backend connections (refrouter.py): keep-alive
pools, one exchange at a time per connection, driven by asyncio protocol
callbacks rather than streams, so that relaying an SSE event costs one
receive and one send and no task switch. A MatchJob collects a whole
answer (a /mock/match reply); a RelayJob passes an answer on to a client as
it arrives. Standard library only."""
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from httpmsg import HEAD_MAX, BadMessage, Framing, Head, split_addr  # noqa: E402

POOL_IDLE_MAX = 256  # idle connections kept per backend
CLIENT_BUFFER_MAX = 1 << 20  # unsent bytes to a client before its backend waits
RESUMING = set()  # tasks waiting for a slow client, referenced until done


class BeforeHead(Exception):
    """A backend exchange failed before the response head; got: whether any
    response byte had arrived (if not, a pooled connection may be retried)."""

    def __init__(self, msg, got):
        super().__init__(msg)
        self.got = got


class BackendConn(asyncio.Protocol):
    """One keep-alive connection to a backend, driven by callbacks: a
    relayed SSE event costs one receive and one send, no task switch. One
    exchange at a time: start(msg, job) sends msg and hands the answer to
    job (MatchJob or RelayJob), which resolves job.fut."""

    def __init__(self, backend):
        self.b, self.t, self.job = backend, None, None
        self.closed = False

    def connection_made(self, transport):
        self.t = transport

    def usable(self):
        return not self.closed and self.job is None and not self.t.is_closing()

    def start(self, msg, job):
        self.job, self.buf, self.head, self.fr, self.got = job, b"", None, None, False
        self.clean = True  # no byte beyond the answer
        self.t.write(msg)
        return job.fut

    def data_received(self, data):
        job = self.job
        if job is None:
            self.close()  # bytes nobody asked for: not a clean connection
            return
        self.got = True
        try:
            while self.head is None:
                self.buf += data
                end = self.buf.find(b"\r\n\r\n")
                if end == -1:
                    if len(self.buf) > HEAD_MAX:
                        raise BadMessage(502, "response head too long")
                    return
                h, data, self.buf = Head(self.buf[:end + 4]), self.buf[end + 4:], b""
                if h.start[1][:1] != b"1" or h.start[1] == b"101":  # not an interim answer
                    self.head = h
                    self.fr = job.on_head(self, h)
                    if self.job is not job:
                        return  # failed meanwhile (the client went)
            if data:
                n = self.fr.feed(data)
                if n < len(data):
                    self.clean = False
                    data = data[:n]
                job.on_body(self, data)
            if self.fr.done and self.job is job:
                self.finish()
        except BadMessage as e:
            self.fail(e)

    def eof_received(self):
        return False  # close; connection_lost follows

    def connection_lost(self, exc):
        self.closed = True
        if self.job is None:
            return
        if self.fr is not None and self.fr.kind == "close":
            self.finish()  # a body delimited by the close: complete
        else:
            self.fail(exc or ConnectionResetError("backend closed the connection"))

    def finish(self):
        job, self.job = self.job, None
        if job.keep and self.clean and self.fr.kind != "close" and \
                not (self.head and self.head.closes()):
            self.b.release(self)
        else:
            self.close()
        job.done()

    def fail(self, exc):
        job, self.job = self.job, None
        self.close()
        if job is not None:
            job.failed(exc, self.got)

    def close(self):
        self.closed = True
        if self.t is not None:
            self.t.close()


class MatchJob:
    """A /mock/match exchange: the whole answer, as (status, body)."""

    keep = True

    def __init__(self, fut):
        self.fut = fut

    def on_head(self, conn, h):
        self.status = int(h.start[1])
        if h.chunked:
            self.fr = Framing("chunked", dechunk=True)
        elif h.length is not None:
            self.fr = Framing("length", h.length, dechunk=True)
        else:
            self.fr = Framing("close", dechunk=True)
        return self.fr

    def on_body(self, conn, data):
        pass  # the framing keeps the payload

    def done(self):
        if not self.fut.done():
            self.fut.set_result((self.status, b"".join(self.fr.payload)))

    def failed(self, exc, got):
        if not self.fut.done():
            self.fut.set_exception(BeforeHead(str(exc) or type(exc).__name__, got))


class RelayJob:
    """A forwarded request: the answer relayed to the client as it comes.
    fut: True when the client connection can serve another request."""

    def __init__(self, fut, req, cw, route_line):
        self.fut, self.req, self.cw, self.route_line = fut, req, cw, route_line
        self.keep = True
        self.started = False

    def on_head(self, conn, h):
        req = self.req
        status = int(h.start[1])
        if req.head.start[0] == b"HEAD" or status in (204, 304):
            fr = Framing("none")
        elif h.chunked:
            fr = Framing("chunked", dechunk=req.http10)
        elif h.length is not None:
            fr = Framing("length", h.length)
        else:
            fr = Framing("close")
        # an HTTP/1.0 client gets a chunked body de-chunked, delimited by close
        self.client_close = req.close or fr.kind == "close" or (
            req.http10 and fr.kind == "chunked")
        lines = [b" ".join(h.start).rstrip(b" ")]
        # chunked framing passed through: its field stays where it was
        lines += h.kept_lines(keep=(b"transfer-encoding",) if fr.kind == "chunked" and
                              not req.http10 else ())
        lines.append(self.route_line)
        if self.client_close:
            lines.append(b"Connection: close")
        elif req.http10:
            lines.append(b"Connection: keep-alive")
        self.started = True
        self.write(conn, b"\r\n".join(lines) + b"\r\n\r\n")
        return fr

    def on_body(self, conn, data):
        if conn.fr.dechunk:
            data = b"".join(conn.fr.payload)
            conn.fr.payload.clear()
        self.write(conn, data)
        t = self.cw.transport
        if not conn.fr.done and t.get_write_buffer_size() > CLIENT_BUFFER_MAX:
            # a slow client: the backend waits until it catches up (never
            # past the answer's end, so a paused connection is not pooled)
            conn.t.pause_reading()
            task = asyncio.ensure_future(self.resume(conn))
            RESUMING.add(task)
            task.add_done_callback(RESUMING.discard)

    def write(self, conn, data):
        if self.cw.transport.is_closing():
            # the client went: drop the backend connection, as a client of
            # the backend that went would (mockllm then frees the request)
            conn.fail(ConnectionResetError("client gone"))
            return
        self.cw.transport.write(data)

    async def resume(self, conn):
        try:
            await self.cw.drain()
        except OSError:
            pass
        if conn.job is not self:
            return  # the exchange failed meanwhile
        if self.cw.transport.is_closing():
            conn.fail(ConnectionResetError("client gone"))
        else:
            conn.t.resume_reading()

    def done(self):
        if not self.fut.done():
            self.fut.set_result(not self.client_close)

    def failed(self, exc, got):
        if self.fut.done():
            return
        if self.started:
            self.fut.set_result(False)  # the client had bytes: close it
        else:
            self.fut.set_exception(BeforeHead(str(exc) or type(exc).__name__, got))


class Backend:
    def __init__(self, spec):
        self.addr = spec
        self.host, self.port = split_addr(spec)
        self.idle = []  # most recently used last: taken first

    def take(self):
        """A pooled connection, or None."""
        while self.idle:
            c = self.idle.pop()
            if c.usable():
                return c
            c.close()
        return None

    async def connect(self):
        _, c = await asyncio.get_running_loop().create_connection(
            lambda: BackendConn(self), self.host, self.port)
        return c

    def release(self, c):
        if len(self.idle) < POOL_IDLE_MAX:
            self.idle.append(c)
        else:
            c.close()
