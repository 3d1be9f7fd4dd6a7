"""etcd on loopback for the fleet tests: one member or a cluster of several,
each with its own data dir and ports (a data dir takes about 123 MB: stop()
removes it), and prefixgate gateways (--no-bpf) reading their membership
from it. Every wait is bounded."""
import base64
import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile

from harness import free_port, http_get, metric_family, wait_until

PREFIX = "/prefixgate/"


def b64(s):
    return base64.b64encode(s.encode()).decode()


def unb64(s):
    return base64.b64decode(s).decode()


class Etcd:
    """One etcd member on 127.0.0.1, data in a temporary directory: a cluster
    of its own, or member `name` of the cluster EtcdCluster sets up."""

    def __init__(self, tmp, name="default", start=True):
        self.dir = tempfile.mkdtemp(prefix="etcd-", dir=tmp)
        self.name, self.port, self.peer = name, free_port(), free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.peer_url = "http://127.0.0.1:%d" % self.peer
        self.cluster = [self]  # the members of --initial-cluster
        self.token = None      # --initial-cluster-token of a cluster
        self.p = None
        if start:
            self.start()

    def start(self, wait=True):
        """Start it (on an existing data dir the --initial-* flags are ignored);
        wait: until /health says it serves, which needs a quorum."""
        self.log = open(os.path.join(self.dir, "etcd.log"), "a")
        cmd = ["etcd", "--name", self.name, "--data-dir", os.path.join(self.dir, "data"),
               "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
               "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls",
               self.peer_url, "--log-level", "warn", "--initial-cluster",
               ",".join("%s=%s" % (m.name, m.peer_url) for m in self.cluster)]
        if self.token:
            cmd += ["--initial-cluster-state", "new", "--initial-cluster-token", self.token]
        self.p = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        if wait:
            self.wait_ready(10)

    def wait_ready(self, timeout):
        if not wait_until(lambda: http_get(self.port, "/health", 0.5)[0] == 200, timeout):
            raise RuntimeError("etcd %s not ready: %s" % (self.name,
                                                          open(self.log.name).read()[-1500:]))

    def kill(self):
        if self.p and self.p.poll() is None:
            self.p.kill()
            self.p.wait(5)
        if self.p:
            self.log.close()

    def stop(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def call(self, path, body):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = json.loads(c.getresponse().read() or b"{}")
        c.close()
        return r

    def put(self, key, value, lease=None):
        body = {"key": b64(PREFIX + key), "value": b64(value)}
        if lease:
            body["lease"] = lease
        return int(self.call("/v3/kv/put", body)["header"]["revision"])

    def delete(self, key):
        return int(self.call("/v3/kv/deleterange", {"key": b64(PREFIX + key)})
                   ["header"]["revision"])

    def get_prefix(self, key):
        end = (PREFIX + key)[:-1] + chr(ord((PREFIX + key)[-1]) + 1)
        r = self.call("/v3/kv/range", {"key": b64(PREFIX + key), "range_end": b64(end)})
        return {unb64(kv["key"])[len(PREFIX):]: unb64(kv.get("value", ""))
                for kv in r.get("kvs", [])}

    def compact(self, rev):
        return self.call("/v3/kv/compaction", {"revision": str(rev), "physical": True})

    def put_backend(self, addr, key=None):
        return self.put("backends/" + (key or addr), json.dumps({"address": addr,
                                                                 "state": "active"}))


class EtcdCluster:
    """n members of one new etcd cluster on 127.0.0.1 (each its own data dir,
    client and peer ports; one --initial-cluster and cluster token)."""

    def __init__(self, tmp, n=3):
        self.members = []
        try:
            for i in range(n):
                self.members.append(Etcd(tmp, "m%d" % i, start=False))
            for m in self.members:
                m.cluster, m.token = self.members, "pg-e2e-%d" % os.getpid()
            self.start(self.members)
        except BaseException:
            self.stop()
            raise

    def start(self, members):
        """Start these members together: none serves before a quorum is up."""
        for m in members:
            m.start(wait=False)
        for m in members:
            m.wait_ready(15)

    def endpoints(self, members):
        """--etcd-endpoints naming these members, in this order."""
        return ",".join(m.url for m in members)

    def stop(self):
        for m in self.members:
            m.stop()


class Gateways:
    """N prefixgate processes on one etcd prefix."""

    def __init__(self, opts, etcd, tmp):
        self.opts, self.etcd, self.tmp = opts, etcd, tmp
        self.gws = []  # dicts: port, admin, p, log, state

    def start(self, i=None, extra=(), endpoints=None):
        i = len(self.gws) if i is None else i
        g = {"id": "gw%d" % i, "port": free_port(), "admin": free_port(),
             "state": os.path.join(self.tmp, "state-gw%d.json" % i),
             "log": os.path.join(self.tmp, "gw%d.log" % i)}
        cmd = [os.path.join(self.opts.build, "prefixgate"), "--no-bpf", "--workers", "1",
               "--listen", "127.0.0.1:%d" % g["port"], "--admin", "127.0.0.1:%d" % g["admin"],
               "--etcd-endpoints", endpoints or self.etcd.url, "--gateway-id", g["id"],
               "--etcd-state-file", g["state"], "--etcd-timeout", "500"] + list(extra)
        g["p"] = subprocess.Popen(cmd, stdout=open(g["log"], "a"), stderr=subprocess.STDOUT)
        if not wait_until(lambda: http_get(g["admin"], "/health", 0.5)[0] == 200, 10):
            raise RuntimeError("prefixgate did not start:\n" + open(g["log"]).read()[-2000:])
        if i < len(self.gws):
            self.gws[i] = g
        else:
            self.gws.append(g)
        return g

    def stop_one(self, g):
        if g["p"].poll() is None:
            g["p"].send_signal(signal.SIGTERM)
            try:
                g["p"].wait(10)
            except subprocess.TimeoutExpired:
                g["p"].kill()
                g["p"].wait()
        log = open(g["log"]).read()
        for marker in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
            assert marker not in log, "sanitizer report in %s:\n%s" % (g["log"], log[-3000:])

    def stop(self):
        for g in self.gws:
            self.stop_one(g)

    @staticmethod
    def health(g):
        st, body = http_get(g["admin"], "/health", 2.0)
        return json.loads(body) if st == 200 else None

    @staticmethod
    def backends(g):
        st, body = http_get(g["admin"], "/backends", 2.0)
        return sorted(b["address"] for b in json.loads(body) if not b["draining"]) \
            if st == 200 else None

    def all_have(self, addrs, timeout=5.0):
        want = sorted(addrs)
        return wait_until(lambda: all(self.backends(g) == want for g in self.gws), timeout,
                          0.005)

    @staticmethod
    def metric(g, name):
        """{'name{labels}': value} of one family, from gateway g."""
        st, body = http_get(g["admin"], "/metrics", 2.0)
        return metric_family(body.decode(), name)
