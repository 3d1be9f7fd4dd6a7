#!/usr/bin/env python3
"""What the gateway learns from the engines' answers, end to end: mockllm
instances whose speed the gateway is not told, behind one prefixgate.

- flow control engages for clients that do not stream, on instances three
  times slower than the defaults: requests wait in the gateway, not in the
  instances (their work stays queued until their answer's head);
- a deadline below what the defaults predict gets 200s after a cold start
  (an instance whose speed is not measured is tried, then judged on what
  was measured), and 429s once the instances are measured too slow for it;
- an instance whose queue only its report drains (its speed not measured,
  answers that do not stream) is scraped five times as often;
- an engine that reports requests waiting gets no new request until it
  drains, whatever the model predicts, and the strategy's choice follows
  (PREFIX_AWARE's first candidate is passed over);
- engines whose cache keeps 2 conversations each (mockllm --slots 2, as
  llama.cpp's server), not told so: CACHE_AWARE learns it from their
  answers' cached tokens and keeps 4 conversations on 2 of them near the
  ideal cached share, however the ring places them;
- in-flight counts and the queue back to 0 after every test.

The tests whose answers do not stream are shm_only (harness.py): a bpf run
on --data-path auto carries none of their bytes in the kernel.

usage: test_learn.py --build DIR [--tools DIR] --mode shm|bpf [-k SUBSTRING]
"""
import http.client
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Fleet, http_get, run_suite, sample_value, shm_only,  # noqa: E402
                     wait_until, words)

TESTS = []
QUIET = ["--health-check-path", "none"]


def test(fn):
    TESTS.append(fn)
    return fn


def chat(n, salt, stream, max_tokens=4):
    return json.dumps({"model": "m", "max_tokens": max_tokens, "stream": stream,
                       "messages": [{"role": "user", "content": words(n, salt)}]})


def send(f, body, headers=None, timeout=60):
    """(status, body, seconds) of one request."""
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c = http.client.HTTPConnection("127.0.0.1", f.port, timeout=timeout)
    try:
        t0 = time.monotonic()
        c.request("POST", "/v1/chat/completions", body=body.encode(), headers=h)
        r = c.getresponse()
        data = r.read()
        return r.status, data, time.monotonic() - t0
    finally:
        c.close()


def mock_waiting(port):
    """vllm:num_requests_waiting of the mockllm on port."""
    st, body = http_get(port, "/metrics", 2.0)
    for line in body.decode().splitlines():
        if line.startswith("vllm:num_requests_waiting"):
            return float(line.split()[-1])
    return 0.0


def pool0(f):
    st, r = f.admin("GET", "/flow")
    assert st == 200, (st, r)
    return r["pools"][0]


def quiet(f):
    assert f.idle(20), "in-flight counts not back to 0"
    assert wait_until(lambda: pool0(f)["queued"] == 0, 5), pool0(f)


@test
@shm_only
def no_stream_flow_control_engages(opts):
    """2 instances at a third of the default speed, 24 clients of answers
    that do not stream, each a 3,000-token prompt: the gateway holds the
    excess (requests queued in it), and no instance is sent more than it
    can start: its own queue, sampled throughout, stays short."""
    slow = ["--speed", "0.33"]
    f = Fleet(opts, 2, gw_args=QUIET + ["--strategy", "cache_aware", "--flow-control",
                                        "--metrics-scrape-interval", "100"],
              mock_args={0: slow, 1: slow})
    try:
        errs, peak, done = [], [0.0], threading.Event()

        def client(k):
            for i in range(3):
                try:
                    st, data, _ = send(f, chat(2000, 100 * k + i, False))
                    if st != 200:
                        errs.append((st, data[:200]))
                except Exception as e:  # noqa: BLE001 - reported below
                    errs.append(repr(e))

        def sampler():
            while not done.is_set():
                for name in f.mocks:
                    peak[0] = max(peak[0], mock_waiting(f.mocks[name][0]))
                time.sleep(0.05)

        ts = [threading.Thread(target=client, args=(k,)) for k in range(24)]
        s = threading.Thread(target=sampler)
        s.start()
        for t in ts:
            t.start()
        for t in ts:
            t.join(180)
        done.set()
        s.join(5)
        assert not errs, errs[:3]
        p = pool0(f)
        print("# queued in the gateway: %d of 72; the instances' queues peaked at %d"
              % (p["enqueued"], peak[0]))
        assert p["enqueued"] >= 24, p
        # 24 clients on 2 instances: without the gate each would hold ~11
        assert peak[0] <= 4, "an instance held %d waiting" % peak[0]
        quiet(f)
    finally:
        f.stop()


@test
def short_deadline_after_cold_start(opts):
    """Instances 8 times faster than the defaults (a first token in ~10 ms
    where the defaults predict over 61.5 ms): with a 50 ms deadline from
    the first request on, most answers are 200 (none would be if the
    defaults decided); every answer is a 200 or a 429."""
    fast = ["--speed", "8"]
    f = Fleet(opts, 2, gw_args=QUIET + ["--strategy", "least_outstanding_requests",
                                        "--flow-control", "--metrics-scrape-interval", "0"],
              mock_args={0: fast, 1: fast})
    try:
        got = {}
        for i in range(40):
            st, data, _ = send(f, chat(100, i, True), {"X-Prefixgate-Deadline-Ms": "50"})
            assert st in (200, 429), (st, data[:200])
            assert st == 429 or data.rstrip().endswith(b"data: [DONE]"), data[-200:]
            got[st] = got.get(st, 0) + 1
        print("# 40 requests with a 50 ms deadline: %s" % got)
        assert got.get(200, 0) >= 30, got
        quiet(f)
    finally:
        f.stop()


@test
def deadline_holds_after_sending(opts):
    """Instances 4 times slower than the defaults (a first token in about
    250 ms), a 50 ms deadline from a cold start, clients that stream and
    clients that do not: every answer is a 429 (deadline_exceeded) — a
    request sent on to learn an instance's speed is cut at its deadline,
    its streamed head held back, never a late 200 — and an instance cut
    while explored is tried about once a second, not with every request."""
    slow = ["--speed", "0.25"]
    f = Fleet(opts, 2, gw_args=QUIET + ["--strategy", "least_outstanding_requests",
                                        "--flow-control", "--metrics-scrape-interval", "0"],
              mock_args={0: slow, 1: slow})
    try:
        got, t0 = {}, time.monotonic()
        for i in range(24):
            st, data, s = send(f, chat(100, i, i % 2 == 0), {"X-Prefixgate-Deadline-Ms": "50"})
            assert st == 429, (i, st, data[:200])
            assert json.loads(data)["error"]["code"] == "deadline_exceeded", data[:200]
            assert s < 2.0, "request %d answered after %.2f s" % (i, s)
            got[st] = got.get(st, 0) + 1
        elapsed = time.monotonic() - t0
        sent = sum(b["requests"] for b in f.backends().values())
        print("# 24 requests with a 50 ms deadline in %.1f s: %s; %d sent on" % (elapsed, got, sent))
        assert sent >= 2, "no instance was tried"
        assert sent <= 2 * (elapsed + 2), "%d sent on in %.1f s" % (sent, elapsed)
        assert pool0(f)["expired"] >= sent, pool0(f)
        quiet(f)
    finally:
        f.stop()


def metrics_gets(port):
    """GET /metrics the mockllm on port has answered, this one left out."""
    st, body = http_get(port, "/metrics", 2.0)
    return int(sample_value(body.decode(), "mockllm_requests_total", path="/metrics")) - 1


@test
@shm_only
def blind_instance_scraped_faster(opts):
    """--metrics-scrape-interval 1000; one instance that serves one request
    at a time (~3 s each), its speed not measured, given 2 answers that do
    not stream at once, ~20,000 prompt tokens each (the defaults predict a
    first token past 0.6 s: each is queued until its head, its engine's
    report, or 4 times that): while the second waits there the instance
    is scraped every 200 ms (a fifth of the interval), and at the interval
    again once both are answered."""
    slow = ["--max-num-seqs", "1", "--decode-ms-per-token", "40"]
    f = Fleet(opts, 1, gw_args=QUIET + ["--strategy", "cache_aware",
                                        "--metrics-scrape-interval", "1000"],
              mock_args={0: slow})
    try:
        port = f.mocks["b0"][0]
        time.sleep(1)  # the first round
        got = []
        ts = [threading.Thread(target=lambda k=k: got.append(
            send(f, chat(10000, k, False, max_tokens=60))[0]))  # 60 x 40 ms of decode
            for k in range(2)]
        for t in ts:
            t.start()
        time.sleep(0.5)
        n0, t0 = metrics_gets(port), time.monotonic()
        time.sleep(2)  # the second waits behind the first all along
        n1, t1 = metrics_gets(port), time.monotonic()
        for t in ts:
            t.join(30)
        time.sleep(1.5)
        n2, t2 = metrics_gets(port), time.monotonic()
        time.sleep(3)
        n3, t3 = metrics_gets(port), time.monotonic()
        print("# %d scrapes in %.1f s while requests waited, %d in %.1f s idle after"
              % (n1 - n0, t1 - t0, n3 - n2, t3 - t2))
        assert got == [200] * 2, got
        assert n1 - n0 >= 0.6 * (t1 - t0) / 0.2, (n1 - n0, t1 - t0)  # ~10; 2 at 1 s
        assert n3 - n2 <= (t3 - t2) / 1.0 + 1, (n3 - n2, t3 - t2)
        quiet(f)
    finally:
        f.stop()


@test
def engine_waiting_gets_none_until_it_drains(opts):
    """PREFIX_AWARE with flow control and a room the model never fills
    (60 s): one instance that serves one request at a time (mockllm
    --max-num-seqs 1) is given two long answers of one key, so it reports
    one waiting; the key's next requests go to the other instance while it
    says so, and back to it once it drained."""
    f = Fleet(opts, 2, gw_args=QUIET + ["--strategy", "prefix_aware", "--flow-control",
                                        "--flow-instance-queue-ms", "60000",
                                        "--metrics-scrape-interval", "50"],
              mock_args={0: ["--max-num-seqs", "1", "--decode-ms-per-token", "40"],
                         1: ["--max-num-seqs", "1", "--decode-ms-per-token", "40"]})
    try:
        key = {"X-Prefixgate-Key": "conversation-7"}
        home = f.name_of(f.dry_run(chat(50, 1, True), key="conversation-7")["backend"])
        other = [n for n in f.mocks if n != home][0]
        long_body = chat(50, 2, True, max_tokens=40)  # 40 tokens x 40 ms: 1.6 s each
        ts = [threading.Thread(target=send, args=(f, long_body, key)) for _ in range(2)]
        for t in ts:
            t.start()
            time.sleep(0.2)
        assert wait_until(lambda: mock_waiting(f.mocks[home][0]) >= 1, 3), \
            "the key's instance never reported a request waiting"
        time.sleep(0.2)  # a scrape (every 50 ms) saw it
        before = {n: b["requests"] for n, b in f.backends().items()}
        for i in range(4):
            st, _, _ = send(f, chat(50, 10 + i, True), key)
            assert st == 200
        after = {n: b["requests"] for n, b in f.backends().items()}
        moved = {n: after[n] - before[n] for n in after}
        assert moved[f.addr(other)] == 4 and moved[f.addr(home)] == 0, moved
        for t in ts:
            t.join(30)
        assert wait_until(lambda: mock_waiting(f.mocks[home][0]) == 0, 5)
        time.sleep(0.3)
        st, _, _ = send(f, chat(50, 20, True), key)
        assert st == 200
        last = {n: b["requests"] for n, b in f.backends().items()}
        assert last[f.addr(home)] == after[f.addr(home)] + 1, (after, last)
        quiet(f)
    finally:
        f.stop()


def slots_round(opts):
    """4 conversations of ~2,500 tokens, 16 turns each in turn, one request
    at a time, on 2 instances of 2 slots: (cached share, ideal share) of
    the turns after the first, by the engines' own usage."""
    # --speed 16: the shares are the engines' token counts, one request at
    # a time, so no time enters them; a faster engine only ends sooner
    # (16 and 4 gave the same shares)
    slots = ["--slots", "2", "--speed", "16"]
    f = Fleet(opts, 2, gw_args=QUIET + ["--strategy", "cache_aware",
                                        "--metrics-scrape-interval", "0"],
              mock_args={0: slots, 1: slots})
    try:
        convs = [[{"role": "system", "content": "conversation %d. " % k + words(1200, k)}]
                 for k in range(4)]
        last = [None] * 4
        got = ideal = total = 0
        for turn in range(16):
            for k in range(4):
                convs[k].append({"role": "user", "content": words(30, 100 * turn + k)})
                st, data, _ = send(f, json.dumps({"model": "m", "max_tokens": 20,
                                                  "stream": False, "messages": convs[k]}))
                assert st == 200, (st, data[:200])
                d = json.loads(data)
                u = d["usage"]
                p = u["prompt_tokens"]
                if turn:
                    got += (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                    ideal += min(p - 1, last[k])  # its slot held the last prompt + answer
                    total += p
                last[k] = p + u["completion_tokens"]
                convs[k].append({"role": "assistant",
                                 "content": d["choices"][0]["message"]["content"]})
        quiet(f)
        return got / total, ideal / total
    finally:
        f.stop()


@test
@shm_only
def slot_engines_keep_their_conversations(opts):
    """Two rounds (two rings: the instances' ports differ): each reaches
    at least 0.9 of the ideal cached share."""
    for rnd in range(2):
        got, ideal = slots_round(opts)
        print("# round %d: cached share %.3f, ideal %.3f (%.2fx)" % (rnd, got, ideal,
                                                                     got / ideal))
        assert got >= 0.9 * ideal, (got, ideal)


if __name__ == "__main__":
    sys.exit(run_suite(TESTS, limit_s=200))
