#!/usr/bin/env python3
"""The packaged systemd unit's own settings, without systemd, and --user's
files (tools/packaging/prefixgate.service, doc/security.md):

- under the unit's CapabilityBoundingSet and NoNewPrivileges (setpriv),
  with its StateDirectory and LogsDirectory as systemd makes them (a
  mount namespace of the test's own), --user works: every thread becomes
  the user, requests are served, the access log is written; ExecReload's
  --check passes in the same settings and a SIGHUP applies a change;
- with --user, a file a reload reads again that the user cannot read is
  told by --check (exit 1) and at start (exit 2) at its directive's
  FILE:LINE, nothing started; readable by the user, the gateway starts and
  reloads; made unreadable later, the reload's --check says so; a TLS key
  too (SIGHUP and POST /tls/reload read every TLS file again).

usage: test_unit.py --build DIR [--tools DIR] --mode shm|bpf [-k SUBSTRING]
  Both need root (they create the system user prefixgate-test if it is
  missing); the first also setpriv, unshare and nsenter (util-linux).
"""
import os
import re
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (TEST_USER as USER, Fleet, ensure_user, free_port, task_status,  # noqa: E402
                     tls_pki, tlsutil, unit_dirs_wrap, unit_settings, run_suite, wait_until)

TESTS = []
TOKEN = "s3cret-token-0123456789"
GW = ["--health-check-path", "none", "--metrics-scrape-interval", "0"]


def test(fn):
    TESTS.append(fn)
    return fn


def write(path, text, mode=0o644):
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, mode)
    return path


def unit_privileges():
    """setpriv's options for the unit's CapabilityBoundingSet= and
    NoNewPrivileges=, as the unit's processes start."""
    u = unit_settings()
    caps = [c.lower().replace("cap_", "") for v in u["CapabilityBoundingSet"]
            for c in v.split()]
    out = ["setpriv", "--bounding-set=-all," + ",".join("+" + c for c in caps)]
    if u.get("NoNewPrivileges") == ["yes"]:
        out.append("--no-new-privs")
    return out


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=20)


@test
def user_under_the_units_settings(opts):
    """--user under the unit's bounding set, NoNewPrivileges and
    directories: it drops to the user, serves, writes its access log under
    LogsDirectory=; ExecReload (--check, then SIGHUP) works."""
    pw, skip = ensure_user()
    if skip:
        return skip
    for tool in ("setpriv", "unshare", "nsenter"):
        if not shutil.which(tool):
            return "SKIP %s (util-linux) not installed" % tool
    priv, log = unit_privileges(), "/var/log/prefixgate/access.log"
    f = Fleet(opts, 2, start_gateway=False)
    try:
        conf = write(os.path.join(f.tmp, "unit-%d.conf" % os.getpid()),
                     "backend %s;\naccess-log %s;\n" % (f.addr("b0"), log))
        try:
            f.start_gateway(GW + ["-c", conf, "--user", USER], backends=[],
                            wrap=unit_dirs_wrap() + priv)
        except RuntimeError as e:
            raise AssertionError("no start under the unit's settings: %s" % e)
        assert wait_until(lambda: "privileges dropped" in f.log(), 5), f.log()[-2000:]
        for tid, st in task_status(f.gw.pid).items():
            assert st["Uid"].split() == [str(pw.pw_uid)] * 4, (tid, st["Uid"])
            assert int(st["CapEff"], 16) == 0 and int(st["CapPrm"], 16) == 0, (tid, st)
        st, h, _ = f.post("/invocations", "under the unit")
        assert st == 200 and h["x-backend-id"] == "b0", (st, h)
        # the access log, under LogsDirectory=, as the gateway's namespace has it
        inside = "/proc/%d/root%s" % (f.gw.pid, log)
        assert wait_until(lambda: os.path.exists(inside) and
                          '"status":200' in open(inside).read(), 5), f.log()[-2000:]
        # ExecReload: --check with the same options and settings, then SIGHUP
        check = ["nsenter", "--target", str(f.gw.pid), "--mount", "--root", "--wd", "--"] + priv + \
            f.gw.args[len(unit_dirs_wrap() + priv):] + ["--check"]
        r = run(check)
        assert r.returncode == 0 and "the configuration is valid" in r.stdout, r
        write(conf, open(conf).read().replace("backend %s;" % f.addr("b0"),
                                              "backend %s %s;" % (f.addr("b0"), f.addr("b1"))))
        f.gw.send_signal(signal.SIGHUP)
        assert wait_until(lambda: f.addr("b1") in f.backends(), 5), f.log()[-2000:]
        assert f.idle()
    finally:
        rc = f.stop()
    assert rc == 0, rc


@test
def user_reads_what_a_reload_reads(opts):
    """--user with a token file only root can read: --check exits 1 and the
    start 2, each naming the directive's FILE:LINE; readable by the user,
    it starts and reloads; unreadable again, the reload's --check fails
    (systemctl reload would report it) where the reload alone would be
    refused in the log only."""
    _, skip = ensure_user()
    if skip:
        return skip
    f = Fleet(opts, 1, start_gateway=False, admin_token=TOKEN)
    try:
        token = write(os.path.join(f.tmp, "token-%d" % os.getpid()), TOKEN + "\n", 0o600)
        conf = write(os.path.join(f.tmp, "user-%d.conf" % os.getpid()),
                     "backend %s;\nadmin-token-file %s;\nuser %s;\n" % (f.addr("b0"), token,
                                                                        USER))
        pg = os.path.join(opts.build, "prefixgate")
        mode = ["--no-bpf"] if opts.mode == "shm" else \
            ["--bpf-pin-path", "/sys/fs/bpf/pg-e2e-unit-%d" % os.getpid()]
        want = re.compile(r"^%s:2: admin-token-file %s: %s \(--user\) cannot read it "
                          r"\(Permission denied\), and a reload reads it again as %s"
                          % (re.escape(conf), re.escape(token), USER, USER), re.M)
        for check, status in ((True, 1), (False, 2)):
            r = run([pg, "-c", conf] + mode + GW + (["--check"] if check else []))
            assert r.returncode == status and want.search(r.stderr), (check, r)
            assert "listening on" not in r.stderr, r.stderr
        os.chown(token, 0, ensure_user()[0].pw_gid)
        os.chmod(token, 0o640)
        f.start_gateway(GW + ["-c", conf], backends=[])
        assert wait_until(lambda: "privileges dropped" in f.log(), 5), f.log()[-2000:]
        write(conf, open(conf).read() + "log-level warn;\n")
        f.gw.send_signal(signal.SIGHUP)
        assert wait_until(lambda: re.search(r"reload: %s: applied" % re.escape(conf), f.log()),
                          5), f.log()[-2000:]
        os.chmod(token, 0o600)
        r = run([pg, "-c", conf] + mode + GW + ["--check"])
        assert r.returncode == 1 and want.search(r.stderr), r
        st, _, _ = f.post("/invocations", "still serving")
        assert st == 200, st
    finally:
        rc = f.stop()
    assert rc == 0, rc


@test
def user_reads_the_tls_files(opts):
    """--user with a TLS key only root can read: --check exits 1 at the
    key's FILE:LINE (a TLS reload, SIGHUP or POST /tls/reload, reads it
    again as the user); readable by the user's group, --check passes."""
    pw, skip = ensure_user()
    if skip:
        return skip
    if not tlsutil.have_openssl():
        return "SKIP openssl not installed (Debian: openssl)"
    pki = tls_pki(opts)
    d = os.path.join(opts.build, "e2e-tmp", "unit-tls-%d" % os.getpid())
    os.makedirs(d, exist_ok=True)
    try:
        os.chmod(d, 0o755)
        key = write(os.path.join(d, "gw.key"), open(pki.path("server.key")).read(), 0o600)
        conf = write(os.path.join(d, "gw.conf"),
                     "listen 127.0.0.1:%d;\ntls-listen 127.0.0.1:%d;\ntls-cert %s;\n"
                     "tls-key %s;\nuser %s;\n" % (free_port(), free_port(),
                                                   pki.path("server.pem"), key, USER))
        cmd = [os.path.join(opts.build, "prefixgate"), "-c", conf, "--check", "--no-bpf"] + GW
        want = re.compile(r"^%s:4: tls-key %s: %s \(--user\) cannot read it "
                          r"\(Permission denied\), and a reload reads it again as %s"
                          % (re.escape(conf), re.escape(key), USER, USER), re.M)
        r = run(cmd)
        assert r.returncode == 1 and want.search(r.stderr), r
        os.chown(key, 0, pw.pw_gid)
        os.chmod(key, 0o640)
        r = run(cmd)
        assert r.returncode == 0, r
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    return run_suite(TESTS)


if __name__ == "__main__":
    sys.exit(main())
