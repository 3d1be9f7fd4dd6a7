#!/usr/bin/env python3
"""mockllm as a prefill/decode pair, without the gateway: a client drives
vLLM's two steps by hand (the prefill leg, its kv_transfer_params copied
into the decode leg, which streams) and SGLang's both-at-once flow
(bootstrap fields, rooms), and every refusal a router's mistake should
meet: stale, unknown, twice-pulled, another engine's or another prompt's
parameters, a wrong field, a room that never gets its KV. Also the
chunked-prefill interference of a mixed instance against a decode
instance's smooth steps. Real processes on loopback; TAP output; every wait
is bounded.

usage: test_mockllm_pd.py --build DIR [-k SUBSTRING]
"""
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import http_get, metric_family, metric_samples, run_suite, wait_until  # noqa: E402

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


class Mock:
    """One mockllm on loopback: .port, and .side (a prefill's side port)."""

    def __init__(self, opts, name, args=()):
        self.log = "/tmp/mockllm-pd-%d-%s.log" % (os.getpid(), name)
        with open(self.log, "w") as log:
            self.p = subprocess.Popen([os.path.join(opts.tools, "mockllm"), "--listen",
                                       "127.0.0.1:0", "--id", name] + list(args),
                                      stdout=log, stderr=subprocess.STDOUT)
        m = wait_until(lambda: re.search(r"listening on \S+ port (\d+)", self.text()), 5)
        if not m:
            self.stop()
            raise RuntimeError("mockllm %s did not start: %s" % (name, self.text()))
        self.port = int(m.group(1))
        s = re.search(r"(?:kv side channel|bootstrap server) on \S+ port (\d+)", self.text())
        self.side = int(s.group(1)) if s else None

    def text(self):
        with open(self.log) as f:
            return f.read()

    def metrics(self):
        return http_get(self.port, "/metrics")[1].decode()

    def stop(self):
        """Stop it; what a sanitizer reported in its log, if anything."""
        self.p.kill()
        self.p.wait(5)
        text = self.text()
        os.unlink(self.log)
        m = re.search(r"(ERROR: \w+Sanitizer|runtime error).*", text)
        return m and m.group(0)


def with_mocks(*specs):
    """Run the test with mocks started from (name, args) specs, stopped after."""
    def wrap(fn):
        def run(opts):
            mocks = []
            try:
                for name, args in specs:
                    mocks.append(Mock(opts, name, args))
                return fn(opts, *mocks)
            finally:
                reports = [r for r in (m.stop() for m in mocks) if r]
                assert not reports, reports
        run.__name__ = fn.__name__
        return run
    return wrap


def post(port, body, headers=None, timeout=10):
    """(status, parsed JSON or the raw bytes) of a non-streamed POST."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", "/v1/chat/completions", json.dumps(body),
              dict({"Content-Type": "application/json"}, **(headers or {})))
    r = c.getresponse()
    data = r.read()
    c.close()
    try:
        return r.status, json.loads(data)
    except ValueError:
        return r.status, data


def stream(port, body, headers=None, timeout=20, out=None):
    """(status, [time of each content event], the parsed events) of a
    streamed POST, times from the request; an error answer's JSON as the
    events. out: a dict that gets 'first' (monotonic time of the first
    content event) as soon as it is read."""
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", "/v1/chat/completions", json.dumps(body),
              dict({"Content-Type": "application/json"}, **(headers or {})))
    r = c.getresponse()
    if r.status != 200:
        data = r.read()
        c.close()
        return r.status, [], json.loads(data)
    times, events, done = [], [], False
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        if line == b"data: [DONE]":
            done = True
            break
        ev = json.loads(line[6:])
        events.append(ev)
        if ev["choices"] and ev["choices"][0]["delta"].get("content"):
            times.append(time.monotonic() - t0)
            if out is not None and "first" not in out:
                out["first"] = time.monotonic()
    c.close()
    assert done, "the stream ended without [DONE]"
    return 200, times, events


def chat(text, n=8, **kw):
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": n,
            "stream": True, "stream_options": {"include_usage": True}}
    body.update(kw)
    return body


def prefill_leg(req):
    """The prefill leg a vLLM router makes of req (PEERS.md)."""
    p = dict(req, max_tokens=1, stream=False,
             kv_transfer_params={"do_remote_decode": True, "do_remote_prefill": False,
                                 "remote_engine_id": None, "remote_block_ids": None,
                                 "remote_host": None, "remote_port": None})
    p.pop("stream_options", None)
    return p


def full_blocks(text):
    """Full 16-token blocks of a one-message chat prompt (mockllm's
    rendering: "<|user|>\\n" text "\\n<|assistant|>\\n", 4 bytes a token)."""
    tokens = (len("<|user|>\n") + len(text) + len("\n<|assistant|>\n") + 3) // 4
    return (tokens - 1) // 16


def error_of(status, body, want_status, want_text):
    assert status == want_status, (status, body)
    assert body["object"] == "error" and body["code"] == want_status, body
    assert want_text in body["message"], body["message"]


def vllm_params(prefill, req, rid=None):
    status, ans = post(prefill.port, prefill_leg(req), {"X-Request-Id": rid} if rid else None)
    assert status == 200, (status, ans)
    return ans["kv_transfer_params"]


# --- vLLM ---------------------------------------------------------------------

@test
@with_mocks(("P", ["--role", "prefill"]), ("D", ["--role", "decode"]), ("M", []))
def vllm_two_steps_stream(opts, p, d, mixed):
    """The prefill leg answers one token and transfer parameters naming its
    engine, side port and the prompt's blocks; the decode leg pulls them and
    streams, its first token without the prefill a mixed instance needs."""
    text = "".join("word%05d " % i for i in range(3200))  # ~8,000 tokens
    req = chat(text, 12)
    status, ans = post(p.port, prefill_leg(req), {"X-Request-Id": "pair-1"})
    assert status == 200, ans
    assert ans["usage"]["completion_tokens"] == 1, ans["usage"]
    kv = ans["kv_transfer_params"]
    info = metric_family(p.metrics(), "mockllm_pd_info")
    assert len(info) == 1 and 'role="prefill"' in next(iter(info)), info
    engine = re.search(r'engine_id="([^"]+)"', next(iter(info))).group(1)
    n = full_blocks(text)
    assert kv["do_remote_prefill"] is True and kv["do_remote_decode"] is False, kv
    assert kv["remote_engine_id"] == engine and kv["tp_size"] == 1, kv
    assert kv["remote_host"] == "127.0.0.1" and kv["remote_port"] == p.side, kv
    assert kv["remote_block_ids"] == list(range(1, n + 1)), kv["remote_block_ids"][:5]
    assert metric_samples(p.metrics())["mockllm_kv_transfers_pinned"] == 1

    status, times, events = stream(d.port, dict(req, kv_transfer_params=kv),
                                   {"X-Request-Id": "pair-1"})
    assert status == 200 and len(times) == 12, (status, len(times))
    usage = events[-1]["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == n * 16, usage
    # the same prompt on a mixed instance prefills all of it (~218 ms more)
    _, mtimes, _ = stream(mixed.port, req)
    assert times[0] < mtimes[0] - 0.1, (times[0], mtimes[0])

    ps, ds = metric_samples(p.metrics()), metric_samples(d.metrics())
    assert ps["mockllm_kv_pulls_served_total"] == 1, ps
    assert ps["mockllm_kv_transfers_pinned"] == 0 and ps["mockllm_kv_blocks_pinned"] == 0
    assert ds['mockllm_kv_pulls_total{result="ok"}'] == 1, ds
    assert ds["mockllm_kv_received_tokens_total"] == n * 16, ds
    assert ds['vllm:external_prefix_cache_hits_total{model_name="mockllm"}'] == n * 16, ds
    assert ds['vllm:prefix_cache_hits_total{model_name="mockllm"}'] == 0, ds

    # the next turn's decode leg pulls only what the decode lacks
    req2 = chat(text + " and more" * 100, 4)
    kv2 = vllm_params(p, req2)
    status, times, events = stream(d.port, dict(req2, kv_transfer_params=kv2))
    assert status == 200 and len(times) == 4, status
    n2 = full_blocks(text + " and more" * 100)
    fresh = metric_samples(d.metrics())["mockllm_kv_received_tokens_total"] - n * 16
    assert 0 < fresh < (n2 - n + 2) * 16, (fresh, n, n2)


@test
@with_mocks(("P", ["--role", "prefill", "--kv-transfer-ttl-ms", "400"]),
            ("D", ["--role", "decode"]), ("P2", ["--role", "prefill"]))
def vllm_refusals(opts, p, d, p2):
    """Parameters pulled twice, stale, unknown, of another engine or another
    prompt, or another X-Request-Id: refused with a 400 naming why."""
    req = chat("a" * 3000, 4)
    kv = vllm_params(p, req)
    assert stream(d.port, dict(req, kv_transfer_params=kv))[0] == 200
    status, _, body = stream(d.port, dict(req, kv_transfer_params=kv))
    error_of(status, body, 400, "refused the pull (pulled): blocks 1-")

    unknown = dict(kv, remote_block_ids=[10 ** 6 + i for i in kv["remote_block_ids"]])
    status, _, body = stream(d.port, dict(req, kv_transfer_params=unknown))
    error_of(status, body, 400, "(unknown): block 1000")

    kv = vllm_params(p, req)
    status, _, body = stream(d.port, dict(req, kv_transfer_params=dict(kv, remote_engine_id="x")))
    error_of(status, body, 400, "(engine): remote_engine_id x is not this instance's")
    short = dict(kv, remote_block_ids=kv["remote_block_ids"][:-1])
    status, _, body = stream(d.port, dict(req, kv_transfer_params=short))
    error_of(status, body, 400, "remote_block_ids names")
    # another prompt of as many blocks: the pull happens, the KV is not its
    status, _, body = stream(d.port, dict(chat("b" * 3000, 4), kv_transfer_params=kv))
    error_of(status, body, 400, "is another prompt's")
    # another engine's parameters sent to this prefill's side port
    kv2 = vllm_params(p2, req)
    status, _, body = stream(d.port, dict(req, kv_transfer_params=dict(kv2, remote_port=p.side)))
    error_of(status, body, 400, "(engine)")

    kv = vllm_params(p, req, "rid-1")
    status, _, body = stream(d.port, dict(req, kv_transfer_params=kv), {"X-Request-Id": "rid-2"})
    error_of(status, body, 400, "(request_id)")
    time.sleep(0.6)  # past the 400 ms TTL
    status, _, body = stream(d.port, dict(req, kv_transfer_params=kv), {"X-Request-Id": "rid-1"})
    error_of(status, body, 400, "(stale): blocks")
    assert "--kv-transfer-ttl-ms" in body["message"]

    ps = metric_samples(p.metrics())
    for reason, n in (("pulled", 1), ("unknown", 1), ("engine", 2), ("request_id", 1),
                      ("stale", 1)):
        assert ps['mockllm_kv_pulls_refused_total{reason="%s"}' % reason] == n, (reason, ps)
    assert ps["mockllm_kv_transfers_expired_total"] == 1 and ps["mockllm_kv_transfers_pinned"] == 0
    ds = metric_samples(d.metrics())
    assert ds['mockllm_kv_pulls_total{result="refused"}'] == 8, ds


@test
@with_mocks(("P", ["--role", "prefill"]), ("D", ["--role", "decode"]),
            ("R", ["--role", "decode", "--kv-load-failure-policy", "recompute"]))
def vllm_wrong_legs(opts, p, d, r):
    """A leg with a wrong field, on the wrong role, or of the other
    protocol: a 400 naming it. Plain requests are served on both roles. A
    pull that fails: 500, or with recompute the decode prefills itself."""
    req = chat("c" * 2000, 3)
    status, body = post(p.port, dict(prefill_leg(req), stream=True))
    error_of(status, body, 400, "\"stream\": false")
    status, body = post(p.port, dict(prefill_leg(req), max_completion_tokens=50))
    error_of(status, body, 400, "\"max_completion_tokens\": 1, not 50")
    status, body = post(p.port, dict(prefill_leg(req), stream_options={"include_usage": True}))
    error_of(status, body, 400, "Stream options can only be defined when `stream=True`.")
    status, body = post(d.port, prefill_leg(req))
    error_of(status, body, 400, "this is a decode instance")
    kv = vllm_params(p, req)
    status, body = post(p.port, dict(req, stream=False, kv_transfer_params=kv))
    error_of(status, body, 400, "this is a prefill instance")
    status, _, body = stream(d.port, dict(req, kv_transfer_params=dict(kv, remote_port="x")))
    error_of(status, body, 400, "remote_port")
    status, _, body = stream(d.port, dict(req, bootstrap_host="127.0.0.1", bootstrap_port=1,
                                          bootstrap_room=5))
    error_of(status, body, 400, "speaks --pd-protocol vllm")
    # plain requests: served as a mixed instance serves them
    for m in (p, d):
        status, times, _ = stream(m.port, req)
        assert status == 200 and len(times) == 3
    # the side port is gone: 500; with recompute, served
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    status, _, body = stream(d.port, dict(req, kv_transfer_params=dict(kv, remote_port=dead)))
    error_of(status, body, 500, "pulling the KV from 127.0.0.1 port %d failed" % dead)
    assert body["type"] == "InternalServerError", body
    status, times, events = stream(r.port, dict(req, kv_transfer_params=dict(kv, remote_port=dead)))
    assert status == 200 and len(times) == 3
    assert metric_samples(r.metrics())['mockllm_kv_pulls_total{result="failed"}'] == 1


# --- SGLang -------------------------------------------------------------------

def sglang_body(req, prefill, room):
    return dict(req, bootstrap_host="127.0.0.1", bootstrap_port=prefill.side, bootstrap_room=room)


@test
@with_mocks(("P", ["--role", "prefill", "--pd-protocol", "sglang"]),
            ("D", ["--role", "decode", "--pd-protocol", "sglang"]))
def sglang_both_at_once(opts, p, d):
    """The same body to both at once: the decode streams, the prefill answers
    one token; either may come first."""
    text = "".join("tok%04d " % i for i in range(800))
    req = chat(text, 6)
    for k, (first, delay) in enumerate((("both", 0), ("decode", 0.3), ("prefill", 0.3))):
        body = sglang_body(req, p, 7 * 10 ** 17 + k)
        res = {}

        def to_prefill():
            if first == "decode":
                time.sleep(delay)
            res["p"] = stream(p.port, body)

        t = threading.Thread(target=to_prefill)
        t.start()
        if first == "prefill":
            time.sleep(delay)
        status, times, events = stream(d.port, body)
        t.join(10)
        assert status == 200 and len(times) == 6, (first, status, events)
        assert events[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == \
            full_blocks(text) * 16
        pstatus, ptimes, pevents = res["p"]
        assert pstatus == 200 and len(ptimes) == 1, pevents
        assert pevents[-1]["usage"]["completion_tokens"] == 1, pevents
    ps = metric_samples(p.metrics())
    assert ps['mockllm_bootstrap_rooms_total{result="matched"}'] == 3, ps
    assert ps['mockllm_bootstrap_rooms_pending{state="held"}'] == 0
    ds = metric_samples(d.metrics())
    assert ds['mockllm_bootstrap_waits_total{result="ok"}'] == 3, ds

    # a batch: one room per prompt
    body = {"model": "m", "prompt": ["x" * 300, "y" * 300], "max_tokens": 2,
            "bootstrap_host": ["127.0.0.1"] * 2, "bootstrap_port": [p.side] * 2,
            "bootstrap_room": [11, 12]}
    res = {}
    t = threading.Thread(target=lambda: res.update(p=post_path(p.port, body)))
    t.start()
    status, ans = post_path(d.port, body)
    t.join(10)
    assert status == 200 and res["p"][0] == 200, (ans, res)
    assert metric_samples(p.metrics())['mockllm_bootstrap_rooms_total{result="matched"}'] == 5


def post_path(port, body, path="/v1/completions"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data)


@test
@with_mocks(("P", ["--role", "prefill", "--pd-protocol", "sglang", "--kv-transfer-ttl-ms",
                   "1000"]),
            ("D", ["--role", "decode", "--pd-protocol", "sglang", "--kv-wait-timeout-ms",
                   "400"]))
def sglang_rooms_refused(opts, p, d):
    """A room that never gets its KV times out (500); KV nobody came for is
    dropped, and its late decode told (400); a reused room, a wrong port or a
    missing field: 400. A client that leaves during the wait frees it."""
    req = chat("d" * 1500, 2)
    status, _, body = stream(d.port, sglang_body(req, p, 41))
    error_of(status, body, 500, "bootstrap_room 41: no KV from the prefill at 127.0.0.1")
    assert "--kv-wait-timeout-ms" in body["message"]

    assert post(p.port, sglang_body(req, p, 42))[0] == 200  # nobody comes
    time.sleep(1.2)
    status, _, body = stream(d.port, sglang_body(req, p, 42))
    error_of(status, body, 400, "bootstrap_room 42: the prefill at 127.0.0.1 port %d refused "
             "it (expired)" % p.side)

    res = {}
    t = threading.Thread(target=lambda: res.update(d=stream(d.port, sglang_body(req, p, 43))))
    t.start()
    assert post(p.port, sglang_body(req, p, 43))[0] == 200
    t.join(10)
    assert res["d"][0] == 200
    status, _, body = stream(d.port, sglang_body(req, p, 43))
    error_of(status, body, 400, "refused it (done)")

    status, body = post(p.port, dict(sglang_body(req, p, 44), bootstrap_port=p.side + 1))
    error_of(status, body, 400, "is not this prefill's (%d)" % p.side)
    status, body = post(d.port, dict(req, stream=False, bootstrap_host="127.0.0.1",
                                     bootstrap_room=44))
    error_of(status, body, 400, "bootstrap_port missing")
    status, body = post(d.port, dict(req, stream=False, kv_transfer_params={
        "do_remote_decode": True}))
    error_of(status, body, 400, "speaks --pd-protocol sglang")

    # a client that leaves while its decode waits: the wait ends with it
    s = socket.create_connection(("127.0.0.1", d.port), 5)
    payload = json.dumps(sglang_body(req, p, 45)).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
              b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
    waiting = 'vllm:num_requests_waiting{model_name="mockllm"}'
    assert wait_until(lambda: metric_samples(d.metrics())[waiting] == 1, 2)
    s.close()
    assert wait_until(lambda: metric_samples(d.metrics())[waiting] == 0, 2)
    assert wait_until(lambda: metric_samples(p.metrics())[
        'mockllm_bootstrap_rooms_pending{state="waiting"}'] == 0, 2)
    ds = metric_samples(d.metrics())
    assert ds['mockllm_bootstrap_waits_total{result="timed_out"}'] == 1, ds
    assert ds['mockllm_bootstrap_waits_total{result="refused"}'] == 2, ds
    ps = metric_samples(p.metrics())
    assert ps['mockllm_bootstrap_rooms_total{result="timed_out"}'] == 1, ps


# --- interference ---------------------------------------------------------------

def max_gap_beside_prefill(port, long_req):
    """The largest gap between the content events of a stream while
    long_req (sent once the stream has started) is prefilled beside it."""
    out, res = {}, {}
    t = threading.Thread(target=lambda: res.update(s=stream(port, chat("e" * 400, 40),
                                                            out=out)))
    t.start()
    assert wait_until(lambda: "first" in out, 5)
    long_req()
    t.join(20)
    status, times, _ = res["s"]
    assert status == 200 and len(times) == 40
    return max(b - a for a, b in zip(times, times[1:]))


@test
@with_mocks(("M", ["--interference"]), ("Q", []),
            ("P", ["--role", "prefill"]), ("D", ["--role", "decode", "--interference"]))
def interference(opts, mixed, quiet, p, d):
    """With --interference a long prefill beside a stream makes its steps
    2047 tokens longer (+56 ms on 25 ms); without, or on a decode instance
    whose prompt was prefilled elsewhere, the steps stay near 25 ms."""
    big = chat("".join("long%05d " % i for i in range(12000)), 1)  # ~30,000 tokens
    gap_mixed = max_gap_beside_prefill(mixed.port, lambda: post(mixed.port, dict(big,
                                                                                 stream=False)))
    gap_quiet = max_gap_beside_prefill(quiet.port, lambda: post(quiet.port, dict(big,
                                                                                 stream=False)))
    kv = vllm_params(p, big)
    gap_decode = max_gap_beside_prefill(d.port, lambda: stream(d.port, dict(
        big, kv_transfer_params=kv)))
    assert gap_mixed > 0.070, gap_mixed
    assert gap_quiet < 0.060 and gap_decode < 0.060, (gap_quiet, gap_decode)
    assert 'interference="on",max_num_batched_tokens="2048"' in mixed.metrics()


@test
def command_line(opts):
    """Flags that do not go together exit 2 naming the problem."""
    exe = os.path.join(opts.tools, "mockllm")
    r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=5)
    assert r.returncode == 0 and "--role mixed|prefill|decode" in r.stdout, r
    for args, want in [(["--role", "both"], "want mixed or prefill or decode"),
                       (["--pd-protocol", "sglang"], "needs --role prefill or --role decode"),
                       (["--role", "decode", "--kv-port", "1"], "only a prefill instance"),
                       (["--role", "prefill", "--bootstrap-port", "1"], "--bootstrap-port is"),
                       (["--role", "prefill", "--pd-protocol", "sglang", "--kv-port", "1"],
                        "--kv-port is"),
                       (["--kv-load-failure-policy", "retry"], "want fail or recompute")]:
        r = subprocess.run([exe] + args, capture_output=True, text=True, timeout=5)
        assert r.returncode == 2 and want in r.stderr, (args, r.returncode, r.stderr)


def main():
    return run_suite(TESTS, modes=None)


if __name__ == "__main__":
    sys.exit(main())
