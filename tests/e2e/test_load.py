#!/usr/bin/env python3
"""cache_aware under load, end to end: mockllm instances behind one
prefixgate (--strategy cache_aware --route-header), streamed traffic on
loopback, so the gateway sees each response's first token.

- a saturated fleet (every instance queueing) keeps each conversation on the
  instance that holds its history: the old rule sent them to the least
  loaded once every instance was past ConcurrencyThreshold;
- two instances of different speeds: the faster learns a faster rate and
  takes more of the work;
- /v1/completions prompts that all open with one 2,048-character block, at
  PrefixLength 1024, use every instance (the shared block is detected in the
  index, and what follows it places the request);
- the header's and the dry run's estimates agree with the traffic;
- in-flight counts and the prefill queues are back to 0 after each test.

usage: test_load.py --build DIR [--tools DIR] --mode shm|bpf [-k SUBSTRING]
"""
import json
import os
import random
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Fleet, run_suite, wait_until  # noqa: E402

TESTS = []
GW = ["--strategy", "cache_aware", "--route-header", "--health-check-path", "none",
      "--metrics-scrape-interval", "0"]


def test(fn):
    TESTS.append(fn)
    return fn


def words(rng, n):
    vocab = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
             "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"]
    return " ".join(rng.choice(vocab) for _ in range(n))


def route(headers):
    """The X-Prefixgate-Route header's fields."""
    return dict(p.strip().split("=", 1) for p in headers["x-prefixgate-route"].split(";"))


def chat(messages, max_tokens=2):
    return json.dumps({"model": "m", "messages": messages, "max_tokens": max_tokens,
                       "stream": True})


def send(f, path, body):
    st, h, data = f.post(path, body, {"Content-Type": "application/json"})
    assert st == 200, "status %s: %s" % (st, data[:200])
    assert data.rstrip().endswith(b"data: [DONE]"), "stream cut short: %r" % data[-80:]
    return route(h)


def load_of(f):
    """Each backend's "load" object of GET /backends, by address."""
    return {a: b["load"] for a, b in f.backends().items()}


def quiet(f):
    """In-flight counts and the prefill queues back to 0."""
    assert f.idle(), "in-flight counts not back to 0"
    assert wait_until(lambda: all(l["prefill_queue_tokens"] == 0 and
                                  l["prefill_queue_requests"] == 0
                                  for l in load_of(f).values()), 5), load_of(f)


def flood(f, n, rng, tokens, threads=8):
    """n distinct long prompts at once from `threads` clients; returns when
    all are answered (each bounded by the client's timeout)."""
    bodies = [chat([{"role": "user", "content": words(random.Random(rng.random()), tokens)}])
              for _ in range(n)]
    errs = []

    def worker(part):
        for b in part:
            try:
                send(f, "/v1/chat/completions", b)
            except Exception as e:  # noqa: BLE001 - reported below
                errs.append(repr(e))

    ts = [threading.Thread(target=worker, args=(bodies[i::threads],)) for i in range(threads)]
    for t in ts:
        t.start()
    return ts, errs


@test
def saturated_fleet_keeps_conversations(opts):
    """12 conversations with long histories on 4 instances, then a flood of
    new long prompts that queues every instance (far past
    ConcurrencyThreshold 2); each conversation's next turn, sent during the
    flood, still goes where its history is cached."""
    # 36,600 tokens/s at time scale 2: a ~7,000-token history is 96 ms of
    # prefill; the flood (32 clients, ~8,000 tokens each) queues ~1 s on
    # each instance
    # each instance is sent ~216,000 tokens of flood: caches (the
    # instances' and the gateway's index of them) of 2M tokens keep every
    # history through it; at mockllm's default 100,000 (and the index's
    # 262,144) one could age out, and the turn rightly go elsewhere
    f = Fleet(opts, 4, gw_args=GW + ["--concurrency-threshold", "2", "--cache-capacity",
                                     "2000000"],
              mock_args={i: ["--time-scale", "2", "--kv-capacity-tokens", "2000000"]
                         for i in range(4)})
    try:
        rng = random.Random(11)
        convs = [[{"role": "user", "content": words(rng, 5000)}] for _ in range(12)]
        home = [send(f, "/v1/chat/completions", chat(c))["backend"] for c in convs]
        for c in convs:
            c += [{"role": "assistant", "content": words(rng, 20)},
                  {"role": "user", "content": words(rng, 20)}]
        ts, errs = flood(f, 96, rng, 6000, threads=32)
        assert wait_until(lambda: sum(l["prefill_queue_requests"]
                                      for l in load_of(f).values()) >= 12, 10), \
            "the flood did not queue: %s" % load_of(f)
        moved = []
        for i, c in enumerate(convs):
            r = send(f, "/v1/chat/completions", chat(c))
            if r["backend"] != home[i] or r["reason"] != "cached":
                moved.append((i, home[i], r))
        for t in ts:
            t.join(60)
        assert not errs, errs[:3]
        assert not moved, "conversations moved under load: %s" % moved
        quiet(f)
    finally:
        f.stop()


@test
def speeds_split_work(opts):
    """Two instances, one twice as fast (--speed 2): 80 new conversations from
    4 clients; the faster one is learned faster and takes more of the work."""
    f = Fleet(opts, 2, gw_args=GW, mock_args={0: ["--time-scale", "4", "--speed", "2"],
                                              1: ["--time-scale", "4"]})
    try:
        rng = random.Random(12)
        ts, errs = flood(f, 80, rng, 3000, threads=4)
        for t in ts:
            t.join(120)
        assert not errs, errs[:3]
        fast, slow = f.addr("b0"), f.addr("b1")
        b = f.backends()
        n_fast, n_slow = b[fast]["requests"], b[slow]["requests"]
        assert n_fast + n_slow == 80, (n_fast, n_slow)
        assert n_fast >= 1.3 * n_slow, "fast took %d, slow %d" % (n_fast, n_slow)
        l = load_of(f)
        assert l[fast]["speed_learned"] and l[slow]["speed_learned"], l
        ratio = l[fast]["prefill_tokens_per_s"] / l[slow]["prefill_tokens_per_s"]
        assert 1.4 <= ratio <= 2.8, "learned rates %s / %s" % (
            l[fast]["prefill_tokens_per_s"], l[slow]["prefill_tokens_per_s"])
        m = f.metrics()
        assert 'prefixgate_backend_prefill_tokens_per_second{backend="%s"}' % fast in m
        # in seconds, and in milliseconds for one more release
        assert "prefixgate_ttft_prediction_error_seconds_count" in m
        assert "prefixgate_ttft_prediction_error_milliseconds_count" in m
        quiet(f)
    finally:
        f.stop()


@test
def shared_block_completions_spread(opts):
    """/v1/completions prompts that all open with the same 2,048 characters,
    PrefixLength 1024 (the key is the shared block alone): once the block is
    seen as shared, what follows it places each request, and 60 requests
    use every one of 4 instances (all on one would be the pin)."""
    f = Fleet(opts, 4, gw_args=GW + ["--prefix-length", "1024"],
              mock_args={i: ["--time-scale", "20"] for i in range(4)})
    try:
        rng = random.Random(13)
        block = words(random.Random(7), 600)[:2048]
        assert len(block) == 2048
        where = []
        for _ in range(60):
            body = json.dumps({"model": "m", "prompt": block + " " + words(rng, 200),
                               "max_tokens": 2, "stream": True})
            where.append(send(f, "/v1/completions", body)["backend"])
        late = where[20:]
        share = {b: late.count(b) for b in set(late)}
        assert len(share) == 4, "the last 40 on %d of 4 instances: %s" % (len(share), share)
        assert max(share.values()) <= 24, share
        quiet(f)
    finally:
        f.stop()


@test
def estimates_agree_with_traffic(opts):
    """The dry run names the instance, matched tokens and runner-up the real
    request then gets, with the same estimates within a few ms; a cached
    turn says what its cache saved."""
    f = Fleet(opts, 3, gw_args=GW, mock_args={i: ["--time-scale", "20"] for i in range(3)})
    try:
        rng = random.Random(14)
        for _ in range(4):
            msgs = [{"role": "user", "content": words(rng, 1500)}]
            send(f, "/v1/chat/completions", chat(msgs))
            msgs += [{"role": "assistant", "content": words(rng, 30)},
                     {"role": "user", "content": words(rng, 30)}]
            dry = f.dry_run(chat(msgs), path="/v1/chat/completions")
            r = send(f, "/v1/chat/completions", chat(msgs))
            assert dry["backend"] == r["backend"] and dry["reason"] == r["reason"], (dry, r)
            assert dry["matched"] == int(r["matched"]) > 0, (dry["matched"], r["matched"])
            assert dry["chosen"]["backend"] == r["backend"], dry
            assert dry["runner_up"]["backend"] == r["runner_up"], (dry, r)
            assert r["reason"] == "cached" and float(r["saved_ms"]) > 0, r
            assert dry["prompt_tokens"] > dry["matched"], dry
            assert abs(dry["chosen"]["ttft_ms"] - float(r["ttft_ms"])) < 25, (dry, r)
        quiet(f)
    finally:
        f.stop()


def main():
    return run_suite(TESTS)


if __name__ == "__main__":
    sys.exit(main())
