#!/usr/bin/env python3
"""llamaserve, the real engine (tools/llamaserve: llama.cpp through
node-llama-cpp, the small generated model, 2 slots, one thread), on its own:

- the API as vLLM serves it: /health, /v1/models, completions and chat,
  streamed and not, usage with cached_tokens, timings, X-Backend-Id;
- bad requests get vLLM's 4xx errors, and the engine serves on after them;
- a slot keeps its prompt: a repeated prefix is found cached, in usage and
  in /metrics; a third prompt on 2 slots evicts the least recently used;
- a third request waits for a slot (vllm:num_requests_waiting), and a client
  that goes away mid-stream frees its slot.

Every test skips, saying why, where node, node-llama-cpp or the model are
missing (make installs them).

usage: test_llamaserve.py --build DIR [--tools DIR] [-k SUBSTRING]
"""
import http.client
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import metric_family, run_suite, wait_until  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "bench"))
import engines  # noqa: E402
import realrun  # noqa: E402
import realwl  # noqa: E402

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


class One:
    """One engine for a test: e.port, e.stop()."""

    def __init__(self, opts, **kw):
        self.tmp = os.path.join(opts.build, "e2e-tmp", str(os.getpid()))
        os.makedirs(self.tmp, exist_ok=True)
        self.e = engines.Engine(opts.tools, self.tmp, "e0", **kw)
        self.port = self.e.port

    def req(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request(method, path, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data

    def metric(self, name):
        return sum(metric_family(self.e.metrics(), name).values())

    def stop(self):
        rc = self.e.stop()
        log = open(self.e.log).read()
        assert "Error" not in log and "error" not in log, "llamaserve's log:\n" + log[-2000:]
        return rc


def needs(fn):
    """The test skips where the engine cannot run."""
    def run(opts):
        why = engines.missing(opts.tools)
        return "SKIP " + why if why else fn(opts)
    run.__name__ = fn.__name__
    return run


def completion(prompt, **kw):
    return json.dumps(dict({"prompt": prompt, "max_tokens": 4, "temperature": 0}, **kw))


@test
@needs
def api_as_vllm_serves_it(opts):
    """Every endpoint and both APIs, streamed and not."""
    e = One(opts)
    try:
        st, h, body = e.req("GET", "/health")
        assert st == 200 and h["x-backend-id"] == "e0", (st, h)
        st, _, body = e.req("GET", "/v1/models")
        assert st == 200 and json.loads(body)["data"][0]["id"] == "m", body
        for path, b in (("/v1/completions", completion("bace dofu kire")),
                        ("/v1/chat/completions", json.dumps({
                            "model": "m", "max_tokens": 5, "temperature": 0, "ignore_eos": True,
                            "messages": [{"role": "user", "content": "bace dofu kire"}]}))):
            st, h, body = e.req("POST", path, b)
            a = json.loads(body)
            assert st == 200 and h["x-backend-id"] == "e0", (st, body)
            u = a["usage"]
            assert u["prompt_tokens"] > 0 and u["completion_tokens"] >= 1, u
            assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], u
            assert u["prompt_tokens_details"]["cached_tokens"] == 0, u
            assert a["timings"]["prompt_n"] == u["prompt_tokens"], a["timings"]
            assert a["choices"][0]["finish_reason"] in ("length", "stop"), a
            s = json.loads(b)
            s.update(stream=True, stream_options={"include_usage": True})
            r = realrun.send(e.port, json.dumps(s), path)
            assert r["status"] == 200 and not r["error"] and r["backend"] == "e0", r
            assert r["prompt"] == u["prompt_tokens"], (r, u)
            # the same prompt again: all of it but the last token cached
            assert r["cached"] == u["prompt_tokens"] - 1, (r, u)
            assert r["ttft_ms"] is not None and r["ttft_ms"] <= r["e2e_ms"], r
        st, h, body = e.req("POST", "/v1/chat/completions", json.dumps({
            "messages": [{"role": "user", "content": "x"}], "max_tokens": 6, "stream": True,
            "temperature": 0, "ignore_eos": True}))
        events = [l for l in body.decode().split("\n\n") if l.startswith("data: ")]
        assert st == 200 and h["content-type"].startswith("text/event-stream"), (st, h)
        assert events[-1] == "data: [DONE]", events[-3:]
        first = json.loads(events[0][6:])
        assert first["choices"][0]["delta"].get("role") == "assistant", first
        assert json.loads(events[-2][6:])["choices"][0]["finish_reason"] == "length", events
        m = e.e.metrics()
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                     "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
                     "vllm:cache_config_info"):
            assert metric_family(m, name), "no %s in /metrics" % name
    finally:
        e.stop()


BAD = [
    # path, body, status, what the message says
    ("/v1/completions", "{", 400, "invalid JSON"),
    ("/v1/completions", "[1]", 400, "JSON object"),
    ("/v1/completions", '{"prompt": ""}', 400, "prompt"),
    ("/v1/completions", '{"prompt": 7}', 400, "prompt"),
    ("/v1/completions", '{"prompt": [1, 2, 100000]}', 400, "vocabulary"),
    ("/v1/completions", '{"prompt": ["a", "b"]}', 400, "batched"),
    ("/v1/completions", '{"prompt": "x", "max_tokens": 0}', 400, "max_tokens"),
    ("/v1/completions", '{"prompt": "x", "max_tokens": 1.5}', 400, "max_tokens"),
    ("/v1/completions", '{"prompt": "x", "max_tokens": 99999}', 400, "maximum context length"),
    ("/v1/completions", '{"prompt": "x", "temperature": "hot"}', 400, "temperature"),
    ("/v1/completions", '{"prompt": "x", "n": 3}', 400, "n:"),
    ("/v1/completions", '{"prompt": "x", "stop": [1]}', 400, "stop"),
    ("/v1/completions", '{"prompt": "x", "stream": "yes"}', 400, "stream"),
    ("/v1/completions", '{"prompt": "x", "model": "other"}', 404, "does not exist"),
    ("/v1/chat/completions", '{"messages": []}', 400, "messages"),
    ("/v1/chat/completions", '{"messages": [{"content": "x"}]}', 400, "role"),
    ("/v1/chat/completions",
     '{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}', 400, "text parts"),
]


@test
@needs
def bad_requests_get_engine_errors(opts):
    """Each bad request gets its 4xx with vLLM's error object; unknown paths
    and methods FastAPI's; the engine then serves a good one."""
    e = One(opts)
    try:
        for path, b, status, says in BAD:
            st, h, body = e.req("POST", path, b)
            err = json.loads(body).get("error", {})
            assert st == status and err.get("code") == status, (path, b, st, body)
            assert says in err.get("message", ""), (b, err)
            assert err.get("type") in ("BadRequestError", "NotFoundError"), err
        assert e.req("GET", "/nope")[0] == 404
        assert e.req("GET", "/v1/completions")[0] == 405
        assert e.req("POST", "/health", "{}")[0] == 405
        st, _, body = e.req("POST", "/v1/completions", "x" * (40 << 20))
        assert st == 413, (st, body[:200])
        st, _, body = e.req("POST", "/v1/completions", completion("bace"))
        assert st == 200, body
    finally:
        e.stop()


@test
@needs
def slots_keep_prompts(opts):
    """Two slots hold two documents: each asked again is found cached (the
    engine's usage and /metrics agree); a third document takes the least
    recently used slot, and the other document is still cached."""
    e = One(opts, parallel=2, ctx=2048)
    try:
        docs = {}
        for d in range(3):
            docs[d] = [r for r in realwl.docs(5, documents=3, requests=60, doc_words=150,
                                              max_tokens=4) if r["group"] == "d%d" % d][:2]
        got = {}
        for d, k in ((0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (1, 0), (0, 0)):
            r = realrun.send(e.port, docs[d][k]["body"])
            assert r["status"] == 200 and not r["error"], r
            got.setdefault(d, []).append(r)
        d0, d1, d2 = got[0], got[1], got[2]
        assert d0[0]["cached"] == 0 and d1[0]["cached"] == 0, (d0[0], d1[0])
        # asked again with another question: the document is cached
        for r in (d0[1], d1[1]):
            assert r["cached"] >= 0.8 * r["prompt"], r
        # the third document evicted document 0's slot (used least recently)
        assert d2[0]["cached"] < 0.2 * d2[0]["prompt"], d2
        assert d1[2]["cached"] >= 0.8 * d1[2]["prompt"], d1[2]
        assert d0[2]["cached"] < 0.2 * d0[2]["prompt"], d0[2]
        hits, queries = e.e.counters()
        allr = [r for rs in got.values() for r in rs]
        assert hits == sum(r["cached"] for r in allr), (hits, allr)
        assert queries == sum(r["prompt"] for r in allr), queries
    finally:
        e.stop()


def long_prompt(i, n=600):
    return realwl.words(__import__("random").Random(i), n)


@test
@needs
def waiting_and_cancelled(opts):
    """Three long requests on two slots: one waits (the metric says so), all
    three are answered; a streamed request whose client goes away frees its
    slot, counted cancelled."""
    e = One(opts, parallel=2, ctx=4096)
    try:
        res = []
        ts = [threading.Thread(target=lambda i=i: res.append(realrun.send(
            e.port, completion("%d %s" % (i, long_prompt(i)), max_tokens=300, ignore_eos=True),
            "/v1/completions"))) for i in range(3)]
        for t in ts:
            t.start()
        seen = wait_until(lambda: e.metric("vllm:num_requests_waiting") == 1 and
                          e.metric("vllm:num_requests_running") == 2, 20, 0.01)
        for t in ts:
            t.join(60)
        assert seen, "no request was seen waiting"
        assert len(res) == 3 and all(r["status"] == 200 and r["completion"] == 300
                                     for r in res), res
        # a client that goes away after its first event
        s = socket.create_connection(("127.0.0.1", e.port), 10)
        b = completion(long_prompt(9), max_tokens=1500, ignore_eos=True, stream=True).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                  b"\r\nContent-Length: %d\r\n\r\n" % len(b) + b)
        s.settimeout(20)
        got = b""
        while b"data: " not in got:
            d = s.recv(4096)
            assert d, "closed before the first event: %r" % got
            got += d
        s.close()
        assert wait_until(lambda: metric_family(e.e.metrics(), "llamaserve_requests_total").get(
            'llamaserve_requests_total{result="cancelled"}') == 1, 10), e.e.metrics()
        assert wait_until(lambda: e.metric("vllm:num_requests_running") == 0, 5)
        t0 = time.monotonic()
        r = realrun.send(e.port, completion("bace"), "/v1/completions")
        assert r["status"] == 200 and time.monotonic() - t0 < 10, r
    finally:
        e.stop()


def main():
    return run_suite(TESTS, modes=(), limit_s=180)


if __name__ == "__main__":
    sys.exit(main())
