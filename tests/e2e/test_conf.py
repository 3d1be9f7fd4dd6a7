#!/usr/bin/env python3
"""The configuration file end to end (prefixgate -c FILE; doc/configuration.md
"Configuration file"): real prefixgate and mockllm processes on loopback.

- every example configuration passes --check (where the unit runs it);
- --check checks what the start needs of the system, as the start does;
- a table of bad files: each gets exactly one FILE:LINE: message and exit
  status 1 under --check (2 at start-up), and none starts a gateway (no
  listener bound, no maps pinned, nothing logged as started);
- --check starts nothing for a good file either;
- SIGHUP applies a good change (backends, routing, health checks, log
  level) and logs it, with what needs a restart; the flags still override
  the file; a PUT /routing lasts through a reload that does not touch
  routing; a file with errors is refused whole, each error logged as
  FILE:LINE:, the running configuration kept;
- prefixgatectl config prints the configuration the gateway runs: --check
  accepts it, and a gateway started from it prints the same; saved, then
  edited at its top, it reaches every pool as the hand-written file does.

usage: test_conf.py --build DIR [--tools DIR] --mode shm|bpf [-k SUBSTRING]
"""
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Fleet, free_port, run_suite, tls_pki, tlsutil, unit_dirs_wrap,  # noqa: E402
                     unit_writable, wait_until)

TESTS = []
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
GW = ["--health-check-path", "none", "--metrics-scrape-interval", "0"]
MOCK = {i: ["--time-scale", "100"] for i in range(4)}


def test(fn):
    TESTS.append(fn)
    return fn


def gateway(opts):
    return os.path.join(opts.build, "prefixgate")


def tmpdir(opts):
    d = os.path.join(opts.build, "e2e-tmp", "conf-%d" % os.getpid())
    os.makedirs(d, exist_ok=True)
    return d


def write(path, text):
    with open(path, "w") as fh:
        fh.write(text)
    return path


def mode_args(opts, pin=None):
    """What the mode adds: --no-bpf, or a pin path of the test's own."""
    if opts.mode == "shm":
        return ["--no-bpf"]
    return ["--bpf-pin-path", pin or "/sys/fs/bpf/pg-e2e-conf-%d" % os.getpid()]


def port_free(port):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def doc_examples():
    """(where, text) of every configuration file in the manual: the blocks
    of README.md and doc/*.md fenced as ```conf."""
    out = []
    for path in [os.path.join(REPO, "README.md")] + sorted(
            glob.glob(os.path.join(REPO, "doc", "**", "*.md"), recursive=True)):
        lines = open(path).read().split("\n")
        i = 0
        while i < len(lines):
            if lines[i].strip() == "```conf":
                end = lines.index("```", i + 1)
                out.append(("%s:%d" % (os.path.relpath(path, REPO), i + 2),
                            "\n".join(lines[i + 1:end]) + "\n"))
                i = end
            i += 1
    return out


def in_unit_dirs(cmd, make=True):
    """cmd where the packaged unit's StateDirectory= and LogsDirectory= are
    (make) or are not, the host untouched; None without root or unshare."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return None
    return unit_dirs_wrap(make) + cmd


@test
def examples_pass_check(opts):
    """Every example configuration of the repository passes --check: the
    packaged one, any file under doc/, and every ```conf block of the
    manual (README.md, doc/*.md), where the packaged unit runs them: its
    StateDirectory= and LogsDirectory= made (without root, only errors
    about those directories are let pass)."""
    files = glob.glob(os.path.join(REPO, "tools", "packaging", "examples", "*.conf")) + \
        glob.glob(os.path.join(REPO, "doc", "**", "*.conf"), recursive=True)
    blocks = doc_examples()
    assert files and blocks, "no example configuration"
    d = tmpdir(opts)
    for n, (where, text) in enumerate(blocks):
        files.append((where, write(os.path.join(d, "doc-example-%d.conf" % n), text)))
    dirs = [x for x in unit_writable() if x.startswith(("/var/lib/", "/var/log/"))]
    for item in files:
        where, path = item if isinstance(item, tuple) else (item, item)
        cmd = [os.path.abspath(gateway(opts)), "-c", os.path.abspath(path), "--check"]
        r = subprocess.run(in_unit_dirs(cmd) or cmd, capture_output=True, text=True,
                           timeout=20)
        if r.returncode and not in_unit_dirs(cmd):
            errs = [x for x in r.stderr.splitlines() if x.startswith(os.path.abspath(path))]
            assert errs and all(any(" %s/" % x in e for x in dirs) for e in errs), (where, r)
            continue
        assert r.returncode == 0, "%s: %s%s" % (where, r.stdout, r.stderr)
        assert "the configuration is valid" in r.stdout, r.stdout


@test
def check_tells_what_start_needs(opts):
    """--check checks what start-up needs of the system, as the start does,
    each error at its directive's FILE:LINE: the packaged configuration
    without the unit's LogsDirectory= fails --check (1) and the start (2)
    alike at its access-log line, and with it passes both; a --user that
    does not exist, an address no interface has (--listen, --tls-listen)
    fail --check."""
    pg = os.path.abspath(gateway(opts))
    cases = [(["--user", "no-such-user-pg"], "--user no-such-user-pg: no such user"),
             (["--listen", "192.0.2.1:8080"],
              "--listen 192.0.2.1:8080: Cannot assign requested address")]
    if tlsutil.have_openssl():  # (else said at the end)
        pki = tls_pki(opts)
        cases.append((["--tls-listen", "192.0.2.1:8443", "--tls-cert", pki.path("server.pem"),
                       "--tls-key", pki.path("server.key")],
                      "--tls-listen 192.0.2.1:8443: Cannot assign requested address"))
    for args, says in cases:
        r = subprocess.run([pg, "--check"] + args, capture_output=True, text=True, timeout=20)
        assert r.returncode == 1 and "prefixgate: " + says in r.stderr, (args, r)
    example = os.path.join(REPO, "tools", "packaging", "examples", "prefixgate.conf")
    if not in_unit_dirs([]):
        return "SKIP not root, or no unshare: the unit's directories cannot be emulated"
    lines = open(example).read().splitlines()
    line = [i + 1 for i, x in enumerate(lines) if x.startswith("access-log ")][0]
    want = "%s:%d: access-log /var/log/prefixgate/access.log: No such file or directory" % (
        example, line)
    pin = "/sys/fs/bpf/pg-e2e-conf-needs-%d" % os.getpid()
    start = [pg, "-c", example, "--listen", "127.0.0.1:%d" % free_port(), "--admin",
             "127.0.0.1:%d" % free_port()] + mode_args(opts, pin)
    for cmd, status in ((start + ["--check"], 1), (start, 2)):
        r = subprocess.run(in_unit_dirs(cmd, make=False), capture_output=True, text=True,
                           timeout=20)
        assert r.returncode == status and want in r.stderr.splitlines(), (status, r)
        assert "listening on" not in r.stderr and not os.path.exists(pin), r.stderr
    r = subprocess.run(in_unit_dirs(start + ["--check"]), capture_output=True, text=True,
                       timeout=20)
    assert r.returncode == 0, r
    # and it starts there (its members are nowhere: none is healthy)
    p = subprocess.Popen(in_unit_dirs(start + ["--health-check-path", "none"]),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = ""
        for out_line in p.stdout:
            out += out_line
            if "listening on" in out_line or "exit status" in out_line:
                break
        assert "listening on" in out, out
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        shutil.rmtree(pin, ignore_errors=True)
    if not tlsutil.have_openssl():
        return "SKIP openssl not installed (Debian: openssl): --tls-listen not tried"


# (text, line, what the message says): each file has exactly one error. The
# listener is {port} and the pin path {pin}, to tell that nothing started.
BAD = [
    ("workers 2;\nworker 3;\n", 2, 'unknown directive "worker" (did you mean workers?)'),
    ("prefix-length 100;\n", 1, "prefix-length: 100 is out of range 1024-65536"),
    ("workers 2;\nworkers 4;\n", 2, "workers: given twice (first at line"),
    ("strategy fastest;\n", 1, 'strategy: "fastest" is not one of random, '
     "least_outstanding_requests, prefix_aware, cache_aware"),
    ("shadow yes;\n", 1, 'shadow: takes no value, or on or off (not "yes")'),
    ("--workers 4\n", 1, "a directive is its flag's name without --: workers"),
    ("model llama;\n", 1, '"model" belongs in a pool block (pool NAME { model ...; })'),
    ("pool a {\n    model x;\n    backend 10.0.0.1:80,10.0.0.2:80;\n}\n", 3,
     'pool a: backend "10.0.0.1:80,10.0.0.2:80": one item a word, without commas'),
    ("pool a {\n    model x;\n    concurrency-threshold 0;\n}\n", 3,
     "pool a: concurrency-threshold 0: not a number in 1-1024"),
    ("pool a {\n    backend 10.0.0.1:80;\n}\n", 1,
     "pool a: no model= and no path=: no request would reach it"),
    ("pool a { model x; }\npool b { model x; }\n", 2,
     "pool b: model x is already served by pool a"),
    ("tenant batch { weight 0; }\n", 1, 'tenant batch: weight: expected 1-1000, got "0"'),
    ("admin 0.0.0.0:9999;\n", 1, "admin 0.0.0.0:9999 is not a loopback address"),
    ("routing-config /nonexistent/routing.json;\n", 1,
     "routing-config /nonexistent/routing.json: No such file or directory"),
    ('pool "llama {\n    model x;\n}\n', 1, "a quoted word is not closed on its line"),
    ("workers 2;\n}\n", 2, "'}' closes no block"),
    ("pool a {\n    model x;\n", 1, 'block "pool" is not closed'),
    ("log-level verbose;\n", 1, 'log-level: "verbose" is not one of error, warn, info, debug'),
]


@test
def bad_files_told_once_and_nothing_starts(opts):
    """Each bad file: exactly one FILE:LINE: message at its line saying what,
    exit 1 under --check and 2 at start-up; no listener bound, no maps pinned,
    nothing started."""
    d = tmpdir(opts)
    port = free_port()
    pin = "/sys/fs/bpf/pg-e2e-conf-bad-%d" % os.getpid()
    for i, (text, line, what) in enumerate(BAD):
        # the listener first, so that a start would bind it (the pin path is
        # a flag): the case's lines move down by one
        path = write(os.path.join(d, "bad-%d.conf" % i), "listen 127.0.0.1:%d;\n" % port + text)
        want_line = line + 1
        for check, status in ((True, 1), (False, 2)):
            args = [gateway(opts), "-c", path] + mode_args(opts, pin) + \
                (["--check"] if check else [])
            r = subprocess.run(args, capture_output=True, text=True, timeout=20)
            located = [x for x in r.stderr.splitlines() if x.startswith(path + ":")]
            assert r.returncode == status, (i, check, r.returncode, r.stderr)
            assert len(located) == 1, (i, check, r.stderr)
            m = re.match(re.escape(path) + r":(\d+): (.*)$", located[0])
            assert m and int(m.group(1)) == want_line and what in m.group(2), (
                i, located[0], want_line, what)
            assert "listening on" not in r.stderr and "admin API on" not in r.stderr, r.stderr
            assert not os.path.exists(pin), "case %d pinned maps at %s" % (i, pin)
            assert port_free(port), "case %d left %d bound" % (i, port)
            if check:
                assert "the configuration is not valid (1 error)" in r.stderr, r.stderr
            else:
                assert "exit status 2, a configuration error" in r.stderr, r.stderr


@test
def check_starts_nothing(opts):
    """--check of a good file says so and starts nothing: no maps pinned, no
    log of a listener; a file with several errors has each told, in order;
    --check exits 1 on an error wherever it stands among the flags."""
    d = tmpdir(opts)
    pin = "/sys/fs/bpf/pg-e2e-conf-check-%d" % os.getpid()
    path = write(os.path.join(d, "good.conf"),
                 "listen 127.0.0.1:%d;\nadmin 127.0.0.1:%d;\nbackend 127.0.0.1:1;\n"
                 "pool a { model x; backend 127.0.0.1:2; }\n" % (free_port(), free_port()))
    r = subprocess.run([gateway(opts), "-c", path, "--check"] + mode_args(opts, pin),
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0 and r.stdout == "prefixgate: %s: the configuration is valid\n" % (
        path), (r.returncode, r.stdout, r.stderr)
    assert not r.stderr and not os.path.exists(pin), (r.stderr, pin)
    path = write(os.path.join(d, "three.conf"), "workers 0\nlisten nowhere\nbogus\n")
    r = subprocess.run([gateway(opts), "-c", path, "--check"], capture_output=True, text=True,
                       timeout=20)
    lines = [int(x.split(":")[1]) for x in r.stderr.splitlines() if x.startswith(path + ":")]
    assert r.returncode == 1 and lines == [1, 2, 3], (r.returncode, r.stderr)
    # --check wherever it stands: 1 (not valid), never 2 (the start-up's exit)
    for args in (["--check", "--strategy", "fastest"], ["--strategy", "fastest", "--check"]):
        r = subprocess.run([gateway(opts)] + args, capture_output=True, text=True, timeout=20)
        assert r.returncode == 1 and "the configuration is not valid" in r.stderr, (
            args, r.returncode, r.stderr)


def conf_fleet(opts, text, flags=()):
    """Mocks b0..b3, and a gateway started with -c FILE (text formatted with
    the mocks' addresses as {b0}..{b3}) and flags."""
    f = Fleet(opts, n=4, mock_args=MOCK, start_gateway=False)
    try:
        names = {n: f.addr(n) for n in f.mocks}
        f.conf = write(os.path.join(f.tmp, "gw.conf"), text.format(**names))
        f.start_gateway(GW + ["-c", f.conf] + list(flags), backends=[])
    except Exception:
        f.stop_quietly()
        raise
    return f


def hup_and_wait(f, what):
    """SIGHUP, then what the log says of that reload."""
    done = re.compile(r"reload: %s(: applied|: nothing changed| refused)" % re.escape(f.conf))
    n = len(done.findall(f.log()))
    f.gw.send_signal(signal.SIGHUP)
    assert wait_until(lambda: len(done.findall(f.log())) > n, 5), \
        what + ":\n" + f.log()[-2000:]
    return f.log().split("SIGHUP")[-1]


@test
def reload_applies_and_refuses(opts):
    """SIGHUP with a good change: backends added and drained, a pool's
    routing, health-check settings and the log level applied at once and
    logged; workers needs a restart, logged as such; a flag still overrides
    the file; a PUT /routing lasts through a reload that does not change the
    routing. A file with errors: each logged FILE:LINE:, refused whole, the
    running configuration kept."""
    text = ("strategy prefix_aware;\nprefix-length 2048;\nconcurrency-threshold 5;\n"
            "backend {b0} {b1};\n")
    f = conf_fleet(opts, text, ["--concurrency-threshold", "7"])
    try:
        assert set(f.backends()) == {f.addr("b0"), f.addr("b1")}, f.backends()
        st, rc = f.admin("GET", "/routing")
        assert rc["PrefixAwareRoutingConfig"] == {"PrefixLength": 2048,
                                                   "ConcurrencyThreshold": 7}, rc
        # a good change
        write(f.conf, "strategy prefix_aware;\nprefix-length 8192;\n"
              "concurrency-threshold 9;\nbackend %s %s;\nworkers 3;\nlog-level warn;\n"
              "health-check-interval 700;\nmax-connections 1000;\n" % (f.addr("b1"),
                                                                       f.addr("b2")))
        out = hup_and_wait(f, "good change")
        m = re.search(r"reload: %s: applied: (.*); needs a restart: (.*)" % re.escape(f.conf),
                      out)
        assert m, out
        assert "backends (2 added or drained" in m.group(1), m.group(1)
        assert "routing" in m.group(1) and "log-level info -> warn" in m.group(1), m.group(1)
        assert "health-check-interval 2000 -> 700" in m.group(1), m.group(1)
        assert m.group(2) == "max-connections (running 65536, the file says 1000)", m.group(2)
        assert wait_until(lambda: {a for a, b in f.backends().items() if not b["draining"]} ==
                          {f.addr("b1"), f.addr("b2")}, 5), f.backends()
        st, rc = f.admin("GET", "/routing")
        # the flag's 7 still over the file's 9
        assert rc["PrefixAwareRoutingConfig"] == {"PrefixLength": 8192,
                                                   "ConcurrencyThreshold": 7}, rc
        st, conf = f.admin("GET", "/config")
        assert "prefix-length 8192;" in conf and "workers 2;" in conf, conf
        assert "health-check-interval 700;" in conf and "log-level warn;" in conf, conf
        # a PUT lasts through a reload that leaves the routing alone
        st, _ = f.admin("PUT", "/routing", {"RoutingStrategy": "RANDOM"})
        assert st == 200
        write(f.conf, open(f.conf).read().replace("connections 1000", "connections 2000"))
        out = hup_and_wait(f, "no routing change")
        assert "applied: nothing; needs a restart: max-connections (running 65536, the file " \
            "says 2000)" in out, out
        assert f.admin("GET", "/routing")[1]["RoutingStrategy"] == "RANDOM"
        # a bad file: two errors, both told, nothing applied
        before = (f.backends().keys(), f.admin("GET", "/routing")[1],
                  f.admin("GET", "/config")[1])
        write(f.conf, "strategy least_outstanding_requests;\nprefix-length 10;\n"
              "backend %s;\nworker 2;\n" % f.addr("b3"))
        out = hup_and_wait(f, "bad file")
        assert "reload: %s:2: prefix-length: 10 is out of range 1024-65536" % f.conf in out, out
        assert 'reload: %s:4: unknown directive "worker"' % f.conf in out, out
        assert "reload: %s refused (2 errors): the running configuration is kept" % f.conf \
            in out, out
        after = (f.backends().keys(), f.admin("GET", "/routing")[1],
                 f.admin("GET", "/config")[1])
        assert before == after, (before, after)
        # still serving
        st, h, _ = f.post("/v1/completions", '{"prompt":"hello","max_tokens":1}')
        assert st == 200, st
    finally:
        f.stop()


def normalized(conf):
    """A GET /config text without what each start gives anew (its
    listeners and pin path)."""
    return "\n".join(x for x in conf.splitlines()
                     if not re.match(r"(listen|admin|bpf-pin-path) ", x))


@test
def ctl_config_reads_back(opts):
    """prefixgatectl config prints the configuration the gateway runs (the
    file and the flags merged, the pools' live routing): --check accepts it,
    and a gateway started from it prints the same."""
    text = ("backend {b0};\nstrategy cache_aware;\nmax-in-flight 100;\nflow-control;\n"
            "pool llama {{\n    model meta-llama/Llama-3.1-8B-Instruct \"llama 3\";\n"
            "    backend {b1} {b2};\n    prefix-length 2048;\n}}\n"
            "pool sm {{ path /invocations; backend {b3}; strategy random; }}\n"
            "tenant batch {{ weight 2; priority sheddable; }}\n")
    f = conf_fleet(opts, text, ["--shadow", "--log-level", "warn"])
    g = None
    try:
        # live routing is the configuration's: a PUT shows in it
        st, _ = f.admin("PUT", "/routing?pool=llama",
                        {"RoutingStrategy": "PREFIX_AWARE",
                         "PrefixAwareRoutingConfig": {"ConcurrencyThreshold": 12}})
        assert st == 200
        r = subprocess.run([os.path.join(opts.tools, "prefixgatectl"), "--admin",
                            "127.0.0.1:%d" % f.admin_port, "config"],
                           capture_output=True, text=True, timeout=20)
        assert r.returncode == 0, r.stderr
        conf = r.stdout
        for want in ("shadow on;", "log-level warn;", "max-in-flight 100;", "flow-control on;",
                     'model meta-llama/Llama-3.1-8B-Instruct "llama 3";',
                     "concurrency-threshold 12;", "tenant batch { weight 2; priority sheddable; }",
                     "backend %s;" % f.addr("b0")):
            assert want in conf, (want, conf)
        saved = write(os.path.join(f.tmp, "saved.conf"), conf)
        r = subprocess.run([gateway(opts), "-c", saved, "--check"], capture_output=True,
                           text=True, timeout=20)
        assert r.returncode == 0, r.stdout + r.stderr
        # a gateway from the saved file alone (its own ports and pin path)
        g = Fleet(opts, n=0, start_gateway=False)
        g.start_gateway(["-c", saved], backends=[])
        st, again = g.admin("GET", "/config")
        assert st == 200 and normalized(again) == normalized(conf), (conf, again)
    finally:
        f.stop()
        if g:
            g.stop()


@test
def saved_config_takes_later_edits(opts):
    """A configuration saved from GET /config holds what each pool set, not
    what it inherits: flow-control added at its top reaches every pool
    (InstanceQueueMs "auto" in GET /flow), as in the file written by hand."""
    text = ("backend {b0};\npool llama {{ model l; backend {b1}; prefix-length 2048; }}\n"
            "pool sm {{ path /invocations; backend {b2}; }}\n")
    f = conf_fleet(opts, text)
    g = None
    try:
        st, conf = f.admin("GET", "/config")
        assert st == 200 and "flow-instance-queue-ms" not in conf, conf
        saved = write(os.path.join(f.tmp, "saved.conf"), conf + "flow-control;\n")
        g = Fleet(opts, n=0, start_gateway=False)
        g.start_gateway(["-c", saved], backends=[])
        st, flow = g.admin("GET", "/flow")
        assert st == 200, flow
        got = {p["pool"]: p["InstanceQueueMs"] for p in flow["pools"]}
        assert got == {"default": "auto", "llama": "auto", "sm": "auto"}, got
        st, rc = g.admin("GET", "/routing?pool=llama")
        assert rc["PrefixAwareRoutingConfig"]["PrefixLength"] == 2048, rc
    finally:
        f.stop()
        if g:
            g.stop()


def main():
    return run_suite(TESTS)


if __name__ == "__main__":
    sys.exit(main())
