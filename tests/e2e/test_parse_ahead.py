#!/usr/bin/env python3
"""Bodies parsed as they arrive, end to end: a 1 MiB prompt sent in 16 KiB
pieces is parsed piece by piece (prefixgate_parsed_ahead_total counts it),
and routes exactly as the same body read whole does: the access log's key
hash and source match the admin dry run's (which parses it whole) for
- a chat body whose prompt_cache_key comes last,
- a chat body keyed by its messages,
- a body with invalid UTF-8, or a grammar error, in its last bytes (the
  raw-bytes key, counted as a fallback),
- a chunked body,
- the same under cache_aware;
and every body reaches the instance intact; a client that goes away
mid-body leaves nothing behind; a request pipelined behind a body parsed
ahead is answered after it. A 32 KiB body sent in pieces
is parsed ahead too; an 8 KiB one (less than PG_PARSE_AHEAD_MIN, 16 KiB) is not.

usage: test_parse_ahead.py --build DIR [--tools DIR] --mode shm|bpf [-k SUBSTRING]
"""
import http.client
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Fleet, check_echo, read_responses, run_suite  # noqa: E402

TESTS = []
PATH = "/v1/chat/completions"
PIECE = 16 * 1024


def test(fn):
    TESTS.append(fn)
    return fn


def chat(n, tag, key=None, tail=b""):
    """A chat body of about n bytes; prompt_cache_key last if given; tail
    replaces its last bytes' closing '}' (tail=b"" keeps the body valid)."""
    text = ("%s: " % tag) + "lorem ipsum dolor sit amet " * (n // 27)
    body = {"model": "m", "max_tokens": 2,
            "messages": [{"role": "system", "content": "be brief"},
                         {"role": "user", "content": text}]}
    if key:
        body["prompt_cache_key"] = key
    raw = json.dumps(body).encode()
    return raw[:-1] + tail if tail else raw


def trickle(f, body, rid, chunked=False):
    """POST body in PIECE-byte writes apart in time: the gateway sees it
    arrive in pieces. Returns (status, headers, data)."""
    s = socket.create_connection(("127.0.0.1", f.port), timeout=20)
    try:
        framing = ("Transfer-Encoding: chunked" if chunked
                   else "Content-Length: %d" % len(body))
        s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "X-Request-Id: %s\r\n%s\r\n\r\n" % (PATH, rid, framing)).encode())
        for off in range(0, len(body), PIECE):
            piece = body[off:off + PIECE]
            s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            # a short body's few pieces far enough apart that a busy
            # gateway still reads them apart
            time.sleep(0.001 if len(body) > 256 * 1024 else 0.3)
        if chunked:
            s.sendall(b"0\r\n\r\n")
        r = http.client.HTTPResponse(s)
        r.begin()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        s.close()


def run(opts, gw_args, cases):
    """cases: (body, chunked, want key_source, parsed ahead). Each is sent
    trickled; its access-log record must carry the dry run's key."""
    f = Fleet(opts, 2, start_gateway=False, mock_args={i: ["--time-scale", "1000"] for i in range(2)})
    log = os.path.join(f.tmp, "access-%d-%s.log" % (os.getpid(), gw_args[-1]))
    try:
        f.start_gateway(["--access-log", log, "--health-check-path", "none"] + gw_args)
        # A client gone mid-body, its parse ahead under way: nothing is
        # counted, nothing leaks (the ASan build's exit checks), and the
        # gateway serves the rest.
        gone = socket.create_connection(("127.0.0.1", f.port), timeout=10)
        half = chat(MIB, "gone")
        gone.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (
            PATH, len(half))).encode())
        for off in range(0, 4 * PIECE, PIECE):
            gone.sendall(half[off:off + PIECE])
            time.sleep(0.01)
        gone.close()
        want = []
        ahead0 = f.counter("prefixgate_parsed_ahead_total")
        fb0 = f.counter("prefixgate_key_extraction_fallbacks_total")
        for i, (body, chunked, source, _) in enumerate(cases):
            dry = f.dry_run(body, path=PATH)
            assert dry["key_source"] == source, (source, dry["key_source"])
            want.append(dry)
            st, h, _ = trickle(f, body, "case-%d" % i, chunked)
            assert st == 200 or source == "raw", "status %s" % st
            if st == 200:
                check_echo(st, h, body)
        ahead = f.counter("prefixgate_parsed_ahead_total") - ahead0
        fb = f.counter("prefixgate_key_extraction_fallbacks_total") - fb0
        assert ahead == sum(1 for c in cases if c[3]), "parsed ahead: %d" % ahead
        assert fb == sum(1 for c in cases if c[2] == "raw"), "fallbacks: %d" % fb
        assert f.idle(), "in-flight counts not back to 0"
    finally:
        rc = f.stop()
    assert rc == 0
    # one record a request, in the order each worker writes them
    recs = {r["request_id"]: r for r in map(json.loads, open(log))}
    assert len(recs) == len(cases), recs
    for i, w in enumerate(want):
        r = recs["case-%d" % i]
        assert r["key_hash"] == w["key_hash"] and r["key_source"] == w["key_source"], (r, w)


MIB = 1 << 20


@test
def prefix_aware_keys_match_a_whole_parse(opts):
    """PREFIX_AWARE: an explicit key last, the messages key, late UTF-8 and
    grammar errors, a chunked body, 32 KiB in two pieces, and a body shorter
    than PG_PARSE_AHEAD_MIN (parsed whole)."""
    run(opts, ["--strategy", "prefix_aware"], [
        (chat(MIB, "a", key="conv-a"), False, "prompt_cache_key", True),
        (chat(MIB, "b"), False, "messages", True),
        (chat(MIB, "c", tail=b'"x":"\xff"}'), False, "raw", True),
        (chat(MIB, "d", tail=b',}'), False, "raw", True),
        (chat(MIB, "e", key="conv-e"), True, "prompt_cache_key", True),
        (chat(32 * 1024, "f"), False, "messages", True),
        (chat(8 * 1024, "g"), False, "messages", False),
    ])


@test
def cache_aware_keys_match_a_whole_parse(opts):
    """CACHE_AWARE parses with its own (larger) window: the same."""
    run(opts, ["--strategy", "cache_aware"], [
        (chat(MIB, "a", key="conv-a"), False, "prompt_cache_key", True),
        (chat(MIB, "b"), False, "messages", True),
        (chat(MIB, "c", tail=b'"x":"\xc3"}'), False, "raw", True),
        (chat(MIB, "e"), True, "messages", True),
    ])


@test
def pipelined_after_a_parsed_body(opts):
    """A request pipelined right behind a body parsed ahead (it arrives in
    that body's last piece) is answered after it, both intact, and the two
    keep their own keys."""
    f = Fleet(opts, 2, gw_args=["--health-check-path", "none"],
              mock_args={i: ["--time-scale", "1000"] for i in range(2)})
    try:
        first, second = chat(MIB, "p1"), chat(8 * 1024, "p2")
        ahead0 = f.counter("prefixgate_parsed_ahead_total")
        s = socket.create_connection(("127.0.0.1", f.port), timeout=20)
        head = "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
        s.sendall((head % (PATH, len(first))).encode())
        last = (len(first) - 1) // PIECE * PIECE  # where the last piece starts
        for off in range(0, last, PIECE):
            s.sendall(first[off:off + PIECE])
            time.sleep(0.001)
        s.sendall(first[last:] + (head % (PATH, len(second))).encode() + second)
        for body, (st, h, _) in zip((first, second), read_responses(s, 2)):
            check_echo(st, h, body)
        s.close()
        assert f.counter("prefixgate_parsed_ahead_total") - ahead0 == 1
        assert f.idle(), "in-flight counts not back to 0"
    finally:
        rc = f.stop()
    assert rc == 0


if __name__ == "__main__":
    sys.exit(run_suite(TESTS))
