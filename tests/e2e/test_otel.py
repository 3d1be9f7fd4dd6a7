#!/usr/bin/env python3
"""OpenTelemetry traces end to end: mockllm instances behind one prefixgate
with --otlp-endpoint, and an OTLP/HTTP receiver in the test (http.server,
tools/bench/netutil.py) standing for the collector.

- a client's traceparent is passed on with the gateway's own span as the
  instance's parent (mockllm echoes what it received as X-Seen-*), its
  tracestate with it; the receiver gets the gateway's spans (request,
  route, backend, connect, first token, response) in that trace, the
  request's span the child of the client's and the parent of the rest,
  with their HTTP and GenAI attributes; a stream's first token has its span;
- a table of bad traceparents: each answered as without one (never a
  400), the instance sees a new trace and no tracestate, the spans have no
  parent;
- a refused attempt and the retry that answers: two backend spans, the
  first an error; under flow control, the wait's span, ending where the
  routing begins, or at the 429 of a deadline that expired;
- GenAI attributes (operation, max_tokens); other paths named by method;
- sampling is parent-based: a sampled parent is traced at ratio 0, an
  unsampled one is not at ratio 1, and a request without one follows the
  ratio;
- a collector that is down, or slower than --otlp-timeout, changes no
  answer: the same statuses and bodies, the loss counted in
  prefixgate_otlp_*;
- off (no --otlp-endpoint): traceparent passes untouched, nothing exported;
- the OpenAI Node SDK instrumented with OpenTelemetry's Node SDK (npm,
  installed into BUILD/npm at the first run; skipped, saying why, without
  node or npm): the app's trace goes on through the gateway's spans to the
  instance, and both reach the receiver.

usage: test_otel.py --build DIR [--tools DIR] --mode shm|bpf [-k SUBSTRING]
"""
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Fleet, free_port, run_suite, running, shm_only, wait_until  # noqa: E402
from netutil import OtlpReceiver  # noqa: E402

TESTS = []
QUIET = ["--health-check-path", "none", "--metrics-scrape-interval", "0"]
# the instance 10 times faster than mockllm's model (0.44 s a CHAT answer at
# 1x): for the tests that send many requests and check no timing
FAST = {0: ["--time-scale", "10"]}
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
CHAT = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello there"}]})
STREAM = json.dumps({"model": "m", "stream": True,
                     "messages": [{"role": "user", "content": "stream to me"}]})


def test(fn):
    TESTS.append(fn)
    return fn


class Collector(OtlpReceiver):
    """The receiver (netutil.py), keeping every span it gets, with its
    resource."""

    def __init__(self, delay_s=0.0):
        self.spans = []
        super().__init__(delay_s)

    def take(self, body):
        doc = json.loads(body)
        with self.lock:
            for rs in doc["resourceSpans"]:
                res = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}
                for ss in rs["scopeSpans"]:
                    for s in ss["spans"]:
                        s["resource"] = res
                        self.spans.append(s)

    def trace(self, trace_id):
        with self.lock:
            return [s for s in self.spans if s["traceId"] == trace_id]

    def wait_trace(self, trace_id, names, timeout=10):
        """The spans of trace_id once every name in names is among them."""
        ok = wait_until(lambda: set(names) <= {s["name"] for s in self.trace(trace_id)},
                        timeout)
        got = self.trace(trace_id)
        assert ok, "spans of %s: %s" % (trace_id, sorted(s["name"] for s in got))
        return got


def attrs(span):
    out = {}
    for a in span["attributes"]:
        v = a["value"]
        k = next(iter(v))
        out[a["key"]] = int(v[k]) if k == "intValue" else v[k]
    return out


def one(spans, name):
    found = [s for s in spans if s["name"] == name]
    assert len(found) == 1, "%d spans named %s" % (len(found), name)
    return found[0]


def tp(trace=TRACE, span=CLIENT_SPAN, flags="01"):
    return "00-%s-%s-%s" % (trace, span, flags)


def seen_parent(headers):
    """The instance's traceparent: (trace id, parent span id, flags)."""
    v = headers.get("x-seen-traceparent")
    assert v, "the instance got no traceparent: %s" % headers
    ver, trace, span, flags = v.split("-")
    assert ver == "00" and len(trace) == 32 and len(span) == 16 and len(flags) == 2, v
    return trace, span, flags


@test
def test_spans_and_parents(opts):
    col = Collector()
    f = Fleet(opts, n=1, gw_args=QUIET + ["--otlp-endpoint", col.url()])
    with running(f, col):
        st, h, body = f.post("/v1/chat/completions", STREAM,
                             {"traceparent": tp(), "tracestate": "vendor=abc,other=x"})
        assert st == 200, st
        trace, parent, flags = seen_parent(h)
        assert trace == TRACE and flags == "01", h["x-seen-traceparent"]
        assert parent != CLIENT_SPAN, "the instance's parent is the gateway's span"
        assert h.get("x-seen-tracestate") == "vendor=abc,other=x", h
        spans = col.wait_trace(TRACE, ["POST /v1/chat/completions", "prefixgate.route",
                                       "prefixgate.backend", "prefixgate.first_token",
                                       "prefixgate.response"])
        req = one(spans, "POST /v1/chat/completions")
        assert req["spanId"] == parent, "the span the instance was given is the request's"
        assert req["parentSpanId"] == CLIENT_SPAN and req["kind"] == 2, req
        a = attrs(req)
        assert a["http.request.method"] == "POST" and a["url.path"] == "/v1/chat/completions"
        assert a["http.response.status_code"] == 200 and a["gen_ai.operation.name"] == "chat"
        assert a["prefixgate.stream"] is True and a["client.address"] == "127.0.0.1", a
        assert req["resource"]["service.name"] == {"stringValue": "prefixgate"}
        t0, t1 = int(req["startTimeUnixNano"]), int(req["endTimeUnixNano"])
        assert abs(t0 / 1e9 - time.time()) < 60 and t0 <= t1, (t0, t1)
        ids = {s["spanId"] for s in spans}
        assert len(ids) == len(spans), "span ids are distinct"
        for s in spans:
            if s is not req:
                assert s["parentSpanId"] in ids, "%s's parent is in the trace" % s["name"]
                assert t0 <= int(s["startTimeUnixNano"]) <= int(s["endTimeUnixNano"]) <= t1, s
        route = one(spans, "prefixgate.route")
        assert route["parentSpanId"] == req["spanId"]
        a = attrs(route)
        assert a["prefixgate.route.strategy"] == "prefix_aware", a
        assert a["prefixgate.route.backend"] == f.addr("b0"), a
        assert "prefixgate.route.matched_tokens" in a and "prefixgate.route.decision" in a
        be = one(spans, "prefixgate.backend")
        assert be["kind"] == 3 and be["parentSpanId"] == req["spanId"], be
        a = attrs(be)
        assert a["server.address"] == "127.0.0.1" and a["server.port"] == f.mocks["b0"][0], a
        assert a["http.response.status_code"] == 200, a
        if not a["prefixgate.connection.reused"]:
            assert one(spans, "prefixgate.connect")["parentSpanId"] == be["spanId"]
        # a second request without a parent: its own trace, the same shape
        st, h, _ = f.post("/v1/chat/completions", CHAT)
        assert st == 200
        trace2, parent2, flags2 = seen_parent(h)
        assert trace2 != TRACE and flags2 == "01", h["x-seen-traceparent"]
        spans = col.wait_trace(trace2, ["POST /v1/chat/completions", "prefixgate.route",
                                        "prefixgate.backend"])
        req = one(spans, "POST /v1/chat/completions")
        assert "parentSpanId" not in req and req["spanId"] == parent2, req
        assert wait_until(lambda: f.counter("prefixgate_otlp_spans_exported_total") >=
                          len(col.spans), 5)
        assert f.counter("prefixgate_otlp_export_errors_total") == 0
        assert f.counter("prefixgate_otlp_spans_dropped_total") == 0


BAD = [
    "",
    "00-%s-%s-01-" % (TRACE, CLIENT_SPAN),          # version 00 is exactly 55 bytes
    "00-%s-%s-01" % (TRACE.upper(), CLIENT_SPAN),   # upper case
    "ff-%s-%s-01" % (TRACE, CLIENT_SPAN),           # version ff
    "00-%s-%s-01" % ("0" * 32, CLIENT_SPAN),        # zero trace id
    "00-%s-%s-01" % (TRACE, "0" * 16),              # zero parent id
    "00-%s-%s-1" % (TRACE, CLIENT_SPAN),            # short flags
    "00-%s-%s" % (TRACE, CLIENT_SPAN),              # no flags
    "garbage",
    "00-%s-%s-zz" % (TRACE, CLIENT_SPAN),
    "x" * 4000,
]


@test
@shm_only
def test_bad_traceparents(opts):
    col = Collector()
    f = Fleet(opts, n=1, gw_args=QUIET + ["--otlp-endpoint", col.url()], mock_args=FAST)
    seen = []  # (bad traceparent, the trace and parent the instance saw)
    with running(f, col):
        for bad in BAD + ["two"]:
            if bad == "two":  # two fields, each valid alone: not a valid one
                hdrs = [("traceparent", tp()), ("traceparent", tp(span="1" * 16))]
            else:
                hdrs = [("traceparent", bad)]
            s = socket.create_connection(("127.0.0.1", f.port), timeout=10)
            head = "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n" \
                   "Content-Type: application/json\r\nContent-Length: %d\r\n" \
                   "tracestate: k=v\r\nConnection: close\r\n" % len(CHAT)
            head += "".join("%s: %s\r\n" % kv for kv in hdrs) + "\r\n"
            s.sendall(head.encode() + CHAT.encode())
            data = b""
            while True:
                d = s.recv(65536)
                if not d:
                    break
                data += d
            s.close()
            status = data.split(b"\r\n", 1)[0]
            assert status == b"HTTP/1.1 200 OK", (bad[:80], status)
            h = {}
            for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
                k, v = line.decode().split(":", 1)
                h[k.lower()] = v.strip()
            trace, parent, flags = seen_parent(h)
            assert trace != TRACE and parent != CLIENT_SPAN, (bad[:80], h)
            assert "x-seen-tracestate" not in h, "tracestate dropped with a bad parent"
            seen.append((bad, trace, parent))
        # the spans, once all were sent: one wait for the exporter's turns,
        # not one per request
        for bad, trace, parent in seen:
            spans = col.wait_trace(trace, ["POST /v1/chat/completions"])
            req = one(spans, "POST /v1/chat/completions")
            assert "parentSpanId" not in req and req["spanId"] == parent, (bad[:80], req)


@test
@shm_only
def test_sampling(opts):
    col = Collector()
    f = Fleet(opts, n=1, gw_args=QUIET + ["--otlp-endpoint", col.url(), "--otlp-sample", "0"],
              mock_args=FAST)
    with running(f, col):
        # ratio 0: no parent, not traced, said so to the instance
        st, h, _ = f.post("/v1/chat/completions", CHAT)
        assert st == 200
        free_trace, _, flags = seen_parent(h)
        assert flags == "00", h["x-seen-traceparent"]
        # an unsampled parent: not traced, its flag passed on
        st, h, _ = f.post("/v1/chat/completions", CHAT,
                          {"traceparent": tp(trace="1" * 32, flags="00")})
        assert seen_parent(h)[2] == "00"
        # a sampled parent: traced whatever the ratio; its spans come
        # after the others' would have (one worker's ring is in order,
        # and the exporter drains every ring at each turn)
        for _ in range(4):
            st, h, _ = f.post("/v1/chat/completions", CHAT, {"traceparent": tp()})
            assert st == 200 and seen_parent(h)[2] == "01"
        col.wait_trace(TRACE, ["POST /v1/chat/completions"])
        wait_until(lambda: len([s for s in col.trace(TRACE) if s["kind"] == 2]) == 4, 5)
        time.sleep(0.5)  # two exporter turns more
        assert not col.trace(free_trace) and not col.trace("1" * 32), "unsampled exported"
        assert {s["traceId"] for s in col.spans} == {TRACE}


@test
@shm_only
def test_gen_ai_attributes(opts):
    col = Collector()
    f = Fleet(opts, n=1, gw_args=QUIET + ["--otlp-endpoint", col.url()])
    with running(f, col):
        st, h, _ = f.post("/v1/completions",
                          json.dumps({"model": "m", "prompt": "p", "max_tokens": 7}))
        assert st == 200
        trace = seen_parent(h)[0]
        a = attrs(one(col.wait_trace(trace, ["POST /v1/completions"]), "POST /v1/completions"))
        assert a["gen_ai.operation.name"] == "text_completion", a
        assert a["gen_ai.request.max_tokens"] == 7 and a["prefixgate.stream"] is False, a
        # any other path: the method alone names the span, no GenAI attribute
        st, h, _ = f.post("/invocations", "raw bytes")
        assert st == 200
        trace = seen_parent(h)[0]
        a = attrs(one(col.wait_trace(trace, ["POST"]), "POST"))
        assert a["url.path"] == "/invocations" and "gen_ai.operation.name" not in a, a


@test
@shm_only
def test_retry_spans(opts):
    """An attempt on a backend that refuses, then one that answers: two
    backend spans, the first an error, and the request's span says 2."""
    col = Collector()
    dead = "127.0.0.1:%d" % free_port()  # nothing listens there
    f = Fleet(opts, n=1, gw_args=QUIET + ["--otlp-endpoint", col.url(), "--backend", dead])
    with running(f, col):
        body = json.dumps({"model": "m", "prompt": "retry me", "max_tokens": 2})
        key = next((k for k in ("k%d" % i for i in range(200))
                    if f.dry_run(body, path="/v1/completions", key=k)["backend"] == dead), None)
        assert key, "no key of 200 goes to the dead backend first"
        st, h, _ = f.post("/v1/completions", body, {"X-Prefixgate-Key": key})
        assert st == 200, st
        trace = seen_parent(h)[0]
        spans = col.wait_trace(trace, ["POST /v1/completions", "prefixgate.backend"])
        wait_until(lambda: len([s for s in col.trace(trace)
                                if s["name"] == "prefixgate.backend"]) == 2, 5)
        spans = col.trace(trace)
        att = sorted((s for s in spans if s["name"] == "prefixgate.backend"),
                     key=lambda s: attrs(s)["prefixgate.attempt"])
        assert len(att) == 2, [s["name"] for s in spans]
        a0, a1 = attrs(att[0]), attrs(att[1])
        assert att[0]["status"]["code"] == 2 and a0["error.type"] == "backend_failed", att[0]
        assert "%s:%d" % (a0["server.address"], a0["server.port"]) == dead, a0
        assert att[1]["status"]["code"] == 0 and a1["http.response.status_code"] == 200, a1
        assert int(att[0]["endTimeUnixNano"]) <= int(att[1]["startTimeUnixNano"])
        req = attrs(one(spans, "POST /v1/completions"))
        assert req["prefixgate.attempts"] == 2, req


@test
def test_queue_spans(opts):
    """Under flow control, behind a flood: a request that waits then goes
    on has its wait's span ending where its routing begins; one whose
    deadline expires while it waits gets 429, its wait's span running to its
    end and no routing span."""
    import random
    import test_flow as flow
    col = Collector()
    f = Fleet(opts, 2, gw_args=flow.GW + ["--otlp-endpoint", col.url()])
    with running(f, col):
        ts, _, errs = flow.flood(f, 16, "sk-a", 8)
        flow.queued_up(f, 4)  # as test_flow.py's deadline_expires_in_the_queue
        st, _, data, _ = flow.send(f, flow.chat(random.Random(9), flow.SMALL_WORDS), "sk-c",
                                   {"traceparent": tp(trace="3" * 32),
                                    "X-Prefixgate-Deadline-Ms": "150"})
        assert st == 429, (st, data[:200])
        st, _, data, _ = flow.send(f, flow.chat(random.Random(3), flow.SMALL_WORDS), "sk-b",
                                   {"traceparent": tp(trace="2" * 32)})
        assert st == 200, (st, data[:200])
        flow.join(ts, errs)
        flow.quiet(f)
        spans = col.wait_trace("2" * 32, ["prefixgate.queue", "prefixgate.route"])
        q, r = one(spans, "prefixgate.queue"), one(spans, "prefixgate.route")
        assert q["endTimeUnixNano"] == r["startTimeUnixNano"], (q, r)
        assert int(q["endTimeUnixNano"]) > int(q["startTimeUnixNano"]), q
        spans = col.wait_trace("3" * 32, ["POST /v1/chat/completions", "prefixgate.queue"])
        req = one(spans, "POST /v1/chat/completions")
        assert attrs(req)["http.response.status_code"] == 429
        assert one(spans, "prefixgate.queue")["endTimeUnixNano"] == req["endTimeUnixNano"]
        assert not [s for s in spans if s["name"] == "prefixgate.route"], spans


def answers(f, n=20):
    """n requests' statuses and bodies (mockllm's answer to a prompt is
    the same every time)."""
    out = []
    for i in range(n):
        st, _, body = f.post("/v1/completions",
                             json.dumps({"model": "m", "prompt": "p%d" % (i % 4),
                                         "max_tokens": 4}),
                             {"traceparent": tp(span="%016x" % (i + 1))})
        out.append((st, json.loads(body)["choices"][0]["text"]))
    return out


@test
@shm_only
def test_collector_down_or_slow(opts):
    # the reference: a collector that answers
    col = Collector()
    f = Fleet(opts, n=1, gw_args=QUIET + ["--otlp-endpoint", col.url()], mock_args=FAST)
    try:
        good = answers(f)
        assert all(st == 200 for st, _ in good), good
    finally:
        f.stop()
        col.close()
    # down: nothing listens on the port
    down = free_port()
    f = Fleet(opts, n=1, gw_args=QUIET + ["--otlp-endpoint", "http://127.0.0.1:%d" % down],
              mock_args=FAST)
    with running(f):
        assert answers(f) == good
        assert wait_until(lambda: f.counter("prefixgate_otlp_export_errors_total") >= 1, 5)
        assert f.counter("prefixgate_otlp_spans_dropped_total") >= 20
        assert f.counter("prefixgate_otlp_spans_exported_total") == 0
    # slow: every answer 2 s late, past --otlp-timeout 300
    col = Collector(delay_s=2.0)
    f = Fleet(opts, n=1, gw_args=QUIET + ["--otlp-endpoint", col.url(),
                                          "--otlp-timeout", "300"], mock_args=FAST)
    with running(f, col):
        got = []
        for _ in range(3):  # spread over several exporter turns
            got += answers(f, 10)
            time.sleep(0.3)
        assert got == good + good[:10], got
        assert wait_until(lambda: f.counter("prefixgate_otlp_export_errors_total") >= 1, 5)
        assert f.counter("prefixgate_otlp_spans_dropped_total") > 0
        assert "otlp: export to" in f.log(), "the failure is logged"


@test
@shm_only
def test_off(opts):
    f = Fleet(opts, n=1, gw_args=QUIET)
    with running(f):
        st, h, _ = f.post("/v1/chat/completions", CHAT,
                          {"traceparent": tp(), "tracestate": "k=v"})
        assert st == 200
        assert h["x-seen-traceparent"] == tp() and h["x-seen-tracestate"] == "k=v", h
        st, h, _ = f.post("/v1/chat/completions", CHAT, {"traceparent": "garbage"})
        assert st == 200 and h["x-seen-traceparent"] == "garbage", h
        st, h, _ = f.post("/v1/chat/completions", CHAT)
        assert "x-seen-traceparent" not in h, "none made up when off"
        assert f.counter("prefixgate_otlp_spans_exported_total") == 0
        assert f.counter("prefixgate_otlp_export_errors_total") == 0


NODE_PACKAGES = ["openai@4", "@opentelemetry/api@1", "@opentelemetry/sdk-trace-node@1.30",
                 "@opentelemetry/exporter-trace-otlp-http@0.57",
                 "@opentelemetry/instrumentation@0.57", "@opentelemetry/instrumentation-http@0.57"]
NODE_CLIENT = r"""
const { NodeTracerProvider, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-node');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http');
const { registerInstrumentations } = require('@opentelemetry/instrumentation');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
const api = require('@opentelemetry/api');
const [gw, collector] = process.argv.slice(2);
const provider = new NodeTracerProvider({spanProcessors: [
  new SimpleSpanProcessor(new OTLPTraceExporter({url: collector + '/v1/traces'}))]});
provider.register();
registerInstrumentations({instrumentations: [new HttpInstrumentation()]});
const OpenAI = require('openai');  // after the instrumentation: its requests are traced
const c = new OpenAI({baseURL: gw + '/v1', apiKey: 'sk-test', maxRetries: 0});
(async () => {
  const out = {};
  await api.trace.getTracer('test-app').startActiveSpan('app-call', async (span) => {
    out.trace = span.spanContext().traceId;
    out.app = span.spanContext().spanId;
    const {data, response} = await c.completions.create(
      {model: 'm', prompt: 'hello', max_tokens: 3}).withResponse();
    out.completion = data.choices[0].text;
    out.seen = response.headers.get('x-seen-traceparent');
    let text = '';
    const s = await c.chat.completions.create({model: 'm', stream: true, max_tokens: 4,
      messages: [{role: 'user', content: 'hi with a trace'}]});
    for await (const ch of s) text += ch.choices[0].delta.content || '';
    out.chat = text;
    span.end();
  });
  await provider.shutdown();  // the app's spans exported
  console.log(JSON.stringify(out));
})().catch(e => { console.error(String(e && e.stack || e)); process.exit(1); });
"""


@test
def test_node_sdk(opts):
    """The OpenAI Node SDK instrumented with OpenTelemetry's Node SDK
    (@opentelemetry/sdk-trace-node, its HTTP instrumentation, its OTLP/HTTP
    exporter to the same receiver): the app's trace goes on through the
    gateway to the instance."""
    import shutil
    import subprocess
    node = shutil.which("node")
    if not node or not shutil.which("npm"):
        return "SKIP node or npm not installed"
    mods = os.path.join(os.path.abspath(opts.tools), "npm")
    if not os.path.isdir(os.path.join(mods, "node_modules", "@opentelemetry",
                                      "instrumentation-http")):
        r = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                            mods] + NODE_PACKAGES, capture_output=True, timeout=240)
        if r.returncode != 0:
            return "SKIP npm could not install the OpenTelemetry packages: %s" % \
                r.stderr.decode(errors="replace").strip().splitlines()[-1:]
    col = Collector()
    f = Fleet(opts, n=1, gw_args=QUIET + ["--otlp-endpoint", col.url()])
    script = os.path.join(f.tmp, "otel-client.js")
    with open(script, "w") as fh:
        fh.write(NODE_CLIENT)
    with running(f, col):
        env = dict(os.environ, NODE_PATH=os.path.join(mods, "node_modules"))
        r = subprocess.run([node, script, "http://127.0.0.1:%d" % f.port, col.url()],
                           capture_output=True, timeout=60, env=env)
        assert r.returncode == 0, (r.returncode, r.stderr.decode()[-2000:])
        out = json.loads(r.stdout.decode().strip().splitlines()[-1])
        assert out["completion"] and out["chat"], out
        trace = out["trace"]
        # the instance is in the app's trace, under the gateway's span
        assert out["seen"] and out["seen"].split("-")[1] == trace, out
        spans = col.wait_trace(trace, ["app-call", "POST /v1/completions",
                                       "POST /v1/chat/completions", "prefixgate.route"])
        by_id = {s["spanId"]: s for s in spans}
        app = one(spans, "app-call")
        assert app["spanId"] == out["app"]
        for name in ("POST /v1/completions", "POST /v1/chat/completions"):
            gw = one(spans, name)
            assert gw["kind"] == 2 and gw["resource"]["service.name"]["stringValue"] == \
                "prefixgate", gw
            # its parent: the SDK's HTTP client span, a child of app-call
            client = by_id.get(gw["parentSpanId"])
            assert client, "the gateway's parent %s is not among the app's spans %s" % \
                (gw["parentSpanId"], sorted(s["name"] for s in spans))
            assert client["kind"] == 3 and client["parentSpanId"] == app["spanId"], client
        assert out["seen"].split("-")[2] == one(spans, "POST /v1/completions")["spanId"]


if __name__ == "__main__":
    sys.exit(run_suite(TESTS))
