#!/usr/bin/env python3
"""tracesim and the gateway agree: the gateway records what it gave its
routing core (--route-journal: its configuration and members, each
request's key and blocks, work taken, first tokens, answers, slots given
back, ticks), tracesim --replay gives its own routing core the same at the
gateway's clock, and every decision must be the same (backend, reason,
tokens believed cached).

- cache_aware and prefix_aware, 4 mockllm instances (one at half speed),
  48 streamed chat requests from 12 clients at once: 2 system prompts
  shared by 12 conversations of two turns each (shared prefixes,
  conversations that come back), so queues form and the index, the fits
  and the in-flight counts all decide;
- the comparison can fail: the same journal without its first tokens
  (cache_aware's queues then never drain), or without its slots given
  back (prefix_aware's threshold), gives other decisions.

The health thread's checks and scrapes are off (--health-check-path none
--metrics-scrape-interval 0): what they store is not journaled.

usage: test_replay.py --build DIR [--tools DIR] --mode shm|bpf [-k SUBSTRING]
"""
import http.client
import json
import os
import re
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Fleet, run_suite, words  # noqa: E402

TESTS = []
CLIENTS = 12
SYSTEMS = 2
CONVERSATIONS = 12  # two turns each; 48 requests in all
MOCK = ["--time-scale", "2"]
SLOW = ["--speed", "0.5"]  # instance 0: the fits differ


def test(fn):
    TESTS.append(fn)
    return fn


def bodies():
    """Each conversation's two turns (the second re-sends the first),
    in the order the clients take them: every first turn, then every
    second."""
    firsts, seconds = [], []
    for c in range(CONVERSATIONS):
        msgs = [{"role": "system", "content": words(600, 1000 + c % SYSTEMS)},
                {"role": "user", "content": words(120 + 10 * c, c)}]
        turn = {"model": "m", "max_tokens": 8, "stream": True}
        firsts.append(json.dumps(dict(turn, messages=msgs)))
        msgs = msgs + [{"role": "assistant", "content": words(40, 500 + c)},
                       {"role": "user", "content": words(60, 700 + c)}]
        seconds.append(json.dumps(dict(turn, messages=msgs)))
    return firsts + firsts[::-1] + seconds + seconds[::-1]


def send_all(f, todo):
    """Every body of todo sent by CLIENTS clients at once; the statuses."""
    lock = threading.Lock()
    statuses = []

    def client():
        while True:
            with lock:
                if not todo:
                    return
                body = todo.pop(0)
            c = http.client.HTTPConnection("127.0.0.1", f.port, timeout=60)
            try:
                c.request("POST", "/v1/chat/completions", body=body.encode(),
                          headers={"Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
                with lock:
                    statuses.append(r.status)
            finally:
                c.close()

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    return statuses


def replay(opts, path):
    """tracesim --replay path: (exit status, output)."""
    p = subprocess.run([os.path.join(opts.tools, "tracesim"), "--replay", path],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def record(opts, strategy):
    """A run of the gateway with strategy, journaled: the journal's path
    and the number of requests sent."""
    f = None
    path = None
    try:
        f = Fleet(opts, 4, mock_args={i: MOCK + (SLOW if i == 0 else []) for i in range(4)}, start_gateway=False)
        path = os.path.join(f.tmp, "journal-%s.txt" % strategy)
        f.start_gateway(["--strategy", strategy, "--health-check-path", "none",
                         "--metrics-scrape-interval", "0", "--route-journal", path])
        todo = bodies()
        n = len(todo)
        statuses = send_all(f, todo)
        assert statuses == [200] * n, statuses
        assert f.idle(20), "in-flight counts not back to 0"
    finally:
        if f:
            rc = f.stop()  # the journal is whole once the gateway is gone
            assert rc == 0, "prefixgate exited with %s" % rc
    return path, n


def lines(path, kind):
    return [ln for ln in open(path).read().splitlines() if ln.split(" ", 1)[0] == kind]


def agree(opts, strategy):
    path, n = record(opts, strategy)
    assert len(lines(path, "route")) == n, "requests journaled: %d of %d" % (
        len(lines(path, "route")), n)
    assert len(lines(path, "first")) == n, "first tokens journaled"
    assert len(lines(path, "release")) == n, "slots given back journaled"
    assert lines(path, "tick"), "no tick journaled"
    assert len(set(ln.split()[3] for ln in lines(path, "take"))) > 1, "one backend took all"
    rc, out = replay(opts, path)
    assert rc == 0 and "replay: %d decisions, 0 differ; 0 takes differ" % n in out, out
    return path, n


def differs_without(opts, path, kind):
    """The journal less its lines of kind replays to other decisions."""
    cut = "%s.no-%s" % (path, kind)
    with open(path) as src, open(cut, "w") as dst:
        dst.writelines(ln for ln in src if ln.split(" ", 1)[0] != kind)
    rc, out = replay(opts, cut)
    assert rc == 1 and re.search(r"decisions, [1-9][0-9]* differ", out), out


@test
def cache_aware_agrees(opts):
    """cache_aware: every decision tracesim makes from the gateway's
    journal is the gateway's; without the journal's first tokens (the
    queues never drain) some differ: the comparison can fail."""
    path, _ = agree(opts, "cache_aware")
    differs_without(opts, path, "first")


@test
def prefix_aware_agrees(opts):
    """prefix_aware: the ring, the threshold and the in-flight counts
    decide, as the gateway's did; without the slots given back (past the
    threshold: the least loaded) some differ."""
    path, _ = agree(opts, "prefix_aware")
    differs_without(opts, path, "release")


def main():
    return run_suite(TESTS)


if __name__ == "__main__":
    sys.exit(main())
