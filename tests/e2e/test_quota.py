#!/usr/bin/env python3
"""Quotas per tenant and usage accounting end to end: mockllm instances
behind one prefixgate, tenants by a header (--flow-tenant header:X-Tenant).

- limits hit: a tenant's own requests a minute and the default's for
  another; 429 in OpenAI's form with Retry-After; every answer of a tenant
  with a quota carries x-ratelimit-* with the right figures; a tenant
  without one carries none; refusals in /metrics and GET /tenants;
- tokens a minute: a tenant past its tokens is refused until they leave
  the minute, and says so;
- a reload of the configuration file changes a limit live, PUT
  /tenants/NAME too; bad values are refused with a reason (flags, file,
  admin API) and nothing is started;
- usage (with --exact-usage; without it and without a quota, every figure
  is estimated) exact from a non-streamed answer and from a stream with
  stream_options.include_usage (the figures the engine reported), the
  completion tokens of a stream without usage estimated, each figure
  saying which in GET /tenants, /metrics and the access log. In bpf mode
  the data path is sockmsg for streams (the kernel carries the body): the
  stream's figures may then be estimated, and must say so;
- two gateways sharing their counts over NATS hold a tenant to one limit
  between them (a real nats-server; skipped, saying why, without it);
- etcd's P/config/quota and P/tenants/NAME set limits live (a real etcd
  on free loopback ports; skipped, saying why, without it);
- a 429 before the body is all in keeps the connection: the rest of a
  Content-Length body is dropped and the next request served; a chunked
  one's answer closes it.

usage: test_quota.py --build DIR [--tools DIR] --mode shm|bpf [-k SUBSTRING]
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Fleet, http_get, read_reply, run_suite, shm_only, wait_until  # noqa: E402

TESTS = []
CUT = 100000  # bytes of a body sent before its answer is read
GW = ["--flow-tenant", "header:X-Tenant", "--health-check-path", "none",
      "--metrics-scrape-interval", "0"]


def test(fn):
    TESTS.append(fn)
    return fn


def chat(words=8, max_tokens=4, stream=False, usage=False):
    b = {"model": "m", "max_tokens": max_tokens,
         "messages": [{"role": "user", "content": " ".join(["word"] * words)}]}
    if stream:
        b["stream"] = True
        if usage:
            b["stream_options"] = {"include_usage": True}
    return json.dumps(b)


def send(f, tenant, body=None):
    h = {"Content-Type": "application/json"}
    if tenant:
        h["X-Tenant"] = tenant
    return f.post("/v1/chat/completions", body or chat(), h)


def tenant(f, name):
    st, r = f.admin("GET", "/tenants")
    assert st == 200, (st, r)
    for t in r["tenants"]:
        if t["tenant"] == name:
            return t
    raise AssertionError("no tenant %s in %s" % (name, r))


def metric(f, name, labels):
    want = "%s{%s} " % (name, labels)
    for line in f.metrics().splitlines():
        if line.startswith(want):
            return int(line.split()[-1])
    raise AssertionError("no sample " + want)


@test
@shm_only
def limits_and_headers(opts):
    """A tenant's own rpm and the default's: the limit's requests go, the
    next is 429 with Retry-After and the headers; counted as refused."""
    f = Fleet(opts, 2, gw_args=GW + ["--quota", "rpm=4", "--tenant", "team-a:rpm=2"])
    try:
        for i in range(2):
            st, h, data = send(f, "team-a")
            assert st == 200, (st, data[:200])
            assert h["x-ratelimit-limit-requests"] == "2", h
            assert h["x-ratelimit-remaining-requests"] == str(1 - i), h
            assert re.fullmatch(r"(\d+(\.\d+)?s|\d+ms)", h["x-ratelimit-reset-requests"]), h
            assert "x-ratelimit-limit-tokens" not in h, h  # no token limit
        st, h, data = send(f, "team-a")
        assert st == 429, (st, data)
        err = json.loads(data)["error"]
        assert err["code"] == "rate_limit_exceeded" and "team-a" in err["message"], err
        assert 1 <= int(h["retry-after"]) <= 60, h
        assert h["x-ratelimit-remaining-requests"] == "0", h
        # the default's 4 for another tenant, untouched by team-a's
        got = [send(f, "team-b")[0] for _ in range(5)]
        assert got == [200] * 4 + [429], got
        t = tenant(f, "team-a")
        assert t["quota"] == {"rpm": 2, "tpm": None, "own": ["rpm"]}, t
        assert t["refused"]["requests"] == 1 and t["usage"]["throttled"] == 1, t
        assert t["usage"]["requests"] == 3, t
        assert tenant(f, "team-b")["quota"]["own"] == [], tenant(f, "team-b")
        assert metric(f, "prefixgate_quota_refused_total",
                      'tenant="team-b",limit="requests"') == 1
        assert metric(f, "prefixgate_tenant_throttled_total", 'tenant="team-b"') == 1
        assert metric(f, "prefixgate_quota_remaining", 'tenant="team-a",limit="requests"') == 0
        # quotas are off for no one else: no headers without a quota
        f.stop()
        f = Fleet(opts, 1, gw_args=GW)
        st, h, _ = send(f, "team-a")
        assert st == 200 and not any(k.startswith("x-ratelimit") for k in h), h
        # and no answer is read for its usage: every figure estimated
        u = tenant(f, "team-a")["usage"]
        assert u["prompt_tokens"]["exact"] == 0 and u["prompt_tokens"]["estimated"] > 0, u
    finally:
        f.stop()


@test
@shm_only
def token_quota(opts):
    """Tokens a minute: the prompt counted when routed, the completion at
    the end; past the limit, 429 naming tokens until they leave."""
    f = Fleet(opts, 1, gw_args=GW + ["--tenant", "team-t:tpm=100"])
    try:
        st, h, data = send(f, "team-t", chat(words=8, max_tokens=60))
        assert st == 200, (st, data[:200])
        assert h["x-ratelimit-limit-tokens"] == "100", h
        # before the answer: its prompt (as routing counts it) only
        assert int(h["x-ratelimit-remaining-tokens"]) < 100, h
        used = tenant(f, "team-t")["minute"]["tokens"]
        assert used >= 60, used  # the 60 completion tokens counted at the end
        st, h, data = send(f, "team-t", chat(words=8, max_tokens=60))
        assert st == 200, (st, data[:200])  # below 100 before it: goes, overshoots once
        st, h, data = send(f, "team-t")
        assert st == 429 and "tokens (TPM)" in json.loads(data)["error"]["message"], data
        assert h["x-ratelimit-remaining-tokens"] == "0", h
        assert tenant(f, "team-t")["refused"]["tokens"] == 1
    finally:
        f.stop()


def hup(f, conf, text):
    with open(conf, "w") as fh:
        fh.write(text)
    done = re.compile(r"reload: %s(: applied|: nothing changed| refused)" % re.escape(conf))
    n = len(done.findall(f.log()))
    f.gw.send_signal(signal.SIGHUP)
    assert wait_until(lambda: len(done.findall(f.log())) > n, 5), f.log()[-2000:]
    return f.log().split("SIGHUP")[-1]


@test
@shm_only
def reload_and_admin_change_limits(opts):
    """A reload changes a tenant's limit and the default, at once; PUT
    /tenants/NAME sets one live; GET /config shows the file's."""
    f = Fleet(opts, 1, start_gateway=False)
    try:
        conf = os.path.join(f.tmp, "quota.conf")
        with open(conf, "w") as fh:
            fh.write("tenant team-a { rpm 1; }\n")
        f.start_gateway(GW + ["-c", conf])
        assert [send(f, "team-a")[0] for _ in range(2)] == [200, 429]
        said = hup(f, conf, "quota rpm=1;\ntenant team-a { rpm 3; }\n")
        assert "tenants (1)" in said and "quota" in said, said
        assert [send(f, "team-a")[0] for _ in range(3)] == [200, 200, 429]
        assert [send(f, "team-z")[0] for _ in range(2)] == [200, 429]
        st, r = f.admin("GET", "/config")
        assert "rpm 3;" in str(r) and "quota rpm=1,tpm=0" in str(r), r
        st, r = f.admin("PUT", "/tenants/team-z", {"rpm": 5, "tpm": None})
        assert st == 200 and r["quota"] == {"rpm": 5, "tpm": None, "own": ["rpm"]}, (st, r)
        assert send(f, "team-z")[0] == 200
        st, r = f.admin("PUT", "/tenants/team-z", {"rpm": None})
        assert st == 200 and r["quota"]["rpm"] == 1, r  # back to the default
        for body, says in (({"rpm": -1}, "rpm"), ({"rpm": 1.5}, "rpm"), ({"rps": 1}, "rps"),
                           ({"tpm": 10 ** 10}, "tpm"), ("[1]", "expected")):
            st, r = f.admin("PUT", "/tenants/team-z", body)
            assert st == 400 and says in r["error"], (body, st, r)
        st, r = f.admin("PUT", "/tenants/not%20a%20name", {"rpm": 1})
        assert st == 400, (st, r)
        # a bad file is refused whole: the limits stay
        said = hup(f, conf, "tenant team-a { rpm lots; }\n")
        assert "refused" in said and "rpm: expected 0 (no limit)" in said, said
        assert tenant(f, "team-a")["quota"]["rpm"] == 3
    finally:
        f.stop()


@test
@shm_only
def bad_values_refused(opts):
    """--quota and --tenant's rpm=/tpm= out of range or malformed: refused by --check
    naming the flag and what is expected."""
    gw = os.path.join(opts.build, "prefixgate")
    for args, says in ((["--quota", "rpm=ten"], "--quota: rpm: expected 0 (no limit)"),
                       (["--quota", "rpm=1,rpm=2"], "--quota: rpm given twice"),
                       (["--quota", "burst=3"], "expected rpm=N or tpm=N"),
                       (["--tenant", "a:tpm=-5"], "--tenant a: tpm: expected 0 (no limit)")):
        r = subprocess.run([gw, "--no-bpf", "--check"] + args, capture_output=True, text=True,
                           timeout=20)
        assert r.returncode == 1 and says in r.stderr, (args, r.returncode, r.stderr)


def usage_of(t):
    return t["usage"]


@test
def usage_exact_and_estimated(opts):
    """Exact figures from a non-streamed answer and an include_usage
    stream; a stream without usage has its completion estimated; the
    access log, GET /tenants and /metrics agree, each figure saying which."""
    f = Fleet(opts, 1, start_gateway=False)
    try:
        alog = os.path.join(f.tmp, "access.log")
        f.start_gateway(GW + ["--access-log", alog, "--exact-usage"])
        st, _, data = send(f, "acct", chat(words=20, max_tokens=5))
        assert st == 200, data[:200]
        reported = json.loads(data)["usage"]
        u = usage_of(tenant(f, "acct"))
        assert u["prompt_tokens"] == {"exact": reported["prompt_tokens"], "estimated": 0}, u
        assert u["completion_tokens"] == {"exact": reported["completion_tokens"],
                                          "estimated": 0}, u
        st, _, data = send(f, "acct-s", chat(words=20, max_tokens=5, stream=True, usage=True))
        assert st == 200
        last = [json.loads(ln[6:]) for ln in data.decode().splitlines()
                if ln.startswith("data: {")][-1]
        reported = last["usage"]
        u = usage_of(tenant(f, "acct-s"))
        c = u["completion_tokens"]
        if opts.mode == "shm":  # the copy path: every byte seen
            assert c == {"exact": reported["completion_tokens"], "estimated": 0}, u
            assert u["prompt_tokens"]["exact"] == reported["prompt_tokens"], u
        else:  # sockmsg may carry the body: then the figures say estimated
            assert c["exact"] + c["estimated"] > 0 and min(c.values()) == 0, u
        st, _, data = send(f, "acct-n", chat(words=20, max_tokens=5, stream=True))
        assert st == 200
        u = usage_of(tenant(f, "acct-n"))
        assert u["completion_tokens"]["exact"] == 0 and u["completion_tokens"]["estimated"] > 0, u
        assert u["prompt_tokens"]["estimated"] > 0 and u["prompt_tokens"]["exact"] == 0, u
        assert metric(f, "prefixgate_tenant_tokens_total",
                      'tenant="acct",kind="prompt",source="exact"') > 0
        assert metric(f, "prefixgate_model_requests_total", 'model="default"') == 3
        # the access log: each line's usage, and which figures are estimated
        assert wait_until(lambda: os.path.exists(alog) and
                          len(open(alog).read().splitlines()) >= 3, 5)
        recs = {r["tenant"]: r for r in map(json.loads, open(alog).read().splitlines())}
        assert recs["acct"]["usage"]["estimated"] == ["cached_tokens"] or \
            recs["acct"]["usage"]["estimated"] == [], recs["acct"]
        assert "completion_tokens" in recs["acct-n"]["usage"]["estimated"], recs["acct-n"]
        assert recs["acct"]["usage"]["prompt_tokens"] == \
            usage_of(tenant(f, "acct"))["prompt_tokens"]["exact"]
    finally:
        f.stop()


@test
def nats_shares_counts(opts):
    """2 gateways over NATS, one tenant at rpm=10 on both: requests spread
    over both, each sent after the last one's count had time to travel,
    get 10 between them, not 10 each; each gateway sees the other's."""
    from test_fleet_nats import Setup, need_nats
    why = need_nats(opts)
    if why:
        return why
    s = Setup(opts, 1)
    try:
        gws = [s.gateway(GW + ["--tenant", "team-n:rpm=10"]) for _ in range(2)]
        assert s.all_peered(), [g.log()[-500:] for g in gws]
        got = []
        for i in range(16):
            st, h = gws[i % 2].post(chat(), {"X-Tenant": "team-n"})
            got.append(st)
            time.sleep(0.1)  # 5 fleet intervals: the count is told by then
        assert got.count(200) == 10 and got.count(429) == 6, got
        for g in gws:
            t = [x for x in g.admin("/tenants")["tenants"] if x["tenant"] == "team-n"][0]
            assert t["minute"]["requests"] == 5 and t["minute"]["peer_requests"] == 5, t
            assert metric_value(g.admin("/metrics"), "prefixgate_fleet_quota_applied_total") > 0
    finally:
        s.close()


@test
def etcd_sets_quotas(opts):
    """The default from P/config/quota, a tenant's own from P/tenants/NAME,
    applied as they are put; a bad value is logged and not applied."""
    import shutil
    import urllib.request
    from etcd_harness import Etcd, Gateways
    if opts.mode == "bpf":
        return "SKIP the gateway runs with --no-bpf here: covered by --mode shm"
    if not shutil.which("etcd"):
        return "SKIP etcd not installed (make deps)"
    f = Fleet(opts, 1, start_gateway=False)
    e = gws = None
    try:
        e = Etcd(f.tmp)
        e.put_backend(f.addr("b0"))
        e.put("config/quota", json.dumps({"rpm": 2}))
        gws = Gateways(opts, e, f.tmp)
        g = gws.start(extra=GW)

        def post(t):
            req = urllib.request.Request(
                "http://127.0.0.1:%d/v1/chat/completions" % g["port"], chat().encode(),
                {"Content-Type": "application/json", "X-Tenant": t})
            try:
                return urllib.request.urlopen(req, timeout=10).status
            except urllib.error.HTTPError as err:
                return err.code

        def rpm(t):
            st, body = http_get(g["admin"], "/tenants", 2.0)
            for x in json.loads(body)["tenants"]:
                if x["tenant"] == t:
                    return x["quota"]["rpm"]
            return None

        assert wait_until(lambda: Gateways.backends(g) == [f.addr("b0")], 5)
        got = [post("team-e") for _ in range(3)]
        assert got == [200, 200, 429], (got, open(g["log"]).read()[-1500:])
        e.put("tenants/team-e", json.dumps({"rpm": 4}))
        assert wait_until(lambda: rpm("team-e") == 4, 5), open(g["log"]).read()[-1000:]
        got = [post("team-e") for _ in range(3)]
        assert got == [200, 200, 429], (got, open(g["log"]).read()[-1500:])
        e.put("tenants/team-f", json.dumps({"rpm": "many"}))
        assert wait_until(lambda: "tenants/team-f: rpm: expected" in open(g["log"]).read(), 5)
        assert rpm("team-e") == 4
    finally:
        if gws:
            gws.stop()
        if e:
            e.stop()
        f.stop()


def metric_value(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError("no " + name)


@test
@shm_only
def refused_before_the_body_is_in(opts):
    """Over its quota, answered once its key's bytes are in, the rest of
    the body still to come: a Content-Length remainder is read and dropped
    and the next request on the connection answered; a chunked body's
    answer says Connection: close and the connection closes (before: the
    body's bytes were read as the next request)."""
    f = Fleet(opts, 2, gw_args=GW + ["--tenant", "team-a:rpm=1"])
    try:
        assert send(f, "team-a")[0] == 200
        # not an API the gateway parses: its key is its first bytes, not
        # its whole body (a JSON one's, up to 16 MiB)
        body = b"x" * 200000
        head = ("POST /raw HTTP/1.1\r\nHost: x\r\nX-Tenant: team-a\r\n"
                "Content-Type: application/octet-stream\r\n")
        nxt = chat().encode()
        assert len(body) < 256 * 1024  # dropped whole, not closed (boundary.h)
        with socket.create_connection(("127.0.0.1", f.port), timeout=10) as s:
            s.sendall((head + "Content-Length: %d\r\n\r\n" % len(body)).encode() + body[:CUT])
            r = read_reply(s)  # before the rest is sent
            assert r and r[0] == 429 and r[1].get("connection") != "close", r
            s.sendall(body[CUT:])
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                      % len(nxt) + nxt)
            r = read_reply(s)
            assert r and r[0] == 200 and json.loads(r[2])["choices"], r
        with socket.create_connection(("127.0.0.1", f.port), timeout=10) as s:
            s.sendall((head + "Transfer-Encoding: chunked\r\n\r\n").encode() +
                      b"%x\r\n%s\r\n" % (CUT, body[:CUT]))
            r = read_reply(s)
            assert r and r[0] == 429 and r[1].get("connection") == "close", r
            assert read_reply(s) is None, "the connection stayed open"
    finally:
        f.stop()


if __name__ == "__main__":
    sys.exit(run_suite(TESTS, limit_s=90))
