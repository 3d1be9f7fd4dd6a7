#!/usr/bin/env python3
"""The benchmarks' reference router (tools/bench/refrouter.py) and the
mockllm endpoints it stands on, with real processes on loopback:

- the placement rules as pure functions (ties, the pass-over bound);
- mockllm's /mock/match (the real endpoint's 400s, nothing submitted, the
  queue seen) and /mock/speed, --speed;
- cache-first: a request's second send goes to the instance that cached it;
  a holder far more loaded than every other instance is passed over, and
  is followed when the margin is not met; predicted-ttft avoids a queued
  instance;
- streamed and non-streamed answers arrive byte for byte as a direct
  request's, but for the route header (chunk framing included);
- client and backend connections are kept alive and reused; a large answer
  to a client that stops reading arrives intact;
- a backend that resets before answering gives a 502 and the client
  connection goes on; a dead backend is left out; no backend at all: 502.

Every socket has a timeout and every wait a deadline.

usage: test_refrouter.py --build DIR [--tools DIR] [-k SUBSTRING]
"""
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Fleet, free_port, http_get, mock_pattern, run_suite,  # noqa: E402
                     wait_until)
from httpmsg import Framing, Head  # noqa: E402  (tools/bench, on the path via harness)
from refrouter import choose  # noqa: E402

TESTS = []
ROUTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench",
                      "refrouter.py")


def test(fn):
    TESTS.append(fn)
    return fn


class RefRouter:
    def __init__(self, opts, f, names, rule, extra=()):
        self.log = os.path.join(f.tmp, "refrouter-%d.log" % free_port())
        cmd = [sys.executable, ROUTER, "--listen", "127.0.0.1:0", "--rule", rule] + list(extra)
        for n in names:
            cmd += ["--backend", f.addr(n) if n in f.mocks else n]
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "w"), stderr=subprocess.STDOUT)

        def port():
            m = re.search(r"listening on \S+ port (\d+)", open(self.log).read())
            return int(m.group(1)) if m else None
        self.port = wait_until(port, 10)
        if not self.port:
            self.proc.kill()
            self.proc.wait(5)
            raise RuntimeError("refrouter did not start:\n" + open(self.log).read()[-2000:])

    def stats(self):
        st, body = http_get(self.port, "/ref/stats")
        assert st == 200, st
        return json.loads(body)

    def stop(self):
        """Stop it; what its log says went wrong, or None."""
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        log = open(self.log).read()
        if "Traceback" in log or "exception" in log.lower():
            return log[-3000:]
        return None


def stop_all(routers, f):
    """Stop every router and the fleet, then fail on a router's log."""
    problems = [r.stop() for r in routers if r]
    f.stop()
    bad = [p for p in problems if p]
    assert not bad, "refrouter logged:\n" + bad[0]


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def exchange(s, path, body, headers=b"", head_only=False, pause=0):
    """Send one POST on socket s; (Head, raw answer bytes: head + framed
    body as sent). head_only: return once the head is in; pause: wait that
    many seconds before reading."""
    if isinstance(body, str):
        body = body.encode()
    s.sendall(b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n%s"
              b"Content-Length: %d\r\n\r\n" % (path.encode(), headers, len(body)) + body)
    time.sleep(pause)
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        assert d, "closed before a head: %r" % buf[:200]
        buf += d
    end = buf.index(b"\r\n\r\n") + 4
    h = Head(buf[:end])
    if head_only:
        return h, buf
    fr = Framing("chunked") if h.chunked else Framing("length", h.length or 0)
    rest = buf[end:]
    n = fr.feed(rest)
    while not fr.done:
        d = s.recv(65536)
        assert d, "closed inside the body"
        n += fr.feed(d)
        rest += d
    assert n == len(rest), "bytes after the answer"
    return h, buf[:end] + rest


def route(h):
    v = h.get(b"x-prefixgate-route")
    assert v is not None, "no route header"
    return dict(p.strip().split("=", 1) for p in v.decode().split(";"))


def chat(text, stream=False, max_tokens=4):
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": text}],
                       "max_tokens": max_tokens, "stream": stream})


def words(seed, n):
    """n distinct-ish 5-byte words (n x 5 / 4 tokens), fixed by seed."""
    x, out = seed * 2654435761 + 1, []
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & (2 ** 64 - 1)
        out.append("%04x" % (x >> 48))
    return " ".join(out)


def post(port, path, body, headers=b""):
    s = connect(port)
    try:
        return exchange(s, path, body, headers)
    finally:
        s.close()


def match(f, name, body, path="/v1/chat/completions"):
    h, raw = post(f.mocks[name][0], "/mock/match" + path, body)
    return int(h.start[1]), raw.split(b"\r\n\r\n", 1)[1]


def accepted(f, name):
    _, m = http_get(f.mocks[name][0], "/metrics")
    return int(re.search(rb"mockllm_connections_accepted_total (\d+)", m).group(1))


@test
def rules_pure(opts):
    """choose(): predicted-ttft ties by queue then order; cache-first ties
    within tie_tokens by predicted TTFT, passes the holder over only past
    far_factor x every other queue time + margin, then to the lowest TTFT."""
    def a(i, cached, queue, pred, rate=1000.0):
        return {"i": i, "cached_tokens": cached, "queue_tokens": queue,
                "prefill_tokens_per_s": rate, "predicted_ttft_ms": pred}
    assert choose("predicted-ttft", [a(0, 0, 9, 5.0), a(1, 0, 3, 5.0), a(2, 0, 3, 5.0)]) == \
        (1, "ttft")
    assert choose("predicted-ttft", [a(0, 900, 0, 7.0), a(1, 0, 0, 6.0)]) == (1, "ttft")
    # 600 and 1000 tie within 512; the lower predicted TTFT of the two wins
    assert choose("cache-first", [a(0, 1000, 0, 9.0), a(1, 600, 0, 8.0), a(2, 0, 0, 1.0)]) == \
        (1, "holder")
    assert choose("cache-first", [a(0, 1000, 0, 9.0), a(1, 400, 0, 1.0)]) == (0, "holder")
    # holder queue 5 s; others 1 s: 5 > 4 x 1 + 1 is false; 0.9 s: true
    busy = a(0, 1000, 5000, 6000.0)
    assert choose("cache-first", [busy, a(1, 0, 1000, 1100.0)]) == (0, "holder")
    assert choose("cache-first", [busy, a(1, 0, 900, 1000.0)]) == (1, "passed-over")
    assert choose("cache-first", [busy, a(1, 0, 900, 1000.0), a(2, 0, 2000, 3000.0)]) == \
        (0, "holder")  # not far from every other instance
    assert choose("cache-first", [busy, a(1, 0, 900, 1000.0)], far_factor=4, margin_s=2) == \
        (0, "holder")
    assert choose("cache-first", [busy]) == (0, "holder")


@test
def mock_endpoints(opts):
    """/mock/match answers for the request without submitting it (a
    malformed body gets the real endpoint's 400); its cached tokens follow
    the completion; /mock/speed reports and changes the rates; --speed 2
    doubles the configured rate."""
    f = Fleet(opts, 2, start_gateway=False, mock_args={1: ["--time-scale", "4", "--speed", "2"]})
    try:
        body = chat(words(1, 800))
        st, m = match(f, "b0", body)
        m = json.loads(m)
        assert st == 200 and m["cached_tokens"] == 0 and m["queue_tokens"] == 0, m
        assert set(m) == {"prompt_tokens", "cached_tokens", "waiting", "running",
                          "queue_tokens", "prefill_tokens_per_s", "ttft_overhead_ms",
                          "predicted_ttft_ms"}, m
        assert m["prefill_tokens_per_s"] == 36600 and m["ttft_overhead_ms"] == 61.5, m
        assert abs(m["predicted_ttft_ms"] - (m["prompt_tokens"] / 36.6 + 61.5)) < 0.01, m
        _, m2 = match(f, "b0", body)
        assert json.loads(m2)["cached_tokens"] == 0, "a match cached something"
        h, _ = post(f.mocks["b0"][0], "/v1/chat/completions", body)
        assert h.start[1] == b"200"
        m3 = json.loads(match(f, "b0", body)[1])
        assert m3["cached_tokens"] == (m3["prompt_tokens"] - 1) // 16 * 16, m3
        for bad in ("{bad", json.dumps({"messages": []})):
            st, got = match(f, "b0", bad)
            _, real = post(f.mocks["b0"][0], "/v1/chat/completions", bad)
            assert st == 400 and got == real.split(b"\r\n\r\n", 1)[1], (got, real)
        _, sp = http_get(f.mocks["b1"][0], "/mock/speed")
        assert json.loads(sp) == {"factor": 1, "prefill_tokens_per_s": 36600 * 8,
                                  "ttft_overhead_ms": 61.5 / 8,
                                  "decode_ms_per_token": 25 / 8}, sp
        h, raw = post(f.mocks["b1"][0], "/mock/speed", '{"factor":0.5}')
        sp = json.loads(raw.split(b"\r\n\r\n", 1)[1])
        assert sp["factor"] == 0.5 and sp["prefill_tokens_per_s"] == 36600 * 4, sp
        m = json.loads(match(f, "b1", body)[1])
        assert m["prefill_tokens_per_s"] == 36600 * 4 and m["ttft_overhead_ms"] == 61.5 / 4, m
        for bad in ('{"factor":0}', '{"factor":"2"}', "[]", '{"factor":1e9}'):
            h, _ = post(f.mocks["b1"][0], "/mock/speed", bad)
            assert h.start[1] == b"400", bad
        assert json.loads(http_get(f.mocks["b1"][0], "/mock/speed")[1])["factor"] == 0.5
    finally:
        f.stop()


@test
def cache_first_follows_cache(opts):
    """Prompts cached on b1 and b2 (sent there directly) go there through
    the router; a new prompt goes to b0 (idle instances tie: the first),
    and its second send goes where it went."""
    f = Fleet(opts, 3, start_gateway=False, mock_args={i: ["--time-scale", "50"] for i in range(3)})
    r = None
    try:
        r = RefRouter(opts, f, ["b0", "b1", "b2"], "cache-first")
        warm = {"b1": words(2, 900), "b2": words(3, 900)}
        for name, text in warm.items():
            post(f.mocks[name][0], "/v1/chat/completions", chat(text))
        s = connect(r.port)
        for name, text in warm.items():
            h, _ = exchange(s, "/v1/chat/completions", chat(text + " and more?", stream=True))
            rt = route(h)
            assert h.get(b"x-backend-id") == name.encode(), (name, rt)
            assert rt["reason"] == "holder" and int(rt["cached"]) > 1000, rt
        fresh = words(4, 700)
        h, _ = exchange(s, "/v1/chat/completions", chat(fresh))
        assert h.get(b"x-backend-id") == b"b0" and route(h)["cached"] == "0", route(h)
        h, _ = exchange(s, "/v1/chat/completions", chat(fresh + " again"))
        assert h.get(b"x-backend-id") == b"b0" and int(route(h)["cached"]) > 800, route(h)
        s.close()
        st = r.stats()
        assert st["decisions"] == 4 and st["passed_over"] == 0, st
        assert list(st["requests"].values()) == [2, 1, 1], st
    finally:
        stop_all([r], f)


def make_busy(f, name, n=2, tokens=8000):
    """n uncached requests of `tokens` tokens sent to name directly, in the
    background; returns once the instance reports them (one waiting)."""
    def one(i):
        try:
            post(f.mocks[name][0], "/v1/completions",
                 json.dumps({"prompt": "%d" % i * (tokens * 4), "max_tokens": 1}))
        except (OSError, AssertionError):
            pass  # the instance was stopped before answering
    for i in range(n):
        threading.Thread(target=one, args=(i + 1,), daemon=True).start()
    probe = json.dumps({"prompt": "x" * 400, "max_tokens": 1})
    ok = wait_until(lambda: json.loads(match(f, name, probe, "/v1/completions")[1])["waiting"]
                    == n - 1, 10)
    assert ok, "the instance never had %d waiting" % (n - 1)


@test
def busy_holder(opts):
    """b0 holds a prompt's prefix but has ~3.5 s of prefill queued (4,000
    tokens/s), b1 is idle: cache-first passes b0 over (3.5 s > 4 x 0 + 1 s);
    with --margin-s 100 it follows the cache; predicted-ttft goes to b1."""
    slow = ["--prefill-tokens-per-s", "4000"]
    f = Fleet(opts, 2, start_gateway=False, mock_args={0: slow, 1: slow})
    routers = []
    try:
        texts = [words(10 + i, 1600) for i in range(3)]  # ~2,000 tokens each
        for t in texts:
            post(f.mocks["b0"][0], "/v1/chat/completions", chat(t))
        make_busy(f, "b0")
        for rule, extra, text, want, reason in [
                ("cache-first", [], texts[0], b"b1", "passed-over"),
                ("cache-first", ["--margin-s", "100"], texts[1], b"b0", "holder"),
                ("predicted-ttft", [], texts[2], b"b1", "ttft")]:
            r = RefRouter(opts, f, ["b0", "b1"], rule, extra)
            routers.append(r)
            s = connect(r.port)
            # streamed: the head comes at once, even from the queued instance
            h, _ = exchange(s, "/v1/chat/completions", chat(text + "?", stream=True),
                            head_only=True)
            s.close()
            assert h.get(b"x-backend-id") == want and route(h)["reason"] == reason, \
                (rule, extra, route(h))
            assert r.stats()["passed_over"] == (reason == "passed-over"), r.stats()
    finally:
        stop_all(routers, f)


def normalize(raw):
    """An answer without the route header and with "created" (the second
    it was made) zeroed, digits kept as many."""
    raw = re.sub(rb"X-Prefixgate-Route: [^\r]*\r\n", b"", raw)
    return re.sub(rb'"created":(\d+)', lambda m: b'"created":' + b"0" * len(m.group(1)), raw)


@test
def bytes_as_direct(opts):
    """Two instances with the same id and history, one behind the router:
    streamed and plain answers, chat and completions, arrive identical, head
    and framing included, but for the route header."""
    f = Fleet(opts, 0, start_gateway=False)
    r = None
    try:
        f.add_mock("direct", ["--id", "twin", "--time-scale", "20"])
        f.add_mock("routed", ["--id", "twin", "--time-scale", "20"])
        r = RefRouter(opts, f, ["routed"], "cache-first")
        cases = [("/v1/chat/completions", chat(words(5, 300), stream=True, max_tokens=12)),
                 ("/v1/chat/completions", chat(words(5, 300), max_tokens=12)),
                 ("/v1/completions", json.dumps({"prompt": words(6, 3000), "max_tokens": 20,
                                                 "stream": True,
                                                 "stream_options": {"include_usage": True}})),
                 ("/v1/completions", json.dumps({"prompt": words(6, 3000), "max_tokens": 3})),
                 ("/v1/chat/completions", "{bad")]
        sd, sr = connect(f.mocks["direct"][0]), connect(r.port)
        for path, body in cases:
            _, want = exchange(sd, path, body, b"X-Request-Id: abc\r\n")
            h, got = exchange(sr, path, body, b"X-Request-Id: abc\r\n")
            assert route(h)["backend"] == f.addr("routed")
            assert normalize(got) == normalize(want), (path, got[:600], want[:600])
        sd.close()
        sr.close()
    finally:
        stop_all([r], f)


@test
def keep_alive_reuse(opts):
    """30 requests on one client connection: it stays open, and the router
    opens at most 2 connections to each backend (matches, then forwards)."""
    f = Fleet(opts, 3, start_gateway=False, mock_args={i: ["--time-scale", "50"] for i in range(3)})
    r = None
    try:
        r = RefRouter(opts, f, ["b0", "b1", "b2"], "predicted-ttft")
        before = {n: accepted(f, n) for n in f.mocks}
        s = connect(r.port)
        for i in range(30):
            h, _ = exchange(s, "/v1/chat/completions", chat(words(20 + i, 200), stream=i % 2 == 0))
            assert h.start[1] == b"200" and h.get(b"connection") is None, h.fields
        s.close()
        # each count includes the /metrics request that reads it
        opened = {n: accepted(f, n) - before[n] - 1 for n in f.mocks}
        assert all(v <= 2 for v in opened.values()), opened
        assert r.stats()["requests"][f.addr("b0")] == 30  # idle instances: the first
    finally:
        stop_all([r], f)


@test
def large_answer_slow_client(opts):
    """8 MiB answers, with Content-Length and chunked, to a client that
    reads nothing for half a second (the backend is paused meanwhile):
    intact, and the connection goes on."""
    f = Fleet(opts, 1, start_gateway=False)
    r = None
    try:
        r = RefRouter(opts, f, ["b0"], "predicted-ttft")
        s = connect(r.port)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        n = 8 << 20
        for chunked in (b"", b"X-Mock-Chunked: 1\r\n"):
            h, raw = exchange(s, "/v1/completions", chat("x"),
                              b"X-Mock-Response-Bytes: %d\r\n" % n + chunked, pause=0.5)
            body = raw.split(b"\r\n\r\n", 1)[1]
            if chunked:
                fr = Framing("chunked", dechunk=True)
                fr.feed(body)
                body = b"".join(fr.payload)
            assert h.start[1] == b"200" and body == mock_pattern(n), (h.fields, len(body))
        s.close()
    finally:
        stop_all([r], f)


@test
def backend_errors(opts):
    """A backend that resets before answering: 502 JSON, and the client
    connection serves the next request. A dead backend among live ones is
    not a candidate; with no live backend: 502."""
    f = Fleet(opts, 2, start_gateway=False)
    r = None
    try:
        dead = "127.0.0.1:%d" % free_port()  # nothing listens there
        r = RefRouter(opts, f, ["b0", dead, "b1"], "cache-first")
        s = connect(r.port)
        h, raw = exchange(s, "/v1/chat/completions", chat("hello"), b"X-Mock-Fail: reset\r\n")
        err = json.loads(raw.split(b"\r\n\r\n", 1)[1])
        assert h.start[1] == b"502" and err["code"] == 502, raw
        for i in range(4):
            h, _ = exchange(s, "/v1/chat/completions", chat(words(30 + i, 100)))
            assert h.start[1] == b"200" and route(h)["backend"] != dead, route(h)
        f.kill_mock("b0")
        f.kill_mock("b1")
        h, raw = exchange(s, "/v1/chat/completions", chat("hello"))
        assert h.start[1] == b"502" and b"no backend answered" in raw, raw
        s.close()
        st = r.stats()
        assert st["bad_gateway"] == 2 and st["requests"][dead] == 0, st
    finally:
        stop_all([r], f)


@test
def command_line(opts):
    """--help exits 0; a missing rule or a malformed backend exits 2."""
    ok = subprocess.run([sys.executable, ROUTER, "--help"], capture_output=True, text=True,
                        timeout=10)
    assert ok.returncode == 0 and "--far-factor" in ok.stdout, ok
    for args in (["--listen", "127.0.0.1:0", "--backend", "127.0.0.1:1"],
                 ["--listen", "127.0.0.1:0", "--backend", "nowhere", "--rule", "cache-first"]):
        bad = subprocess.run([sys.executable, ROUTER] + args, capture_output=True, text=True,
                             timeout=10)
        assert bad.returncode == 2, (args, bad)


def main():
    return run_suite(TESTS, modes=None, limit_s=60)


if __name__ == "__main__":
    sys.exit(main())
