#!/usr/bin/env python3
"""refrouter: a reference router for the benchmarks, which knows each
instance's real prefix cache and queue. Before placing a request it asks
every mockllm instance what the request would meet there (POST /mock/match +
the request's path, tools/mockllm/mockapi.c), so its placements are the
upper bound of routing on engines' KV events and queue reports; a router
that guesses (prefixgate) is measured against it. Benchmarks only: it
trusts its backends to be mockllm instances.

usage: refrouter.py --listen ADDR:PORT --backend ADDR:PORT [--backend ...]
                    --rule cache-first|predicted-ttft [--far-factor X]
                    [--margin-s S] [--tie-tokens T] [--match-timeout-s S]

Placement. A POST to /v1/completions or /v1/chat/completions is sent, body
unchanged, to every backend's /mock/match/v1/... at once, on pooled
keep-alive connections. The backends that answer 200 within
--match-timeout-s (default 5) are the candidates; from candidate i (its
position in --backend order) the rules use M_i = cached_tokens,
Q_i = queue_tokens, R_i = prefill_tokens_per_s, P_i = predicted_ttft_ms,
and T_i = Q_i / R_i, its queue time in seconds (the instance's seconds, the
wall clock's: mockllm reports rates after --time-scale and --speed).

  predicted-ttft: the candidate with the least (P_i, Q_i, i).

  cache-first: let L = max M_i. The holders are the candidates with
    M_i >= L - TIE_TOKENS (--tie-tokens, default 512: a match within 512
    tokens of the longest counts as a tie), and the holder h is the one of
    them with the least (P_i, Q_i, i). h is passed over only when there is
    another candidate and, for every other candidate o,
        T_h > FAR_FACTOR x T_o + MARGIN_S
    (--far-factor, default 4; --margin-s, default 1.0: one second of the
    holder's work, R_h tokens); the request then goes to the candidate with
    the least (P_i, Q_i, i), as predicted-ttft would place it. Otherwise it
    goes to h: when every instance is busy it follows the cache. With
    mockllm --time-scale K a wall-clock second is K model seconds; pass
    --margin-s 1/K for one model second.

  When no backend answers 200 but one answered (a malformed body: 400), the
  request goes to the first that answered, which gives the client the
  endpoint's own answer. When none answered: 502. Other requests are
  forwarded to the backends in turn, outside the decision counts.

Forwarding. The request goes on unchanged (head and body) but for the
hop-by-hop fields (Connection and what it names, Keep-Alive, TE, Trailer,
Transfer-Encoding, Upgrade, Proxy-*) and Expect (answered here); a chunked
request body is forwarded with a Content-Length. The response is relayed
as it arrives, each read written at once (an SSE event is not held back),
chunked framing passed through byte for byte (de-chunked for HTTP/1.0
clients), with X-Prefixgate-Route: backend=ADDR; reason=R; rule=ref-RULE;
cached=M added (R: holder, passed-over, ttft, no-match, other). Client and
backend connections both stay alive. An error before the response head
arrives is a 502 JSON error; a pooled connection that fails before any
response byte is retried once on a fresh one (a backend's idle close; a
backend that took the request and dropped it unanswered gets it twice).
An error after the head closes the client connection. A client that
leaves mid-answer is noticed at the next byte relayed to it; its backend
connection is then closed, which ends the generation (mockllm, vLLM).

GET /ref/stats: {"rule", "far_factor", "margin_s", "tie_tokens",
"backends", "requests" (decisions per backend), "decisions", "passed_over"
(cache-first: decisions that did not go to the holder), "mean_decision_ms"
(from the request's body read to the placement: the match round trip),
"no_match", "bad_gateway", "other_requests"}.

Cost. One thread of plain asyncio, no per-request threads: client
connections on streams, backend connections on protocol callbacks
(refpool.py; HTTP framing in httpmsg.py). Measured on the 2-CPU
development VM, shared (2026-12-03): 8 mockllm --time-scale 100, pgload
--workload fixed --body-bytes 49152 --rate 150 (streamed, 32 tokens) for
20 s, 3,053 requests, against the same pgload sent straight to the 8
instances. TTFT p50 0.86 ms direct, 3.7 ms through cache-first (+2.8 ms),
3.4 ms through predicted-ttft (+2.6); p90 +6.2 / +5.4 ms; p99 +11 / +10 ms.
Of that, the placement (8 match round trips, each instance parsing the
48 KB body on the same 2 CPUs) took 2.0-2.2 ms on average; the router used
40-44% of one CPU. One request at a time it adds ~1.3 ms. Through
instances at --time-scale K those milliseconds count K times in model
time: compare routers at equal overhead, or subtract it.
"""
import argparse
import asyncio
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from httpmsg import (BODY_MAX, BadMessage, error_response, read_chunked_body,  # noqa: E402
                     read_head, split_addr)
from refpool import Backend, BeforeHead, MatchJob, RelayJob  # noqa: E402

STREAM_LIMIT = 1 << 20  # client stream buffer: reads pause past twice this
ROUTED = ("/v1/completions", "/v1/chat/completions")


def better(a, b):
    """Whether answer a has a lower (P, Q, index) than b."""
    return (a["predicted_ttft_ms"], a["queue_tokens"], a["i"]) < \
        (b["predicted_ttft_ms"], b["queue_tokens"], b["i"])


def lowest(cands):
    best = cands[0]
    for c in cands[1:]:
        if better(c, best):
            best = c
    return best


def choose(rule, cands, far_factor=4.0, margin_s=1.0, tie_tokens=512):
    """(index, reason) of the candidate the rule picks; cands: match answers
    (dicts), each with its backend index "i"; at least one. Pure."""
    if rule == "predicted-ttft":
        return lowest(cands)["i"], "ttft"
    longest = max(c["cached_tokens"] for c in cands)
    h = lowest([c for c in cands if c["cached_tokens"] >= longest - tie_tokens])
    others = [c for c in cands if c is not h]

    def qtime(c):
        return c["queue_tokens"] / c["prefill_tokens_per_s"]

    if others and all(qtime(h) > far_factor * qtime(o) + margin_s for o in others):
        pick = lowest(cands)
        if pick is not h:
            return pick["i"], "passed-over"
    return h["i"], "holder"


class Router:
    def __init__(self, opts):
        self.opts = opts
        self.backends = [Backend(b) for b in opts.backend]
        self.turn = 0
        self.requests = [0] * len(self.backends)
        self.decisions = self.passed_over = self.no_match = self.bad_gateway = 0
        self.other = 0
        self.decision_s = 0.0
        self.tasks = set()

    # --- asking the backends ------------------------------------------------
    def ask(self, b, msg):
        """A future of b's (status, body) answer to msg; a pooled connection
        that fails before any answer byte is retried once on a fresh one."""
        fut = asyncio.get_running_loop().create_future()
        c = b.take()
        if c is None:
            self.spawn(self.ask_fresh(b, msg, fut))
            return fut
        job = MatchJob(fut)

        def retry(exc, got):
            if got or fut.done():
                MatchJob.failed(job, exc, got)
            else:
                self.spawn(self.ask_fresh(b, msg, fut))
        job.failed = retry
        c.start(msg, job)
        return fut

    async def ask_fresh(self, b, msg, fut):
        try:
            c = await b.connect()
        except OSError as e:
            if not fut.done():
                fut.set_exception(BeforeHead(str(e), False))
            return
        if fut.done():
            c.close()  # the caller stopped waiting
        else:
            c.start(msg, MatchJob(fut))

    def spawn(self, coro):
        t = asyncio.ensure_future(coro)
        self.tasks.add(t)  # a reference until it ends
        t.add_done_callback(self.tasks.discard)

    async def ask_all(self, path, body):
        """Every backend's match answer: a dict (200), a status, or None."""
        msg = (b"POST /mock/match%s HTTP/1.1\r\nHost: refrouter\r\n"
               b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
                   path.encode(), len(body))) + body
        futs = [self.ask(b, msg) for b in self.backends]
        done, pending = await asyncio.wait(futs, timeout=self.opts.match_timeout_s)
        out = []
        for i, f in enumerate(futs):
            if f not in done:
                f.cancel()  # its connection goes back to the pool once answered
                out.append(None)
                continue
            if f.exception() is not None:
                out.append(None)
                continue
            status, data = f.result()
            if status != 200:
                out.append(status)
                continue
            try:
                a = json.loads(data)
                a["i"] = i
                out.append(a)
            except ValueError:
                out.append(None)
        return out

    async def place(self, req):
        """(backend index or None, reason, cached tokens) for a routed request."""
        t0 = time.perf_counter()
        answers = await self.ask_all(req.path, req.body)
        self.decision_s += time.perf_counter() - t0
        self.decisions += 1
        cands = [a for a in answers if isinstance(a, dict)]
        if not cands:
            self.no_match += 1
            answered = [i for i, a in enumerate(answers) if a is not None]
            return (answered[0] if answered else None), "no-match", 0
        i, reason = choose(self.opts.rule, cands, self.opts.far_factor, self.opts.margin_s,
                           self.opts.tie_tokens)
        self.requests[i] += 1
        self.passed_over += reason == "passed-over"
        return i, reason, answers[i]["cached_tokens"]

    # --- forwarding ---------------------------------------------------------
    async def forward(self, req, b, route_line, cw):
        """Send req to b and relay the answer to the client writer cw. True
        when the client connection can serve another request."""
        lines = [b"%s %s HTTP/1.1" % (req.head.start[0], req.head.start[1])]
        lines += req.head.kept_lines(drop=(b"expect",))
        if req.head.get(b"host") is None:
            lines.append(b"Host: %s" % b.addr.encode())  # HTTP/1.1 needs one
        if req.head.chunked:
            lines.append(b"Content-Length: %d" % len(req.body))
        msg = b"\r\n".join(lines) + b"\r\n\r\n" + req.body
        for attempt in (0, 1):
            c = b.take()
            pooled = c is not None
            if not pooled:
                try:
                    c = await b.connect()
                except OSError as e:
                    return self.fail(cw, req, "backend %s: %s" % (b.addr, e))
            fut = asyncio.get_running_loop().create_future()
            try:
                return await c.start(msg, RelayJob(fut, req, cw, route_line))
            except BeforeHead as e:
                if pooled and attempt == 0 and not e.got:
                    continue
                return self.fail(cw, req, "backend %s: %s" % (b.addr, e))
            except BaseException:
                c.close()
                raise

    def fail(self, cw, req, msg):
        self.bad_gateway += 1
        cw.write(error_response(502, msg, req.close))
        return not req.close

    # --- the client side ----------------------------------------------------
    def stats(self):
        return {"rule": self.opts.rule, "far_factor": self.opts.far_factor,
                "margin_s": self.opts.margin_s, "tie_tokens": self.opts.tie_tokens,
                "backends": [b.addr for b in self.backends],
                "requests": {b.addr: n for b, n in zip(self.backends, self.requests)},
                "decisions": self.decisions, "passed_over": self.passed_over,
                "mean_decision_ms": round(self.decision_s / self.decisions * 1e3, 4)
                if self.decisions else 0.0,
                "no_match": self.no_match, "bad_gateway": self.bad_gateway,
                "other_requests": self.other}

    async def read_request(self, reader, cw):
        head = await read_head(reader)
        if head is None:
            return None
        req = argparse.Namespace(head=head, body=b"")
        if not head.start[2].startswith(b"HTTP/1."):
            raise BadMessage(400, "not an HTTP/1.x request")
        if head.length is not None and head.length > BODY_MAX:
            raise BadMessage(413, "request body over %d bytes" % BODY_MAX)
        target = head.start[1].decode("latin-1")
        req.path = target.split("?", 1)[0]
        req.http10 = head.start[2] == b"HTTP/1.0"
        req.close = b"close" in head.conn_tokens or (
            req.http10 and b"keep-alive" not in head.conn_tokens)
        if head.chunked or head.length:
            expect = head.get(b"expect")
            if expect is not None and expect.lower() == b"100-continue":
                cw.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            if head.chunked:
                req.body = await read_chunked_body(reader)
            else:
                req.body = await reader.readexactly(head.length)
        return req

    async def serve_client(self, reader, cw):
        try:
            while True:
                try:
                    req = await self.read_request(reader, cw)
                except BadMessage as e:
                    cw.write(error_response(e.status, str(e), True))
                    break
                if req is None or not await self.handle(req, cw):
                    break
                await cw.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client went
        except asyncio.CancelledError:
            pass  # shutting down (raising would only get it logged)
        finally:
            cw.close()

    async def handle(self, req, cw):
        method = req.head.start[0]
        if method == b"GET" and req.path == "/ref/stats":
            body = json.dumps(self.stats()).encode() + b"\n"
            cw.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n%s\r\n" % (
                         len(body), b"Connection: close\r\n" if req.close else b"") + body)
            return not req.close
        if method == b"POST" and req.path in ROUTED:
            i, reason, cached = await self.place(req)
            if i is None:
                return self.fail(cw, req, "no backend answered /mock/match")
        else:
            self.other += 1
            i, reason, cached = self.turn % len(self.backends), "other", 0
            self.turn += 1
        b = self.backends[i]
        route = b"X-Prefixgate-Route: backend=%s; reason=%s; rule=ref-%s; cached=%d" % (
            b.addr.encode(), reason.encode(), self.opts.rule.encode(), cached)
        return await self.forward(req, b, route, cw)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="Reference router for benchmarks: places each request by asking every "
        "mockllm backend's /mock/match (see the module docstring for the exact rules).")
    ap.add_argument("--listen", required=True, help="ADDR:PORT (port 0: any, printed)")
    ap.add_argument("--backend", action="append", required=True, help="ADDR:PORT, repeated")
    ap.add_argument("--rule", required=True, choices=["cache-first", "predicted-ttft"])
    ap.add_argument("--far-factor", type=float, default=4.0,
                    help="cache-first: pass the holder over only when its queue time exceeds "
                    "X x every other's + --margin-s (default 4)")
    ap.add_argument("--margin-s", type=float, default=1.0,
                    help="cache-first: the margin, in the instances' (wall-clock) seconds "
                    "(default 1.0)")
    ap.add_argument("--tie-tokens", type=int, default=512,
                    help="cache-first: matches within this many tokens of the longest tie "
                    "(default 512)")
    ap.add_argument("--match-timeout-s", type=float, default=5.0,
                    help="a backend not answering /mock/match in this time is not a "
                    "candidate (default 5)")
    opts = ap.parse_args(argv)
    try:
        for spec in [opts.listen] + opts.backend:
            split_addr(spec)
    except ValueError as e:
        ap.error(str(e))
    if opts.far_factor < 0 or opts.margin_s < 0 or opts.tie_tokens < 0 or \
            not opts.match_timeout_s > 0:
        ap.error("--far-factor, --margin-s and --tie-tokens must be >= 0, "
                 "--match-timeout-s > 0")
    return opts


async def run(opts):
    router = Router(opts)
    host, port = split_addr(opts.listen)
    server = await asyncio.start_server(router.serve_client, host, port, limit=STREAM_LIMIT,
                                        backlog=1024)
    print("refrouter: rule %s, %d backends, listening on %s port %d" % (
        opts.rule, len(router.backends), host, server.sockets[0].getsockname()[1]),
        file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()
    for b in router.backends:
        for c in b.idle:
            c.close()


def main(argv=None):
    asyncio.run(run(parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
