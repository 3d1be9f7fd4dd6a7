#!/usr/bin/env python3
"""Gateway fleets on etcd: a real etcd (its own data dir and loopback ports,
stopped after each test; 3 members for the quorum test), several prefixgate
gateways (--no-bpf, each its own ports) on one membership, mockllm backends;
the etcd and gateway helpers are in etcd_harness.py. TAP output; every wait
is bounded.

usage: test_fleet.py --build DIR [--tools DIR] [-k SUBSTRING]
  Without the etcd binary (Debian etcd-server) every test is skipped, saying so.
"""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Fleet, http_get, run_suite, wait_until  # noqa: E402
from etcd_harness import PREFIX, Etcd, EtcdCluster, Gateways, b64  # noqa: E402

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def setup_fleet(opts, n_backends=4):
    """(fleet of mockllm backends, etcd, gateways); the caller stops all three."""
    f = Fleet(opts, n=n_backends, start_gateway=False)
    e = Etcd(f.tmp)
    return f, e, Gateways(opts, e, tempfile.mkdtemp(prefix="gws-", dir=f.tmp))


def teardown(f, e, gws):
    try:
        gws.stop()
    finally:
        e.stop()
        f.stop_quietly()


def dry(g, key):
    c = http.client.HTTPConnection("127.0.0.1", g["admin"], timeout=5)
    c.request("POST", "/route?key=" + key, b"{}")
    r = json.loads(c.getresponse().read())
    c.close()
    return r["backend"], tuple(r["candidates"])


def ctl(opts, *args, timeout=20):
    return subprocess.run([os.path.join(opts.tools, "prefixgatectl")] + list(args),
                          capture_output=True, timeout=timeout)


# Keys each gateway routes (dry runs, one connection each: the admin API
# closes every connection); every one must agree, and reach every backend.
KEYS = 2000


@test
def four_gateways_route_alike(opts):
    """4 gateways that learnt the same membership in different orders and with
    different ids route 2,000 keys identically, publish one ring digest, and
    prefixgatectl fleet says they agree (and says so when they do not)."""
    f, e, gws = setup_fleet(opts, 5)
    try:
        addrs = [f.addr("b%d" % i) for i in range(5)]
        for a in addrs[:3]:
            e.put_backend(a)
        gws.start()
        gws.start()
        for a in addrs[3:]:
            e.put_backend(a)
        e.delete("backends/" + addrs[0])
        assert gws.all_have(addrs[1:]), [gws.backends(g) for g in gws.gws]
        gws.start()  # these two list the set at once, in key order
        gws.start()
        e.put_backend(addrs[0])
        assert gws.all_have(addrs), [gws.backends(g) for g in gws.gws]
        ids = [{b["address"]: b["id"] for b in json.loads(http_get(g["admin"], "/backends")[1])}
               for g in gws.gws]
        digests = {tuple(gws.metric(g, "prefixgate_ring_digest_info")) for g in gws.gws}
        assert len(digests) == 1 and digests != {()}, digests
        results = [None] * len(gws.gws)

        def run(i):
            results[i] = [dry(gws.gws[i], "k%d" % k) for k in range(KEYS)]

        th = [threading.Thread(target=run, args=(i,)) for i in range(len(gws.gws))]
        t0 = time.monotonic()
        for t in th:
            t.start()
        for t in th:
            t.join(180)
        same = sum(all(r[k] == results[0][k] for r in results) for k in range(KEYS))
        print("# %d keys x %d gateways: %d identical (%.2f%%), %.1f s; ids per gateway "
              "differ: %s" % (KEYS, len(gws.gws), same, 100.0 * same / KEYS,
                              time.monotonic() - t0,
                              len({tuple(sorted(i.items())) for i in ids}) > 1))
        assert same == KEYS
        assert len({r[0] for r in results[0]}) == 5  # the keys reach every backend
        ok = wait_until(lambda: ctl(opts, "fleet", "--etcd", e.url).returncode == 0, 5)
        r = ctl(opts, "fleet", "--etcd", e.url)
        print("# " + r.stdout.decode().replace("\n", "\n# "))
        assert ok and r.stdout.decode().count("\ngw") == 4, r.stdout
        # A gateway whose record says another ring is a disagreement.
        rec = json.loads(e.get_prefix("gateways/gw0")["gateways/gw0"])
        rec["digest"] = "0123456789abcdef"
        rec["id"] = "gw-fake"
        e.put("gateways/gw-fake", json.dumps(rec))
        r = ctl(opts, "fleet", "--etcd", e.url)
        assert r.returncode == 1 and b"DISAGREE" in r.stdout, r.stdout
    finally:
        teardown(f, e, gws)


@test
def membership_change_reaches_all_within_a_second(opts):
    """Put and delete backend keys 20 times; each time, the time until all 4
    gateways have the new set. p99 (here: the maximum) below 1 s."""
    f, e, gws = setup_fleet(opts, 4)
    try:
        addrs = [f.addr("b%d" % i) for i in range(4)]
        for a in addrs[:3]:
            e.put_backend(a)
        for _ in range(4):
            gws.start()
        assert gws.all_have(addrs[:3])
        lat = []
        for i in range(20):
            want = addrs if i % 2 == 0 else addrs[:3]
            t0 = time.monotonic()
            if i % 2 == 0:
                e.put_backend(addrs[3])
            else:
                e.delete("backends/" + addrs[3])
            assert gws.all_have(want, 3.0), "change %d did not arrive" % i
            lat.append(time.monotonic() - t0)
        lat.sort()
        p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        print("# membership change -> all 4 gateways: p50 %.1f ms, p99 %.1f ms, max %.1f ms "
              "(%d changes; includes the test's polling of 4 admin APIs)"
              % (p50 * 1e3, p99 * 1e3, lat[-1] * 1e3, len(lat)))
        assert p99 < 1.0, lat
    finally:
        teardown(f, e, gws)


@test
def lease_loss_removes_the_backend_everywhere(opts):
    """prefixgatectl register: killed, its lease lapses and every gateway drops
    the backend within TTL + 1 s; stopped with SIGTERM, it revokes at once."""
    f, e, gws = setup_fleet(opts, 3)
    regs = []
    try:
        addrs = [f.addr("b%d" % i) for i in range(3)]
        e.put_backend(addrs[0])
        for _ in range(3):
            gws.start()
        ttl = 2
        for a in addrs[1:]:
            regs.append(subprocess.Popen(
                [os.path.join(opts.tools, "prefixgatectl"), "register", "--etcd", e.url,
                 "--address", a, "--ttl", str(ttl)], stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT))
        assert gws.all_have(addrs), [gws.backends(g) for g in gws.gws]
        t0 = time.monotonic()
        regs[0].kill()  # no revoke: the lease must lapse
        regs[0].wait(5)
        assert gws.all_have([addrs[0], addrs[2]], ttl + 3), [gws.backends(g) for g in gws.gws]
        took = time.monotonic() - t0
        print("# lease of %d s lapsed: backend gone from every gateway %.2f s after the "
              "process died" % (ttl, took))
        assert took < ttl + 1, took
        t0 = time.monotonic()
        regs[1].send_signal(signal.SIGTERM)
        out = regs[1].communicate(timeout=10)[0].decode()
        assert regs[1].returncode == 0 and "revoked" in out, out
        assert gws.all_have([addrs[0]], 2), [gws.backends(g) for g in gws.gws]
        print("# SIGTERM: revoked, gone everywhere in %.2f s" % (time.monotonic() - t0))
    finally:
        for r in regs:
            if r.poll() is None:
                r.kill()
                r.wait()
        teardown(f, e, gws)


def traffic(gws, stop, counts):
    """Requests round-robin over the gateways until stop is set."""
    body = json.dumps({"model": "m", "prompt": "hello", "max_tokens": 2})
    i = 0
    while not stop.is_set():
        g = gws.gws[i % len(gws.gws)]
        i += 1
        try:
            c = http.client.HTTPConnection("127.0.0.1", g["port"], timeout=10)
            c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            c.close()
            counts["ok" if r.status == 200 else "failed"] += 1
        except OSError:
            counts["failed"] += 1


@test
def etcd_outage_keeps_routing(opts):
    """etcd killed under traffic: no request fails, every gateway says it is
    stale (/health, metric) and routes on the last state; etcd back: the flag
    clears and a change made then reaches every gateway."""
    f, e, gws = setup_fleet(opts, 3)
    stop, counts = threading.Event(), {"ok": 0, "failed": 0}
    t = None
    try:
        addrs = [f.addr("b%d" % i) for i in range(3)]
        for a in addrs[:2]:
            e.put_backend(a)
        for _ in range(3):
            gws.start()
        assert gws.all_have(addrs[:2])
        t = threading.Thread(target=traffic, args=(gws, stop, counts))
        t.start()
        time.sleep(0.5)
        e.kill()
        stale = wait_until(lambda: all((gws.health(g) or {}).get("etcd", {}).get("stale")
                                       for g in gws.gws), 5)
        assert stale, [gws.health(g) for g in gws.gws]
        assert all(gws.metric(g, "prefixgate_etcd_stale").get("prefixgate_etcd_stale") == 1
                   for g in gws.gws)
        time.sleep(1.5)  # routing goes on, on the last state
        assert all(gws.backends(g) == sorted(addrs[:2]) for g in gws.gws)
        before = dict(counts)
        e.start()
        e.put_backend(addrs[2])
        assert gws.all_have(addrs, 5), [gws.backends(g) for g in gws.gws]
        back = wait_until(lambda: all(not gws.health(g)["etcd"]["stale"] for g in gws.gws), 5)
        assert back, [gws.health(g) for g in gws.gws]
        stop.set()
        t.join(15)
        print("# etcd down ~2 s: %d requests during the outage, %d in all, %d failed"
              % (before["ok"], counts["ok"], counts["failed"]))
        assert counts["failed"] == 0 and before["ok"] > 0, counts
    finally:
        stop.set()
        if t:
            t.join(15)
        teardown(f, e, gws)


def stale_all(gws, want):
    return all((gws.health(g) or {}).get("etcd", {}).get("stale") is want and
               gws.metric(g, "prefixgate_etcd_stale").get("prefixgate_etcd_stale") == int(want)
               for g in gws.gws)


@test
def quorum_loss_is_detected_and_survived(opts):
    """3-member etcd, 2 members SIGKILLed under traffic: the last one still
    takes connections and answers serializable reads, but has no quorum.
    The gateways list it first, so their watch is open on it and stays open,
    silent: only the liveness check can tell. Each is stale within
    2 x --etcd-timeout + 2 s; no request fails. The 2 restarted: the flag
    clears and a backend added then reaches both."""
    f = Fleet(opts, n=3, start_gateway=False)
    c = gws = t = None
    stop, counts = threading.Event(), {"ok": 0, "failed": 0}
    try:
        c = EtcdCluster(f.tmp, 3)
        live, dead = c.members[0], c.members[1:]
        gws = Gateways(opts, live, tempfile.mkdtemp(prefix="gws-", dir=f.tmp))
        addrs = [f.addr("b%d" % i) for i in range(3)]
        for a in addrs[:2]:
            live.put_backend(a)
        # Endpoints are tried in turn from the one that last answered, and
        # the first at start: both gateways talk to the member that stays.
        for _ in range(2):
            gws.start(endpoints=c.endpoints([live] + dead))
        assert gws.all_have(addrs[:2]) and stale_all(gws, False), \
            [gws.health(g) for g in gws.gws]
        t = threading.Thread(target=traffic, args=(gws, stop, counts))
        t.start()
        time.sleep(0.5)
        t0, ok0 = time.monotonic(), counts["ok"]
        for m in dead:
            m.kill()
        bound = 2 * 0.5 + 2  # the gateways run with --etcd-timeout 500
        stale = wait_until(lambda: stale_all(gws, True), bound)
        to_stale = time.monotonic() - t0
        assert stale, [gws.health(g) for g in gws.gws]
        # Their check asked the member that stays, which took the connection
        # and did not answer.
        asked = "etcd 127.0.0.1:%d/v3/kv/range: timed out" % live.port
        assert all(asked in open(g["log"]).read() for g in gws.gws), \
            [open(g["log"]).read()[-1500:] for g in gws.gws]
        # Up, but without a quorum: /health false, serializable reads answer.
        assert http_get(live.port, "/health", 2)[0] != 200
        r = live.call("/v3/kv/range", {"key": b64(PREFIX + "backends/" + addrs[0]),
                                       "serializable": True})
        assert r.get("count") == "1", r
        time.sleep(1.5)  # routing goes on, on the last state
        assert all(gws.backends(g) == sorted(addrs[:2]) for g in gws.gws)
        t1, during, seen = time.monotonic(), counts["ok"] - ok0, {}
        for m in dead:
            m.start(wait=False)

        def recovered():  # when the surviving member and the gateways are back
            for k, up in (("etcd", lambda: http_get(live.port, "/health", 0.5)[0] == 200),
                          ("gws", lambda: stale_all(gws, False))):
                if k not in seen and up():
                    seen[k] = time.monotonic() - t1
            return len(seen) == 2
        assert wait_until(recovered, 20), (seen, [gws.health(g) for g in gws.gws])
        assert seen["gws"] <= seen["etcd"] + bound, seen
        live.put_backend(addrs[2])
        assert gws.all_have(addrs, 5), [gws.backends(g) for g in gws.gws]
        stop.set()
        t.join(15)
        print("# quorum lost (2 of 3 members killed): every gateway stale after %.2f s "
              "(bound %.1f s); %d requests from the kill to the restart, %d in all, %d failed"
              % (to_stale, bound, during, counts["ok"], counts["failed"]))
        print("# 2 members restarted: the surviving member healthy after %.2f s, no gateway "
              "stale after %.2f s" % (seen["etcd"], seen["gws"]))
        assert counts["failed"] == 0 and during > 0, counts
    finally:
        stop.set()
        if t:
            t.join(15)
        try:
            if gws:
                gws.stop()
        finally:
            if c:
                c.stop()
            f.stop_quietly()


@test
def restart_on_the_state_file_with_etcd_down(opts):
    """A gateway restarted while etcd is down serves from --etcd-state-file."""
    f, e, gws = setup_fleet(opts, 2)
    try:
        addrs = [f.addr("b%d" % i) for i in range(2)]
        for a in addrs:
            e.put_backend(a)
        e.put("config/routing", json.dumps({"RoutingStrategy": "PREFIX_AWARE",
                                            "PrefixAwareRoutingConfig": {"PrefixLength": 2048}}))
        g = gws.start()
        assert gws.all_have(addrs)
        assert wait_until(lambda: os.path.exists(g["state"]), 2)
        gws.stop_one(g)
        e.kill()
        g = gws.start(0)
        assert gws.backends(g) == sorted(addrs), open(g["log"]).read()[-2000:]
        h = gws.health(g)
        assert h["etcd"]["stale"], h
        assert "PrefixLength\":2048" in http_get(g["admin"], "/routing")[1].decode()
        c = http.client.HTTPConnection("127.0.0.1", g["port"], timeout=10)
        c.request("POST", "/v1/completions", json.dumps({"model": "m", "prompt": "x"}))
        r = c.getresponse()
        assert r.status == 200, (r.status, r.read())
        e.start()
        assert wait_until(lambda: not gws.health(g)["etcd"]["stale"], 5), gws.health(g)
    finally:
        teardown(f, e, gws)


@test
def compaction_forces_a_relist(opts):
    """A watch resumed from a compacted revision is cancelled; the gateway
    reads everything again and ends on the right set."""
    f, e, gws = setup_fleet(opts, 3)
    try:
        addrs = [f.addr("b%d" % i) for i in range(3)]
        e.put_backend(addrs[0])
        g = gws.start()
        assert gws.all_have(addrs[:1])
        # Frozen, the gateway cannot resume its watch before the compaction.
        g["p"].send_signal(signal.SIGSTOP)
        try:
            e.kill()
            e.start()
            e.put_backend(addrs[1])
            rev = e.put_backend(addrs[2])
            e.delete("backends/" + addrs[0])
            rev = e.put("config/x", "y")
            e.compact(rev)
        finally:
            g["p"].send_signal(signal.SIGCONT)
        assert gws.all_have(addrs[1:], 8), gws.backends(g)
        relists = wait_until(lambda: gws.metric(g, "prefixgate_etcd_relists_total")
                             .get("prefixgate_etcd_relists_total", 0) != 0, 5)
        log = open(g["log"]).read()
        assert relists and "compacted: re-listing" in log, log[-2000:]
    finally:
        teardown(f, e, gws)


@test
def admin_writes_through_to_etcd(opts):
    """POST /backends and DELETE /backends/ADDR on one gateway write etcd; all
    gateways apply the change from their watch."""
    f, e, gws = setup_fleet(opts, 2)
    try:
        addrs = [f.addr("b%d" % i) for i in range(2)]
        e.put_backend(addrs[0], key="reg-1")
        for _ in range(2):
            gws.start()
        assert gws.all_have(addrs[:1])
        c = http.client.HTTPConnection("127.0.0.1", gws.gws[0]["admin"], timeout=5)
        c.request("POST", "/backends", json.dumps({"address": addrs[1]}))
        r = c.getresponse()
        body = json.loads(r.read())
        assert r.status == 202 and body["etcd_key"] == PREFIX + "backends/" + addrs[1], body
        assert "backends/" + addrs[1] in e.get_prefix("backends/")
        assert gws.all_have(addrs)
        # DELETE on the other gateway, of a key that is not the address
        c = http.client.HTTPConnection("127.0.0.1", gws.gws[1]["admin"], timeout=5)
        c.request("DELETE", "/backends/" + addrs[0])
        r = c.getresponse()
        assert r.status == 202, r.read()
        r.read()
        assert "backends/reg-1" not in e.get_prefix("backends/")
        assert gws.all_have(addrs[1:])
        c = http.client.HTTPConnection("127.0.0.1", gws.gws[1]["admin"], timeout=5)
        c.request("DELETE", "/backends/127.0.0.1:9")
        assert c.getresponse().status == 404
    finally:
        teardown(f, e, gws)


@test
def records_name_their_pool(opts):
    """A backend record's "pool" (prefixgatectl register --pool, POST
    /backends with a pool) puts it in that pool on every gateway; a decode
    set is a pool too (NAME-decode), so a prefill/decode pool's members can
    come from etcd."""
    f, e, gws = setup_fleet(opts, 3)
    try:
        addrs = [f.addr("b%d" % i) for i in range(3)]
        e.put_backend(addrs[0])
        pools = ["--pool", "default", "--pool", "llama:model=m-llama"]
        for _ in range(2):
            gws.start(extra=pools)
        assert gws.all_have(addrs[:1]), [gws.backends(g) for g in gws.gws]
        c = http.client.HTTPConnection("127.0.0.1", gws.gws[0]["admin"], timeout=5)
        c.request("POST", "/backends", json.dumps({"address": addrs[1], "pool": "llama"}))
        r = c.getresponse()
        body = json.loads(r.read())
        assert r.status == 202, body
        assert json.loads(e.get_prefix("backends/")["backends/" + addrs[1]])["pool"] == "llama"
        reg = subprocess.Popen([os.path.join(opts.tools, "prefixgatectl"), "register", "--etcd",
                                e.url, "--prefix", PREFIX.rstrip("/"), "--address", addrs[2],
                                "--pool", "llama", "--ttl", "5"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            assert gws.all_have(addrs), [gws.backends(g) for g in gws.gws]

            def pools_of(g):
                st, b = http_get(g["admin"], "/backends", 2.0)
                return {x["address"]: x["pool"] for x in json.loads(b)} if st == 200 else {}
            want = {addrs[0]: "default", addrs[1]: "llama", addrs[2]: "llama"}
            assert wait_until(lambda: all(pools_of(g) == want for g in gws.gws), 5), \
                [pools_of(g) for g in gws.gws]
        finally:
            reg.send_signal(signal.SIGTERM)
            reg.wait(10)
    finally:
        teardown(f, e, gws)


@test
def etcd_authentication(opts):
    """With auth enabled in etcd, --etcd-user and --etcd-password-file get a
    token; the gateway lists, watches and writes with it."""
    f, e, gws = setup_fleet(opts, 2)
    try:
        addrs = [f.addr("b%d" % i) for i in range(2)]
        e.put_backend(addrs[0])
        env = dict(os.environ, ETCDCTL_API="3")
        for args in (["user", "add", "root:s3cret-pw"], ["auth", "enable"]):
            r = subprocess.run(["etcdctl", "--endpoints", e.url] + args, env=env,
                               capture_output=True, timeout=20)
            assert r.returncode == 0, r.stderr
        assert "error" in e.call("/v3/kv/range", {"key": b64(PREFIX)})  # no token: refused
        pw = os.path.join(gws.tmp, "pw")
        open(pw, "w").write("s3cret-pw\n")
        g = gws.start(extra=["--etcd-user", "root", "--etcd-password-file", pw])
        assert gws.all_have(addrs[:1]), open(g["log"]).read()[-2000:]
        c = http.client.HTTPConnection("127.0.0.1", g["admin"], timeout=5)
        c.request("POST", "/backends", json.dumps({"address": addrs[1]}))
        assert c.getresponse().status == 202
        assert gws.all_have(addrs), open(g["log"]).read()[-2000:]
        assert not gws.health(g)["etcd"]["stale"]
    finally:
        teardown(f, e, gws)


def setup(opts):
    opts.no_etcd = None if shutil.which("etcd") else \
        "etcd not installed (Debian etcd-server; make deps installs it)"


if __name__ == "__main__":
    def skip_or(t):
        def w(opts):
            return "SKIP " + opts.no_etcd if opts.no_etcd else t(opts)
        w.__name__ = t.__name__
        return w
    sys.exit(run_suite([skip_or(t) for t in TESTS], setup=setup, modes=None, limit_s=240))
