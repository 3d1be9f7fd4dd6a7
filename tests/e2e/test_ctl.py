#!/usr/bin/env python3
"""prefixgatectl and packaging tests: the real prefixgatectl against real
prefixgate and mockllm fleets (tests/e2e/harness.py), the man pages against
--help, and `make install` into a scratch DESTDIR. TAP output; every wait is
bounded.

usage: test_ctl.py --build DIR [--tools DIR] [--ctl PATH] [-k SUBSTRING]
  Tests that read pinned BPF maps need root and bpftool; without them they
  are skipped with the reason. The others run unprivileged (--no-bpf fleets).
"""
import copy
import difflib
import glob
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Fleet, SickBackend, free_port, have_bpf, http_get, run_suite,  # noqa: E402
                     unit_writable, wait_until)

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DECISIONS = ["affinity", "overflow", "random", "least_outstanding", "retry", "explicit_key",
             "cached", "balanced"]
RING_SLOTS = 65536
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def fleet(opts, mode, n=3, **kw):
    o = copy.copy(opts)
    o.mode = mode
    return Fleet(o, n, **kw)


def nopin():
    """A pin path where nothing is pinned."""
    return "/sys/fs/bpf/pg-ctl-absent-%d" % os.getpid()


def ctl(opts, f, *args, pin=None, admin=None, stdin=None, env=None, timeout=30):
    """Run prefixgatectl against fleet f (None: no fleet); (rc, out, err)."""
    cmd = [opts.ctl]
    if f is not None or pin:
        cmd += ["--pin-path", pin or f.pin or nopin()]
    if f is not None or admin:
        cmd += ["--admin", admin or "127.0.0.1:%d" % f.admin_port]
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd + list(args), input=stdin, capture_output=True, timeout=timeout,
                       env=e)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def ok(r, what):
    rc, out, err = r
    assert rc == 0, "%s: exit %d\nstdout: %s\nstderr: %s" % (what, rc, out[-1500:], err[-1500:])
    return out


def closed_port():
    return "127.0.0.1:%d" % free_port()


def chat(text):
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]})


def traffic(f, n, key_prefix="doc"):
    for i in range(n):
        st, _, _ = f.post("/invocations", ("%s %d " % (key_prefix, i)) * 300)
        assert st == 200, st


# --- command line ------------------------------------------------------------

@test
def help_and_usage_errors(opts):
    """--help everywhere exits 0; usage errors exit 2; runtime errors 1."""
    rc, out, _ = ctl(opts, None, "--help")
    assert rc == 0 and "Usage: prefixgatectl" in out, out
    for c in ("status", "route", "backends", "top", "pools", "help"):
        rc, out, _ = ctl(opts, None, c, "--help")
        assert rc == 0 and "Usage:" in out, (c, rc, out)
    rc, out, _ = ctl(opts, None, "help", "route")
    assert rc == 0 and "--key" in out, out
    rc, out, _ = ctl(opts, None, "--version")
    assert rc == 0 and out.startswith("prefixgatectl "), out
    usage = [[], ["bogus"], ["--bogus", "status"], ["status", "extra"],
             ["status", "--path", "/x"], ["--timeout", "0", "status"],
             ["--timeout", "abc", "status"], ["top", "--count", "-1"],
             ["top", "--interval", "0"], ["route"], ["route", "--path", "nope", "-"],
             ["backends"], ["backends", "add"], ["backends", "add", "not-an-address"],
             ["backends", "drain", "1.2.3.4:99999"], ["backends", "frob", "1.2.3.4:5"],
             ["--admin", "localhost", "status"], ["--json=1", "status"], ["help", "nope"],
             ["--source", "disk", "status"], ["--pin-path"],
             ["backends", "list", "--pool", "a"], ["backends", "add", "1.2.3.4:5", "--pool",
                                                   "a b"], ["status", "--pool", "a"]]
    for args in usage:
        rc, out, err = ctl(opts, None, *args)
        assert rc == 2, "%s: exit %d (want 2): %s" % (args, rc, err)
        assert err.startswith("prefixgatectl: ") or "Usage:" in err, (args, err)
    # runtime errors name what failed
    rc, _, err = ctl(opts, None, "--source", "maps", "status", pin=nopin())
    assert rc == 1 and "no prefixgate maps pinned under" in err and "--no-bpf" in err, err
    dead = closed_port()
    rc, _, err = ctl(opts, None, "status", pin=nopin(), admin=dead)
    assert rc == 1 and "admin API %s: connect" % dead in err, err
    rc, _, err = ctl(opts, None, "route", "-", admin=dead, stdin=b"x")
    assert rc == 1 and "connect" in err, err
    rc, _, err = ctl(opts, None, "route", "/nonexistent/body.json", admin=dead)
    assert rc == 1 and "/nonexistent/body.json" in err, err
    rc, _, err = ctl(opts, None, "backends", "add", "127.0.0.1:1", admin=dead)
    assert rc == 1 and "backends add 127.0.0.1:1" in err, err


# --- status --------------------------------------------------------------------

def check_status_json(f, doc, source):
    api = f.backends()
    assert doc["source"] == source, doc["source"]
    got = {b["address"]: b for b in doc["backends"]}
    assert set(got) == set(api), (sorted(got), sorted(api))
    for a, b in got.items():
        assert b["requests"] == api[a]["requests"], (a, b["requests"], api[a]["requests"])
        assert b["id"] == api[a]["id"] and b["in_flight"] == api[a]["in_flight"]
        assert b["health"] == "up" and b["healthy"] and not b["draining"], b
        # the decision names are the gateway's own
        assert list(b["requests_by_decision"]) == list(api[a]["requests_by_decision"]), \
            (b["requests_by_decision"], api[a]["requests_by_decision"])
        assert b["requests_by_decision"] == api[a]["requests_by_decision"]
    st, routing = f.admin("GET", "/routing")
    assert st == 200 and doc["routing"] == routing, (doc["routing"], routing)
    gen = f.counter("prefixgate_ring_generation")
    assert doc["ring"]["generation"] == gen, (doc["ring"], gen)


@test
def status_from_maps(opts):
    """status reads the pinned maps: tables, JSON, ring share, no admin API needed."""
    why = have_bpf()
    if why:
        return "SKIP " + why
    f = fleet(opts, "bpf", 3, gw_args=["--prefix-length", "2048"])
    try:
        traffic(f, 12)
        assert f.idle()
        out = ok(ctl(opts, f, "status"), "status")
        assert "BPF maps pinned at %s" % f.pin in out, out
        assert "PrefixLength 2048" in out, out
        for name in f.mocks:
            assert f.addr(name) in out, out
        doc = json.loads(ok(ctl(opts, f, "status", "--json"), "status --json"))
        check_status_json(f, doc, "maps")
        assert doc["pin_path"] == f.pin
        assert doc["ring"]["members"] == 3, doc["ring"]
        slots = [b["ring_slots"] for b in doc["backends"]]
        assert sum(slots) == RING_SLOTS, slots
        for b in doc["backends"]:
            assert 0.25 < b["ring_share"] < 0.42, b
        # the lookup path reads the same state as the mmap path
        doc2 = json.loads(ok(ctl(opts, f, "status", "--json",
                                 env={"PREFIXGATECTL_NO_MMAP": "1"}), "status (lookup)"))
        assert doc2 == doc, (doc2, doc)
        # the admin API is not needed
        doc3 = json.loads(ok(ctl(opts, f, "status", "--json", admin=closed_port()),
                             "status, admin API unreachable"))
        assert doc3["backends"] == doc["backends"]
        lst = json.loads(ok(ctl(opts, f, "backends", "list", "--json"), "backends list"))
        assert lst == doc["backends"], lst
        # bpftool sees the same members
        bt = subprocess.run(["bpftool", "-j", "map", "dump", "pinned",
                             f.pin + "/pg_backends"], capture_output=True, timeout=20)
        assert bt.returncode == 0, bt.stderr
        active = 0
        for e in json.loads(bt.stdout):
            v = e.get("value", e.get("formatted", {}).get("value"))
            if isinstance(v, dict) and v.get("flags", 0) & 1:
                active += 1
        assert active in (0, 3), active  # 0: bpftool without BTF shows raw bytes
    finally:
        f.stop()


@test
def status_ring_consistent_under_churn(opts):
    """Ring shares always add up while members are added and drained (seqlock)."""
    why = have_bpf()
    if why:
        return "SKIP " + why
    f = fleet(opts, "bpf", 3)
    stop = threading.Event()
    errors = []

    a = "127.0.0.1:%d" % f.add_mock("spare")

    def churn():
        while not stop.is_set():
            for method, path, body in (("POST", "/backends", {"address": a}),
                                       ("DELETE", "/backends/" + a, None)):
                st, r = f.admin(method, path, body)
                if st not in (201, 202, 409, 404):
                    errors.append((method, st, r))
                time.sleep(0.01)

    t = threading.Thread(target=churn)
    try:
        t.start()
        gens = set()
        deadline = time.monotonic() + 3
        n = 0
        # at least 3 s, 20 reads and 5 ring generations (at most 60 s: a slow machine)
        while (time.monotonic() < deadline or n < 20 or len(gens) < 5) and \
                time.monotonic() < deadline + 57:
            doc = json.loads(ok(ctl(opts, f, "status", "--json"), "status under churn"))
            slots = sum(b["ring_slots"] for b in doc["backends"])
            assert slots == RING_SLOTS, (slots, doc)
            gens.add(doc["ring"]["generation"])
            n += 1
        assert len(gens) >= 3, "the ring did not change during the test: %s" % gens
    finally:
        stop.set()
        t.join(10)
        f.stop()
    assert not errors, errors[:3]


@test
def status_falls_back_to_admin_api(opts):
    """--no-bpf: no maps pinned, status says so and asks the admin API."""
    f = fleet(opts, "shm", 3)
    try:
        traffic(f, 6)
        assert f.idle()
        rc, out, err = ctl(opts, f, "status")
        assert rc == 0, err
        assert "no prefixgate maps pinned under" in err and "using the admin API" in err, err
        assert "admin API at 127.0.0.1:%d" % f.admin_port in out, out
        rc, out, err = ctl(opts, f, "status", "--json")
        assert rc == 0, err
        doc = json.loads(out)
        check_status_json(f, doc, "api")
        # the gateway counts the ring shares for the API too
        assert sum(b["ring_slots"] for b in doc["backends"]) == RING_SLOTS, doc
        rc, out, err = ctl(opts, f, "--source", "api", "backends", "list")
        assert rc == 0 and err == "", err
        for name in f.mocks:
            assert f.addr(name) in out, out
        rc, _, err = ctl(opts, f, "--source", "maps", "status")
        assert rc == 1 and "no prefixgate maps pinned" in err, err
    finally:
        f.stop()


@test
def status_tells_stale_maps(opts):
    """Maps left pinned by a dead gateway are not shown as a live one: auto
    goes to the admin API that --admin names, maps-only says STALE (rc 3)."""
    why = have_bpf()
    if why:
        return "SKIP " + why
    dead = fleet(opts, "bpf", 2)
    live = fleet(opts, "shm", 2)
    try:
        out = ok(ctl(opts, dead, "status"), "status, live gateway")
        assert "written by a live gateway" in out, out
        dead.gw.kill()  # SIGKILL: no clean exit, the pid goes away
        dead.gw.wait(10)
        rc, out, err = ctl(opts, None, "status", pin=dead.pin,
                           admin="127.0.0.1:%d" % live.admin_port)
        assert rc == 0 and "stale" in err and "is not running" in err, (rc, err)
        assert "admin API at 127.0.0.1:%d" % live.admin_port in out, out
        assert live.addr("b0") in out and dead.addr("b0") not in out, out
        rc, out, err = ctl(opts, None, "--source", "maps", "status", pin=dead.pin)
        assert rc == 3 and "STALE" in out and "is not running" in out, (rc, out, err)
        rc, out, err = ctl(opts, None, "status", "--json", pin=dead.pin, admin=closed_port())
        assert rc == 3 and json.loads(out)["stale"] is True, (rc, out, err)
        # a clean exit says so
        again = fleet(opts, "bpf", 1, start_gateway=False)
        try:
            again.start_gateway(pin=dead.pin)
            assert ok(ctl(opts, again, "status"), "status") and \
                "written by a live gateway" in ctl(opts, again, "status")[1]
            again.gw.send_signal(signal.SIGTERM)
            assert again.gw.wait(15) == 0
            rc, out, err = ctl(opts, None, "--source", "maps", "status", pin=dead.pin)
            assert rc == 3 and "exited" in out, (rc, out)
        finally:
            again.stop()
    finally:
        dead.stop()
        live.stop()


# --- the same from either source ------------------------------------------------------

def mock_v6(f):
    """A mockllm on [::1] (its port), or None without IPv6 loopback."""
    import socket
    try:
        socket.socket(socket.AF_INET6).bind(("::1", 0))
    except OSError:
        return None
    path = os.path.join(f.tmp, "mock-v6.log")
    p = subprocess.Popen([os.path.join(f.opts.tools, "mockllm"), "--listen", "[::1]:0", "--id",
                          "v6"], stdout=open(path, "w"), stderr=subprocess.STDOUT)
    port = wait_until(lambda: re.search(r"listening on \S+ port (\d+)", open(path).read()), 5)
    f.mocks["v6"] = (int(port.group(1)) if port else 0, p)
    return f.mocks["v6"][0] or None


def without_source(cmd, out):
    """A command's output less what names its source (and top's clock)."""
    if "--json" in cmd:
        docs = [json.loads(x) for x in out.splitlines() if x.strip()]
        for d in docs:
            for k in ("source", "time", "interval"):
                if isinstance(d, dict):
                    d.pop(k, None)
        return docs
    lines = out.splitlines()
    return [x for x in lines if not x.startswith(("source ", "prefixgatectl top "))]


@test
def every_command_same_from_maps_and_api(opts):
    """Each command against a gateway with model pools, an unhealthy
    backend, an IPv6 backend and a DNS name that never resolves: status,
    backends list, top and pools print the same from the maps as from the
    admin API (health words, POOL, ring shares of each pool's own ring,
    PATHS); route, backends add --pool, remove and drain work; then the
    maps left by the gateway, killed, are told STALE by all four."""
    why = have_bpf()
    if why:
        return "SKIP " + why
    sick = SickBackend()
    sick.mode = "error"
    f = fleet(opts, "bpf", 3, start_gateway=False)
    v6 = mock_v6(f)
    v6addr = "[::1]:%d" % v6 if v6 else "[::1]:9"
    try:
        f.start_gateway(["--pool", "a:model=alpha", "--pool",
                         "a:backend=%s,%s" % (f.addr("b0"), f.addr("b1")),
                         "--pool", "b:model=beta,beta-2", "--pool", "b:path=/invocations",
                         "--pool", "b:backend=%s,%s" % (sick.addr(), v6addr),
                         "--pool", "b:strategy=least_outstanding_requests",
                         "--backend", "never.invalid:9", "--resolver", "127.0.0.1:1",
                         "--resolve-interval", "200", "--health-check-interval", "200",
                         "--health-fall", "1"], backends=["b2"])
        assert wait_until(lambda: f.backends()[sick.addr()]["health"] == "unhealthy", 5)
        assert wait_until(lambda: f.backends().get(None, {}).get("state") == "unresolved", 8)
        for cmd in (["status"], ["status", "--json"], ["backends", "list"],
                    ["backends", "list", "--json"], ["pools"], ["pools", "--json"],
                    ["top", "--count", "1", "--interval", "0.1"],
                    ["top", "--count", "1", "--interval", "0.1", "--json"]):
            got = {}
            for src in ("maps", "api"):
                rc, out, err = ctl(opts, f, "--source", src, *cmd)
                assert rc == 0, (cmd, src, rc, err)
                got[src] = without_source(cmd, out)
            assert got["maps"] == got["api"], (cmd, "\n".join(difflib.unified_diff(
                json.dumps(got["maps"], indent=1).splitlines(),
                json.dumps(got["api"], indent=1).splitlines(), "maps", "api", lineterm="")))
        # what they show: health, pools, each pool's ring, the name, PATHS
        rc, out, _ = ctl(opts, f, "--source", "maps", "status")
        assert "POOL" in out and "pool       b: LEAST_OUTSTANDING_REQUESTS" in out, out
        row = [x for x in out.splitlines() if sick.addr() in x][0]
        assert " unhealthy " in row and re.search(r"%  b +-$", row), row
        assert "never.invalid:9" in out and "unresolved" in out, out
        doc = json.loads(ctl(opts, f, "status", "--json")[1])
        by_pool = {}
        for b in doc["backends"]:
            if b["ring_slots"] is not None:
                by_pool[b["pool"]] = by_pool.get(b["pool"], 0) + b["ring_slots"]
        assert by_pool == {"default": RING_SLOTS, "a": RING_SLOTS, "b": RING_SLOTS}, by_pool
        assert {b["address"]: b["health"] for b in doc["backends"]}[sick.addr()] == "unhealthy"
        assert v6addr in {b["address"] for b in doc["backends"]}, doc["backends"]
        rc, out, _ = ctl(opts, f, "pools")
        assert re.search(r"^b +no +2 +[01] +LEAST_OUTSTANDING_REQUESTS .*beta,beta-2 +"
                         r"/invocations$", out, re.M), out
        pools = {p["name"]: p for p in json.loads(ctl(opts, f, "pools", "--json")[1])}
        assert pools["b"]["paths"] == ["/invocations"] and pools["b"]["models"] == [
            "beta", "beta-2"] and not pools["a"]["catch_all"], pools
        # route names the pool; the changes go through the API
        rc, out, err = ctl(opts, f, "route", "--path", "/v1/chat/completions", "-",
                           stdin=chat("x").replace('"m"', '"alpha"').encode())
        assert rc == 0 and "pool         a\n" in out and "(ring order)" in out, (out, err)
        port = f.add_mock("extra")
        assert ok(ctl(opts, f, "backends", "add", "127.0.0.1:%d" % port, "--pool", "a"),
                  "add --pool").startswith("added 127.0.0.1:%d as backend" % port)
        assert f.backends()["127.0.0.1:%d" % port]["pool"] == "a"
        ok(ctl(opts, f, "backends", "remove", v6addr), "remove IPv6")
        ok(ctl(opts, f, "backends", "drain", "127.0.0.1:%d" % port), "drain")
        # a dead gateway's maps: every reader says STALE, exit 3
        f.gw.kill()
        f.gw.wait(10)
        for cmd in (["status"], ["backends", "list"], ["pools"], ["top", "--count", "1",
                                                                  "--interval", "0.1"]):
            rc, out, err = ctl(opts, f, "--source", "maps", *cmd)
            assert rc == 3 and "stale" in err and "is not running" in err, (cmd, rc, out, err)
            if cmd[0] != "backends":
                assert "STALE" in out, (cmd, out)
            rc, out, err = ctl(opts, f, *cmd)  # auto: the API does not answer either
            assert rc == 3 and "stale" in err, (cmd, rc, err)
        rc, out, _ = ctl(opts, f, "pools", "--json")
        assert rc == 3 and json.loads(out)[2]["name"] == "b", (rc, out)
    finally:
        f.stop()
        sick.stop()


# --- route -------------------------------------------------------------------------

@test
def route_dry_run(opts):
    """route prints the admin API's dry run: backend, reason, candidates, key."""
    f = fleet(opts, "shm", 3)
    try:
        body = chat("Where is my order? " * 20)
        want = f.dry_run(body, path="/v1/chat/completions")
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tf:
            tf.write(body)
        try:
            out = ok(ctl(opts, f, "route", "--path", "/v1/chat/completions", tf.name),
                     "route FILE")
        finally:
            os.unlink(tf.name)
        assert re.search(r"^backend\s+%s " % re.escape(want["backend"]), out, re.M), out
        assert re.search(r"^reason\s+affinity$", out, re.M), out
        assert want["key_hash"] in out and "length %d characters" % want["key_length"] in out
        assert ", ".join(want["candidates"]) in out, out
        doc = json.loads(ok(ctl(opts, f, "route", "--json", "--path", "/v1/chat/completions",
                                "-", stdin=body.encode()), "route - --json"))
        for k in ("backend", "reason", "candidates", "key_hash", "key_length"):
            assert doc[k] == want[k], (k, doc[k], want[k])
        # raw bytes without --path; an explicit key with odd characters
        doc = json.loads(ok(ctl(opts, f, "route", "--json", "-", stdin=body.encode()), "raw"))
        assert doc["api"] == "raw" and doc["key_length"] == len(body), doc
        key = "sess 1&x=2/ü"
        doc = json.loads(ok(ctl(opts, f, "route", "--json", "--key", key, "-",
                                stdin=b"{}"), "route --key"))
        assert doc["reason"] == "explicit_key" and doc["key_preview"] == key, doc
        assert doc["key_hash"] == f.dry_run(b"{}", key="sess+1%26x%3D2/%C3%BC")["key_hash"]
        # no usable backend: exit 1, saying so
        for name in f.mocks:
            st, _ = f.admin("DELETE", "/backends/" + f.addr(name))
            assert st == 202, st
        rc, out, err = ctl(opts, f, "route", "-", stdin=body.encode())
        assert rc == 1 and "no usable backend" in err, (rc, out, err)
    finally:
        f.stop()


# --- backends --------------------------------------------------------------------

@test
def backends_add_remove_list(opts):
    """add / remove / list through the admin API, errors exit 1 with its message."""
    f = fleet(opts, "shm", 2)
    try:
        port = f.add_mock("extra")
        a = "127.0.0.1:%d" % port
        out = ok(ctl(opts, f, "backends", "add", "localhost:%d" % port), "add")
        assert re.match(r"added %s as backend \d+$" % re.escape(a), out.strip()), out
        assert a in f.backends()
        rc, _, err = ctl(opts, f, "backends", "add", a)
        assert rc == 1 and "HTTP 409" in err and "already a member" in err, err
        out = ok(ctl(opts, f, "backends", "list"), "list")
        assert out.count("127.0.0.1:") == 3, out
        doc = json.loads(ok(ctl(opts, f, "backends", "remove", a, "--json"), "remove --json"))
        assert doc["address"] == a and doc["draining"] is True, doc
        assert wait_until(lambda: a not in f.backends(), 5), "not removed"
        rc, _, err = ctl(opts, f, "backends", "remove", a)
        assert rc == 1 and "HTTP 404" in err, err
        doc = json.loads(ok(ctl(opts, f, "backends", "list", "--json"), "list --json"))
        assert sorted(b["address"] for b in doc) == sorted(f.addr(n) for n in ("b0", "b1"))
    finally:
        f.stop()


@test
def backends_drain_waits(opts):
    """drain waits for in-flight requests, printing progress; --timeout bounds it."""
    f = fleet(opts, "shm", 3)
    try:
        target = f.dry_run("x", key="slow")["backend"]
        results = []

        def slow(ms):
            results.append(f.post("/invocations", "x", {"X-Prefixgate-Key": "slow",
                                                        "X-Mock-Delay-Ms": str(ms)})[0])

        ts = [threading.Thread(target=slow, args=(ms,)) for ms in (600, 1200)]
        for t in ts:
            t.start()
        assert wait_until(lambda: f.backends()[target]["in_flight"] == 2, 5)
        t0 = time.monotonic()
        out = ok(ctl(opts, f, "backends", "drain", target), "drain")
        took = time.monotonic() - t0
        for t in ts:
            t.join(10)
        assert results == [200, 200], results
        assert "%s draining: 2 in flight" % target in out, out
        assert "%s draining: 1 in flight" % target in out, out
        assert re.search(r"%s removed after [\d.]+s" % re.escape(target), out), out
        assert 0.8 < took < 5, took
        assert target not in f.backends()
        # bounded: a 3 s request outlives --timeout 0.5
        target = f.dry_run("x", key="slow")["backend"]
        t = threading.Thread(target=slow, args=(3000,))
        t.start()
        assert wait_until(lambda: f.backends()[target]["in_flight"] == 1, 5)
        t0 = time.monotonic()
        rc, out, err = ctl(opts, f, "backends", "drain", target, "--timeout", "0.5", "--json")
        took = time.monotonic() - t0
        assert rc == 1 and "still draining after 0.5s with 1 in flight" in err, (rc, err)
        doc = json.loads(out)
        assert doc["removed"] is False and doc["in_flight"] == 1, doc
        assert took < 2.5, took
        assert f.backends()[target]["draining"] is True
        t.join(10)
        rc, _, err = ctl(opts, f, "backends", "drain", "127.0.0.1:1")
        assert rc == 1 and "not a member" in err, err
    finally:
        f.stop()


def start_gateway_with_token(f, args):
    """Fleet.start_gateway, but ready once the admin API answers at all (it
    answers 401 to the harness's unauthenticated probe)."""
    f.port = free_port()
    f.admin_port = free_port()
    cmd = [os.path.join(f.opts.build, "prefixgate"), "--listen", "127.0.0.1:%d" % f.port,
           "--admin", "127.0.0.1:%d" % f.admin_port, "--workers", "2", "--no-bpf"]
    for name in f.mocks:
        cmd += ["--backend", f.addr(name)]
    f.gw_log = os.path.join(f.tmp, "gateway-%d.log" % f.port)
    f.gw = subprocess.Popen(cmd + list(args), stdout=open(f.gw_log, "w"),
                            stderr=subprocess.STDOUT)
    if not wait_until(lambda: http_get(f.admin_port, "/health", 0.5)[0] is not None, 5):
        raise RuntimeError("prefixgate did not start:\n" + open(f.gw_log).read()[-2000:])


@test
def admin_token(opts):
    """With prefixgate's --admin-token-file, prefixgatectl sends the token
    (--admin-token-file or PREFIXGATE_ADMIN_TOKEN); without it, 401 exits 1."""
    gw_help = subprocess.run([os.path.join(opts.build, "prefixgate"), "--help"],
                             capture_output=True, timeout=10).stdout.decode()
    if "--admin-token-file" not in gw_help:
        return "SKIP this prefixgate has no --admin-token-file"
    token = "t0ken-for-the-ctl-test-%d" % os.getpid()
    with tempfile.NamedTemporaryFile("w", delete=False) as tf:
        tf.write("  %s\n" % token)
    f = None
    try:
        f = fleet(opts, "shm", 2, start_gateway=False)
        start_gateway_with_token(f, ["--admin-token-file", tf.name])
        rc, _, err = ctl(opts, f, "--source", "api", "status")
        assert rc == 1 and "401" in err and "--admin-token-file" in err, (rc, err)
        ok(ctl(opts, f, "--source", "api", "status", "--admin-token-file", tf.name), "file")
        ok(ctl(opts, f, "--source", "api", "status", env={"PREFIXGATE_ADMIN_TOKEN": token}),
           "env")
        rc, _, err = ctl(opts, f, "status", "--admin-token-file", "/nonexistent/token")
        assert rc == 2 and "/nonexistent/token" in err, (rc, err)
    finally:
        os.unlink(tf.name)
        if f:
            f.stop()


# --- top ---------------------------------------------------------------------------

def run_top(opts, f, mode_args, n_requests):
    done = threading.Event()

    def load():
        i = 0
        while not done.is_set() and i < n_requests:
            f.post("/invocations", ("top %d " % i) * 200)
            i += 1

    t = threading.Thread(target=load)
    t.start()
    try:
        return ctl(opts, f, "top", "--count", "2", "--interval", "0.4", *mode_args)
    finally:
        done.set()
        t.join(20)


@test
def top_count(opts):
    """top --count 2: two refreshes with rates, then exit 0 (API; and maps if root)."""
    for mode in ("shm",) if have_bpf() else ("shm", "bpf"):
        top_count_mode(opts, mode)


def top_count_mode(opts, mode):
    f = fleet(opts, mode, 3)
    try:
        traffic(f, 3)
        rc, out, err = run_top(opts, f, [], 400)
        assert rc == 0, err
        assert out.count("prefixgatectl top") == 2, out
        assert "\033[2J" not in out, "screen cleared although stdout is not a terminal"
        for name in f.mocks:
            assert f.addr(name) in out, out
        rc, out, err = run_top(opts, f, ["--json"], 400)
        assert rc == 0, err
        lines = out.strip().splitlines()
        assert len(lines) == 2, out
        docs = [json.loads(x) for x in lines]
        assert docs[0]["source"] == ("maps" if mode == "bpf" else "api"), docs[0]
        assert any(d["requests_per_second"] > 0 for d in docs), docs
        for d in docs:
            assert len(d["backends"]) == 3
            for b in d["backends"]:
                assert set(b["decisions_per_second"]) == set(DECISIONS), b
            share = sum(b["share"] for b in d["backends"])
            assert d["requests_per_second"] == 0 or abs(share - 1) < 1e-3, d
    finally:
        f.stop()


@test
def top_ends_when_gateway_stops(opts):
    """top over the maps exits 1, saying so, when prefixgate stops; Ctrl-C exits 0."""
    why = have_bpf()
    if why:
        return "SKIP " + why
    f = fleet(opts, "bpf", 2)
    try:
        cmd = [opts.ctl, "--pin-path", f.pin, "--admin", "127.0.0.1:%d" % f.admin_port,
               "top", "--interval", "0.2"]
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.6)
        p.send_signal(signal.SIGINT)
        assert p.wait(5) == 0, "Ctrl-C: exit %s" % p.returncode
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.6)
        assert f.stop() == 0
        rc = p.wait(5)
        err = p.stderr.read().decode()
        assert rc == 1 and "prefixgate stopped" in err, (rc, err)
    finally:
        f.stop()


# --- packaging -------------------------------------------------------------------

def help_flags(text):
    """Options defined by a --help text (lines starting with --name, or -c,
    --name) and every --name mentioned anywhere in it."""
    defined = set(re.findall(r"^  (?:-[a-z], )?(--[a-z][a-z0-9-]*)", text, re.M))
    mentioned = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))
    return defined, mentioned


def man_items(path):
    """The text of each OPTIONS item (.TP) of a man page, by its option, with
    font escapes and \\- removed and lines joined."""
    src = open(path).read().replace("\\-", "-")
    src = re.sub(r"\\f[BIRP]", "", src)
    items, section, cur = {}, None, None
    for line in src.splitlines():
        if line.startswith(".SH"):
            section, cur = line[3:].strip().strip('"'), None
        elif section != "OPTIONS":
            continue
        elif line.startswith(".TP"):
            cur = ""
        elif cur == "":
            m = re.match(r"\.(?:B|BI|BR|I)\s+\"?(--[a-z][a-z0-9-]*)", line)
            cur = m.group(1) if m else None
            if cur:
                items[cur] = ""
        elif cur:
            items[cur] += " " + re.sub(r"^\.[A-Z]+\s*", "", line).replace('"', "")
    return items


def help_facts(text):
    """(option, range "MIN-MAX" or None, default or None) of each --help option
    whose help states a range or a one-word default."""
    facts, flag = [], None
    for line in text.splitlines():
        m = re.match(r"  (?:-[a-z], )?(--[a-z][a-z0-9-]*)", line)
        if m:
            flag = m.group(1)
        if not flag or not line.startswith("  "):
            continue
        rng = re.search(r", (?:0 or )?(\d+-\d+)(?:; 0: off)?(?: \(default|$)", line)
        dflt = re.search(r" \(default ([^ )]+)\)$", line)
        if rng or dflt:
            facts.append((flag, rng and rng.group(1), dflt and dflt.group(1)))
    return facts


def man_flags(path):
    """Options documented as .TP items under OPTIONS, and every --name in the page."""
    src = open(path).read().replace("\\-", "-")
    src = re.sub(r"\\f[BIRP]", "", src)
    mentioned = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", src))
    return set(man_items(path)), mentioned


@test
def man_page_states_help_defaults(opts):
    """Each range and default --help states (both from the one option table in
    config_opts.c) is stated by the man page item of that option too."""
    gw = subprocess.run([os.path.join(opts.build, "prefixgate"), "--help"],
                        capture_output=True, timeout=10).stdout.decode()
    items = man_items(os.path.join(REPO, "tools", "packaging", "prefixgate.8"))
    facts = help_facts(gw)
    assert len([f for f in facts if f[1]]) >= 20, facts
    for flag, rng, dflt in facts:
        text = items.get(flag, "")
        if rng:
            assert re.search(r"(?<![\d-])%s(?![\d-])" % re.escape(rng), text), (
                "prefixgate.8: %s does not state the range %s: %r" % (flag, rng, text))
        if dflt:
            assert re.search(r"(?<![\w./:-])%s(?![\w/:-])" % re.escape(dflt), text), (
                "prefixgate.8: %s does not state the default %s: %r" % (flag, dflt, text))


def doc_text(name):
    return open(os.path.join(REPO, *name.split("/"))).read()


def pool_keys():
    """The keys of --pool and of a pool block: the table pool_keys in
    user/config/config_pools.c, read from the source so that a key added
    there is one the manual must name."""
    src = open(os.path.join(REPO, "user", "config", "config_pools.c")).read()
    table = src[src.index("pool_keys[] = {"):]
    table = table[:table.index("};")]
    return re.findall(r'\{"([a-z-]+)",', table)


@test
def configuration_doc_help_is_the_binarys(opts):
    """doc/configuration.md's copy of prefixgate --help is what the binary
    prints (make doc-flags writes it)."""
    gw = subprocess.run([os.path.join(opts.build, "prefixgate"), "--help"],
                        capture_output=True, timeout=10).stdout.decode()
    doc = doc_text("doc/configuration.md")
    at = doc.index("<!-- generated by make doc-flags")
    start = doc.index("```\n", at) + 4
    copy = doc[start:doc.index("```\n", start)]
    assert copy == gw, "doc/configuration.md's --help copy differs (make doc-flags):\n" + \
        "\n".join(difflib.unified_diff(copy.splitlines(), gw.splitlines(),
                                       "doc/configuration.md", "--help", lineterm=""))


@test
def configuration_doc_names_every_flag_and_key(opts):
    """Both ways, as for the man page: every option of prefixgate --help is
    named in doc/configuration.md outside the generated copy of --help, and
    every --flag the page names anywhere is an option of --help; every key
    of a pool (config_pools.c's pool_keys) is documented there."""
    gw = subprocess.run([os.path.join(opts.build, "prefixgate"), "--help"],
                        capture_output=True, timeout=10).stdout.decode()
    defined, _ = help_flags(gw)
    doc = doc_text("doc/configuration.md")
    at = doc.index("<!-- generated by make doc-flags")
    start = doc.index("```\n", at) + 4
    prose = doc[:at] + doc[doc.index("```\n", start) + 4:]
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", prose))
    assert len(defined) >= 50, defined
    stray = named - defined
    assert not stray, "doc/configuration.md names flags prefixgate does not have: %s" % (
        sorted(stray))
    # the help copy alone would satisfy "appears": each flag is also in the
    # prose (a table row, a directive, a sentence), as a --flag or a directive
    unnamed = [f for f in sorted(defined)
               if not re.search(r"(?<![\w-])(--)?%s(?![\w-])" % re.escape(f[2:]), prose)]
    assert not unnamed, "doc/configuration.md's prose does not name %s" % unnamed
    keys = pool_keys()
    assert len(keys) >= 16, keys
    table = prose[prose.index("## Pool keys"):]
    missing = [k for k in keys if "| `%s` |" % k not in table]
    assert not missing, "doc/configuration.md's Pool keys table lacks %s" % missing


def md_anchors(text):
    """GitHub's anchors of a markdown file's headings."""
    out, fence = set(), False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def manual_files():
    return ["README.md"] + sorted(os.path.relpath(p, REPO) for p in
                                  glob.glob(os.path.join(REPO, "doc", "**", "*.md"),
                                            recursive=True))


@test
def manual_links_resolve(opts):
    """Every relative link of README.md and doc/ names a file of the
    repository, and its #anchor a heading of that file."""
    bad = []
    for name in manual_files():
        text = doc_text(name)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(REPO, os.path.dirname(name), path)) \
                if path else os.path.join(REPO, name)
            if not os.path.exists(full):
                bad.append("%s: %s (no such file)" % (name, target))
            elif anchor and (not full.endswith(".md") or anchor not in md_anchors(open(full).read())):
                bad.append("%s: %s (no such heading)" % (name, target))
    assert not bad, "\n".join(bad)


@test
def readme_is_short_and_current(opts):
    """README.md stays a first read: at most 400 lines, no dated session
    logs ("(2026-12-02, 13:20-14:30)"), nothing from outside the
    repository; the manual's pages are the doc/ files it links."""
    readme = doc_text("README.md")
    assert readme.count("\n") <= 400, readme.count("\n")
    dated = re.findall(r"\b20\d\d-\d\d-\d\d\b[^\n]*", readme)
    assert not dated, "README.md carries dated logs: %s" % dated[:3]
    for gone in ("DESIGN.md", "KERNEL-FACTS.md"):  # not part of the repository
        for name in manual_files():
            assert gone not in doc_text(name), (name, gone)
    for page in ("routing", "configuration", "operations", "fleets", "datapaths", "security",
                 "benchmarks", "CHANGELOG"):
        assert "(doc/%s.md" % page in readme, "README.md does not link doc/%s.md" % page


@test
def gateway_usage_error_hints_once(opts):
    """A usage error of prefixgate names what is wrong, exits 2 and points to
    --help once (not once from the parser and once more from main)."""
    gw = os.path.join(opts.build, "prefixgate")
    for args, what in ((["--bogus"], "unknown option --bogus"),
                       (["extra"], 'unexpected argument "extra"'),
                       (["--prefix-length", "5"], "--prefix-length: 5 is out of range")):
        r = subprocess.run([gw] + args, capture_output=True, timeout=10)
        err = r.stderr.decode()
        assert r.returncode == 2 and what in err, (args, r.returncode, err)
        assert err.count("--help") == 1, (args, err)


@test
def man_pages_match_help(opts):
    """Every option of --help is an item of the man page's OPTIONS and vice versa;
    every flag either mentions exists."""
    gw = subprocess.run([os.path.join(opts.build, "prefixgate"), "--help"],
                        capture_output=True, timeout=10).stdout.decode()
    cl = subprocess.run([opts.ctl, "--help"], capture_output=True, timeout=10).stdout.decode()
    gw_def, gw_men = help_flags(gw)
    cl_def, cl_men = help_flags(cl)
    assert len(gw_def) >= 10 and len(cl_def) >= 8, (gw_def, cl_def)
    pages = os.path.join(REPO, "tools", "packaging")
    for page, defined, mentioned, others in (("prefixgate.8", gw_def, gw_men, set()),
                                             ("prefixgatectl.8", cl_def, cl_men, gw_def)):
        items, man_men = man_flags(os.path.join(pages, page))
        assert items == defined, "%s: OPTIONS lacks %s; documents unknown %s" % (
            page, sorted(defined - items), sorted(items - defined))
        assert mentioned <= man_men, "%s: --help mentions %s, the page does not" % (
            page, sorted(mentioned - man_men))
        stray = man_men - mentioned - defined - others
        assert not stray, "%s mentions flags that do not exist: %s" % (page, sorted(stray))
        # renders without groff warnings
        if shutil.which("groff"):
            r = subprocess.run(["groff", "-man", "-ww", "-z", os.path.join(pages, page)],
                               capture_output=True, timeout=20)
            assert r.returncode == 0 and not r.stderr, (page, r.stderr)
        if shutil.which("man"):
            env = {k: v for k, v in os.environ.items() if k != "MAN_KEEP_FORMATTING"}
            r = subprocess.run(["man", "-l", os.path.join(pages, page)], capture_output=True,
                               timeout=20, env=dict(env, MANWIDTH="80"))
            text = re.sub(rb".\x08", b"", r.stdout)  # overstrike bold/underline
            assert r.returncode == 0 and b"OPTIONS" in text, (page, r.stderr)


def make_install(opts, destdir, *extra, target="install"):
    build = os.path.abspath(opts.build)
    bins = [os.path.join(build, "prefixgate"), os.path.join(build, "prefixgatectl")]
    # -o: install what is built; never rebuild from a test
    cmd = ["make", "-C", REPO, "--no-print-directory", "BUILD=" + build, target,
           "DESTDIR=" + destdir] + list(extra)
    for b in bins:
        cmd[3:3] = ["-o", b]
    return subprocess.run(cmd, capture_output=True, timeout=120)


@test
def make_install_destdir(opts):
    """make install DESTDIR=... installs the expected files; uninstall removes them."""
    if not os.path.exists(os.path.join(opts.build, "prefixgatectl")):
        return "SKIP %s/prefixgatectl not built" % opts.build
    d = tempfile.mkdtemp(prefix="pg-install-")
    try:
        r = make_install(opts, d)
        assert r.returncode == 0, r.stderr.decode()
        want = {
            "usr/local/sbin/prefixgate": 0o755,
            "usr/local/sbin/prefixgatectl": 0o755,
            "usr/local/share/man/man8/prefixgate.8": 0o644,
            "usr/local/share/man/man8/prefixgatectl.8": 0o644,
            "usr/local/lib/systemd/system/prefixgate.service": 0o644,
            "usr/local/share/doc/prefixgate/examples/prefixgate.conf": 0o644,
            "usr/local/share/doc/prefixgate/examples/backends": 0o644,
            "usr/local/share/doc/prefixgate/examples/routing.json": 0o644,
            "usr/local/share/doc/prefixgate/examples/prefixgate.default": 0o644,
        }
        got = {}
        for root, _, files in os.walk(d):
            for fn in files:
                p = os.path.join(root, fn)
                got[os.path.relpath(p, d)] = stat.S_IMODE(os.stat(p).st_mode)
        assert got == want, "installed %s" % sorted(got.items())
        unit = open(os.path.join(d, "usr/local/lib/systemd/system/prefixgate.service")).read()
        assert "ExecStart=/usr/local/sbin/prefixgate $PREFIXGATE_OPTS" in unit, unit
        assert "@SBINDIR@" not in unit, "unsubstituted placeholder"
        for k in ("EnvironmentFile=-/etc/default/prefixgate", "ExecReload=/bin/kill -HUP $MAINPID",
                  "ExecReload=/usr/local/sbin/prefixgate $PREFIXGATE_OPTS --check",
                  "PREFIXGATE_OPTS=-c /etc/prefixgate/prefixgate.conf",
                  "Restart=on-failure", "ProtectSystem=strict", "NoNewPrivileges=yes",
                  "ReadWritePaths=/sys/fs/bpf", "LimitNOFILE=1048576",
                  "CapabilityBoundingSet=CAP_BPF CAP_NET_ADMIN CAP_SYS_ADMIN CAP_PERFMON "
                  "CAP_NET_BIND_SERVICE CAP_SETUID CAP_SETGID"):
            assert k in unit, k
        json.load(open(os.path.join(d, "usr/local/share/doc/prefixgate/examples/routing.json")))
        v = subprocess.run([os.path.join(d, "usr/local/sbin/prefixgatectl"), "--version"],
                           capture_output=True, timeout=10)
        assert v.returncode == 0 and v.stdout.startswith(b"prefixgatectl "), v
        r = make_install(opts, d, target="uninstall")
        assert r.returncode == 0, r.stderr.decode()
        left = [os.path.join(r_, f_) for r_, _, fs in os.walk(d) for f_ in fs]
        assert not left, left
        # PREFIX=/usr: the unit goes to /lib/systemd/system
        r = make_install(opts, d, "PREFIX=/usr")
        assert r.returncode == 0, r.stderr.decode()
        assert os.path.exists(os.path.join(d, "lib/systemd/system/prefixgate.service"))
        assert os.path.exists(os.path.join(d, "usr/sbin/prefixgatectl"))
        unit = open(os.path.join(d, "lib/systemd/system/prefixgate.service")).read()
        assert "ExecStart=/usr/sbin/prefixgate " in unit
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test
def systemd_unit_verifies(opts):
    """systemd-analyze verify accepts the unit (with its man pages on MANPATH)."""
    if not shutil.which("systemd-analyze"):
        return "SKIP systemd-analyze not installed"
    d = tempfile.mkdtemp(prefix="pg-unit-")
    try:
        os.makedirs(os.path.join(d, "man", "man8"))
        for page in ("prefixgate.8", "prefixgatectl.8"):
            shutil.copy(os.path.join(REPO, "tools", "packaging", page),
                        os.path.join(d, "man", "man8"))
        src = open(os.path.join(REPO, "tools", "packaging", "prefixgate.service")).read()
        unit = os.path.join(d, "prefixgate.service")
        with open(unit, "w") as fh:
            fh.write(src.replace("@SBINDIR@", os.path.abspath(opts.build)))
        r = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True,
                           timeout=60, env=dict(os.environ, MANPATH=os.path.join(d, "man")))
        assert r.returncode == 0 and not r.stderr.strip(), r.stderr.decode()
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test
def systemd_unit_writable_paths(opts):
    """Every --etcd-state-file and --access-log path the manual, the man page
    and the installed examples suggest is one the systemd unit lets the
    gateway write (StateDirectory=, LogsDirectory=; not /tmp, which is
    private); what exit status 2 means under the unit is said."""
    unit = open(os.path.join(REPO, "tools", "packaging", "prefixgate.service")).read()
    assert "ProtectSystem=strict" in unit and "PrivateTmp=yes" in unit
    writable = unit_writable(unit)
    assert "/var/lib/prefixgate" in writable and "/var/log/prefixgate" in writable, writable
    texts = {name: open(os.path.join(REPO, *name.split("/"))).read().replace("\\-", "-")
             for name in manual_files() + ["tools/packaging/prefixgate.8",
                                           "tools/packaging/examples/prefixgate.default"]}
    seen = {"--etcd-state-file": 0, "--access-log": 0}
    for name, text in texts.items():
        for flag, path in re.findall(r"(--etcd-state-file|--access-log)[ =](/[^\s`\\\"]+)", text):
            seen[flag] += 1
            assert any(path.startswith(d.rstrip("/") + "/") for d in writable), (
                "%s suggests %s %s, which prefixgate.service cannot write (writable: %s)" %
                (name, flag, path, writable))
    assert seen["--etcd-state-file"] and seen["--access-log"], seen
    # an exit that RestartPreventExitStatus=2 stops is explained
    assert "RestartPreventExitStatus=2" in unit
    for name in ("doc/operations.md", "tools/packaging/prefixgate.8"):
        t = re.sub(r"\s+", " ", texts[name])
        assert "RestartPreventExitStatus=2" in t and "journalctl -u prefixgate" in t, name


@test
def configuration_exit_is_told(opts):
    """An access log that cannot be opened exits 2, naming the file, and a
    last line says it is a configuration error not restarted by the unit."""
    r = subprocess.run([os.path.join(opts.build, "prefixgate"), "--no-bpf", "--listen",
                        "127.0.0.1:%d" % free_port(), "--admin", "127.0.0.1:%d" % free_port(),
                        "--access-log", "/nonexistent-pg-dir/access.log"],
                       capture_output=True, timeout=20)
    err = r.stderr.decode()
    assert r.returncode == 2, (r.returncode, err)
    assert "--access-log /nonexistent-pg-dir/access.log: No such file or directory" in err, err
    assert err.rstrip().splitlines()[-1].startswith(
        "prefixgate: exit status 2, a configuration error"), err
    assert "prefixgate.service does not restart after it" in err, err


@test
def example_backends_file_is_todays_syntax(opts):
    """The installed examples/backends describes what the parser takes: it
    loads as it is, and with its commented examples taken in it yields an
    IPv6 member, a DNS name (listed while it does not resolve) and members
    of model pools."""
    src = open(os.path.join(REPO, "tools", "packaging", "examples", "backends")).read()
    f = fleet(opts, "shm", 0, start_gateway=False)
    try:
        # the commented examples: "#   HOST:PORT [pool=NAME]  [# comment]"
        lines = [re.sub(r"^#\s+", "", x) if re.match(r"#\s+\S+:\d+(\s|$)", x) else x
                 for x in src.splitlines()]
        for text, args in ((src, []), ("\n".join(lines) + "\n",
                                        ["--pool", "llama:model=l", "--pool", "qwen:model=q"])):
            path = os.path.join(f.tmp, "backends-example")
            with open(path, "w") as fh:
                fh.write(text)
            f.start_gateway(["--backends-file", path, "--resolver", "127.0.0.1:1",
                             "--health-check-path", "none"] + args, backends=[])
            b = f.backends()
            assert {"10.0.0.11:8000", "10.0.0.12:8000", "[2001:db8::13]:8000"} <= set(b), b
            f.stop()
            f.gw = None
        pools = {a: x["pool"] for a, x in b.items() if a}
        assert pools["10.0.1.21:8000"] == "llama" and pools["[2001:db8::1:23]:8000"] == "qwen"
        assert b[None]["name"] == "vllm.inference.svc.cluster.local:8000", b[None]
    finally:
        f.stop()


def main():
    def add(ap):
        ap.add_argument("--ctl", help="prefixgatectl to test (default BUILD/prefixgatectl)")

    def setup(opts):
        opts.ctl = opts.ctl or os.path.join(opts.build, "prefixgatectl")

    return run_suite(TESTS, add_args=add, setup=setup, modes=None)


if __name__ == "__main__":
    sys.exit(main())
