#!/usr/bin/env python3
"""End-to-end tests of TLS (doc/security.md) with real clients: the HTTPS
listener beside the plain one (curl, openssl s_client, Python's ssl),
versions, ciphers and their overrides, ALPN, SNI picking the certificate,
session resumption, TLS answers on the copy path, mTLS accepted and
refused and its subject as flow control's tenant, live reloads with good
and bad files (SIGHUP, POST /tls/reload), --check's refusals (expired, key
mismatch, chain order, unreadable), hostile handshakes (stalls, garbage,
plain HTTP, the bound on handshakes, renegotiation), the access log's
version and cipher. A test CA is made at test time
(tlsutil.py). https:// backends: test_tls_backends.py."""
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Fleet, free_port, have_cgroup2, mock_pattern, run_suite,  # noqa: E402
                     shm_only, wait_until)
from harness import metric_value as metric  # noqa: E402
import tlsutil  # noqa: E402

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def pki_dir(opts, name):
    return os.path.join(opts.build, "e2e-tmp", "tls-%d" % os.getpid(), name)


def tls_fleet(opts, pki, certs=(("server.pem", "server.key"),), args=(), n=1):
    """mockllm backends behind a gateway with a TLS listener (f.tls_port)
    showing certs (file names in pki's directory) besides --listen."""
    f = Fleet(opts, n, start_gateway=False)
    f.tls_port = free_port()
    a = ["--tls-listen", "127.0.0.1:%d" % f.tls_port]
    for c, k in certs:
        a += ["--tls-cert", pki.path(c)] + (["--tls-key", pki.path(k)] if k else [])
    try:
        f.start_gateway(a + list(args))
    except Exception:
        f.stop_quietly()
        raise
    return f


def tls_request(port, ctx, body=b"hello", sni="gw.test", path="/v1/completions", headers=""):
    """One request over a new TLS connection: (status, head text, body, sslsock info)."""
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                        server_hostname=sni)
    try:
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s"
                  b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" %
                  (path.encode(), headers.encode(), len(body), body))
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
        info = (s.version(), s.cipher()[0], s.selected_alpn_protocol(), s.session_reused)
    finally:
        s.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), head.decode(errors="replace"), rest, info


def s_client(port, *args, stdin=b"", timeout=10):
    """openssl s_client against the listener: (exit status, output)."""
    r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port] + list(args),
                       input=stdin, capture_output=True, timeout=timeout)
    return r.returncode, (r.stdout + r.stderr).decode(errors="replace")


def need_openssl():
    return None if tlsutil.have_openssl() else "SKIP openssl not installed (Debian: openssl)"


@test
def listeners_side_by_side(opts):
    """Plain and TLS listeners of one gateway both serve; curl over HTTPS
    gets TLS 1.3 with ALPN http/1.1; TLS 1.0/1.1 and h2-only are refused."""
    if need_openssl():
        return need_openssl()
    pki = tlsutil.server_pki(pki_dir(opts, "side"))
    f = tls_fleet(opts, pki)
    try:
        st, _, body = f.post("/v1/completions", '{"prompt":"plain","max_tokens":2}')
        assert st == 200, (st, body)
        r = subprocess.run(["curl", "-sS", "-v", "--cacert", pki.ca,
                            "https://127.0.0.1:%d/v1/completions" % f.tls_port,
                            "-H", "Content-Type: application/json",
                            "-d", '{"prompt":"over tls","max_tokens":2}'],
                           capture_output=True, timeout=20)
        err = r.stderr.decode(errors="replace")
        assert r.returncode == 0 and b'"text_completion"' in r.stdout, (r.returncode, err[-800:])
        assert "SSL connection using TLSv1.3" in err and "ALPN: server accepted http/1.1" in err, \
            err[-800:]
        # TLS 1.2, then versions we refuse, then a client offering only h2
        rc, out = s_client(f.tls_port, "-tls1_2", "-CAfile", pki.ca, "-alpn", "http/1.1")
        assert rc == 0 and "Protocol  : TLSv1.2" in out and "ALPN protocol: http/1.1" in out \
            and "Cipher is ECDHE-ECDSA-AES128-GCM-SHA256" in out, out[-800:]
        for v in ("-tls1_1", "-tls1"):
            rc, out = s_client(f.tls_port, v, "-cipher", "DEFAULT@SECLEVEL=0")
            assert rc != 0 and "Cipher is (NONE)" in out, (v, out[-600:])
        rc, out = s_client(f.tls_port, "-alpn", "h2")
        assert rc != 0 and "no application protocol" in out, out[-600:]
        assert metric(f, "prefixgate_tls_handshakes_total", side="clients",
                      resumed="false") >= 2
        assert metric(f, "prefixgate_tls_version_handshakes_total", side="clients",
                      version="TLSv1.2") >= 1
        assert metric(f, "prefixgate_tls_handshake_failures_total", side="clients",
                      reason="version") >= 2
        assert metric(f, "prefixgate_tls_handshake_failures_total", side="clients",
                      reason="alpn") >= 1
        assert metric(f, "prefixgate_tls_cipher_handshakes_total", side="clients",
                      cipher="TLS_AES_128_GCM_SHA256") >= 1
        st, j = f.admin("GET", "/tls")
        assert st == 200 and j["listeners"] == [
            {"address": "127.0.0.1:%d" % f.port, "scheme": "http"},
            {"address": "127.0.0.1:%d" % f.tls_port, "scheme": "https"}], j
        assert j["certificates"][0]["subject"] == "CN=gw.test", j
        assert j["certificates"][0]["not_after"]["in_s"] > 8 * 86400, j
        # the expiry is a metric too, the same instant as GET /tls's
        exp = metric(f, "prefixgate_tls_certificate_expiry_seconds", role="listener")
        assert abs(exp - time.time() - j["certificates"][0]["not_after"]["in_s"]) < 60, (exp, j)
        # GET /config writes the TLS options back, and they check again
        st, conf = f.admin("GET", "/config")
        assert "tls-listen 127.0.0.1:%d;" % f.tls_port in conf and \
            "tls-cert %s;" % pki.path("server.pem") in conf, conf
        with open(pki.path("back.conf"), "w") as out:
            out.write(conf.replace("listen 127.0.0.1:%d;" % f.port, "listen 127.0.0.1:1;"))
        r = subprocess.run([os.path.join(opts.build, "prefixgate"), "--check", "--no-bpf", "-c",
                            pki.path("back.conf")], capture_output=True, timeout=10)
        assert r.returncode == 0, r.stderr.decode()
        # prefixgatectl status shows the listeners and certificates
        ctl = [os.path.join(opts.tools, "prefixgatectl"), "--admin",
               "127.0.0.1:%d" % f.admin_port] + (["--pin-path", f.pin] if f.pin else [])
        out = subprocess.run(ctl + ["status"], capture_output=True, timeout=10).stdout.decode()
        assert "listeners  127.0.0.1:%d (http), 127.0.0.1:%d (https)" % (f.port, f.tls_port) \
            in out and "cert       %s: CN=gw.test (gw.test, localhost), expires" % \
            pki.path("server.pem") in out, out
    finally:
        f.stop()


@test
def tls_responses_copied(opts):
    """--data-path sockmsg: a plain client's streamed answer is carried in
    the kernel, a TLS client's (SSE and a large chunked body) take the copy
    path, encrypted by the worker, intact on one keep-alive connection."""
    if opts.mode != "bpf":
        return "SKIP the in-kernel data paths need --mode bpf"
    if have_cgroup2():
        return "SKIP " + have_cgroup2()
    import http.client
    pki = tlsutil.server_pki(pki_dir(opts, "copy"))
    f = tls_fleet(opts, pki, args=["--data-path", "sockmsg"])
    body = '{"model":"m","stream":true,"messages":[{"role":"user","content":"path"}]}'
    n = 500000
    cases = ({"X-Mock-Chunks": "6", "X-Mock-Chunk-Interval-Ms": "5"}, None), \
        ({"X-Mock-Response-Bytes": str(n), "X-Mock-Chunked": "1"}, n)
    try:
        st, _, data = f.post("/v1/chat/completions", body, cases[1][0])
        assert st == 200 and data == mock_pattern(n), (st, len(data))
        assert f.counter("prefixgate_spliced_responses_total") == 1
        c = http.client.HTTPSConnection("127.0.0.1", f.tls_port, timeout=20,
                                        context=tlsutil.client_context(pki.ca))
        for hdrs, size in cases * 2:
            c.request("POST", "/v1/chat/completions", body=body, headers=hdrs)
            r = c.getresponse()
            data = r.read()
            assert r.status == 200, r.status
            assert data == mock_pattern(size) if size else \
                data.rstrip().endswith(b"data: [DONE]"), data[-100:]
        c.close()
        assert f.counter("prefixgate_spliced_responses_total") == 1
    finally:
        f.stop()


@test
@shm_only
def sni_picks_the_certificate(opts):
    """Three certificates: an exact name, a wildcard, and the default for
    any other name (and none); --tls-min-version 1.3 refuses TLS 1.2."""
    if need_openssl():
        return need_openssl()
    pki = tlsutil.server_pki(pki_dir(opts, "sni"))
    pki.issue("a", "a.test")
    pki.issue("wild", "wild.b.test", "DNS:*.b.test")
    f = tls_fleet(opts, pki, [("server.pem", "server.key"), ("a.pem", "a.key"),
                              ("wild.pem", "wild.key")], args=["--tls-min-version", "1.3"])
    try:
        rc, out = s_client(f.tls_port, "-tls1_2", "-CAfile", pki.ca)
        assert rc != 0 and metric(f, "prefixgate_tls_handshake_failures_total", side="clients",
                                  reason="version") == 1, out[-600:]
        for sni, cn in (("a.test", "a.test"), ("x.b.test", "wild.b.test"),
                        ("other.test", "gw.test"), ("A.TEST", "a.test")):
            rc, out = s_client(f.tls_port, "-servername", sni, "-CAfile", pki.ca)
            assert rc == 0 and re.search(r"subject=CN ?= ?%s\b" % re.escape(cn), out), \
                (sni, out[-900:])
        rc, out = s_client(f.tls_port, "-noservername")
        assert "subject=CN = gw.test" in out, out[-900:]
        # Python's ssl checks the name against the certificate SNI chose
        ctx = tlsutil.client_context(pki.ca)
        st, _, _, _ = tls_request(f.tls_port, ctx, b'{"prompt":"sni"}', sni="y.b.test")
        assert st == 200
    finally:
        f.stop()


@test
@shm_only
def keepalive_bodies_and_resumption(opts):
    """Python's ssl: many requests on one connection, large and chunked
    bodies intact; a second connection resumes the session (TLS 1.3 and
    1.2), counted as resumed."""
    pki = tlsutil.server_pki(pki_dir(opts, "resume"))
    f = tls_fleet(opts, pki)
    try:
        import http.client
        for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
            ctx = tlsutil.client_context(pki.ca, version=version)
            c = http.client.HTTPSConnection("127.0.0.1", f.tls_port, timeout=20, context=ctx)
            for i, size in enumerate((10, 70000, 1 << 20, 5, 300000)):
                body = os.urandom(size)
                hdrs = {"Content-Type": "application/octet-stream"}
                if i % 2:  # chunked upload
                    c.putrequest("POST", "/invocations")
                    c.putheader("Transfer-Encoding", "chunked")
                    for k, v in hdrs.items():
                        c.putheader(k, v)
                    c.endheaders()
                    for o in range(0, size, 16384):
                        part = body[o:o + 16384]
                        c.send(b"%x\r\n%s\r\n" % (len(part), part))
                    c.send(b"0\r\n\r\n")
                else:
                    c.request("POST", "/invocations", body=body, headers=hdrs)
                r = c.getresponse()
                r.read()
                assert r.status == 200, r.status
                assert int(r.getheader("X-Body-Length")) == size, (i, r.getheader("X-Body-Length"))
            sess = c.sock.session
            c.close()
            time.sleep(0.05)  # TLS 1.3: the ticket came with the first response
            c2 = http.client.HTTPSConnection("127.0.0.1", f.tls_port, timeout=20, context=ctx)
            c2.connect()
            c2.sock.close()
            s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", f.tls_port), timeout=10),
                                server_hostname="gw.test", session=sess)
            assert s.session_reused, version
            s.close()
        assert wait_until(lambda: metric(  # counted once the client's Finished is in
            f, "prefixgate_tls_handshakes_total", side="clients", resumed="true") >= 2, 5)
    finally:
        f.stop()


@test
@shm_only
def mtls_accepted_refused_and_tenant(opts):
    """--tls-client-ca: a client certificate of that CA is served, none or
    another CA's is refused; --flow-tenant cert names the tenant by it, each
    request by its own connection's (two interleaved, access log)."""
    import http.client
    import json
    pki = tlsutil.server_pki(pki_dir(opts, "mtls"))
    alice, bob = pki.issue("alice", "alice", client=True), pki.issue("bob", "bob", client=True)
    other = tlsutil.Pki(pki_dir(opts, "mtls-other"), "Other CA")
    mallory = other.issue("mallory", "mallory", client=True)
    f = tls_fleet(opts, pki, args=["--tls-client-ca", pki.ca, "--flow-control", "--flow-tenant",
                                   "cert", "--access-log", pki.path("access.log")])
    try:
        cs = {who: http.client.HTTPSConnection("127.0.0.1", f.tls_port, timeout=20,
                                               context=tlsutil.client_context(pki.ca, *cert))
              for who, cert in (("alice", alice), ("bob", bob))}
        for i in range(12):
            who = ("alice", "bob")[i % 2]
            cs[who].request("POST", "/v1/completions", headers={"X-Request-Id": "%s-%d" % (who, i)},
                            body='{"prompt":"mtls %d","max_tokens":2}' % i)
            r = cs[who].getresponse()
            assert r.status == 200 and r.read(), r.status
        for c in cs.values():
            c.close()
        log = pki.path("access.log")
        recs = wait_until(lambda: os.path.exists(log) and len(open(log).readlines()) >= 12 and
                          [json.loads(x) for x in open(log)], 5)
        assert recs and all(x["tenant"] == x["request_id"].split("-")[0] for x in recs), recs
        for ctx in (tlsutil.client_context(pki.ca), tlsutil.client_context(pki.ca, *mallory)):
            try:
                st, _, _, _ = tls_request(f.tls_port, ctx, b'{"prompt":"no"}')
                raise AssertionError("served without a good client certificate: %s" % st)
            except (ssl.SSLError, ConnectionError, OSError, ValueError, IndexError):
                pass
        assert wait_until(lambda: metric(f, "prefixgate_tls_handshake_failures_total",
                                         side="clients", reason="client_cert") >= 2, 3)
        st, j = f.admin("GET", "/flow")
        assert st == 200 and any(t["tenant"] == "alice" for t in j["tenants"]), j
    finally:
        f.stop()


def serial_of(port, sni="gw.test"):
    rc, out = s_client(port, "-servername", sni)
    m = re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", out, re.S)
    assert m, out[-600:]
    r = subprocess.run(["openssl", "x509", "-noout", "-serial"], input=m.group(0).encode(),
                       capture_output=True)
    return r.stdout.decode().strip().split("=")[-1]


def put(src, dst):
    with open(src, "rb") as a, open(dst + ".tmp", "wb") as b:
        b.write(a.read())
    os.replace(dst + ".tmp", dst)


@test
@shm_only
def reload_good_and_bad(opts):
    """SIGHUP and POST /tls/reload show new files to new connections; a
    key that does not match, or an expired certificate, is refused whole
    with the file named, and the running certificate stays."""
    if need_openssl():
        return need_openssl()
    pki = tlsutil.server_pki(pki_dir(opts, "reload"))
    second = pki.issue("second", "gw.test", "DNS:gw.test,IP:127.0.0.1")
    expired = pki.issue("expired", "gw.test", start="20200101000000Z", end="20200201000000Z")
    stray = pki.key(pki.path("stray.key"))
    live_cert, live_key = pki.path("live.pem"), pki.path("live.key")
    put(pki.path("server.pem"), live_cert)
    put(pki.path("server.key"), live_key)
    first_serial = pki.serial(pki.path("server.pem"))
    f = tls_fleet(opts, pki, [("live.pem", "live.key")])
    try:
        assert serial_of(f.tls_port) == first_serial
        put(second[0], live_cert)
        put(second[1], live_key)
        f.gw.send_signal(signal.SIGHUP)
        assert wait_until(lambda: serial_of(f.tls_port) == pki.serial(second[0]), 5)
        # a key of another certificate: refused, the running one stays
        put(stray, live_key)
        f.gw.send_signal(signal.SIGHUP)
        assert wait_until(lambda: "tls reload (SIGHUP) refused: %s: key does not match" %
                          live_key in f.log(), 5), f.log()[-1500:]
        assert serial_of(f.tls_port) == pki.serial(second[0])
        # an expired one, through the admin API
        put(expired[0], live_cert)
        put(expired[1], live_key)
        st, j = f.admin("POST", "/tls/reload")
        assert st == 422 and j["error"].startswith(live_cert + ": expired on 2020-02-01"), (st, j)
        st, j = f.admin("GET", "/tls")
        assert j["refused"] == 2 and j["last_error"].startswith(live_cert), j
        assert serial_of(f.tls_port) == pki.serial(second[0])
        put(pki.path("server.pem"), live_cert)
        put(pki.path("server.key"), live_key)
        gen = j["generation"]
        st, j = f.admin("POST", "/tls/reload")
        assert st == 200 and j["generation"] == gen + 1, (st, j)
        assert serial_of(f.tls_port) == first_serial
        assert metric(f, "prefixgate_tls_reloads_total", result="refused") == 2
        assert metric(f, "prefixgate_tls_reloads_total", result="applied") == 2
        ctx = tlsutil.client_context(pki.ca)
        assert tls_request(f.tls_port, ctx, b'{"prompt":"after"}')[0] == 200
    finally:
        f.stop()


@test
@shm_only
def check_refuses_bad_files(opts):
    """--check reads the files: an expired certificate, a key that does not
    match, a wrong chain order, an unreadable file are each told as
    FILE: what is wrong (with the configuration file's line), exit 1."""
    pki = tlsutil.server_pki(pki_dir(opts, "check"))
    expired = pki.issue("expired", "gw.test", start="20200101000000Z", end="20200201000000Z")
    wrong = pki.path("wrong-order.pem")
    with open(wrong, "w") as out:
        out.write(open(pki.ca).read() + open(pki.path("server.pem")).read())
    gw = os.path.join(opts.build, "prefixgate")
    port = free_port()  # (--check binds it: not a port below 1024 needing root)
    base = [gw, "--check", "--no-bpf", "--tls-listen", "127.0.0.1:%d" % port]
    cases = [
        (["--tls-cert", expired[0], "--tls-key", expired[1]],
         "%s: expired on 2020-02-01 00:00:00 UTC" % expired[0]),
        (["--tls-cert", pki.path("server.pem"), "--tls-key", expired[1]],
         "%s: key does not match the certificate" % expired[1]),
        (["--tls-cert", wrong, "--tls-key", pki.path("server.key")],
         "%s: wrong chain order" % wrong),
        (["--tls-cert", pki.path("nope.pem")],
         "%s: cannot be read: No such file or directory" % pki.path("nope.pem")),
        (["--tls-cert", pki.path("server.pem"), "--tls-key", pki.path("server.key"),
          "--flow-tenant", "cert"], "--flow-tenant cert: needs client certificates"),
    ]
    for args, want in cases:
        r = subprocess.run(base + args, capture_output=True, timeout=10)
        err = r.stderr.decode()
        assert r.returncode == 1 and want in err, (args, r.returncode, err)
    conf = pki.path("gw.conf")
    with open(conf, "w") as out:
        out.write("tls-listen 127.0.0.1:%d;\ntls-cert %s;\ntls-key %s;\n" % ((port,) + expired))
    r = subprocess.run([gw, "--check", "--no-bpf", "-c", conf], capture_output=True, timeout=10)
    assert r.returncode == 1 and "%s:2: tls-cert: %s: expired on" % (conf, expired[0]) in \
        r.stderr.decode(), r.stderr.decode()
    r = subprocess.run(base + ["--tls-cert", pki.path("server.pem"), "--tls-key",
                               pki.path("server.key")], capture_output=True, timeout=10)
    assert r.returncode == 0, r.stderr.decode()


def closed_within(port, payload, limit):
    """Send payload (None: nothing) and wait for the gateway to close: how
    long it took, or None if still open after limit seconds."""
    s = socket.create_connection(("127.0.0.1", port), timeout=limit)
    t0 = time.monotonic()
    try:
        if payload:
            s.sendall(payload)
        while True:
            d = s.recv(4096)
            if not d:
                return time.monotonic() - t0
    except socket.timeout:
        return None
    except OSError:
        return time.monotonic() - t0
    finally:
        s.close()


HELLO_CTX = []


def client_hello():
    """The first bytes a real client sends (a fresh ClientHello each call),
    from Python's ssl; one context for all (making one reads the system's
    CAs, 50 ms: 300 hellos took 7 s)."""
    if not HELLO_CTX:
        HELLO_CTX.append(ssl.create_default_context())
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = HELLO_CTX[0].wrap_bio(inc, out, server_hostname="gw.test")
    try:
        o.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


@test
@shm_only
def hostile_handshakes(opts):
    """Stalled and truncated handshakes are closed at --tls-handshake-timeout;
    garbage and plain HTTP at once; past --tls-max-handshakes new ones are
    closed; a renegotiation closes the connection; memory stays bounded and
    a good client is served throughout."""
    if need_openssl():
        return need_openssl()
    pki = tlsutil.server_pki(pki_dir(opts, "hostile"))
    f = tls_fleet(opts, pki, args=["--tls-handshake-timeout", "300", "--tls-max-handshakes",
                                   "8", "--workers", "1"])
    ctx = tlsutil.client_context(pki.ca)
    try:
        for payload in (None, client_hello()[:40]):
            dt = closed_within(f.tls_port, payload, 5)
            assert dt is not None and 0.2 < dt < 2.0, dt
        for payload in (os.urandom(3000), b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                        b"\x16\x03\x01\xff\xff" + os.urandom(200)):
            dt = closed_within(f.tls_port, payload, 5)
            assert dt is not None and dt < 0.25, dt
        assert metric(f, "prefixgate_tls_handshake_failures_total", side="clients",
                      reason="timeout") >= 2
        assert metric(f, "prefixgate_tls_handshake_failures_total", side="clients",
                      reason="plain_http") >= 1
        assert metric(f, "prefixgate_tls_handshake_failures_total", side="clients",
                      reason="not_tls") >= 1
        # 30 stalled handshakes: 8 wait, the rest are closed at once
        stalled = [socket.create_connection(("127.0.0.1", f.tls_port), timeout=5)
                   for _ in range(30)]
        assert wait_until(lambda: metric(f, "prefixgate_tls_handshake_failures_total",
                                         side="clients", reason="overload") >= 22, 3)
        assert metric(f, "prefixgate_tls_handshakes_in_progress") <= 8
        for s in stalled:
            s.close()
        assert wait_until(lambda: metric(f, "prefixgate_tls_handshakes_in_progress") == 0, 3)
        assert tls_request(f.tls_port, ctx, b'{"prompt":"still here"}')[0] == 200
        # renegotiation (TLS 1.2; s_client's "R" command)
        p = subprocess.Popen(["openssl", "s_client", "-connect", "127.0.0.1:%d" % f.tls_port,
                              "-tls1_2", "-CAfile", pki.ca],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        time.sleep(0.5)
        out, _ = p.communicate(b"R\n", timeout=10)
        assert wait_until(lambda: metric(f, "prefixgate_tls_handshake_failures_total",
                                         side="clients", reason="renegotiation") >= 1, 3), \
            out.decode(errors="replace")[-600:]
        # 300 connections of garbage and stalls cost bounded memory
        rss0 = rss_kib(f.gw.pid)
        for i in range(300):
            s = socket.create_connection(("127.0.0.1", f.tls_port), timeout=5)
            s.sendall(client_hello()[:60] if i % 2 else os.urandom(500))
            s.close()
        # the flood's last handshakes end before a good client comes (with 8
        # still in progress it would be refused: the bound at work)
        assert wait_until(lambda: metric(f, "prefixgate_tls_handshakes_in_progress") == 0, 3)
        assert tls_request(f.tls_port, ctx, b'{"prompt":"after the flood"}')[0] == 200
        grew = rss_kib(f.gw.pid) - rss0
        print("# 300 hostile connections: gateway RSS +%d KiB" % grew)
        # ASan keeps freed memory in quarantine (up to 256 MiB): a looser bound
        asan = b"__asan_init" in open(os.path.join(opts.build, "prefixgate"), "rb").read()
        assert grew < (64 if asan else 16) * 1024, "RSS grew %d KiB" % grew
    finally:
        f.stop()


def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@test
@shm_only
def access_log_version_and_cipher(opts):
    """A TLS request's access-log line names its version and cipher, those
    --tls-ciphers and --tls-ciphersuites chose (a cipher left out is
    refused); a plain one's names none."""
    pki = tlsutil.server_pki(pki_dir(opts, "alog"))
    log = pki.path("access.log")
    f = tls_fleet(opts, pki, args=["--access-log", log, "--tls-ciphers",
                                   "ECDHE-ECDSA-CHACHA20-POLY1305", "--tls-ciphersuites",
                                   "TLS_AES_256_GCM_SHA384"])
    try:
        for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = tlsutil.client_context(pki.ca, version=v)
            assert tls_request(f.tls_port, ctx, b'{"prompt":"logged","max_tokens":2}')[0] == 200
        assert f.post("/v1/completions", '{"prompt":"plain","max_tokens":2}')[0] == 200
        rc, out = s_client(f.tls_port, "-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256")
        assert rc != 0 and metric(f, "prefixgate_tls_handshake_failures_total", side="clients",
                                  reason="cipher") == 1, out[-600:]
        import json
        lines = wait_until(lambda: [json.loads(x) for x in open(log)] if os.path.exists(log)
                           and len(open(log).readlines()) >= 3 else None, 5)
        # (the workers' lines may come out in either order)
        assert sorted((x.get("tls_version", ""), x.get("tls_cipher", "")) for x in lines or []) \
            == [("", ""), ("TLSv1.2", "ECDHE-ECDSA-CHACHA20-POLY1305"),
                ("TLSv1.3", "TLS_AES_256_GCM_SHA384")], lines
    finally:
        f.stop()


@test
@shm_only
def node_openai_sdk(opts):
    """The OpenAI Node SDK over https:// (its own TLS stack trusting the test
    CA through NODE_EXTRA_CA_CERTS): a completion and a streamed chat."""
    node = subprocess.run(["which", "node"], capture_output=True).stdout.decode().strip()
    if not node:
        return "SKIP node not installed"
    # under --tools, as test_otel.py's: one install for both suites and builds
    mods = os.path.join(os.path.abspath(opts.tools), "npm")
    if not os.path.isdir(os.path.join(mods, "node_modules", "openai")):
        r = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                            mods, "openai@4"], capture_output=True, timeout=240)
        if r.returncode != 0:
            return "SKIP npm could not install the openai package: %s" % \
                r.stderr.decode(errors="replace").strip().splitlines()[-1:]
    pki = tlsutil.server_pki(pki_dir(opts, "node"))
    f = tls_fleet(opts, pki)
    script = """
const OpenAI = require('openai');
const c = new OpenAI({baseURL: 'https://127.0.0.1:%d/v1', apiKey: 'sk-test'});
(async () => {
  const r = await c.completions.create({model: 'm', prompt: 'hello', max_tokens: 3});
  let text = '';
  const s = await c.chat.completions.create({model: 'm', stream: true, max_tokens: 4,
    messages: [{role: 'user', content: 'hi over tls'}]});
  for await (const ch of s) text += ch.choices[0].delta.content || '';
  console.log(JSON.stringify({completion: r.choices[0].text, chat: text}));
})().catch(e => { console.error(String(e)); process.exit(1); });
""" % f.tls_port
    try:
        env = dict(os.environ, NODE_EXTRA_CA_CERTS=pki.ca, NODE_PATH=os.path.join(mods,
                                                                                   "node_modules"))
        r = subprocess.run([node, "-e", script], capture_output=True, timeout=60, env=env)
        out = r.stdout.decode()
        assert r.returncode == 0 and '"completion"' in out, (r.returncode, r.stderr.decode())
        import json
        j = json.loads(out.strip().splitlines()[-1])
        assert j["completion"] and j["chat"], j
    finally:
        f.stop()


def main():
    return run_suite(TESTS)


if __name__ == "__main__":
    sys.exit(main())
