#!/usr/bin/env python3
"""Backend addresses end to end: IPv6 listener and backend on ::1, a same-host
IPv6 backend on the sockmsg data path (bpf mode), a DNS name whose answer
changes (2, then 3 addresses, then failures that keep the last answer) served
by a small DNS responder on loopback, an /etc/hosts name, and more than 255
backends. TAP output (harness.run_suite)."""
import http.client
import json
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Fleet, have_cgroup2, metric_samples, mock_pattern, run_suite,  # noqa: E402
                     shm_only, wait_until)

TESTS = []


def test(f):
    TESTS.append(f)
    return f


class DnsServer:
    """A UDP DNS responder on 127.0.0.1: answers A / AAAA for the names in
    self.records (name -> list of IP strings) with TTL 1, NXDOMAIN for other
    names, and SERVFAIL for everything while self.fail is set."""

    def __init__(self):
        self.records = {}
        self.fail = False
        self.queries = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.running = True
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while self.running:
            try:
                q, peer = self.sock.recvfrom(512)
            except socket.timeout:
                continue
            except OSError:
                return
            r = self.answer(q)
            if r:
                self.sock.sendto(r, peer)

    def answer(self, q):
        if len(q) < 12:
            return None
        self.queries += 1
        qid, _, qd = struct.unpack("!HHH", q[:6])
        pos, labels = 12, []
        while pos < len(q) and q[pos]:
            n = q[pos]
            labels.append(q[pos + 1:pos + 1 + n].decode(errors="replace").lower())
            pos += 1 + n
        qtype, _ = struct.unpack("!HH", q[pos + 1:pos + 5])
        question = q[12:pos + 5]
        name = ".".join(labels)
        rcode, answers = 0, []
        if self.fail:
            rcode = 2
        elif name not in self.records:
            rcode = 3
        else:
            fam, t = (socket.AF_INET, 1) if qtype == 1 else (socket.AF_INET6, 28)
            for ip in self.records[name]:
                if qtype in (1, 28) and (":" in ip) == (fam == socket.AF_INET6):
                    rd = socket.inet_pton(fam, ip)
                    answers.append(struct.pack("!HHHIH", 0xC00C, t, 1, 1, len(rd)) + rd)
        flags = 0x8180 | rcode  # response, recursion desired + available
        return (struct.pack("!HHHHHH", qid, flags, 1, len(answers), 0, 0) + question +
                b"".join(answers))

    def stop(self):
        self.running = False
        self.sock.close()
        self.thread.join(2)


def have_ipv6_loopback():
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


def members(f):
    """address -> GET /backends entry, the active (not draining) ones (not
    the entries of names that stand for no address)."""
    return {a: b for a, b in f.backends().items() if a and not b["draining"]}


def mock_v6(f, ident="v6"):
    """mockllm listening on [::1]:0: (process, port); the port is None if it
    did not start within 5 s."""
    log = open(os.path.join(f.tmp, "mock-%s.log" % ident), "w")
    mock = subprocess.Popen([os.path.join(f.opts.tools, "mockllm"), "--listen", "[::1]:0",
                             "--id", ident], stdout=log, stderr=subprocess.STDOUT)

    def port():
        m = re.search(r"listening on \S+ port (\d+)", open(log.name).read())
        return int(m.group(1)) if m else None
    return mock, wait_until(port, 5)


def stop_mock(mock):
    mock.kill()
    mock.wait(5)


@test
@shm_only
def ipv6_listener_and_backend(opts):
    """--listen [::1]:P and --backend [::1]:P: requests go over IPv6 both ways."""
    if not have_ipv6_loopback():
        return "SKIP ::1 is not available on this host (no IPv6 loopback)"
    f = Fleet(opts, 0, start_gateway=False)
    mock, mport = mock_v6(f)
    try:
        assert mport, "mockllm on ::1 did not start"
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", 0))
        lport = s.getsockname()[1]
        s.close()
        f.start_gateway(["--listen", "[::1]:%d" % lport, "--health-check-interval", "200"],
                        backends=[], extra_backends=["[::1]:%d" % mport])
        # start_gateway returns once the admin API answers; the workers may
        # log their listener a little later (the ASan build is slow)
        assert wait_until(lambda: "listening on [::1]:%d" % lport in f.log(), 5), \
            f.log()[-1500:]
        b = f.backends()
        assert list(b) == ["[::1]:%d" % mport], b
        assert wait_until(lambda: f.backends()["[::1]:%d" % mport]["healthy"], 5), \
            "health check over IPv6 failed:\n" + f.log()[-1500:]
        c = socket.create_connection(("::1", lport), timeout=10)
        c.sendall(b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                  b"Connection: close\r\n\r\nhello")
        data = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
        c.close()
        assert data.startswith(b"HTTP/1.1 200"), data[:200]
        assert b"x-backend-id: v6" in data.lower(), data[:400]
        # the admin API accepts and lists IPv6 members
        st, r = f.admin("POST", "/backends", {"address": "[::1]:9"})
        assert st == 201 and r["address"] == "[::1]:9", (st, r)
        # and removes them, the brackets raw in the target as curl sends them
        st, r = f.admin("DELETE", "/backends/[::1]:9")
        assert st == 202 and r["address"] == "[::1]:9" and r["draining"], (st, r)
        st, r = f.admin("DELETE", "/backends/[::1]:10")
        assert st == 404 and "not a member" in r["error"], (st, r)
        # prefixgatectl too
        ctl = subprocess.run([os.path.join(opts.tools, "prefixgatectl"), "--admin",
                              "127.0.0.1:%d" % f.admin_port, "backends", "remove",
                              "[::1]:%d" % mport], capture_output=True, timeout=20)
        assert ctl.returncode == 0, ctl.stderr
        assert f.backends()["[::1]:%d" % mport]["draining"], f.backends()
    finally:
        stop_mock(mock)
        f.stop()


def msg_routes(pin):
    """The sockmsg routes pinned under pin (bpftool's BTF-formatted
    splice_routes): a list of (key, value) dicts."""
    p = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", pin + "/splice_routes"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    out = []
    for e in json.loads(p.stdout or "[]"):
        e = e.get("formatted", e)
        out.append((e["key"], e["value"]))
    return out


@test
def ipv6_backend_sockmsg(opts):
    """--data-path sockmsg with a same-host backend on [::1]: a streamed
    response is spliced in the kernel (its route, keyed by ::1, has bytes
    redirected while the stream runs), and streamed and bulk bodies arrive
    intact."""
    if opts.mode != "bpf":
        return "SKIP the sockmsg data path needs --mode bpf"
    why = have_cgroup2()
    if why:
        return "SKIP " + why
    if not have_ipv6_loopback():
        return "SKIP ::1 is not available on this host (no IPv6 loopback)"
    f = Fleet(opts, 0, start_gateway=False)
    mock, mport = mock_v6(f, "v6msg")
    try:
        assert mport, "mockllm on ::1 did not start"
        f.start_gateway(["--data-path", "sockmsg", "--health-check-interval", "200"],
                        backends=[], extra_backends=["[::1]:%d" % mport])
        assert "copy path" not in f.log(), f.log()[-1500:]
        assert wait_until(lambda: f.backends()["[::1]:%d" % mport]["healthy"], 5), \
            f.log()[-1500:]
        n_events = 12
        body = json.dumps({"model": "m", "stream": True,
                           "messages": [{"role": "user", "content": "v6 splice"}]})
        conn = http.client.HTTPConnection("127.0.0.1", f.port, timeout=20)
        conn.request("POST", "/v1/chat/completions", body=body,
                     headers={"X-Mock-Chunks": str(n_events), "X-Mock-Chunk-Interval-Ms": "80"})
        r = conn.getresponse()
        assert r.status == 200, r.status
        data, routes = b"", []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = r.readline()  # decoded: chunked framing removed
            if not line:
                break
            data += line
            # Mid-stream (events still 80 ms apart): the route is live.
            if not routes and data.count(b"data: ") >= 4:
                routes = msg_routes(f.pin)
        conn.close()
        events = [x for x in data.split(b"\n\n") if x.startswith(b"data: ")]
        print("# %d SSE events, %d bytes" % (len(events), len(data)))
        assert len(events) >= n_events + 1 and events[-1] == b"data: [DONE]", data[-200:]
        for e in events[:-1]:
            json.loads(e[6:])  # each event whole, none cut or mixed
        loop6 = list(socket.inet_pton(socket.AF_INET6, "::1"))
        print("# routes mid-stream: %s" % routes)
        assert len(routes) == 1, routes
        key, val = routes[0]
        ip6 = key["backend_ip6"]
        got = b"".join(struct.pack("=I", int(x)) for x in ip6)
        assert list(got) == loop6 and key["backend_port"] == mport, key
        assert int(val["redirected"]) > 0, val
        # A bulk body, chunked and not, byte for byte.
        for hdrs in ({"X-Mock-Response-Bytes": "3000000", "X-Mock-Chunked": "1"},
                     {"X-Mock-Response-Bytes": "3000000"}):
            st, _, got = f.post("/v1/chat/completions", body, hdrs)
            assert st == 200 and got == mock_pattern(3000000), (st, len(got))
        spliced = f.counter("prefixgate_spliced_responses_total")
        assert spliced == 3, spliced
        assert f.idle()
    finally:
        stop_mock(mock)
        f.stop()


@test
@shm_only
def dns_name_follows_answers(opts):
    """A name: 2 addresses, then 3 (one joins), then failures keep all 3."""
    dns = DnsServer()
    dns.records["pool.pg.test"] = ["127.0.0.11", "127.0.0.12"]
    f = Fleet(opts, 0, start_gateway=False)
    try:
        f.start_gateway(["--resolver", "127.0.0.1:%d" % dns.port, "--resolve-interval", "200",
                         "--health-check-path", "none"],
                        backends=[], extra_backends=["pool.pg.test:9"])
        want2 = {"127.0.0.11:9", "127.0.0.12:9"}
        assert wait_until(lambda: set(members(f)) == want2, 5), (members(f), f.log()[-1500:])
        for b in members(f).values():
            assert b.get("name") == "pool.pg.test:9", b
        ids = {a: b["id"] for a, b in members(f).items()}
        dns.records["pool.pg.test"] = ["127.0.0.13", "127.0.0.12", "127.0.0.11"]
        want3 = want2 | {"127.0.0.13:9"}
        assert wait_until(lambda: set(members(f)) == want3, 5), members(f)
        # the members already there kept their ids (ring identity: address)
        assert all(members(f)[a]["id"] == i for a, i in ids.items()), members(f)
        dns.fail = True
        n0 = dns.queries
        assert wait_until(lambda: dns.queries >= n0 + 3, 10), "no queries while failing"
        assert set(members(f)) == want3, members(f)
        assert "keeping its last answer" in f.log(), f.log()[-1500:]
        dns.fail = False
        dns.records["pool.pg.test"] = ["127.0.0.13"]
        assert wait_until(lambda: set(members(f)) == {"127.0.0.13:9"}, 5), members(f)
        # DELETE of the name drains what it stood for
        st, r = f.admin("DELETE", "/backends/pool.pg.test:9")
        assert st == 202 and r == {"name": "pool.pg.test:9", "draining": True}, (st, r)
        assert wait_until(lambda: not members(f), 5), members(f)
        # added again through the admin API: resolves asynchronously
        st, r = f.admin("POST", "/backends", {"address": "pool.pg.test:9"})
        assert st == 202 and r["resolving"], (st, r)
        assert wait_until(lambda: set(members(f)) == {"127.0.0.13:9"}, 5), members(f)
    finally:
        f.stop()
        dns.stop()


@test
@shm_only
def name_that_never_resolves(opts):
    """A name that never resolves is listed by GET /backends (resolving,
    then unresolved with the error), counted in /metrics, and logged once
    per minute at most, not once in all."""
    dns = DnsServer()  # knows no name: NXDOMAIN
    f = Fleet(opts, 0, start_gateway=False)
    name = "nonexistent.invalid:28009"
    try:
        f.start_gateway(["--resolver", "127.0.0.1:%d" % dns.port, "--resolve-interval", "200",
                         "--health-check-path", "none"], backends=[])
        st, r = f.admin("POST", "/backends", {"address": name})
        assert st == 202 and r == {"name": name, "resolving": True}, (st, r)

        def entry():
            e = [b for b in f.admin("GET", "/backends")[1] if b.get("name") == name]
            return e[0] if e else None

        assert wait_until(lambda: (entry() or {}).get("state") == "unresolved", 5), entry()
        e = entry()
        assert e["address"] is None and e["id"] == 0 and not e["healthy"], e
        assert "not found" in e["error"].lower(), e
        n0 = dns.queries
        assert wait_until(lambda: dns.queries >= n0 + 6, 10), "no lookups"
        assert entry()["lookup_failures"] >= 3, entry()
        m = f.metrics()
        assert 'prefixgate_backend_name_resolved{name="%s"} 0' % name in m, m[-2000:]
        fails = metric_samples(m)['prefixgate_backend_name_lookup_failures_total{name="%s"}'
                                  % name]
        assert fails >= 3, fails
        # logged at its first failure, not at every one (again after a minute)
        log = f.log()
        assert log.count("backend name %s:" % name) == 1, log[-2000:]
        assert "it stands for no address" in log, log[-2000:]
        # it appears: a member, and the name's own entry is gone
        dns.records["nonexistent.invalid"] = ["127.0.0.21"]
        assert wait_until(lambda: "127.0.0.21:28009" in members(f), 5), f.backends()
        assert entry()["address"] == "127.0.0.21:28009", entry()
        assert "backend name %s resolves again" % name in f.log()
    finally:
        f.stop()
        dns.stop()


@test
@shm_only
def etc_hosts_name(opts):
    """A name in /etc/hosts resolves without DNS (files first)."""
    names = []
    if not os.path.exists("/etc/hosts"):
        return "SKIP this machine has no /etc/hosts (a bare chroot)"
    for line in open("/etc/hosts"):
        parts = line.split("#")[0].split()
        if len(parts) >= 2 and parts[0].startswith("127."):
            names += [(n, parts[0]) for n in parts[1:] if n != "localhost" and "." not in n]
    if not names:
        return "SKIP /etc/hosts has no loopback name other than localhost"
    name, ip = names[0]
    f = Fleet(opts, 0, start_gateway=False)
    try:
        # a resolver that answers nothing: only /etc/hosts can resolve it
        f.start_gateway(["--resolver", "127.0.0.1:9", "--health-check-path", "none"],
                        backends=[], extra_backends=["%s:9" % name])
        assert wait_until(lambda: "%s:9" % ip in members(f), 5), (members(f), f.log()[-800:])
        assert members(f)["%s:9" % ip]["name"] == "%s:9" % name.lower()
    finally:
        f.stop()


@test
@shm_only
def more_than_255_backends(opts):
    """300 backends from --backends-file (not listening: membership only)."""
    f = Fleet(opts, 0, start_gateway=False)
    try:
        path = os.path.join(f.tmp, "many.txt")
        with open(path, "w") as fh:
            for i in range(300):
                fh.write("127.0.%d.%d:9\n" % (1 + i // 250, 1 + i % 250))
        f.start_gateway(["--backends-file", path, "--health-check-path", "none"], backends=[])
        b = f.backends()
        assert len(b) == 300, len(b)
        assert max(x["id"] for x in b.values()) == 300
        st, r = f.admin("POST", "/backends", {"address": "127.0.9.9:9"})
        assert st == 201 and r["id"] == 301, (st, r)
        assert "301 backends" in f.log(), f.log()[-800:]
    finally:
        f.stop()


def main():
    return run_suite(TESTS, limit_s=60)


if __name__ == "__main__":
    sys.exit(main())
