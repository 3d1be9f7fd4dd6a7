#!/usr/bin/env python3
"""Running prefixgate in production, end to end (issue 5): privilege drop
(--user), the admin token, graceful shutdown, restarts on a pin path, the
overload caps. TAP output; every wait is bounded.

usage: test_ops.py --build DIR [--tools DIR] --mode shm|bpf [-k SUBSTRING]
  The --user tests need root (they create the system user prefixgate-test
  if it is missing); the pin-path and data-path start-up tests need --mode
  bpf, the latter also a cgroup v2 mount.
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (TEST_USER as USER, Fleet, ensure_user, free_port,  # noqa: E402
                     have_cgroup2, http_get, mock_pattern, shm_only, task_status, wait_until,
                     run_suite)

TESTS = []
TOKEN = "s3cret-token-0123456789"


def test(fn):
    TESTS.append(fn)
    return fn


class Slow(threading.Thread):
    """One request the backend answers after delay_ms; result in .status/.error."""

    def __init__(self, port, delay_ms, timeout=30):
        super().__init__(daemon=True)
        self.port, self.delay_ms, self.timeout = port, delay_ms, timeout
        self.status, self.body, self.error = None, b"", None
        self.done_at = None

    def run(self):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            c.request("POST", "/invocations", body=b"slow request",
                      headers={"X-Mock-Delay-Ms": str(self.delay_ms)})
            r = c.getresponse()
            self.status, self.body = r.status, r.read()
            c.close()
        except (OSError, http.client.HTTPException) as e:
            self.error = e
        self.done_at = time.monotonic()


def in_flight(f):
    return sum(b["in_flight"] for b in f.backends().values())


def start_slow(f, n, delay_ms):
    ts = [Slow(f.port, delay_ms) for _ in range(n)]
    for t in ts:
        t.start()
    assert wait_until(lambda: in_flight(f) >= n, 5), "requests never got in flight"
    return ts


# --- least privilege -----------------------------------------------------------

@test
def user_drops_privileges(opts):
    """--user: every thread runs as the user with no capability left, and the
    gateway still routes, takes a backend from the admin API and reloads its
    backends file on SIGHUP."""
    pw, skip = ensure_user()
    if skip:
        return skip
    f = Fleet(opts, 3, start_gateway=False)
    try:
        bfile = os.path.join(f.tmp, "backends-%d.txt" % os.getpid())
        with open(bfile, "w") as fh:
            fh.write(f.addr("b0") + "\n")
        os.chmod(bfile, 0o644)
        f.start_gateway(["--user", USER, "--backends-file", bfile], backends=[])
        # the admin API answers from just before the drop
        assert wait_until(lambda: "privileges dropped" in f.log(), 5), f.log()[-2000:]
        tasks = task_status(f.gw.pid)
        assert len(tasks) >= 3, tasks.keys()
        for tid, st in tasks.items():
            uids = st["Uid"].split()
            gids = st["Gid"].split()
            assert all(int(u) == pw.pw_uid for u in uids), (tid, st["Uid"])
            assert all(int(g) == pw.pw_gid for g in gids), (tid, st["Gid"])
            for cap in ("CapPrm", "CapEff", "CapInh", "CapAmb"):
                assert int(st[cap], 16) == 0, (tid, cap, st[cap])
            assert st["NoNewPrivs"].strip() == "1", (tid, st["NoNewPrivs"])
        assert "privileges dropped: running as %s" % USER in f.log(), f.log()[-2000:]
        st, h, _ = f.post("/invocations", "hello")
        assert st == 200 and h["x-backend-id"] == "b0", (st, h)
        st, r = f.admin("POST", "/backends", {"address": f.addr("b1")})
        assert st == 201, (st, r)
        with open(bfile, "a") as fh:
            fh.write(f.addr("b2") + "\n")
        f.gw.send_signal(signal.SIGHUP)
        assert wait_until(lambda: f.addr("b2") in f.backends(), 5), f.log()[-2000:]
        seen = set()
        for i in range(60):
            st, h, _ = f.post("/invocations", "prefix %d " % i * 300)
            assert st == 200, st
            seen.add(h["x-backend-id"])
        assert seen == {"b0", "b1", "b2"}, seen
        assert f.idle()
    finally:
        rc = f.stop()
    assert rc == 0, "exit code %s" % rc


@test
def user_unknown_refused(opts):
    """--user naming no user is a start-up error (exit 2) naming the flag."""
    if os.geteuid() != 0:
        return "SKIP not root: --user needs root"
    p = subprocess.run([os.path.join(opts.build, "prefixgate"), "--no-bpf", "--listen",
                        "127.0.0.1:%d" % free_port(), "--admin", "127.0.0.1:%d" % free_port(),
                        "--user", "no-such-user-pg"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and "--user no-such-user-pg" in p.stderr, (p.returncode, p.stderr)


# --- admin token -------------------------------------------------------------------

def admin_status(f, headers):
    c = http.client.HTTPConnection("127.0.0.1", f.admin_port, timeout=5)
    c.request("GET", "/backends", headers=headers)
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, r.getheader("WWW-Authenticate")


@test
@shm_only
def admin_token_required(opts):
    """--admin-token: 401 without or with a wrong bearer token, 200 with it."""
    f = Fleet(opts, 1, ["--admin-token", TOKEN], admin_token=TOKEN)
    try:
        st, www = admin_status(f, {})
        assert st == 401 and www and www.startswith("Bearer"), (st, www)
        for bad in ("Bearer " + TOKEN[:-1], "Bearer " + TOKEN + "x", "Basic " + TOKEN,
                    TOKEN, "Bearer " + TOKEN.upper()):
            assert admin_status(f, {"Authorization": bad})[0] == 401, bad
        assert admin_status(f, {"Authorization": "Bearer " + TOKEN})[0] == 200
        assert admin_status(f, {"Authorization": "bearer " + TOKEN})[0] == 200
        assert http_get(f.admin_port, "/metrics")[0] == 401
        st, _, _ = f.post("/invocations", "x")  # the client listener needs no token
        assert st == 200, st
    finally:
        f.stop()


@test
@shm_only
def admin_token_file(opts):
    """--admin-token-file reads the token (trailing newline ignored)."""
    path = os.path.join(opts.build, "e2e-tmp", "token-%d" % os.getpid())
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(TOKEN + "\n")
    try:
        f = Fleet(opts, 1, ["--admin-token-file", path], admin_token=TOKEN)
        try:
            assert admin_status(f, {})[0] == 401
            assert admin_status(f, {"Authorization": "Bearer " + TOKEN})[0] == 200
        finally:
            f.stop()
    finally:
        os.unlink(path)


@test
@shm_only
def admin_non_loopback_needs_token(opts):
    """A non-loopback --admin without a token exits 2 naming --admin-token."""
    pg = os.path.join(opts.build, "prefixgate")
    for args, want in ((["--admin", "0.0.0.0:%d" % free_port()], "--admin-token"),
                       (["--admin", ":%d" % free_port()], "--admin-token"),
                       (["--admin-token", "short"], "--admin-token"),
                       (["--admin-token-file", "/nonexistent/pg-token"], "--admin-token-file"),
                       (["--shutdown-timeout", "5000"], "--shutdown-timeout"),
                       (["--max-in-flight", "x"], "--max-in-flight"),
                       (["--max-connections", "0"], "--max-connections")):
        p = subprocess.run([pg, "--no-bpf"] + args, capture_output=True, text=True, timeout=10)
        assert p.returncode == 2 and want in p.stderr, (args, p.returncode, p.stderr)
    p = subprocess.run([pg, "--help"], capture_output=True, text=True, timeout=5)
    for flag in ("--user", "--admin-token", "--admin-token-file", "--shutdown-timeout",
                 "--max-in-flight", "--max-connections"):
        assert flag in p.stdout, flag


# --- shutdown ----------------------------------------------------------------------

@test
def shutdown_finishes_in_flight(opts):
    """SIGTERM during slow requests: they complete, then exit 0, within the deadline."""
    f = Fleet(opts, 2, ["--shutdown-timeout", "8"])
    try:
        ts = start_slow(f, 3, 1500)
        t0 = time.monotonic()
        f.gw.send_signal(signal.SIGTERM)
        rc = f.gw.wait(10)
        took = time.monotonic() - t0
        for t in ts:
            t.join(5)
            assert t.status == 200 and t.error is None, (t.status, t.error)
        assert rc == 0, rc
        assert took < 8, took
        assert "drained: no request in flight" in f.log()
    finally:
        f.stop()


@test
def shutdown_deadline(opts):
    """A request outliving --shutdown-timeout is cut; the exit is still 0, on time."""
    f = Fleet(opts, 1, ["--shutdown-timeout", "1"])
    try:
        ts = start_slow(f, 1, 20000)
        t0 = time.monotonic()
        f.gw.send_signal(signal.SIGTERM)
        rc = f.gw.wait(10)
        took = time.monotonic() - t0
        assert rc == 0 and 0.9 < took < 4, (rc, took)
        ts[0].join(5)
        assert ts[0].status != 200, ts[0].status
    finally:
        f.stop()


@test
def shutdown_second_signal(opts):
    """A second SIGTERM during the drain stops at once."""
    f = Fleet(opts, 1, ["--shutdown-timeout", "60"])
    try:
        start_slow(f, 1, 30000)
        t0 = time.monotonic()
        f.gw.send_signal(signal.SIGTERM)
        assert wait_until(lambda: "draining" in f.log(), 3)
        f.gw.send_signal(signal.SIGTERM)
        rc = f.gw.wait(10)
        assert rc == 0 and time.monotonic() - t0 < 4, (rc, time.monotonic() - t0)
    finally:
        f.stop()


@test
def shutdown_stops_accepting(opts):
    """While draining, new connections are refused; the in-flight one finishes."""
    f = Fleet(opts, 1, ["--shutdown-timeout", "8"])
    try:
        ts = start_slow(f, 1, 2000)
        f.gw.send_signal(signal.SIGTERM)
        assert wait_until(lambda: "draining" in f.log(), 3)
        time.sleep(0.3)  # a worker tick (100 ms) closes the listeners

        def refused():
            try:
                s = socket.create_connection(("127.0.0.1", f.port), timeout=2)
            except ConnectionRefusedError:
                return True
            try:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                return s.recv(100) == b""
            except OSError:
                return True
            finally:
                s.close()
        assert refused(), "a new connection was accepted while draining"
        ts[0].join(10)
        assert ts[0].status == 200, (ts[0].status, ts[0].error)
        assert f.gw.wait(10) == 0
    finally:
        f.stop()


# --- restarts on a pin path ---------------------------------------------------------

def dump_in_flight(pin):
    p = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", pin + "/pg_backends"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    return sum(int(n) for n in re.findall(r'"in_flight":\s*(-?\d+)', p.stdout))


@test
def restart_no_stale_counts(opts):
    """kill -9 with requests in flight, restart on the same pin path: the maps
    are reused (bpftool still reads the dead run's counts) and start from 0."""
    if opts.mode != "bpf":
        return "SKIP pinned maps are not used in --no-bpf mode"
    f = Fleet(opts, 2)
    try:
        start_slow(f, 4, 20000)
        pin = f.pin
        f.gw.kill()
        f.gw.wait(5)
        assert dump_in_flight(pin) == 4, "the dead run's counts are not readable"
        f.start_gateway(pin=pin)
        assert "reusing the maps pinned at" in f.log()
        assert in_flight(f) == 0, f.backends()
        assert dump_in_flight(pin) == 0
        st, _, _ = f.post("/invocations", "after restart")
        assert st == 200 and f.idle()
    finally:
        f.stop()
    assert not os.path.exists(pin)


@test
def second_instance_refused(opts):
    """A second prefixgate on a pin path in use exits with a clear message."""
    if opts.mode != "bpf":
        return "SKIP pinned maps are not used in --no-bpf mode"
    f = Fleet(opts, 1)
    try:
        p = subprocess.run([os.path.join(opts.build, "prefixgate"), "--bpf-pin-path", f.pin,
                            "--listen", "127.0.0.1:%d" % free_port(),
                            "--admin", "127.0.0.1:%d" % free_port()],
                           capture_output=True, text=True, timeout=10)
        assert p.returncode != 0, p.returncode
        assert "in use by another running prefixgate" in p.stderr, p.stderr
        st, _, _ = f.post("/invocations", "still serving")  # the first is unharmed
        assert st == 200 and f.gw.poll() is None
    finally:
        f.stop()


# --- data path start-up ---------------------------------------------------------------

# Where user/datapath/splice_load.c looks for cgroup v2 without --bpf-cgroup, in its order.
CGROUP_PROBE = ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")


def probed_cgroup(opts):
    """The cgroup2 directory the loader's probe finds, or a SKIP reason.
    (run_suite already skips --mode bpf without root or bpftool.)"""
    if opts.mode != "bpf":
        return None, "SKIP --no-bpf (shm) mode loads no in-kernel data path"
    for path in CGROUP_PROBE:
        if have_cgroup2(path) is None:
            return path, None
    return None, "SKIP no cgroup v2 at %s or %s (the sockmsg path attaches there)" % CGROUP_PROBE


def streamed_post(f, n):
    """A stream:true chat request, so auto would choose sockmsg; mockllm
    answers with mock_pattern(n)."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                       "stream": True})
    return f.post("/v1/chat/completions", body, {"X-Mock-Response-Bytes": str(n)})


def gateway_exit(opts, args, pin, wrap=()):
    """Run prefixgate on pin, expecting it to exit within 10 s: (status, stderr)."""
    try:
        p = subprocess.run(list(wrap) + [os.path.join(opts.build, "prefixgate"),
                                         "--bpf-pin-path", pin,
                                         "--listen", "127.0.0.1:%d" % free_port(),
                                         "--admin", "127.0.0.1:%d" % free_port()] + args,
                           capture_output=True, text=True, timeout=10)
    finally:
        shutil.rmtree(pin, ignore_errors=True)  # maps stay pinned after an exit
    return p.returncode, p.stderr


@test
def unprivileged_fallback_is_quiet(opts):
    """Started without privilege (and without --no-bpf), prefixgate says once
    that it falls back to shared memory, with no libbpf noise."""
    pw, skip = ensure_user()
    if skip:
        return skip
    d = tempfile.mkdtemp(prefix="pg-unpriv-", dir="/tmp")
    os.chmod(d, 0o755)
    exe = os.path.join(d, "prefixgate")
    shutil.copy(os.path.join(opts.build, "prefixgate"), exe)
    os.chmod(exe, 0o755)
    log = os.path.join(d, "log")
    p = subprocess.Popen(["setpriv", "--reuid=%d" % pw.pw_uid, "--regid=%d" % pw.pw_gid,
                          "--clear-groups", exe, "--bpf-pin-path", os.path.join(d, "pin"),
                          "--listen", "127.0.0.1:%d" % free_port(),
                          "--admin", "127.0.0.1:%d" % free_port()],
                         stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        assert wait_until(lambda: "listening on" in open(log).read(), 10), open(log).read()
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(15)
        text = open(log).read()
        shutil.rmtree(d, ignore_errors=True)
    assert rc == 0, (rc, text)
    assert text.count("falling back to shared memory") == 1, text
    assert "libbpf" not in text, text


@test
def data_path_explicit_unloadable_exits_2(opts):
    """--data-path sockmsg with --bpf-cgroup naming no cgroup v2 exits 2,
    naming the flag and the cause."""
    _, skip = probed_cgroup(opts)
    if skip:
        return skip
    notcg = tempfile.mkdtemp(prefix="pg-notcg-", dir="/tmp")
    try:
        rc, err = gateway_exit(opts, ["--data-path", "sockmsg", "--bpf-cgroup", notcg],
                               "/sys/fs/bpf/pg-e2e-%d-notcg" % os.getpid())
    finally:
        os.rmdir(notcg)
    assert rc == 2, (rc, err)
    assert "--data-path sockmsg" in err and "no cgroup v2 at %s" % notcg in err, err


@test
def data_path_auto_unloadable_falls_back(opts):
    """--data-path auto with --bpf-cgroup naming no cgroup v2 logs the cause
    and serves a streamed response whole through copy."""
    _, skip = probed_cgroup(opts)
    if skip:
        return skip
    notcg = tempfile.mkdtemp(prefix="pg-notcg-", dir="/tmp")
    try:
        f = Fleet(opts, 1, ["--data-path", "auto", "--bpf-cgroup", notcg])
        try:
            # the listening line follows the admin API's start
            assert wait_until(lambda: "data path copy" in f.log(), 5), f.log()
            log = f.log()
            assert "sockmsg unavailable" in log and "no cgroup v2 at %s" % notcg in log, log
            n = 256 << 10
            st, _, data = streamed_post(f, n)
            assert st == 200 and data == mock_pattern(n), (st, len(data))
            assert f.idle()
        finally:
            f.stop()
    finally:
        os.rmdir(notcg)


@test
def data_path_bpf_cgroup_used(opts):
    """--data-path sockmsg --bpf-cgroup naming a real cgroup v2 starts on
    sockmsg (so the failures above come from the flag, not the host)."""
    cg, skip = probed_cgroup(opts)
    if skip:
        return skip
    f = Fleet(opts, 1, ["--data-path", "sockmsg", "--bpf-cgroup", cg])
    try:
        assert wait_until(lambda: "data path sockmsg" in f.log(), 5), f.log()
        n = 256 << 10
        st, _, data = streamed_post(f, n)
        assert st == 200 and data == mock_pattern(n), (st, len(data))
        assert f.idle()
    finally:
        f.stop()


@test
def data_path_cgroup_probe(opts):
    """Without --bpf-cgroup, the loader finds cgroup v2 mounted at
    /sys/fs/cgroup itself (the layout of a cgroup v2 only host), and with
    none mounted the error names both places it looked. Each case runs in
    a private mount namespace, so the host's mounts are untouched."""
    _, skip = probed_cgroup(opts)
    if skip:
        return skip
    if not shutil.which("unshare"):
        return "SKIP unshare (util-linux) not installed: needed for a private mount namespace"

    def in_ns(fstype):
        # unshare -m makes every mount private to the new namespace
        return ["unshare", "-m", "sh", "-c",
                'umount -R /sys/fs/cgroup && mount -t %s none /sys/fs/cgroup && exec "$@"'
                % fstype, "sh"]

    rc, err = gateway_exit(opts, ["--data-path", "sockmsg"],
                           "/sys/fs/bpf/pg-e2e-%d-nocg" % os.getpid(), in_ns("tmpfs"))
    assert rc == 2, (rc, err)
    assert "no cgroup v2 at %s or %s" % CGROUP_PROBE in err, err

    pin = "/sys/fs/bpf/pg-e2e-%d-v2only" % os.getpid()
    admin = free_port()
    log = tempfile.TemporaryFile("w+")
    gw = subprocess.Popen(in_ns("cgroup2") + [
        os.path.join(opts.build, "prefixgate"), "--bpf-pin-path", pin, "--data-path", "sockmsg",
        "--listen", "127.0.0.1:%d" % free_port(), "--admin", "127.0.0.1:%d" % admin],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        def started():
            log.seek(0)
            return gw.poll() is not None or "data path sockmsg" in log.read()
        wait_until(started, 5)
        log.seek(0)
        text = log.read()
        assert gw.poll() is None and "data path sockmsg" in text, (gw.poll(), text[-2000:])
        # it serves (503: it has no backend, so none is healthy)
        assert http_get(admin, "/health", 2)[0] == 503, text[-2000:]
    finally:
        gw.send_signal(signal.SIGTERM)
        try:
            rc = gw.wait(10)
        except subprocess.TimeoutExpired:
            gw.kill()
            rc = gw.wait()
        shutil.rmtree(pin, ignore_errors=True)
        log.close()
    assert rc == 0, rc


# --- overload -------------------------------------------------------------------------

@test
@shm_only
def max_in_flight_503(opts):
    """--max-in-flight N: request N+1 gets 503 with Retry-After and a JSON body."""
    f = Fleet(opts, 2, ["--max-in-flight", "2"])
    try:
        ts = start_slow(f, 2, 2000)
        st, h, body = f.post("/invocations", "one too many")
        assert st == 503 and h.get("retry-after") == "1", (st, h)
        assert b"overloaded" in body, body
        for t in ts:
            t.join(10)
            assert t.status == 200
        st, _, _ = f.post("/invocations", "fits again")
        assert st == 200, st
    finally:
        f.stop()


@test
@shm_only
def max_connections_503(opts):
    """--max-connections N per worker: connection N+1 gets 503, then is closed."""
    f = Fleet(opts, 1, ["--max-connections", "2", "--workers", "1"])
    held = []
    try:
        for _ in range(2):
            held.append(socket.create_connection(("127.0.0.1", f.port), timeout=5))
        time.sleep(0.2)
        s = socket.create_connection(("127.0.0.1", f.port), timeout=5)
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        assert data.startswith(b"HTTP/1.1 503"), data[:100]
        for c in held:
            c.close()
        assert wait_until(lambda: f.post("/invocations", "x")[0] == 200, 5)
    finally:
        for c in held:
            c.close()
        f.stop()


def main():
    return run_suite(TESTS, limit_s=90)


if __name__ == "__main__":
    sys.exit(main())
