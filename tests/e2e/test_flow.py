#!/usr/bin/env python3
"""Flow control end to end (--flow-control): mockllm instances behind one
prefixgate, streamed traffic on loopback, tenants by bearer token.

- a noisy tenant floods the fleet; a quiet one's requests, sent meanwhile,
  wait behind at most what is already on the instances, not behind the
  flood; the access log names both tenants by label, never by token; the
  queue is visible in /metrics, GET /flow, prefixgatectl status and (bpf
  mode) the pinned map pg_flow, read with bpftool;
- a critical request is not held behind a sheddable flood;
- a client that disconnects while queued leaves the queue, and no instance
  ever sees its request;
- a deadline that expires in the queue: 429 with Retry-After and an
  OpenAI-style error, nothing sent on;
- bad tenant, priority and deadline headers: 400, nothing queued;
- a 429 answered while the body was still arriving: on a kept-alive
  connection its body (Content-Length or chunked) is dropped and the next
  request served;
- in-flight counts and the queue back to 0 after every test.

usage: test_flow.py --build DIR [--tools DIR] --mode shm|bpf [-k SUBSTRING]
"""
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Fleet, read_reply, run_suite, wait_until  # noqa: E402

TESTS = []
# 2 instances at the default speed (36,600 prefill tokens/s, 61.5 ms before
# each first token): a 9,000-token prompt is ~250 ms of prefill
GW = ["--strategy", "cache_aware", "--flow-control", "--health-check-path", "none",
      "--metrics-scrape-interval", "0"]
FLOOD_WORDS = 6000  # ~9,000 tokens
SMALL_WORDS = 600


def test(fn):
    TESTS.append(fn)
    return fn


def words(rng, n):
    vocab = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    return " ".join(rng.choice(vocab) for _ in range(n))


def chat(rng, n):
    return json.dumps({"model": "m", "max_tokens": 2, "stream": True,
                       "messages": [{"role": "user", "content": words(rng, n)}]})


def send(f, body, token=None, extra=None):
    """(status, headers, body, seconds to its first token) of one request:
    the first token is the first event of a streamed 200."""
    h = {"Content-Type": "application/json"}
    if token:
        h["Authorization"] = "Bearer " + token
    h.update(extra or {})
    c = http.client.HTTPConnection("127.0.0.1", f.port, timeout=30)
    try:
        t0 = time.monotonic()
        c.request("POST", "/v1/chat/completions", body=body.encode(), headers=h)
        r = c.getresponse()
        first = r.readline() if r.status == 200 else b""
        ttft = time.monotonic() - t0
        data = first + r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data, ttft
    finally:
        c.close()


def flood(f, n, token, seed, threads=8, extra=None):
    """n long prompts from `threads` clients of tenant `token`; returns the
    threads, the latencies list and the errors list (filled as they end)."""
    rng = random.Random(seed)
    bodies = [chat(random.Random(rng.random()), FLOOD_WORDS) for _ in range(n)]
    lat, errs = [], []

    def worker(part):
        for b in part:
            try:
                st, _, data, s = send(f, b, token, extra)
                if st != 200:
                    errs.append("status %s: %r" % (st, data[:200]))
                lat.append(s)
            except Exception as e:  # noqa: BLE001 - reported by the caller
                errs.append(repr(e))

    ts = [threading.Thread(target=worker, args=(bodies[i::threads],)) for i in range(threads)]
    for t in ts:
        t.start()
    return ts, lat, errs


def join(ts, errs):
    for t in ts:
        t.join(90)
    assert not errs, errs[:3]


def flow(f):
    st, r = f.admin("GET", "/flow")
    assert st == 200, (st, r)
    return r


def pool0(f):
    return flow(f)["pools"][0]


def dispatched_total(f):
    return sum(b["requests"] for b in f.backends().values())


def queued_up(f, n=1):
    assert wait_until(lambda: pool0(f)["queued"] >= n, 10), "nothing waited: %s" % pool0(f)


def quiet(f):
    """In-flight counts and the queue back to 0."""
    assert f.idle(10), "in-flight counts not back to 0"
    assert wait_until(lambda: pool0(f)["queued"] == 0 and pool0(f)["queued_bytes"] == 0, 5), \
        pool0(f)


@test
def noisy_tenant_does_not_hold_the_quiet_one(opts):
    """Tenant A floods 2 instances with 48 long prompts from 12 clients; tenant
    B's 4 short requests, sent one after another meanwhile, each wait at most
    for an instance's current work, far less than A's own requests wait."""
    alog = os.path.join(opts.build, "e2e-tmp", "flow-alog-%d.jsonl" % os.getpid())
    if os.path.exists(alog):
        os.unlink(alog)
    f = Fleet(opts, 2, gw_args=GW + ["--access-log", alog])
    try:
        ts, a_lat, errs = flood(f, 48, "sk-tenant-a-secret", 1, threads=12)
        queued_up(f, 4)
        rng = random.Random(2)
        b_lat = []
        for _ in range(4):
            st, _, data, s = send(f, chat(rng, SMALL_WORDS), "sk-tenant-b-secret")
            assert st == 200, (st, data[:200])
            b_lat.append(s)
        join(ts, errs)
        a_med = statistics.median(a_lat)
        print("# tenant B: %s s; tenant A: median %.2f s" % (
            ", ".join("%.2f" % x for x in b_lat), a_med))
        assert max(b_lat) < 1.2, "tenant B waited %s s (A's median %.2f s)" % (b_lat, a_med)
        assert max(b_lat) < a_med, "tenant B %s s, A's median %.2f s" % (b_lat, a_med)
        quiet(f)
        p = pool0(f)
        assert p["enqueued"] >= 4 and p["dispatched"] == p["enqueued"], p
        tenants = {t["tenant"]: t for t in flow(f)["tenants"]}
        labels = [t for t in tenants if t.startswith("t-")]
        assert len(labels) == 2, tenants
        assert all(tenants[t]["queued"] == 0 for t in tenants), tenants
        m = f.metrics()
        for fam in ("prefixgate_flow_queued{", "prefixgate_flow_wait_seconds_bucket{",
                    "prefixgate_flow_tenant_wait_seconds_count{tenant=\"%s\"}" % labels[0],
                    "prefixgate_flow_left_total{outcome=\"dispatched\"}"):
            assert fam in m, fam
        assert "sk-tenant" not in m
        # the access log: tenants by label and how long each waited; no token
        f.stop()
        f.gw = None
        lines = [json.loads(x) for x in open(alog)]
        assert len(lines) == 52, len(lines)
        assert {x.get("tenant") for x in lines} == set(labels), {x.get("tenant") for x in lines}
        assert any(x["queue_us"] > 0 for x in lines)
        assert "sk-tenant" not in open(alog).read()
    finally:
        if f.gw:
            f.stop()


@test
def status_and_pinned_map_show_the_queue(opts):
    """prefixgatectl status prints the queue line; in bpf mode bpftool reads
    the pinned map pg_flow."""
    f = Fleet(opts, 2, gw_args=GW)
    try:
        ts, _, errs = flood(f, 16, "sk-a", 3)
        queued_up(f, 2)
        join(ts, errs)
        quiet(f)
        ctl = os.path.join(opts.build, "prefixgatectl")
        if not os.path.exists(ctl):
            ctl = os.path.join(opts.tools, "prefixgatectl")
        args = [ctl, "--admin", "127.0.0.1:%d" % f.admin_port]
        if opts.mode == "bpf":
            args += ["--pin-path", f.pin]
        out = subprocess.run(args + ["status"], capture_output=True, timeout=10).stdout.decode()
        assert "queue      0 waiting" in out, out
        js = json.loads(subprocess.run(args + ["--json", "status"], capture_output=True,
                                       timeout=10).stdout)
        assert js["queue"]["InstanceQueueMs"] == "auto" and js["queue"]["enqueued"] >= 2, js
        if opts.mode == "bpf":
            p = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", f.pin + "/pg_flow"],
                               capture_output=True, timeout=10)
            assert p.returncode == 0, p.stderr
            v = json.loads(p.stdout)[0]
            v = v.get("formatted", v)["value"]
            assert v["queued"] == 0 and v["enqueued"] >= 2 and \
                v["dispatched"] == v["enqueued"], v
    finally:
        f.stop()


@test
def critical_passes_a_sheddable_flood(opts):
    """A sheddable flood from 12 clients; 3 critical requests meanwhile each
    go before every sheddable one waiting."""
    f = Fleet(opts, 2, gw_args=GW)
    try:
        ts, s_lat, errs = flood(f, 48, "sk-batch", 4, threads=12,
                                extra={"X-Prefixgate-Priority": "sheddable"})
        queued_up(f, 4)
        rng = random.Random(5)
        c_lat = []
        for _ in range(3):
            st, _, data, s = send(f, chat(rng, SMALL_WORDS), "sk-chat",
                                  {"X-Prefixgate-Priority": "critical"})
            assert st == 200, (st, data[:200])
            c_lat.append(s)
        join(ts, errs)
        print("# critical: %s s; sheddable: median %.2f s" % (
            ", ".join("%.2f" % x for x in c_lat), statistics.median(s_lat)))
        assert max(c_lat) < 1.2 and max(c_lat) < statistics.median(s_lat), (
            c_lat, statistics.median(s_lat))
        quiet(f)
    finally:
        f.stop()


@test
def client_gone_while_queued(opts):
    """A request queued behind a flood whose client then disconnects leaves
    the queue at once; no instance ever gets it."""
    f = Fleet(opts, 2, gw_args=GW)
    try:
        ts, _, errs = flood(f, 16, "sk-a", 6)
        queued_up(f, 2)
        before = pool0(f)
        body = chat(random.Random(7), SMALL_WORDS).encode()
        s = socket.create_connection(("127.0.0.1", f.port), 5)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                  + body)
        assert wait_until(lambda: pool0(f)["enqueued"] > before["enqueued"], 5)
        s.close()
        assert wait_until(lambda: pool0(f)["gone"] == before["gone"] + 1, 5), pool0(f)
        join(ts, errs)
        quiet(f)
        assert dispatched_total(f) == 16, f.backends()
    finally:
        f.stop()


@test
def deadline_expires_in_the_queue(opts):
    """A request with a 150 ms deadline behind a flood: 429 with Retry-After
    and an OpenAI-style error, in about its deadline; never sent on. The
    access log has the bytes of the 429 the client got."""
    f = Fleet(opts, 2, start_gateway=False)
    log = os.path.join(f.tmp, "access-429-%d.log" % os.getpid())
    try:
        f.start_gateway(GW + ["--access-log", log])
        ts, _, errs = flood(f, 16, "sk-a", 8)
        queued_up(f, 4)
        st, h, data, s = send(f, chat(random.Random(9), SMALL_WORDS), "sk-b",
                              {"X-Prefixgate-Deadline-Ms": "150"})
        assert st == 429, (st, data[:200])
        assert int(h["retry-after"]) >= 1, h
        err = json.loads(data)["error"]
        assert err["code"] == "deadline_exceeded" and err["type"] == "rate_limit_exceeded", err
        assert s < 1.0, "answered after %.2f s" % s
        join(ts, errs)
        quiet(f)
        p = pool0(f)
        assert p["expired"] + p["late"] == 1, p
        assert dispatched_total(f) == 16, f.backends()
    finally:
        f.stop()
    # its status line, fields, blank line and body, as the client got them
    sent = len("HTTP/1.1 429 Too Many Requests\r\n") + \
        sum(len(k) + len(v) + 4 for k, v in h.items()) + 2 + len(data)
    recs = [json.loads(line) for line in open(log)]
    r = [x for x in recs if x["status"] == 429]
    assert len(r) == 1 and r[0]["bytes_out"] == sent, (r, sent)


@test
def bad_headers_are_400(opts):
    """Bad priority, deadline and tenant headers: 400 saying which, nothing
    queued, nothing sent on."""
    f = Fleet(opts, 2, gw_args=GW)
    try:
        body = chat(random.Random(10), 50)
        for extra, says in (({"X-Prefixgate-Priority": "urgent"}, "X-Prefixgate-Priority"),
                            ({"X-Prefixgate-Deadline-Ms": "soon"}, "X-Prefixgate-Deadline-Ms"),
                            ({"X-Prefixgate-Deadline-Ms": "0"}, "X-Prefixgate-Deadline-Ms"),
                            ({"Authorization": "Basic dXNlcjpwYXNz"}, "Authorization")):
            st, _, data, _ = send(f, body, None, extra)
            assert st == 400 and says in data.decode(), (extra, st, data)
        assert pool0(f)["enqueued"] == 0 and dispatched_total(f) == 0
        st, _, data, _ = send(f, body, "sk-ok", {"X-Prefixgate-Priority": "Critical",
                                                 "X-Prefixgate-Deadline-Ms": "60000"})
        assert st == 200, (st, data[:200])
        quiet(f)
    finally:
        f.stop()


def refused_then_served(s, nxt):
    """On connection s, a 429 that keeps it open, then nxt (a chat body)
    answered 200 on it; that answer."""
    r = read_reply(s)
    assert r and r[0] == 429, r
    assert "close" not in r[1].get("connection", ""), r[1]
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
              % len(nxt) + nxt)
    r = read_reply(s)
    assert r and r[0] == 200, r
    return r


@test
def refused_while_the_body_arrives(opts):
    """A 1 ms deadline, its body sent in pieces after its head (not with it):
    429 when the body is in, the connection kept, the next request on it
    answered 200 (before: the body was read as a request, 400); the same
    for a chunked body (its decoded bytes dropped with it)."""
    f = Fleet(opts, 2, gw_args=GW)
    try:
        body = json.dumps({"model": "m", "max_tokens": 2, "stream": False, "messages": [
            {"role": "user", "content": words(random.Random(11), 700)}]}).encode()
        assert len(body) > 4096, len(body)
        nxt = json.dumps({"model": "m", "max_tokens": 2, "stream": False, "messages": [
            {"role": "user", "content": "hello"}]}).encode()
        head = ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                "Content-Type: application/json\r\nX-Prefixgate-Deadline-Ms: 1\r\n")
        with socket.create_connection(("127.0.0.1", f.port), timeout=10) as s:
            s.sendall((head + "Content-Length: %d\r\n\r\n" % len(body)).encode())
            time.sleep(0.05)
            s.sendall(body[:300])
            time.sleep(0.05)
            s.sendall(body[300:])
            r = refused_then_served(s, nxt)
            assert json.loads(r[2])["choices"], r
        with socket.create_connection(("127.0.0.1", f.port), timeout=10) as s:
            s.sendall((head + "Transfer-Encoding: chunked\r\n\r\n").encode())
            time.sleep(0.05)
            s.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
            refused_then_served(s, nxt)
        assert pool0(f)["expired"] == 2, pool0(f)
        quiet(f)
    finally:
        f.stop()


if __name__ == "__main__":
    sys.exit(run_suite(TESTS, limit_s=150))
