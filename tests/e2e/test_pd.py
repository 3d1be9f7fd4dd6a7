#!/usr/bin/env python3
"""Prefill/decode disaggregation end to end: mockllm instances in the
prefill and decode roles (--role, --pd-protocol) behind one prefixgate
whose pool has a decode set, streamed and plain chat answers on loopback.

- vLLM's two steps: the answer streams from the decode instance, which
  pulled the KV the prefill instance kept for it; a plain answer too; a
  short prompt goes to the decode instance alone, its body byte-exact, and
  so does a conversation's next turn (the decode instance holds it);
- SGLang's legs at once, a batch of prompts too;
- a prefill instance down: the other, then the decode instance alone;
- a decode instance down: a fresh pair with the other;
- a prefill that answers without kv_transfer_params: 502 saying so;
- stale parameters (the prefill let them expire): the decode instance's
  refusal reaches the client;
- a client that goes during either leg: both legs go, nothing is left;
- with flow control: requests that waited are charged to their tenants as
  any others are; the room a prefill frees is seen at its answer, not at
  the gateway's next tick;
- the dry run (POST /route) names the pair, or the decode instance alone;
- in-flight counts of both sets back to 0 after every test.

usage: test_pd.py --build DIR [--tools DIR] --mode shm|bpf [-k SUBSTRING]
"""
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Fleet, http_get, metric_samples, run_suite, wait_until  # noqa: E402

TESTS = []
GW = ["--health-check-path", "none", "--metrics-scrape-interval", "0"]
# 4 of the mocks' time units a real second: a 2,000-token prompt is ~14 ms of prefill
FAST = ["--time-scale", "4"]


def test(fn):
    TESTS.append(fn)
    return fn


def chat(words, stream=True, max_tokens=4, **more):
    """A prompt of its own (its first word is words'): a decode instance
    holds none of it, so it goes to a pair, not to the decode alone."""
    body = {"model": "m", "max_tokens": max_tokens, "stream": stream,
            "messages": [{"role": "user", "content": "u%d " % words + " ".join(
                "w%d" % (i % 97) for i in range(words))}]}
    body.update(more)
    return json.dumps(body)


def send(f, body, timeout=20):
    """(status, headers, data) of a chat request."""
    return f.request("POST", "/v1/chat/completions", body,
                     {"Content-Type": "application/json"}, timeout=timeout)


def streamed_ok(st, data):
    assert st == 200, (st, data[:300])
    assert data.rstrip().endswith(b"data: [DONE]"), data[-200:]


def side_port(f, name):
    """The side port a prefill mock printed (--kv-port / --bootstrap-port 0)."""
    text = open(os.path.join(f.tmp, "mock-%s.log" % name)).read()
    return int(re.search(r"(?:kv side channel|bootstrap server) on \S+ port (\d+)",
                         text).group(1))


def pd_fleet(opts, proto, prefills=1, decodes=1, prefill_args=(), decode_args=(),
             gw_args=()):
    """prefills p0.. and decodes d0.. mocks in their roles, one gateway whose
    default pool has them as prefill set and decode set."""
    f = Fleet(opts, 0, start_gateway=False)
    try:
        side = ["--kv-port", "0"] if proto == "vllm" else ["--bootstrap-port", "0"]
        for i in range(prefills):
            f.add_mock("p%d" % i, ["--role", "prefill", "--pd-protocol", proto] + side +
                       FAST + list(prefill_args))
        for i in range(decodes):
            f.add_mock("d%d" % i, ["--role", "decode", "--pd-protocol", proto] + FAST +
                       list(decode_args))
        pre = ",".join(f.addr("p%d" % i) + ("@%d" % side_port(f, "p%d" % i)
                                            if proto == "sglang" else "")
                       for i in range(prefills))
        dec = ",".join(f.addr("d%d" % i) for i in range(decodes))
        f.start_gateway(GW + ["--pool", "default:pd=" + proto,
                              "--pool", "default:prefill=" + pre,
                              "--pool", "default:decode=" + dec] + list(gw_args),
                        backends=[])
        return f
    except Exception:
        f.stop_quietly()
        raise


def counters(f):
    s = metric_samples(f.metrics())
    return {k: int(s.get("prefixgate_pd_%s_total" % k, 0))
            for k in ("pairs", "decode_alone", "prefill_failures", "decode_retries")}


def mock_requests(f, name):
    """Chat requests an instance answered (mockllm_requests_total)."""
    s = metric_samples(http_get(f.mocks[name][0], "/metrics")[1].decode())
    return sum(int(v) for k, v in s.items()
               if k.startswith("mockllm_requests_total") and "chat" in k)


def quiet(f):
    assert f.idle(10), "in-flight counts not back to 0: %s" % f.backends()


# flow control, with one prompt's prefill (a few hundred tokens or more)
# filling an instance: the requests after it wait
FLOW = ["--flow-control", "--flow-instance-queue-ms", "1"]


def flow_pool(f):
    st, r = f.admin("GET", "/flow")
    assert st == 200, (st, r)
    return r


def send_all(f, bodies, token=None):
    """Send bodies at once, each from its own client; returns the threads
    and the list of (status, data) they fill."""
    h = {"Content-Type": "application/json"}
    if token:
        h["Authorization"] = "Bearer " + token
    out = []

    def one(b):
        st, _, data = f.request("POST", "/v1/chat/completions", b, h, timeout=30)
        out.append((st, data))

    ts = [threading.Thread(target=one, args=(b,)) for b in bodies]
    for t in ts:
        t.start()
    return ts, out


def joined(ts, out, n):
    for t in ts:
        t.join(60)
    assert len(out) == n and all(st == 200 for st, _ in out), [(st, d[:200]) for st, d in out]


@test
def vllm_pair_streams(opts):
    """Long prompts streamed and plain: each goes to the prefill, then to
    the decode instance with the parameters; the decode pulled the KV."""
    f = pd_fleet(opts, "vllm")
    try:
        for i in range(4):
            st, h, data = send(f, chat(2000 + i))
            streamed_ok(st, data)
        st, h, data = send(f, chat(2100, stream=False))
        assert st == 200 and json.loads(data)["choices"], (st, data[:200])
        c = counters(f)
        assert c["pairs"] == 5 and c["decode_alone"] == 0, c
        d = metric_samples(http_get(f.mocks["d0"][0], "/metrics")[1].decode())
        served = sum(int(v) for k, v in d.items()
                     if k.startswith("mockllm_kv_pulls_total") and "ok" in k)
        assert served == 5, {k: v for k, v in d.items() if "kv" in k}
        quiet(f)
    finally:
        f.stop()


@test
def both_sets_shown_and_joined(opts):
    """GET /pools (and in bpf mode the pinned map pg_pools, as bpftool reads
    it) show the prefill set and its decode set; a decode instance added
    through the admin API (POST /backends, pool default-decode) joins the
    decode set and serves its share of the decode legs."""
    f = pd_fleet(opts, "vllm")
    try:
        st, pools = f.admin("GET", "/pools")
        assert st == 200, pools
        by = {p["name"]: p for p in pools}
        assert by["default"]["pd"] == "vllm" and by["default"]["decode_pool"] == \
            "default-decode", by
        assert by["default-decode"]["decode_of"] == "default", by
        if opts.mode == "bpf":
            out = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", f.pin + "/pg_pools"],
                                 capture_output=True, text=True, timeout=20)
            assert out.returncode == 0, out.stderr
            assert '"default-decode"' in out.stdout, out.stdout[:500]
        f.add_mock("d1", ["--role", "decode", "--pd-protocol", "vllm"] + FAST)
        st, r = f.admin("POST", "/backends", {"address": f.addr("d1"), "pool": "default-decode"})
        assert st == 201, (st, r)
        assert f.backends()[f.addr("d1")]["pool"] == "default-decode", f.backends()
        for i in range(16):
            streamed_ok(*send(f, chat(3000 + 7 * i))[::2])
            if mock_requests(f, "d1"):
                break
        assert mock_requests(f, "d1") >= 1, counters(f)
        quiet(f)
    finally:
        f.stop()


@test
def short_prompt_goes_to_decode_alone(opts):
    """A prompt under pd-min-tokens: the decode instance alone, its body as
    sent (mockllm echoes its length and CRC-32)."""
    f = pd_fleet(opts, "vllm")
    try:
        body = chat(20, stream=False).replace(",", " ,")  # odd whitespace, kept
        st, h, data = send(f, body)
        assert st == 200, (st, data[:200])
        assert int(h["x-body-length"]) == len(body)
        assert int(h["x-body-crc32"], 16) == zlib.crc32(body.encode())
        assert counters(f)["decode_alone"] == 1 and mock_requests(f, "p0") == 0
        quiet(f)
    finally:
        f.stop()


@test
def dry_run_tells_pair_and_decode_alone(opts):
    """POST /route on a prefill/decode pool says what a request would do:
    the decode instance that answers as backend, with the prefill instance
    of a pair, or none when the decode instance goes alone; the requests
    then go so."""
    f = pd_fleet(opts, "vllm")
    try:
        path = "/v1/chat/completions"
        long_, short = chat(2000), chat(20)
        r = f.dry_run(long_, path=path)
        assert r["backend"] == f.addr("d0") and r["pd_route"] == "pair", r
        assert r["prefill"] == f.addr("p0") and r["decode_pool"] == "default-decode", r
        r = f.dry_run(short, path=path)
        assert r["backend"] == f.addr("d0") and r["pd_route"] == "decode_alone", r
        assert r["prefill"] is None, r
        # prefixgatectl route says the same
        for body, want in ((long_, r"^prefill\s+%s \(\w+\), then the decode instance" %
                            re.escape(f.addr("p0"))),
                           (short, r"^prefill\s+none: the decode instance above alone$")):
            out = subprocess.run([os.path.join(opts.tools, "prefixgatectl"), "--admin",
                                  "127.0.0.1:%d" % f.admin_port, "route", "--path", path, "-"],
                                 input=body, capture_output=True, text=True, timeout=20)
            assert out.returncode == 0 and re.search(want, out.stdout, re.M), out
            assert re.search(r"^backend\s+%s " % re.escape(f.addr("d0")), out.stdout, re.M), out
        # and the requests go so
        streamed_ok(*send(f, long_)[::2])
        assert counters(f)["pairs"] == 1, counters(f)
        streamed_ok(*send(f, short)[::2])
        c = counters(f)
        assert c["pairs"] == 1 and c["decode_alone"] == 1, c
        quiet(f)
    finally:
        f.stop()


@test
def next_turn_goes_to_decode_alone(opts):
    """A conversation's next turn, whose history the decode instance holds
    (it pulled its KV): served there alone, nothing left to disaggregate."""
    f = pd_fleet(opts, "vllm")
    try:
        first = json.loads(chat(2000))
        st, h, data = send(f, json.dumps(first))
        streamed_ok(st, data)
        first["messages"] += [{"role": "assistant", "content": "ok"},
                              {"role": "user", "content": "and then?"}]
        st, h, data = send(f, json.dumps(first))
        streamed_ok(st, data)
        c = counters(f)
        assert c["pairs"] == 1 and c["decode_alone"] == 1, c
        quiet(f)
    finally:
        f.stop()


@test
def sglang_pair_and_batch(opts):
    """SGLang: both legs at once, matched by a room; a batch of prompts."""
    f = pd_fleet(opts, "sglang")
    try:
        for i in range(3):
            st, h, data = send(f, chat(2000 + i))
            streamed_ok(st, data)
        body = json.dumps({"model": "m", "max_tokens": 3,
                           "prompt": [" ".join("a%d" % k for k in range(1500 + j))
                                      for j in range(2)]})
        st, h, data = f.request("POST", "/v1/completions", body,
                                {"Content-Type": "application/json"})
        # 200: the instances found a room for each prompt (mockllm refuses
        # arrays of another length than the batch's)
        assert st == 200, (st, data[:300])
        assert counters(f)["pairs"] == 4
        quiet(f)
    finally:
        f.stop()


@test
def prefill_down_then_decode_alone(opts):
    """One of two prefill instances down: the other; both down: the decode
    instance alone. Every request answered."""
    f = pd_fleet(opts, "vllm", prefills=2)
    try:
        f.kill_mock("p0")
        # until a prompt's prefill instance was p0 (its ring slot decides;
        # 16 prompts all on p1: 1 run in 65,000)
        for i in range(16):
            st, h, data = send(f, chat(2000 + i))
            streamed_ok(st, data)
            if counters(f)["prefill_failures"] >= 1:
                break
        assert counters(f)["prefill_failures"] == 1, counters(f)
        f.kill_mock("p1")
        st, h, data = send(f, chat(2500))
        streamed_ok(st, data)
        c = counters(f)
        assert c["prefill_failures"] >= 2 and c["decode_alone"] >= 1, c
        quiet(f)
    finally:
        f.stop()


@test
def decode_down_fresh_pair(opts):
    """One of two decode instances down: its requests go again, with a fresh
    prefill, to the other."""
    f = pd_fleet(opts, "vllm", decodes=2)
    try:
        f.kill_mock("d0")
        # until a prompt's decode instance was d0 (its ring slot decides;
        # 16 prompts all on d1: 1 run in 65,000)
        for i in range(16):
            st, h, data = send(f, chat(2000 + 3 * i))
            streamed_ok(st, data)
            if counters(f)["decode_retries"] >= 1:
                break
        assert counters(f)["decode_retries"] >= 1, counters(f)
        quiet(f)
    finally:
        f.stop()


@test
def prefill_without_params_is_502(opts):
    """A "prefill" instance that is no such thing (a mixed mockllm): its
    answer has no kv_transfer_params; the client is told, nothing hangs."""
    f = Fleet(opts, 0, start_gateway=False)
    try:
        f.add_mock("p0", FAST)
        f.add_mock("d0", ["--role", "decode"] + FAST)
        f.start_gateway(GW + ["--pool", "default:pd=vllm",
                              "--pool", "default:prefill=" + f.addr("p0"),
                              "--pool", "default:decode=" + f.addr("d0")], backends=[])
        st, h, data = send(f, chat(2000))
        assert st == 502 and b"kv_transfer_params" in data, (st, data[:300])
        assert mock_requests(f, "d0") == 0
        quiet(f)
    finally:
        f.stop()


@test
def stale_params_refused(opts):
    """The prefill keeps its blocks 1 model-ms: gone before the decode pulls
    them; the decode instance's refusal reaches the client as it said it."""
    f = pd_fleet(opts, "vllm", prefill_args=["--kv-transfer-ttl-ms", "0.001"])
    try:
        st, h, data = send(f, chat(2000))
        assert st == 400 and b"stale" in data, (st, data[:300])
        quiet(f)
    finally:
        f.stop()


@test
def client_gone_in_either_leg(opts):
    """A client that closes while its prefill runs (a slow prefill instance),
    and one that closes mid-stream of its decode: both legs go."""
    f = pd_fleet(opts, "vllm", prefill_args=["--speed", "0.01"])
    try:
        body = chat(3000).encode()
        s = socket.create_connection(("127.0.0.1", f.port), 5)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                  + body)
        assert wait_until(lambda: f.backends()[f.addr("p0")]["in_flight"] == 1, 5)
        s.close()
        quiet(f)
        assert mock_requests(f, "d0") == 0
    finally:
        f.stop()
    f = pd_fleet(opts, "vllm")
    try:
        c = http.client.HTTPConnection("127.0.0.1", f.port, timeout=10)
        c.request("POST", "/v1/chat/completions", chat(2000, max_tokens=400),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200
        r.readline()  # the first event: decoding
        c.close()
        quiet(f)
    finally:
        f.stop()


@test
def charged_to_their_tenant(opts):
    """Flow control on a prefill/decode pool: tenant A's 6 long prompts and
    then tenant B's 2, held at the one prefill instance (SIGSTOP) until B's
    wait in the gateway behind A's. Every request is answered and both
    tenants were charged the work they were served (GET /flow
    served_work), as any pool's are."""
    f = pd_fleet(opts, "vllm", gw_args=FLOW)
    held = f.mocks["p0"][1]
    try:
        held.send_signal(signal.SIGSTOP)
        ta, oa = send_all(f, [chat(2000 + i, stream=False) for i in range(6)], "sk-tenant-a")
        waited = wait_until(lambda: flow_pool(f)["pools"][0]["queued"] >= 2, 10)
        tb, ob = send_all(f, [chat(2100 + i, stream=False) for i in range(2)], "sk-tenant-b")
        waited = waited and wait_until(
            lambda: flow_pool(f)["pools"][0]["enqueued"] >= 4 and
            sum(t["queued"] for t in flow_pool(f)["tenants"]) >= 3, 10)
        held.send_signal(signal.SIGCONT)
        assert waited, flow_pool(f)
        joined(ta, oa, 6)
        joined(tb, ob, 2)
        fl = flow_pool(f)
        served = {t["tenant"]: t["served_work"] for t in fl["tenants"] if t["tenant"] != "other"}
        # each charged request: its ~2,000 prompt tokens, none cached, and 4 out
        assert len(served) == 2 and all(v >= 2000 for v in served.values()), fl["tenants"]
        assert counters(f)["pairs"] == 8, counters(f)
        quiet(f)
    finally:
        held.send_signal(signal.SIGCONT)
        f.stop()


@test
def freed_room_seen_at_once(opts):
    """Flow control on a prefill/decode pool: 10 long prompts to one fast
    prefill instance, held (SIGSTOP) until 8 of them wait in the gateway,
    so that each then waits for the prefill before it. A prefill's answer
    is its first token, and the next request goes then, in that turn: the
    gap between one request leaving the queue and the next is that prefill,
    a few ms, not the time to the gateway's next tick (100 ms; one worker,
    and non-streamed answers whose decode takes longer, so that nothing else
    wakes the queue sooner)."""
    alog = os.path.join(opts.build, "e2e-tmp", "pd-alog-%d.jsonl" % os.getpid())
    if os.path.exists(alog):
        os.unlink(alog)
    f = pd_fleet(opts, "vllm", prefill_args=["--speed", "10"],
                 gw_args=FLOW + ["--workers", "1", "--access-log", alog])
    held = f.mocks["p0"][1]
    try:
        held.send_signal(signal.SIGSTOP)
        ts, out = send_all(f, [chat(6000 + i, stream=False, max_tokens=40) for i in range(10)])
        waited = wait_until(lambda: flow_pool(f)["pools"][0]["queued"] >= 8, 10)
        held.send_signal(signal.SIGCONT)
        assert waited, flow_pool(f)["pools"][0]
        joined(ts, out, 10)
        quiet(f)
        f.stop()
        f.gw = None
        lines = [json.loads(x) for x in open(alog)]
        assert len(lines) == 10, lines

        def start_us(x):
            hms = x["time"][11:-1].split(":")
            return ((int(hms[0]) * 60 + int(hms[1])) * 60 + float(hms[2])) * 1e6

        # when each left the queue (its start and its wait), in that order
        went = sorted(start_us(x) + x["queue_us"] for x in lines)
        gaps = [b - a for a, b in zip(went[1:], went[2:])]  # from the first to go after the hold
        print("# gaps between requests leaving the queue: %s ms" %
              ", ".join("%.1f" % (g / 1000) for g in gaps))
        assert statistics.median(gaps) < 50000, gaps
    finally:
        held.send_signal(signal.SIGCONT)
        if f.gw:
            f.stop()


if __name__ == "__main__":
    sys.exit(run_suite(TESTS, limit_s=120))
