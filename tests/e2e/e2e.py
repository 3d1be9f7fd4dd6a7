#!/usr/bin/env python3
"""prefixgate end-to-end tests: real prefixgate and mockllm processes on
loopback, one fresh fleet per test. TAP output; every wait is bounded.

usage: e2e.py --build DIR [--tools DIR] --mode shm|bpf
              [--data-path auto|copy|sockmap|sockmsg] [-k SUBSTRING]
  shm: --no-bpf (routing state in shared memory)
  bpf: routing state in pinned BPF maps (root; skipped with the reason if not)
"""
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Fleet, check_echo, free_port, mock_pattern, read_responses,  # noqa: E402
                     run_suite, wait_until)

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def rnd_text(rng, n):
    words = ["alpha", "beta", "gamma", "delta", "kv", "cache", "prefix", "token", "route"]
    out = []
    size = 0
    while size < n:
        w = rng.choice(words)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def chat(messages, **extra):
    d = {"model": "m", "messages": messages}
    d.update(extra)
    return json.dumps(d)


# --- routing -----------------------------------------------------------------

@test
def prefix_stickiness(opts):
    """Requests sharing a prefix land on one backend; prefixes spread out."""
    f = Fleet(opts, 3)
    try:
        rng = random.Random(1)
        used = set()
        for i in range(12):
            prefix = rnd_text(rng, 5000)
            seen = set()
            for j in range(4):
                st, h, _ = f.post("/invocations", prefix + " question %d" % rng.random())
                assert st == 200, st
                seen.add(h["x-backend-id"])
            assert len(seen) == 1, "prefix %d went to %s" % (i, seen)
            used |= seen
        assert len(used) >= 2, "12 prefixes all on %s" % used
        assert f.idle()
    finally:
        f.stop()


@test
def prefix_length_boundary(opts):
    """Bytes past PrefixLength never change the route; bytes inside it do."""
    f = Fleet(opts, 3, ["--prefix-length", "1024"])
    try:
        base = "x" * 1024
        k1 = f.dry_run(base + "AAAA")["key_hash"]
        k2 = f.dry_run(base + "BBBB" * 100)["key_hash"]
        assert k1 == k2, "suffix changed the key"
        k3 = f.dry_run("y" + base[1:] + "AAAA")["key_hash"]
        assert k3 != k1, "first byte did not change the key"
        k4 = f.dry_run(base[:1023] + "z" + "AAAA")["key_hash"]
        assert k4 != k1, "byte 1023 did not change the key"
        r = f.dry_run(base + "tail")
        assert r["key_length"] == 1024, r
        # Real traffic goes where the dry run says.
        for tail in ("1", "2" * 3000, "3"):
            st, h, _ = f.post("/invocations", base + tail)
            assert st == 200 and f.addr(h["x-backend-id"]) == r["backend"], (h, r)
        assert f.idle()
    finally:
        f.stop()


@test
def openai_serialization_invariance(opts):
    """Whitespace, key order and other fields never change an OpenAI key."""
    f = Fleet(opts, 3)
    try:
        msgs = [{"role": "system", "content": "You are a support bot. " * 40},
                {"role": "user", "content": "Where is my order?"}]
        bodies = [
            chat(msgs),
            json.dumps({"messages": msgs, "model": "m", "temperature": 0.2, "stream": False}),
            json.dumps({"max_tokens": 7, "messages": msgs, "model": "other"}, indent=4),
            json.dumps({"model": "m", "messages": [
                {"content": msgs[0]["content"], "role": "system"},
                {"content": [{"type": "text", "text": "Where is my order?"}], "role": "user"}]}),
        ]
        path = "/v1/chat/completions"
        hashes = {f.dry_run(b, path=path)["key_hash"] for b in bodies}
        assert len(hashes) == 1, hashes
        want = f.dry_run(bodies[0], path=path)["backend"]
        for b in bodies:
            st, h, _ = f.post(path, b, {"Content-Type": "application/json"})
            assert st == 200 and f.addr(h["x-backend-id"]) == want, (st, h)
        other = chat([msgs[0], {"role": "user", "content": "Something else"}])
        r = f.dry_run(other, path=path)
        assert r["key_source"] == "messages" and not r["fallback"], r
        # Unparseable JSON still routes (raw-bytes key), counted as a fallback.
        st, h, _ = f.post(path, '{"messages": [ broken')
        assert "x-backend-id" in h, (st, h)  # routed (the backend may reject it)
        assert "prefixgate_key_extraction_fallbacks_total 1" in f.metrics()
        assert f.idle()
    finally:
        f.stop()


@test
def explicit_key(opts):
    """X-Prefixgate-Key and prompt_cache_key pin a session to one backend."""
    f = Fleet(opts, 3)
    try:
        rng = random.Random(2)
        for sess in ("alice", "bob", "carol"):
            seen = set()
            for i in range(4):
                st, h, _ = f.post("/invocations", rnd_text(rng, 2000),
                                  {"X-Prefixgate-Key": sess})
                seen.add(h["x-backend-id"])
                st, h, _ = f.post("/v1/chat/completions",
                                  chat([{"role": "user", "content": rnd_text(rng, 50)}],
                                       prompt_cache_key=sess, max_tokens=1))
                seen.add(h["x-backend-id"])
            assert len(seen) == 1, (sess, seen)
        assert 'decision="explicit_key"' in f.metrics()
        assert f.idle()
    finally:
        f.stop()


@test
def newer_api_keys(opts):
    """/v1/responses, /v1/messages and /v1/embeddings are keyed by their text:
    field order, whitespace and sampling fields never move a request; the
    dry run (also with a query string in ?path=) says so, and real traffic
    goes where it says."""
    f = Fleet(opts, 4)
    try:
        sysp = "You are a support bot. " * 30
        cases = {
            "/v1/responses": ("input", [
                {"model": "m", "instructions": sysp, "input": "Where is my order?"},
                {"input": [{"role": "user", "content": "Where is my order?"}],
                 "max_output_tokens": 5, "stream": True, "instructions": sysp},
                {"instructions": sysp, "temperature": 0.3, "input": [
                    {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": "Where is my order?"}]}]},
            ]),
            "/v1/messages": ("messages", [
                {"model": "c", "max_tokens": 100, "system": sysp,
                 "messages": [{"role": "user", "content": "Where is my order?"}]},
                {"messages": [{"content": [{"type": "text", "text": "Where is my order?"}],
                               "role": "user"}], "stream": True, "max_tokens": 7,
                 "system": [{"type": "text", "text": sysp}]},
            ]),
            "/v1/embeddings": ("input", [
                {"model": "e", "input": sysp},
                {"input": [sysp], "encoding_format": "float"},
            ]),
        }
        for path, (source, bodies) in cases.items():
            texts = [json.dumps(bodies[0]), json.dumps(bodies[0], indent=3)] + \
                [json.dumps(b) for b in bodies[1:]]
            rs = [f.dry_run(t, path=path) for t in texts]
            for r in rs:
                assert r["key_source"] == source and not r["fallback"], (path, r)
                assert r["key_hash"] == rs[0]["key_hash"], (path, rs)
            # A query string does not change the API (real routing drops it).
            q = f.dry_run(texts[0], path=path + "%3Fapi-version%3D1")
            assert q["key_hash"] == rs[0]["key_hash"] and q["key_source"] == source, q
            for t in texts:
                st, h, _ = f.post(path + "?api-version=1", t,
                                  {"Content-Type": "application/json"})
                assert f.addr(h["x-backend-id"]) == rs[0]["backend"], (path, st, h, rs[0])
        # The completions key is its prompt, and says so.
        r = f.dry_run(json.dumps({"prompt": "hello"}), path="/v1/completions")
        assert r["key_source"] == "prompt" and r["api"] == "completions", r
        # previous_response_id: one chain, one backend, an explicit key.
        a = f.dry_run(json.dumps({"previous_response_id": "resp_7", "input": "one"}),
                      path="/v1/responses")
        b = f.dry_run(json.dumps({"input": "two", "previous_response_id": "resp_7"}),
                      path="/v1/responses")
        assert a["key_source"] == "previous_response_id" and a["reason"] == "explicit_key", a
        assert a["key_hash"] == b["key_hash"], (a, b)
        c = f.dry_run(json.dumps({"previous_response_id": "resp_7", "input": "x",
                                  "prompt_cache_key": "conv-1"}), path="/v1/responses")
        assert c["key_source"] == "prompt_cache_key", c
        assert f.idle()
    finally:
        f.stop()


@test
def concurrency_threshold_overflow(opts):
    """The key's backend never exceeds ConcurrencyThreshold; excess overflows
    to other backends and no request fails."""
    f = Fleet(opts, 3, ["--concurrency-threshold", "2"])
    try:
        body = "hot prefix " * 500
        target = f.dry_run(body)["backend"]
        peak = {}
        results = []
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                for a, b in f.backends().items():
                    peak[a] = max(peak.get(a, 0), b["in_flight"])
                time.sleep(0.01)

        def one():
            results.append(f.post("/invocations", body, {"X-Mock-Delay-Ms": "800"}))

        t = threading.Thread(target=sample)
        t.start()
        ths = [threading.Thread(target=one) for _ in range(5)]
        for th in ths:
            th.start()
            time.sleep(0.03)
        for th in ths:
            th.join(15)
        stop.set()
        t.join(5)
        assert len(results) == 5 and all(r[0] == 200 for r in results), [r[0] for r in results]
        served = [f.addr(r[1]["x-backend-id"]) for r in results]
        assert served.count(target) == 2, served
        assert peak.get(target, 0) <= 2, peak
        m = f.metrics()
        assert 'decision="overflow"' in m
        assert f.idle()
    finally:
        f.stop()


@test
def random_spread(opts):
    """RANDOM spreads one prefix uniformly."""
    f = Fleet(opts, 3, ["--strategy", "RANDOM"])
    try:
        counts = {}
        for _ in range(300):
            st, h, _ = f.post("/invocations", "same body every time")
            counts[h["x-backend-id"]] = counts.get(h["x-backend-id"], 0) + 1
        # Binomial(300, 1/3): mean 100, sd 8.2; 60..140 is beyond 4.8 sd.
        assert len(counts) == 3 and all(60 <= c <= 140 for c in counts.values()), counts
        assert f.idle()
    finally:
        f.stop()


@test
def least_outstanding_avoids_slow_backend(opts):
    """LEAST_OUTSTANDING_REQUESTS sends little to a slow backend."""
    f = Fleet(opts, 3, ["--strategy", "least_outstanding_requests"],
              mock_args={2: ["--ttft-overhead-ms", "400"]})
    try:
        counts = {}
        lock = threading.Lock()
        deadline = time.monotonic() + 3

        def client(i):
            rng = random.Random(i)
            while time.monotonic() < deadline:
                st, h, _ = f.post("/v1/chat/completions",
                                  chat([{"role": "user", "content": rnd_text(rng, 100)}],
                                       max_tokens=1))
                assert st == 200
                with lock:
                    counts[h["x-backend-id"]] = counts.get(h["x-backend-id"], 0) + 1

        ths = [threading.Thread(target=client, args=(i,)) for i in range(3)]
        for t in ths:
            t.start()
        for t in ths:
            t.join(20)
        total = sum(counts.values())
        assert total > 20, counts
        assert counts.get("b2", 0) < 0.15 * total, counts
        assert f.idle()
    finally:
        f.stop()


@test
def membership_change_moves_right_keys(opts):
    """Adding a backend moves ~1/(N+1) of keys, all to it; removing one moves
    only the keys it owned."""
    f = Fleet(opts, 4, start_gateway=False)
    try:
        f.start_gateway(backends=["b0", "b1", "b2"])
        keys = ["key-%d " % i + "p" * 100 for i in range(300)]
        before = [f.dry_run(k)["backend"] for k in keys]
        st, _ = f.admin("POST", "/backends", {"address": f.addr("b3")})
        assert st == 201, st
        after = [f.dry_run(k)["backend"] for k in keys]
        moved = [(a, b) for a, b in zip(before, after) if a != b]
        assert all(b == f.addr("b3") for _, b in moved), "a key moved between old backends"
        assert 0.12 * len(keys) <= len(moved) <= 0.40 * len(keys), len(moved)
        st, _ = f.admin("DELETE", "/backends/" + f.addr("b0"))
        assert st == 202, st
        wait_until(lambda: f.addr("b0") not in f.backends(), 5)
        final = [f.dry_run(k)["backend"] for k in keys]
        for a, b in zip(after, final):
            assert a == b or a == f.addr("b0"), "a key not owned by b0 moved"
            assert b != f.addr("b0")
        # Real traffic follows.
        st, h, _ = f.post("/invocations", keys[0])
        assert st == 200 and f.addr(h["x-backend-id"]) == final[0]
        assert "prefixgate_ring_generation" in f.metrics()
        assert f.idle()
    finally:
        f.stop()


@test
def dead_backend_costs_no_request(opts):
    """A backend that dies costs no failed request: attempts move on."""
    f = Fleet(opts, 3)
    try:
        rng = random.Random(3)
        f.kill_mock("b1")
        for i in range(40):
            st, h, body = f.post("/invocations", rnd_text(rng, 300))
            assert st == 200, (i, st, body)
            assert h["x-backend-id"] != "b1"
        assert f.idle()
        # Every backend gone: a clear 502 with a JSON body.
        f.kill_mock("b0")
        f.kill_mock("b2")
        st, h, body = f.post("/invocations", "anything")
        assert st == 502 and json.loads(body)["error"]["code"] == 502, (st, body)
        assert f.idle()
    finally:
        f.stop()


@test
def active_health_checks(opts):
    """A backend failing its health checks (errors or silence) gets no
    traffic until it passes them again."""
    from harness import SickBackend
    sick = SickBackend()
    f = Fleet(opts, 2, start_gateway=False)
    try:
        f.start_gateway(["--health-check-interval", "100", "--health-check-timeout", "200",
                         "--health-fall", "2", "--health-rise", "2"],
                        extra_backends=[sick.addr()])
        rng = random.Random(5)

        def served(n=30):
            got = set()
            for _ in range(n):
                st, h, _ = f.post("/invocations", rnd_text(rng, 200))
                assert st == 200, st
                got.add(h["x-backend-id"])
            return got

        assert wait_until(lambda: "sick" in served(10), 3), "sick backend never used while healthy"
        for mode in ("error", "hang"):
            sick.mode = mode
            assert wait_until(lambda: not f.backends()[sick.addr()]["healthy"], 3), mode
            assert "sick" not in served(), "unhealthy backend got traffic (%s)" % mode
            sick.mode = "ok"
            assert wait_until(lambda: f.backends()[sick.addr()]["healthy"], 3), \
                "never recovered from %s" % mode
            assert wait_until(lambda: "sick" in served(10), 3)
        log = f.log()
        assert "unhealthy after 2 failed checks" in log and "healthy again" in log, log[-500:]
        assert f.idle()
    finally:
        f.stop()
        sick.stop()


# --- HTTP behaviour ------------------------------------------------------------

@test
def keepalive_per_request_routing(opts):
    """One keep-alive connection: each request is routed by its own key."""
    import http.client
    f = Fleet(opts, 3)
    try:
        rng = random.Random(4)
        conn = http.client.HTTPConnection("127.0.0.1", f.port, timeout=10)
        backends = set()
        for i in range(20):
            body = rnd_text(rng, 500)
            want = f.dry_run(body)["backend"]
            st, h, _ = f.post("/invocations", body, conn=conn)
            assert st == 200 and f.addr(h["x-backend-id"]) == want, (i, h, want)
            backends.add(want)
        conn.close()
        assert len(backends) >= 2
        assert f.idle()
    finally:
        f.stop()


@test
def pipelining_in_order(opts):
    """Pipelined requests are answered in order, each intact, on every data
    path (a spliced response's end is found by its framing, so the client's
    connection stays open after it)."""
    f = Fleet(opts, 3)
    try:
        s = socket.create_connection(("127.0.0.1", f.port), timeout=10)
        bodies = [("body-%d " % i + "q" * (i * 3000)).encode() for i in range(6)]
        raw = b"".join(b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                       b"X-Mock-Delay-Ms: %d\r\n\r\n" % (len(b), (5 - i) * 20) + b
                       for i, b in enumerate(bodies))
        s.sendall(raw)
        for b, (st, hdr, data) in zip(bodies, read_responses(s, len(bodies))):
            check_echo(st, hdr, b)
            assert len(data) == int(hdr["content-length"])
            assert "connection" not in hdr, hdr
        s.close()
        assert f.idle()
    finally:
        f.stop()


@test
def backend_fin_mid_body_is_visible(opts):
    """A backend closing cleanly in the middle of a body (FIN, no reset):
    the client sees a short body or a chunked stream without its last
    chunk, then a close -- never a hang, on every data path."""
    f = Fleet(opts, 1)
    try:
        for chunked in (False, True):
            body = b'{"messages":[{"role":"user","content":"x"}],"stream":true}'
            s = socket.create_connection(("127.0.0.1", f.port), timeout=10)
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                      b"X-Mock-Fail: close-mid-body\r\nX-Mock-Response-Bytes: 3000000\r\n%s\r\n%s"
                      % (len(body), b"X-Mock-Chunked: 1\r\n" if chunked else b"", body))
            data = b""
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline:
                d = s.recv(1 << 20)
                if not d:
                    break
                data += d
            s.close()
            assert time.monotonic() < deadline, "client left hanging (chunked=%s)" % chunked
            head, _, rest = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head[:60]
            if chunked:
                assert not rest.endswith(b"0\r\n\r\n"), "stream looked complete"
            else:
                assert len(rest) < 3000000, "body looked complete"
        assert f.idle()
    finally:
        f.stop()


@test
def spliced_responses_keep_the_connection(opts):
    """Streamed responses of every framing (SSE events, a large chunked body,
    a Content-Length body) follow one another on one client connection, each
    intact, none closing it: on sockmap/sockmsg their end is found by the
    framing tracked in the kernel, and they were carried there (metrics)."""
    f = Fleet(opts, 1)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", f.port, timeout=20)
        body = chat([{"role": "user", "content": "keep-alive"}], stream=True)
        n = 500000
        cases = [({"X-Mock-Chunks": "8", "X-Mock-Chunk-Interval-Ms": "5"}, None),
                 ({"X-Mock-Response-Bytes": str(n), "X-Mock-Chunked": "1"}, n),
                 ({"X-Mock-Response-Bytes": str(n)}, n)] * 2
        sock, closed = None, 0
        for hdrs, size in cases:
            try:
                st, h, data = f.post("/v1/chat/completions", body, hdrs, conn=conn)
            except http.client.RemoteDisconnected:
                # Only after a response whose end went untracked (see
                # stalled_reader_bounded); checked against the metric below.
                closed += 1
                conn.close()
                sock = None
                st, h, data = f.post("/v1/chat/completions", body, hdrs, conn=conn)
            assert st == 200, st
            assert "connection" not in h, h
            if size is None:
                assert data.rstrip().endswith(b"data: [DONE]"), data[-100:]
            else:
                assert data == mock_pattern(size), (len(data), size)
            sock = sock or conn.sock
            assert conn.sock is not None and conn.sock is sock, "client connection not kept"
        conn.close()
        spliced = f.counter("prefixgate_spliced_responses_total")
        unframed = f.counter("prefixgate_spliced_unframed_total")
        print("# spliced %d of %d responses, %d unframed" % (spliced, len(cases), unframed))
        assert closed <= unframed and (closed == 0 or opts.data_path == "sockmsg"), \
            "connection closed after %d responses, %d untracked" % (closed, unframed)
        dp = getattr(opts, "data_path", None)
        if dp in ("sockmap", "sockmsg"):
            assert spliced == len(cases), spliced
        elif dp == "copy" or opts.mode == "shm":
            assert spliced == 0, spliced
        else:  # auto: every one (streamed, same host) if sockmsg loaded, else none
            assert spliced in (0, len(cases)), spliced
        assert f.idle()
    finally:
        f.stop()


@test
def sse_streams_event_by_event(opts):
    """A chunked SSE response reaches the client event by event."""
    f = Fleet(opts, 2)
    try:
        s = socket.create_connection(("127.0.0.1", f.port), timeout=10)
        body = chat([{"role": "user", "content": "hi"}], stream=True)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                  b"X-Mock-Chunks: 5\r\nX-Mock-Chunk-Interval-Ms: 200\r\n\r\n%s"
                  % (len(body), body.encode()))
        t0 = time.monotonic()
        times = []
        buf = b""
        while b"[DONE]" not in buf and time.monotonic() - t0 < 10:
            d = s.recv(65536)
            if not d:
                break
            n_before = buf.count(b"data: {")
            buf += d
            for _ in range(buf.count(b"data: {") - n_before):
                times.append(time.monotonic() - t0)
        s.close()
        assert b"[DONE]" in buf, buf[-200:]
        assert buf.count(b"data: {") >= 5, buf
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert sum(1 for g in gaps if g > 0.1) >= 3, "events bunched: %s" % times
        assert f.idle()
    finally:
        f.stop()


@test
def large_bodies_concurrent_keepalive(opts):
    """Bodies up to 1 MiB stay intact under 16 concurrent keep-alive clients."""
    import http.client
    f = Fleet(opts, 3)
    try:
        errors = []

        def client(i):
            rng = random.Random(100 + i)
            try:
                conn = http.client.HTTPConnection("127.0.0.1", f.port, timeout=20)
                for j in range(4):
                    n = rng.randint(1, 1 << 20)
                    body = bytes(rng.getrandbits(8) for _ in range(min(n, 4096))) * (n // 4096 + 1)
                    body = body[:n]
                    st, h, _ = f.post("/invocations", body, conn=conn)
                    check_echo(st, h, body)
                conn.close()
            except Exception as e:  # noqa: BLE001
                errors.append("client %d: %r" % (i, e))

        ths = [threading.Thread(target=client, args=(i,)) for i in range(16)]
        for t in ths:
            t.start()
        for t in ths:
            t.join(60)
        assert not errors, errors[:3]
        assert f.idle()
    finally:
        f.stop()


@test
def huge_request_and_response(opts):
    """A 64 MiB request body and an 8 MiB response pass intact."""
    f = Fleet(opts, 2)
    try:
        body = bytes(range(256)) * (64 * 4096)
        st, h, _ = f.post("/invocations", body)
        check_echo(st, h, body)
        chat_body = json.dumps({"messages": [{"role": "user", "content": "z" * (20 << 20)}]})
        st, h, _ = f.post("/v1/chat/completions", chat_body, {"X-Mock-Response-Bytes": "100"})
        assert st == 200, st
        n = 8 << 20
        st, h, data = f.post("/invocations", "x", {"X-Mock-Response-Bytes": str(n)})
        assert st == 200 and data == mock_pattern(n), (st, len(data))
        st, h, data = f.post("/invocations", "x", {"X-Mock-Response-Bytes": str(n),
                                                   "X-Mock-Chunked": "1"})
        assert st == 200 and data == mock_pattern(n), (st, len(data))
        assert f.idle()
    finally:
        f.stop()


@test
def chunked_request_body(opts):
    """A chunked request body is routed by its decoded bytes and arrives intact."""
    f = Fleet(opts, 3)
    try:
        body = b"chunked-body " * 1000
        want = f.dry_run(body.decode())["backend"]
        s = socket.create_connection(("127.0.0.1", f.port), timeout=10)
        req = b"POST /invocations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        for i in range(0, len(body), 1000):
            part = body[i:i + 1000]
            req += b"%x\r\n%s\r\n" % (len(part), part)
        req += b"0\r\n\r\n"
        s.sendall(req)
        resp = s.recv(65536)
        s.close()
        head = resp.split(b"\r\n\r\n")[0].decode().lower()
        assert head.startswith("http/1.1 200"), head
        hdr = dict(l.split(": ", 1) for l in head.split("\r\n")[1:])
        assert int(hdr["x-body-length"]) == len(body)
        assert int(hdr["x-body-crc32"], 16) == zlib.crc32(body)
        assert f.addr(hdr["x-backend-id"]) == want
        assert f.idle()
    finally:
        f.stop()


@test
def malformed_requests_never_reach_backends(opts):
    """Ambiguous or malformed requests get 4xx/5xx and never reach a backend."""
    f = Fleet(opts, 2)
    cases = [
        (b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        (b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
        (b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400),
        (b"POST /invocations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"a" * 70000 + b"\r\n\r\n", 431),
        (b"POST /invocations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    ]
    try:
        for raw, want in cases:
            s = socket.create_connection(("127.0.0.1", f.port), timeout=10)
            s.sendall(raw)
            resp = b""
            while b"\r\n\r\n" not in resp:
                d = s.recv(4096)
                if not d:
                    break
                resp += d
            s.close()
            assert resp.startswith(b"HTTP/1.1 %d" % want), (raw[:60], resp[:80])
        for name in f.mocks:
            m = subprocess.run(["curl", "-s", "http://%s/metrics" % f.addr(name)],
                               capture_output=True, text=True, timeout=5).stdout
            bad = [l for l in m.splitlines() if l.startswith("mockllm_requests_total")
                   and "/invocations" in l and not l.endswith(" 0")]
            assert not bad, bad
        assert f.idle()
    finally:
        f.stop()


@test
def client_abort_releases_slot(opts):
    """A client leaving mid-stream frees the in-flight slot at once."""
    f = Fleet(opts, 2)
    try:
        s = socket.create_connection(("127.0.0.1", f.port), timeout=10)
        body = chat([{"role": "user", "content": "hi"}], stream=True)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                  b"X-Mock-Chunks: 1000\r\nX-Mock-Chunk-Interval-Ms: 20\r\n\r\n%s"
                  % (len(body), body.encode()))
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        assert sum(b["in_flight"] for b in f.backends().values()) == 1
        s.close()
        assert f.idle(2.0), f.backends()
        assert "prefixgate_aborted_total 1" in f.metrics()
    finally:
        f.stop()


def _proc_cpu_s(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _tcp_mem_kib():
    for line in open("/proc/net/sockstat"):
        if line.startswith("TCP:"):
            f = line.split()
            return int(f[f.index("mem") + 1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    return 0


@test
def stalled_reader_bounded(opts):
    """A client that stops reading a 1 GiB response: gateway RSS and kernel
    TCP memory stay bounded, the (non-blocking) backend does not spin, and
    the rest arrives intact once the client reads again."""
    f = Fleet(opts, 1)
    try:
        n = 1 << 30
        port, mock = f.mocks["b0"]
        rss0, mem0 = _rss_kib(f.gw.pid), _tcp_mem_kib()
        s = socket.create_connection(("127.0.0.1", f.port), timeout=20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
        s.sendall(b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
                  b"X-Mock-Response-Bytes: %d\r\n\r\nx" % n)
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += s.recv(65536)
        got = len(buf) - buf.index(b"\r\n\r\n") - 4
        while got < (1 << 20):
            got += len(s.recv(65536))
        time.sleep(1.0)  # let every buffer on the way fill up
        c0 = _proc_cpu_s(mock.pid) + _proc_cpu_s(f.gw.pid)
        time.sleep(3.0)
        cpu = _proc_cpu_s(mock.pid) + _proc_cpu_s(f.gw.pid) - c0
        rss, mem = _rss_kib(f.gw.pid) - rss0, _tcp_mem_kib() - mem0
        print("# stalled: gateway RSS +%d KiB, kernel TCP memory +%d KiB, "
              "backend+gateway CPU %.2f s in 3 s" % (rss, mem, cpu))
        assert rss < 64 * 1024, "gateway RSS grew %d KiB" % rss
        assert mem < 96 * 1024, "kernel TCP memory grew %d KiB" % mem
        assert cpu < 0.3, "backend or gateway busy while the client stalls: %.2f s" % cpu
        tail = b""
        while got < n:
            d = s.recv(1 << 20)
            assert d, "EOF after %d of %d bytes" % (got, n)
            off = got % 16
            # spot check: every 16-byte line is its own offset
            if len(d) > 64 and got // (1 << 26) != (got + len(d)) // (1 << 26):
                i = (16 - off) % 16
                line = d[i:i + 16]
                if len(line) == 16:
                    assert line == b"%015d\n" % (got + i), (got + i, line)
            got += len(d)
            tail = (tail + d)[-64:]
        assert got == n, (got, n)
        assert tail == b"".join(b"%015d\n" % o for o in range(n - 64, n, 16)), tail
        unframed = f.counter("prefixgate_spliced_unframed_total")
        assert f.counter("prefixgate_backend_errors_total") == 0, "counted as a backend error"
        if unframed:
            # sockmsg: a short write into the full client buffer left the
            # end untracked (doc/datapaths.md): the complete response is
            # followed by a clean close, never by a hang or stray bytes.
            print("# the stalled response's end was not tracked: connection closed after it")
            assert opts.data_path == "sockmsg", unframed
            assert s.recv(1) == b"", "bytes after an untracked response"
        else:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1"), "keep-alive broken after the stall"
        s.close()
        assert f.idle()
    finally:
        f.stop()


@test
def admin_api(opts):
    """The admin API answers what doc/operations.md "Admin API" lists."""
    f = Fleet(opts, 2)
    try:
        st, h = f.admin("GET", "/health")
        assert st == 200 and h["status"] == "ok", h
        st, b = f.admin("GET", "/backends")
        assert st == 200 and len(b) == 2 and {"address", "healthy", "in_flight", "requests"} <= set(b[0])
        st, r = f.admin("GET", "/routing")
        assert st == 200 and r["RoutingStrategy"] == "PREFIX_AWARE", r
        new = {"RoutingStrategy": "PREFIX_AWARE",
               "PrefixAwareRoutingConfig": {"PrefixLength": 2048, "ConcurrencyThreshold": 3}}
        st, r = f.admin("PUT", "/routing", new)
        assert st == 200 and f.admin("GET", "/routing")[1]["PrefixAwareRoutingConfig"]["PrefixLength"] == 2048
        st, r = f.admin("PUT", "/routing", {"RoutingStrategy": "PREFIX_AWARE",
                                            "PrefixAwareRoutingConfig": {"PrefixLength": 5}})
        assert st == 400 and "PrefixLength" in json.dumps(r), r
        st, r = f.admin("POST", "/backends", {"address": "nonsense"})
        assert st == 400, st
        st, r = f.admin("DELETE", "/backends/127.0.0.1:1")
        assert st == 404, st
        f.post("/invocations", "x")
        m = f.metrics()
        for series in ("prefixgate_requests_total{", "prefixgate_backend_in_flight{",
                       "prefixgate_routing_latency_seconds_bucket"):
            assert series in m, series
        assert f.idle()
    finally:
        f.stop()


@test
def command_line_errors(opts):
    """Bad flags exit 2 naming the flag and range; --help and --version work."""
    pg = os.path.join(opts.build, "prefixgate")
    cases = [(["--prefix-length", "100"], "--prefix-length"),
             (["--concurrency-threshold", "0"], "1-1024"),
             (["--strategy", "fastest"], "--strategy"),
             (["--listen", "nowhere"], "--listen"),
             (["--bogus"], "--bogus")]
    for args, want in cases:
        p = subprocess.run([pg] + args, capture_output=True, text=True, timeout=5)
        assert p.returncode == 2 and want in p.stderr, (args, p.returncode, p.stderr)
    # A log file that cannot be opened is a configuration error too (the
    # unit's RestartPreventExitStatus=2 must not restart it in a loop).
    p = subprocess.run([pg, "--no-bpf", "--listen", "127.0.0.1:%d" % free_port(),
                        "--admin", "127.0.0.1:%d" % free_port(),
                        "--access-log", "/nonexistent-dir/access.log"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and "--access-log" in p.stderr, (p.returncode, p.stderr)
    p = subprocess.run([pg, "--help"], capture_output=True, text=True, timeout=5)
    assert p.returncode == 0 and "--prefix-length" in p.stdout
    p = subprocess.run([pg, "--version"], capture_output=True, text=True, timeout=5)
    assert p.returncode == 0 and p.stdout.strip()


@test
def access_log(opts):
    """--access-log: one JSON line per request, with request id, client,
    method, path, backend, decision, key hash, status, bytes (spliced ones
    too), TTFT, durations and outcome."""
    f = Fleet(opts, 2, start_gateway=False)
    path = os.path.join(f.tmp, "access-%d.log" % os.getpid())
    try:
        f.start_gateway(["--access-log", path])
        body = "logged " * 300
        want = f.dry_run(body)
        for _ in range(3):
            st, h, _ = f.post("/invocations?secret=1", body, {"X-Request-Id": "req-\"q\""})
            assert st == 200 and h["x-request-id"] == 'req-"q"', h
        # A streamed answer (spliced on the kernel paths): bytes_out is what
        # the client received, counted on the wire.
        s = socket.create_connection(("127.0.0.1", f.port), timeout=10)
        sb = json.dumps({"messages": [{"role": "user", "content": "stream me"}],
                         "stream": True, "max_tokens": 60})
        s.sendall(("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: spliced\r\n"
                   "Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(sb), sb)).encode())
        got = 0
        deadline = time.time() + 20
        while time.time() < deadline:
            d = s.recv(65536)
            if not d:
                break
            got += len(d)
        s.close()
        s = socket.create_connection(("127.0.0.1", f.port), timeout=5)
        s.sendall(b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400")
        s.close()
        assert f.idle()
    finally:
        rc = f.stop()
    assert rc == 0
    recs = [json.loads(l) for l in open(path)]
    ok = [r for r in recs if r["outcome"] == "ok" and r["request_id"] != "spliced"]
    assert len(ok) == 3, recs
    for r in ok:
        assert r["backend"] == want["backend"] and r["status"] == 200, r
        assert r["key_hash"] == want["key_hash"] and r["decision"] == "affinity", (r, want)
        assert r["bytes_in"] > len(body) and r["bytes_out"] > 0 and r["duration_us"] > 0, r
        assert r["key_source"] == "raw" and r["attempts"] == 1, r
        assert r["method"] == "POST" and r["path"] == "/invocations", r
        assert r["client"] == "127.0.0.1" and r["request_id"] == 'req-"q"', r
        assert 0 < r["ttft_us"] <= r["duration_us"], r
    sp = [r for r in recs if r["request_id"] == "spliced"]
    assert len(sp) == 1 and sp[0]["bytes_out"] == got, (sp, got)
    bad = [r for r in recs if r["outcome"] == "gateway"]
    assert len(bad) == 1 and bad[0]["status"] == 400, recs


def exchange(port, raw, timeout=10):
    """Every byte a request sent raw gets until the connection closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(raw)
        got = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            d = s.recv(65536)
            if not d:
                break
            got += d
        return got
    finally:
        s.close()


@test
def access_log_own_answers_and_first_token(opts):
    """The access log of the gateway's own answers (GET /v1/models; 404 for
    a model, or a path, no pool serves; 400) has their method, path,
    request id and the bytes the client got; a stream's ttft_us is its
    first token's time (300 ms after its head here), not its head's."""
    f = Fleet(opts, 1, mock_args={0: ["--ttft-overhead-ms", "300"]}, start_gateway=False)
    path = os.path.join(f.tmp, "access-own-%d.log" % os.getpid())

    def post(rid, body):
        return ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: %s\r\n"
                "Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (rid, len(body), body)
                ).encode()
    try:
        f.start_gateway(["--access-log", path, "--pool", "a:model=m",
                         "--pool", "a:backend=" + f.addr("b0")], backends=[])
        got = {}
        for rid, method, target in (("models", "GET", "/v1/models"),
                                    ("health", "GET", "/health")):
            got[rid] = exchange(f.port, ("%s %s HTTP/1.1\r\nHost: x\r\nX-Request-Id: %s\r\n"
                                         "Connection: close\r\n\r\n" % (method, target, rid)
                                         ).encode())
        got["nomodel"] = exchange(f.port, post("nomodel", chat([{"role": "user", "content": "x"}],
                                                                 model="zzz")))
        got["stream"] = exchange(f.port, post("stream", chat([{"role": "user", "content": "hi"}],
                                                               model="m", stream=True,
                                                               max_tokens=3)))
        got["bad"] = exchange(f.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                      b"Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
        for rid, status in (("models", 200), ("health", 404), ("nomodel", 404), ("stream", 200),
                            ("bad", 400)):
            assert got[rid].startswith(b"HTTP/1.1 %d " % status), (rid, got[rid][:200])
        assert got["stream"].rstrip().endswith(b"0"), got["stream"][-100:]
        for rid in ("models", "health", "nomodel"):  # each echoes its request's id
            assert b"\r\nX-Request-Id: %s\r\n" % rid.encode() in got[rid], got[rid][:300]
        assert f.idle()
    finally:
        rc = f.stop()
    assert rc == 0
    recs = [json.loads(line) for line in open(path)]
    by_id = {r["request_id"]: r for r in recs if r["request_id"]}
    for rid, method, target in (("models", "GET", "/v1/models"), ("health", "GET", "/health"),
                                ("nomodel", "POST", "/v1/chat/completions")):
        r = by_id.get(rid)
        assert r and r["method"] == method and r["path"] == target, (rid, recs)
        assert r["outcome"] == "gateway" and r["bytes_out"] == len(got[rid]), (rid, r,
                                                                                len(got[rid]))
    bad = [r for r in recs if r["status"] == 400]
    assert len(bad) == 1 and bad[0]["bytes_out"] == len(got["bad"]), (bad, len(got["bad"]))
    r = by_id["stream"]
    assert r["outcome"] == "ok" and r["bytes_out"] == len(got["stream"]), (r, len(got["stream"]))
    assert 250000 <= r["ttft_us"] <= r["duration_us"], r


@test
def request_identity(opts):
    """X-Forwarded-For gets the client appended, X-Request-Id is kept or
    made (unique) and echoed, traceparent reaches the backend untouched."""
    f = Fleet(opts, 2)
    try:
        tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        st, h, _ = f.post("/invocations", "x", {"X-Forwarded-For": "203.0.113.7",
                                                "X-Request-Id": "abc-1", "traceparent": tp})
        assert st == 200, st
        assert h["x-seen-x-forwarded-for"] == "203.0.113.7, 127.0.0.1", h
        assert h["x-seen-x-request-id"] == "abc-1" and h["x-request-id"] == "abc-1", h
        assert h["x-seen-traceparent"] == tp, h
        ids = set()
        for body in ("a", "b", "c"):
            st, h, _ = f.post("/invocations", body)
            assert h["x-seen-x-forwarded-for"] == "127.0.0.1", h
            assert h["x-request-id"] == h["x-seen-x-request-id"], h
            assert re.fullmatch(r"[0-9a-f]{16}-[0-9a-f]{16}", h["x-request-id"]), h
            ids.add(h["x-request-id"])
        assert len(ids) == 3, ids
        # a stream (spliced on the kernel paths) echoes it too
        st, h, _ = f.post("/v1/chat/completions",
                          chat([{"role": "user", "content": "hi"}], stream=True),
                          {"X-Request-Id": "s-1"})
        assert st == 200 and h["x-request-id"] == "s-1", h
        # and so does the gateway's own answer (every backend resets)
        st, h, _ = f.post("/invocations", "x", {"X-Mock-Fail": "reset", "X-Request-Id": "f-1"})
        assert st == 502 and h["x-request-id"] == "f-1", (st, h)
        assert f.idle()
    finally:
        f.stop()


@test
def bpftool_reads_state(opts):
    """bpftool prints the pinned backends map with field names."""
    if opts.mode != "bpf":
        return "SKIP BPF maps are not used in --no-bpf mode"
    f = Fleet(opts, 2)
    try:
        f.post("/invocations", "x")
        p = subprocess.run(["bpftool", "map", "dump", "pinned", f.pin + "/pg_backends"],
                           capture_output=True, text=True, timeout=10)
        assert p.returncode == 0, p.stderr
        for field in ("in_flight", "port", "requests", "flags"):
            assert field in p.stdout, field
        p = subprocess.run(["bpftool", "map", "dump", "pinned", f.pin + "/pg_state"],
                           capture_output=True, text=True, timeout=10)
        assert "ring_generation" in p.stdout and "prefix_length" in p.stdout, p.stdout
        # The maps stay pinned after a clean exit: bpftool reads the last state.
        f.gw.send_signal(signal.SIGTERM)
        assert f.gw.wait(15) == 0, "gateway exit code %s" % f.gw.returncode
        p = subprocess.run(["bpftool", "map", "dump", "pinned", f.pin + "/pg_backends"],
                           capture_output=True, text=True, timeout=10)
        assert p.returncode == 0 and "in_flight" in p.stdout, "pins gone after exit: " + p.stderr
    finally:
        rc = f.stop()
    assert rc == 0, "gateway exit code %s" % rc
    assert not os.path.exists(f.pin), "the harness left the pin dir behind"


def main():
    def add(ap):
        ap.add_argument("--data-path", choices=("auto", "copy", "sockmap", "sockmsg"),
                        help="passed to prefixgate (sockmap/sockmsg need --mode bpf)")

    def setup(opts):
        opts.label = opts.mode + ("/" + opts.data_path if opts.data_path else "")

    return run_suite(TESTS, add_args=add, setup=setup)


if __name__ == "__main__":
    sys.exit(main())
