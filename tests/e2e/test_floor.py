#!/usr/bin/env python3
"""The floor proxy (tools/floorproxy), which the overhead benchmark measures
prefixgate against: it must carry bytes both ways intact and in order, give
each client connection its own backend connection, the backends in turn,
end both sides when either ends, and refuse bad command lines. Real
processes on loopback; TAP output; every wait is bounded.

usage: test_floor.py --build DIR [-k SUBSTRING]
"""
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import free_port, run_suite, wait_until  # noqa: E402

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


class Backend:
    """A TCP server on loopback: each connection is sent the server's name
    and a newline, then everything it sends is echoed until it closes."""

    def __init__(self, name):
        self.name = name.encode()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0  # connections so far
        self.open = 0  # of which not yet closed by the client
        self.stopping = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            self.open += 1
            threading.Thread(target=self.echo, args=(c,), daemon=True).start()

    def echo(self, c):
        c.settimeout(10)
        try:
            c.sendall(self.name + b"\n")
            while True:
                data = c.recv(65536)
                if not data:
                    break
                c.sendall(data)
        except OSError:
            pass
        finally:
            c.close()
            self.open -= 1

    def stop(self):
        self.stopping = True
        self.thread.join(2)
        self.sock.close()


class Floor:
    def __init__(self, opts, backends):
        self.port = free_port()
        cmd = [os.path.join(opts.build, "floorproxy"), "--listen", "127.0.0.1:%d" % self.port,
               "--workers", "2"]
        for b in backends:
            cmd += ["--backend", "127.0.0.1:%d" % b.port]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        def up():
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return True
            except OSError:
                return False
        assert wait_until(up, 5), "floorproxy did not start listening"

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return s

    def stop(self):
        self.proc.terminate()
        self.proc.wait(5)
        self.proc.stderr.close()


def read_line(s):
    buf = b""
    while not buf.endswith(b"\n"):
        data = s.recv(1)
        assert data, "connection closed before a line: %r" % buf
        buf += data
    return buf[:-1]


def read_exactly(s, n):
    out = bytearray()
    while len(out) < n:
        data = s.recv(min(1 << 16, n - len(out)))
        assert data, "closed after %d bytes of %d" % (len(out), n)
        out += data
    return bytes(out)


@test
def bytes_intact_both_ways(opts):
    """8 MiB of patterned bytes up, all echoed back down, in order (the
    backend reads and writes in pieces of its own choosing); the client's
    close ends the backend connection."""
    b = Backend("b0")
    f = Floor(opts, [b])
    try:
        s = f.connect()
        assert read_line(s) == b"b0"
        payload = bytes((i * 7 + i // 251) & 0xff for i in range(1 << 16)) * 128
        got = []
        reader = threading.Thread(target=lambda: got.append(read_exactly(s, len(payload))))
        reader.start()
        s.sendall(payload)
        reader.join(30)
        assert not reader.is_alive() and got, "the echo did not come back"
        assert got[0] == payload, "first difference at %d" % next(
            i for i, (x, y) in enumerate(zip(got[0], payload)) if x != y)
        conns = b.open
        s.close()
        assert wait_until(lambda: b.open == conns - 1, 5), "backend connection left open"
    finally:
        f.stop()
        b.stop()


@test
def backends_in_turn(opts):
    """Each client connection gets a backend connection of its own, the
    backends taken in turn by each worker."""
    bs = [Backend("b0"), Backend("b1")]
    f = Floor(opts, bs)
    try:
        # Floor() made one connection to see it listening: its backend's.
        assert wait_until(lambda: sum(b.accepted for b in bs) == 1, 5)
        names = []
        for _ in range(8):
            s = f.connect()
            names.append(read_line(s))
            s.close()
        assert set(names) == {b"b0", b"b1"}, names
        assert wait_until(lambda: sum(b.accepted for b in bs) == 9, 5), [
            b.accepted for b in bs]
    finally:
        f.stop()
        for b in bs:
            b.stop()


@test
def refused_backend_closes_client(opts):
    """A backend that refuses the connection: the client connection is
    closed, and the proxy goes on serving."""
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()  # nothing listens there now

    class Dead:
        pass
    d = Dead()
    d.port = port
    f = Floor(opts, [d])
    try:
        s = f.connect()
        s.settimeout(5)
        assert s.recv(1) == b"", "the client connection stayed open"
        s.close()
        assert f.proc.poll() is None, "floorproxy exited"
    finally:
        f.stop()


@test
def command_line(opts):
    """--help exits 0; a missing or malformed backend, an unknown flag or a
    bad worker count exit 2 naming the problem."""
    exe = os.path.join(opts.build, "floorproxy")
    r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=5)
    assert r.returncode == 0 and "usage: floorproxy" in r.stdout, r
    for args, want in [([], "--backend ADDR:PORT is required"),
                       (["--backend", "localhost:80"], "numeric IPv4"),
                       (["--backend", "127.0.0.1:0"], "port 1-65535"),
                       (["--backend", "127.0.0.1:80", "--workers", "0"], "1-64"),
                       (["--backend", "127.0.0.1:80", "--bogus", "1"], "unknown flag")]:
        r = subprocess.run([exe] + args, capture_output=True, text=True, timeout=5)
        assert r.returncode == 2 and want in r.stderr, (args, r.returncode, r.stderr)


def main():
    return run_suite(TESTS, modes=None)


if __name__ == "__main__":
    sys.exit(main())
