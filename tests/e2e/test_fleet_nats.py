#!/usr/bin/env python3
"""Fleets of gateways sharing load and the cache index over NATS, end to end:
a real nats-server on loopback (a free port, stopped after each test),
2-4 prefixgates on one host (--no-bpf: each its own shared memory), mockllm
backends.

- 4 gateways, one hot prefix: no backend ever has more than
  ConcurrencyThreshold + 2 requests in flight (measured at the clients: a
  request is counted from before it is sent until its response is read, an
  upper bound of the backend's own count);
- a peer that goes silent (SIGSTOP) is dropped, its requests no longer
  counted; it rejoins when it speaks again;
- NATS killed: each gateway logs its fallback load mode (backend when the
  backends report their load, share with --fleet-size), metrics show it,
  routing goes on with 0 failed requests; NATS back: mode nats again;
- cache_aware: a conversation whose turns reach different gateways stays on
  one backend, found in the index the gateways share;
- bpf mode: bpftool shows peer_in_flight beside in_flight.

usage: test_fleet_nats.py --build DIR [--tools DIR] --mode shm|bpf [-k SUBSTRING]
"""
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Fleet, free_port, http_get, metric_samples, run_suite, wait_until  # noqa: E402

TESTS = []
T = 4  # ConcurrencyThreshold of the hot-prefix test
QUIET = ["--health-check-path", "none", "--metrics-scrape-interval", "0"]


def test(fn):
    TESTS.append(fn)
    return fn


class Nats:
    """nats-server on 127.0.0.1:port; restartable on the same port."""

    def __init__(self, tmp, port=None):
        self.port = port or free_port()
        self.log = os.path.join(tmp, "nats-%d.log" % self.port)
        self.p = None
        self.start()

    def url(self):
        return "nats://127.0.0.1:%d" % self.port

    def start(self):
        self.p = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(self.port)],
                                  stdout=open(self.log, "a"), stderr=subprocess.STDOUT)

        def up():
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return True
            except OSError:
                return False
        if not wait_until(up, 5):
            raise RuntimeError("nats-server did not start: " + open(self.log).read()[-500:])

    def kill(self):
        if self.p and self.p.poll() is None:
            self.p.kill()
            self.p.wait(5)


class Gateway:
    """One prefixgate of the fleet."""

    def __init__(self, opts, tmp, backends, args):
        self.port, self.admin_port = free_port(), free_port()
        cmd = [os.path.join(opts.build, "prefixgate"), "--listen", "127.0.0.1:%d" % self.port,
               "--admin", "127.0.0.1:%d" % self.admin_port, "--workers", "2", "--no-bpf"]
        for b in backends:
            cmd += ["--backend", b]
        self.logf = os.path.join(tmp, "gw-%d.log" % self.port)
        self.p = subprocess.Popen(cmd + list(args), stdout=open(self.logf, "w"),
                                  stderr=subprocess.STDOUT)
        if not wait_until(lambda: http_get(self.admin_port, "/health", 0.5)[0] == 200, 5):
            raise RuntimeError("prefixgate did not start:\n" + self.log()[-2000:])

    def log(self):
        return open(self.logf).read()

    def admin(self, path):
        st, body = http_get(self.admin_port, path, 5)
        assert st == 200, "%s: %s" % (path, st)
        return json.loads(body) if path != "/metrics" else body.decode()

    def peers(self):
        return len(self.admin("/fleet")["peers"])

    def metric(self, name):
        return metric_samples(self.admin("/metrics")).get(name)

    def post(self, body, headers=None, timeout=20):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        c.request("POST", "/v1/chat/completions", body=body,
                  headers=dict({"Content-Type": "application/json"}, **(headers or {})))
        r = c.getresponse()
        r.read()
        c.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGCONT)
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        log = self.log()
        for marker in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
            assert marker not in log, "sanitizer report in %s" % self.logf


class Setup:
    """mockllm backends, NATS, gateways; everything stopped by close()."""

    def __init__(self, opts, nmocks, mock_args=()):
        self.mocks = Fleet(opts, nmocks, mock_args={i: list(mock_args) for i in range(nmocks)},
                           start_gateway=False)
        self.opts, self.tmp, self.gws, self.nats = opts, self.mocks.tmp, [], None
        try:
            self.nats = Nats(self.tmp)
        except Exception:
            self.mocks.stop_quietly()
            raise

    def gateway(self, args, nats=True):
        g = Gateway(self.opts, self.tmp, [self.mocks.addr(n) for n in self.mocks.mocks],
                    (["--nats", self.nats.url(), "--fleet-interval", "100"] if nats else []) +
                    list(args))
        self.gws.append(g)
        return g

    def all_peered(self, timeout=5):
        n = len(self.gws) - 1
        return wait_until(lambda: all(g.peers() == n for g in self.gws), timeout)

    def close(self):
        errs = []
        for g in self.gws:
            try:
                g.stop()
            except AssertionError as e:
                errs.append(str(e))
        if self.nats:
            self.nats.kill()
        self.mocks.stop()
        assert not errs, errs


def need_nats(opts=None):
    """Why a test cannot run: no nats-server, or (opts given) bpf mode, since
    those tests run their gateways with --no-bpf and --mode shm covers them."""
    if opts is not None and opts.mode == "bpf":
        return "SKIP gateways run with --no-bpf here: covered by --mode shm"
    return None if shutil.which("nats-server") else "SKIP nats-server not installed (make deps)"


def hot_load(gws, per_gw, seconds, delay_ms=150):
    """per_gw closed-loop clients on each gateway sending one hot prefix for
    `seconds`; returns (max in flight per backend seen at the clients, failures,
    requests)."""
    body = json.dumps({"model": "m", "max_tokens": 2,
                       "messages": [{"role": "user", "content": "hot " * 1500}]})
    spans, fails, lock = [], [0], threading.Lock()
    stop_at = time.monotonic() + seconds

    def client(g, k):
        # Clients start 20 ms apart: a perfectly simultaneous first burst
        # reaches every gateway before any count could (see doc/fleets.md).
        time.sleep(0.02 * k)
        while time.monotonic() < stop_at:
            t0 = time.monotonic()
            try:
                st, h = g.post(body, {"X-Mock-Delay-Ms": str(delay_ms)})
            except OSError:
                st, h = None, {}
            t1 = time.monotonic()
            with lock:
                if st != 200:
                    fails[0] += 1
                else:
                    spans.append((h["x-backend-id"], t0, t1))

    ths = [threading.Thread(target=client, args=(g, k * len(gws) + i))
           for k in range(per_gw) for i, g in enumerate(gws)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(seconds + 30)
    peak = {}
    for b in set(s[0] for s in spans):
        ev = sorted([(s[1], 1) for s in spans if s[0] == b] +
                    [(s[2], -1) for s in spans if s[0] == b], key=lambda e: (e[0], e[1]))
        cur = top = 0
        for _, d in ev:
            cur += d
            top = max(top, cur)
        peak[b] = top
    return peak, fails[0], len(spans)


@test
def hot_prefix_capped_across_gateways(opts):
    """4 gateways x 3 clients on one hot prefix, ConcurrencyThreshold 4: no
    backend above T + 2 at any time (without NATS each gateway alone would
    put up to 12 on the first candidate)."""
    why = need_nats(opts)
    if why:
        return why
    s = Setup(opts, 4)
    try:
        args = QUIET + ["--concurrency-threshold", str(T)]
        for _ in range(4):
            s.gateway(args)
        assert s.all_peered(), [g.peers() for g in s.gws]
        peak, fails, n = hot_load(s.gws, 3, 4.0)
        print("# shared counts: %d requests, peak in flight per backend %s" % (n, peak))
        assert fails == 0, "%d failed requests" % fails
        assert n > 100, "only %d requests" % n
        assert max(peak.values()) <= T + 2, "peak %s above %d + 2" % (peak, T)
        for g in s.gws:
            assert g.metric('prefixgate_fleet_load_mode{mode="nats"}') == 1
    finally:
        s.close()


@test
def silent_peer_is_dropped(opts):
    """A peer stopped (SIGSTOP) mid-request is dropped after 3 intervals and
    its request no longer counted; resumed, it rejoins."""
    why = need_nats(opts)
    if why:
        return why
    s = Setup(opts, 1)
    try:
        a, b = s.gateway(QUIET), s.gateway(QUIET)
        assert s.all_peered()
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]})
        th = threading.Thread(target=lambda: b.post(body, {"X-Mock-Delay-Ms": "3000"}))
        th.start()
        assert wait_until(lambda: a.admin("/backends")[0]["peer_in_flight"] == 1, 3), \
            "b's request never counted at a"
        b.p.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        assert wait_until(lambda: a.peers() == 0, 3), "silent peer still listed"
        dropped = time.monotonic() - t0
        assert a.admin("/backends")[0]["peer_in_flight"] == 0
        assert "silent for 3 intervals: dropped" in a.log()
        print("# silent peer dropped after %.2f s (interval 0.1 s)" % dropped)
        b.p.send_signal(signal.SIGCONT)
        assert wait_until(lambda: a.peers() == 1, 3), "resumed peer did not rejoin"
        th.join(10)
    finally:
        s.close()


@test
def nats_killed_falls_back(opts):
    """NATS killed under traffic: the fallback mode is logged and exported,
    no request fails; NATS back on the same port: mode nats again."""
    why = need_nats(opts)
    if why:
        return why
    s = Setup(opts, 3)
    try:
        g_backend = s.gateway(["--health-check-path", "none", "--metrics-scrape-interval",
                               "200"])
        g_share = s.gateway(QUIET + ["--fleet-size", "2"])
        assert s.all_peered()
        stop, fails, ok = [False], [0], [0]

        def traffic(g):
            rng = random.Random(id(g))
            while not stop[0]:
                body = json.dumps({"model": "m", "max_tokens": 2, "messages": [
                    {"role": "user", "content": "k%d " % rng.randrange(50) * 300}]})
                try:
                    st, _ = g.post(body)
                except OSError:
                    st = None
                if st == 200:
                    ok[0] += 1
                else:
                    fails[0] += 1

        ths = [threading.Thread(target=traffic, args=(g,)) for g in s.gws for _ in range(2)]
        for t in ths:
            t.start()
        try:
            time.sleep(0.5)
            s.nats.kill()
            assert wait_until(lambda: "load mode nats -> backend" in g_backend.log(), 5), \
                g_backend.log()[-1500:]
            assert wait_until(lambda: "load mode nats -> share" in g_share.log(), 5), \
                g_share.log()[-1500:]
            assert "ConcurrencyThreshold / 2 per gateway" in g_share.log()
            assert g_share.metric('prefixgate_fleet_load_mode{mode="share"}') == 1
            assert g_share.metric("prefixgate_fleet_nats_connected") == 0
            assert g_backend.admin("/fleet")["load_mode"] == "backend"
            time.sleep(1.0)  # routing goes on without NATS
            during = ok[0]
            s.nats.start()
            assert wait_until(lambda: all(g.admin("/fleet")["load_mode"] == "nats"
                                          for g in s.gws), 5), "not back to nats"
            assert s.all_peered()
            time.sleep(0.3)
        finally:
            stop[0] = True
            for t in ths:
                t.join(30)
        assert fails[0] == 0, "%d failed requests" % fails[0]
        assert during > 20 and ok[0] > during, (during, ok[0])
        print("# %d requests, 0 failed, across a NATS outage" % ok[0])
    finally:
        s.close()


@test
def starts_without_nats(opts):
    """NATS down at start-up: the gateway starts at once and serves; a
    SIGTERM while NATS is still down stops it (start-up used to wait inside
    libnats' connect for NATS to come, so SIGTERM went unread); a gateway
    started without NATS joins it when it comes."""
    why = need_nats(opts)
    if why:
        return why
    s = Setup(opts, 1)
    try:
        s.nats.kill()
        t0 = time.monotonic()
        g = s.gateway(QUIET)  # returns once /health answers, within 5 s
        started = time.monotonic() - t0
        assert g.admin("/fleet")["nats_connected"] is False
        body = json.dumps({"model": "m", "max_tokens": 2,
                           "messages": [{"role": "user", "content": "hello"}]})
        assert g.post(body)[0] == 200
        t1 = time.monotonic()
        g.p.send_signal(signal.SIGTERM)
        try:
            g.p.wait(5)
        except subprocess.TimeoutExpired:
            raise AssertionError("SIGTERM with NATS down: still running after 5 s:\n" +
                                 g.log()[-1500:])
        stopped = time.monotonic() - t1
        assert "signal 15: stopping" in g.log(), g.log()[-1500:]
        g2 = s.gateway(QUIET)
        s.nats.start()
        assert wait_until(lambda: g2.admin("/fleet")["nats_connected"], 5), \
            "never joined NATS:\n" + g2.log()[-1500:]
        print("# started without NATS in %.2f s; stopped %.2f s after SIGTERM" % (
            started, stopped))
    finally:
        s.close()


def words(rng, n):
    vocab = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
             "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"]
    return " ".join(rng.choice(vocab) for _ in range(n))


@test
def conversation_turns_across_gateways(opts):
    """cache_aware, 3 gateways, 12 conversations behind one shared system
    prompt: turn k goes to gateway k mod 3, and still lands where turn 1
    did, from the third turn as a cached match found in the index the
    gateways share."""
    why = need_nats(opts)
    if why:
        return why
    s = Setup(opts, 4, ["--time-scale", "50"])
    try:
        for _ in range(3):
            s.gateway(QUIET + ["--strategy", "cache_aware", "--route-header"])
        assert s.all_peered()
        rng = random.Random(5)
        system = words(random.Random(99), 2000)[:9000]
        convs = [[{"role": "system", "content": system},
                  {"role": "user", "content": words(rng, 60)}] for _ in range(12)]
        where, made = [None] * len(convs), [0, 0, 0]
        for turn in range(4):
            g = s.gws[turn % 3]
            for i, m in enumerate(convs):
                st, h = g.post(json.dumps({"model": "m", "messages": m, "max_tokens": 4}))
                assert st == 200
                route = dict(p.strip().split("=", 1) for p in h["x-prefixgate-route"].split(";"))
                if turn == 0:
                    where[i] = route["backend"]
                else:
                    assert route["backend"] == where[i], \
                        "conversation %d turn %d at gateway %d: %s -> %s" % (
                            i, turn + 1, turn % 3, where[i], route["backend"])
                    # As with one gateway (test_cache.py): from the third
                    # turn the match reaches past the shared system prompt.
                    if turn >= 2:
                        assert route["reason"] == "cached", (turn, route)
                m += [{"role": "assistant", "content": words(rng, 80)},
                      {"role": "user", "content": words(rng, 40)}]
            made[turn % 3] += len(convs)
            # Every other gateway has applied this turn's decisions.
            for k, o in enumerate(s.gws):
                want = sum(made) - made[k]
                assert wait_until(lambda: o.metric("prefixgate_fleet_cache_applied_total")
                                  >= want, 3), "gateway %d applied %s of %d" % (
                    k, o.metric("prefixgate_fleet_cache_applied_total"), want)
        assert len(set(where)) > 1, "conversations did not spread: %s" % set(where)
        for g in s.gws:
            assert g.metric("prefixgate_fleet_cache_dropped_total") == 0
    finally:
        s.close()


@test
def flow_control_shared_across_gateways(opts):
    """Flow control on two gateways in front of 2 instances: a tenant's flood
    on gateway 1 waits there, and gateway 2's GET /flow shows its requests
    waiting at the peer (peer_queued, under the tenant's label) and, once
    served, their work charged to the tenant there too (peer_served_work),
    so that tenants share the fleet, not each gateway; the peer's queued
    count goes back to 0."""
    why = need_nats(opts)
    if why:
        return why
    s = Setup(opts, 2)
    try:
        g1, g2 = (s.gateway(QUIET + ["--strategy", "cache_aware", "--flow-control"])
                  for _ in range(2))
        assert s.all_peered()
        rng = random.Random(8)
        bodies = [json.dumps({"model": "m", "max_tokens": 2, "messages": [
            {"role": "user", "content": words(random.Random(rng.random()), 6000)}]})
            for _ in range(24)]
        errs = []

        def client(part):
            for b in part:
                try:
                    st, _ = g1.post(b, {"Authorization": "Bearer sk-flood"}, timeout=60)
                    if st != 200:
                        errs.append(st)
                except Exception as e:  # noqa: BLE001 - reported below
                    errs.append(repr(e))

        ts = [threading.Thread(target=client, args=(bodies[i::8],)) for i in range(8)]
        for t in ts:
            t.start()
        try:
            def waiting_at_peer():
                mine = [t for t in g1.admin("/flow")["tenants"] if t["queued"] > 0]
                seen = {t["tenant"]: t for t in g2.admin("/flow")["tenants"]}
                return mine and seen.get(mine[0]["tenant"], {}).get("peer_queued", 0) > 0 \
                    and g2.admin("/flow")["peer_queued"] > 0
            assert wait_until(waiting_at_peer, 20), \
                "gateway 2 never saw gateway 1's queue: %s / %s" % (
                    g1.admin("/flow"), g2.admin("/flow"))
        finally:
            for t in ts:
                t.join(90)
        assert not errs, errs[:3]
        label = [t["tenant"] for t in g1.admin("/flow")["tenants"] if t["served_work"] > 0]
        assert len(label) == 1, g1.admin("/flow")
        assert "sk-flood" not in json.dumps(g2.admin("/flow"))

        def settled():
            t = {x["tenant"]: x for x in g2.admin("/flow")["tenants"]}.get(label[0], {})
            return t.get("peer_served_work", 0) > 0 and t.get("peer_queued") == 0 \
                and g2.admin("/flow")["peer_queued"] == 0
        assert wait_until(settled, 5), g2.admin("/flow")
        sent = g1.metric('prefixgate_fleet_messages_sent_total{type="flow"}')
        got = g2.metric('prefixgate_fleet_messages_received_total{type="flow"}')
        assert sent and got, (sent, got)
        assert g2.metric("prefixgate_fleet_flow_applied_total") > 0
    finally:
        s.close()


@test
def bpftool_shows_peer_in_flight(opts):
    """bpf mode: the pinned backends map has peer_in_flight beside in_flight,
    and it holds the peer's count."""
    if opts.mode != "bpf":
        return "SKIP peer_in_flight in a pinned map needs --mode bpf"
    why = need_nats()
    if why:
        return why
    s = Setup(opts, 1)
    f = None
    try:
        peer = s.gateway(QUIET)
        f = Fleet(opts, 0, start_gateway=False)
        f.start_gateway(QUIET + ["--nats", s.nats.url(), "--fleet-interval", "100"],
                        backends=(), extra_backends=[s.mocks.addr("b0")])
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]})
        th = threading.Thread(target=lambda: peer.post(body, {"X-Mock-Delay-Ms": "2000"}))
        th.start()

        def dump():
            p = subprocess.run(["bpftool", "-j", "map", "dump", "pinned",
                                f.pin + "/pg_backends"], capture_output=True, text=True,
                               timeout=10)
            assert p.returncode == 0, p.stderr
            return p.stdout
        assert wait_until(lambda: '"peer_in_flight": 1' in dump().replace('":1', '": 1'), 3), \
            dump()[:1500]
        assert '"in_flight"' in dump() and '"peer_gateways"' in dump()
        th.join(10)
    finally:
        if f:
            f.stop()
        s.close()


if __name__ == "__main__":
    sys.exit(run_suite(TESTS, limit_s=60))
