#!/usr/bin/env python3
"""End-to-end tests of https:// backends (doc/security.md): a uvicorn +
Starlette backend over TLS named in every place a backend is named (flags,
the backends file, the admin API, etcd), its certificate checked against a
CA (a wrong one refused, counted and logged), its DNS name sent as SNI, the
gateway's own client certificate shown to a backend that asks for one,
connections pooled and sessions resumed, health checks over TLS, TLS on
both sides at once. A test CA is made at test time (tlsutil.py)."""
import hashlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Fleet, free_port, run_suite, wait_until  # noqa: E402
from harness import metric_value as metric  # noqa: E402
import tlsutil  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def uvicorn_python():
    for py in (sys.executable, "/usr/bin/python3"):
        if py and shutil.which(py) and subprocess.run(
                [py, "-c", "import uvicorn, starlette"], capture_output=True).returncode == 0:
            return py
    return None


class TlsBackend:
    """early_app.py (vLLM-shaped: /health, /v1/score echoes the body's
    SHA-256 with "Authorization: Bearer good") under uvicorn over TLS;
    client_ca: it asks for a client certificate of that CA."""

    def __init__(self, opts, pki, cert, client_ca=None, args=()):
        self.port = free_port()
        py = uvicorn_python()
        cmd = [py, "-m", "uvicorn", "early_app:app", "--host", "127.0.0.1", "--port",
               str(self.port), "--no-access-log", "--ssl-certfile", cert[0], "--ssl-keyfile",
               cert[1]] + list(args)
        if client_ca:
            cmd += ["--ssl-ca-certs", client_ca, "--ssl-cert-reqs", "2"]
        self.log = os.path.join(pki.d, "uvicorn-%d.log" % self.port)
        self.p = subprocess.Popen(cmd, cwd=HERE, stdout=open(self.log, "w"),
                                  stderr=subprocess.STDOUT)
        ctx = tlsutil.client_context(pki.ca)
        ctx.check_hostname = False  # whether it serves, whatever its names
        if client_ca:
            ctx.load_cert_chain(pki.path("gwclient.pem"), pki.path("gwclient.key"))

        def up():
            try:
                c = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=1, context=ctx)
                c.request("GET", "/health")
                return c.getresponse().status == 200
            except OSError:
                return self.p.poll() is not None
        if not wait_until(up, 15) or self.p.poll() is not None:
            self.stop()
            raise RuntimeError("uvicorn did not start: " + open(self.log).read()[-1000:])

    def addr(self, host="127.0.0.1"):
        return "https://%s:%d" % (host, self.port)

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


class SniBackend:
    """A small HTTPS backend that records the server names (SNI) clients
    sent; answers every request 200 "ok" (Content-Length)."""

    def __init__(self, cert):
        import http.server
        import ssl
        import threading

        self.names = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                n = int(self.headers.get("Content-Length", 0))
                self.rfile.read(n)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            do_POST = do_GET

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*cert)
        ctx.sni_callback = lambda sock, name, c: outer.names.append(name) and None
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.socket = ctx.wrap_socket(self.srv.socket, server_side=True)
        self.srv.daemon_threads = True
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


def pki_for(opts, name):
    pki = tlsutil.server_pki(os.path.join(os.path.abspath(opts.build), "e2e-tmp",
                                          "tlsb-%d" % os.getpid(), name))
    if not os.path.exists(pki.path("backend.pem")):
        pki.issue("backend", "backend.test", "DNS:backend.test,DNS:localhost,IP:127.0.0.1")
        pki.issue("gwclient", "gateway-client", client=True)
    return pki


def score(port, body, ctx=None):
    """POST /v1/score through the gateway (HTTPS when ctx): (status, json)."""
    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=20, context=ctx) if ctx \
        else http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.request("POST", "/v1/score", body=body, headers={"Authorization": "Bearer good"})
    r = c.getresponse()
    data = r.read()
    c.close()
    try:
        return r.status, json.loads(data)
    except ValueError:
        return r.status, data


def echoed(st, j, body):
    assert st == 200 and j["len"] == len(body) and \
        j["sha256"] == hashlib.sha256(body).hexdigest(), (st, j)


def with_env(name, value, fn, *args, **kw):
    """fn(*args, **kw) with the environment variable name set to value
    (None: unset), as the processes it starts inherit it."""
    old = os.environ.pop(name, None)
    if value is not None:
        os.environ[name] = value
    try:
        return fn(*args, **kw)
    finally:
        os.environ.pop(name, None)
        if old is not None:
            os.environ[name] = old


def needs():
    if not uvicorn_python():
        return "SKIP uvicorn not installed (python3-uvicorn, python3-starlette)"
    if not tlsutil.have_openssl():
        return "SKIP openssl not installed (Debian: openssl)"
    return None


@test
def uvicorn_over_tls_pooled(opts):
    """--backend https://: bodies intact over TLS to the backend, from a
    plain client and a TLS one; the connections are pooled (20 requests, a
    few handshakes) and, once the backend closed the idle ones, a fresh one
    resumes the session; health checks pass over TLS."""
    if needs():
        return needs()
    pki = pki_for(opts, "pooled")
    be = TlsBackend(opts, pki, (pki.path("backend.pem"), pki.path("backend.key")),
                    args=["--timeout-keep-alive", "1"])
    f = Fleet(opts, 0, start_gateway=False)
    try:
        tls_port = free_port()
        f.start_gateway(["--backend-tls-ca", pki.ca, "--tls-listen", "127.0.0.1:%d" % tls_port,
                         "--tls-cert", pki.path("server.pem"), "--tls-key",
                         pki.path("server.key"), "--health-check-interval", "200"],
                        backends=[], extra_backends=[be.addr()])
        ctx = tlsutil.client_context(pki.ca)
        for i in range(20):
            body = os.urandom([10, 70000, 1 << 20][i % 3])
            echoed(*score(tls_port if i % 2 else f.port, body, ctx if i % 2 else None), body)
        b = f.backends()[be.addr()]
        assert b["health"] == "up" and b["requests"] == 20, b
        full = metric(f, "prefixgate_tls_handshakes_total", side="backends", resumed="false")
        resumed = metric(f, "prefixgate_tls_handshakes_total", side="backends", resumed="true")
        # pooled: sequential requests on at most a connection per worker
        assert 1 <= full + resumed <= 4, (full, resumed)
        assert metric(f, "prefixgate_tls_version_handshakes_total", side="backends",
                      version="TLSv1.3") >= 1
        # the backend closes idle connections after 1 s: the next ones resume
        time.sleep(1.5)
        for i in range(4):
            body = b"after the close %d" % i
            echoed(*score(f.port, body), body)
        assert metric(f, "prefixgate_tls_handshakes_total", side="backends",
                      resumed="true") >= 1, f.metrics()[-3000:]
    finally:
        f.stop()
        be.stop()


@test
def named_everywhere(opts):
    """https:// in the backends file, the admin API (POST /backends), etcd's
    backend records and prefixgatectl register's: each served over TLS,
    shown with its scheme."""
    if needs():
        return needs()
    pki = pki_for(opts, "named")
    be = TlsBackend(opts, pki, (pki.path("backend.pem"), pki.path("backend.key")))
    be2 = TlsBackend(opts, pki, (pki.path("backend.pem"), pki.path("backend.key")))
    bfile = pki.path("backends")
    with open(bfile, "w") as out:
        out.write("# over TLS\n%s\n" % be.addr())
    f = Fleet(opts, 0, start_gateway=False)
    e = None
    try:
        f.start_gateway(["--backend-tls-ca", pki.ca, "--backends-file", bfile],
                        backends=[])
        body = b"from the file"
        echoed(*score(f.port, body), body)
        st, j = f.admin("POST", "/backends", {"address": be2.addr()})
        assert st in (200, 201, 202), (st, j)
        assert wait_until(lambda: be2.addr() in f.backends(), 5), f.backends()
        st, j = f.admin("DELETE", "/backends/" + be.addr())
        assert st in (200, 202), (st, j)
        assert wait_until(lambda: list(f.backends()) == [be2.addr()], 5), f.backends()
        echoed(*score(f.port, body), body)
        f.stop()
        # by DNS name (a responder of test_addr's): its name is sent as SNI
        # and checked against the certificate
        from test_addr import DnsServer
        dns = DnsServer()
        dns.records["backend.test"] = ["127.0.0.1"]
        sni = SniBackend((pki.path("backend.pem"), pki.path("backend.key")))
        try:
            f = Fleet(opts, 0, start_gateway=False)
            f.start_gateway(["--backend-tls-ca", pki.ca, "--resolver", "127.0.0.1:%d" % dns.port,
                             "--health-check-path", "none"], backends=[])
            st, j = f.admin("POST", "/backends", {"address": "https://backend.test:%d" % sni.port})
            assert st in (200, 201, 202), (st, j)
            assert wait_until(lambda: score(f.port, b"x")[0] == 200, 5), f.backends()
            assert "backend.test" in sni.names, sni.names
            f.stop()
        finally:
            sni.stop()
            dns.stop()
        if not shutil.which("etcd"):
            return "SKIP etcd not installed: the file and admin API parts passed"
        from etcd_harness import Etcd
        e = Etcd(pki.d)
        e.put_backend(be.addr())
        f = Fleet(opts, 0, start_gateway=False)
        f.start_gateway(["--backend-tls-ca", pki.ca, "--etcd-endpoints", e.url], backends=[])
        assert wait_until(lambda: be.addr() in f.backends(), 10), f.backends()
        echoed(*score(f.port, body), body)
        # and prefixgatectl register's record; its end drains the backend
        reg = subprocess.Popen([os.path.join(opts.tools, "prefixgatectl"), "register", "--etcd",
                                e.url, "--address", be2.addr(), "--ttl", "5"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            assert wait_until(lambda: be2.addr() in f.backends(), 10), f.backends()
            e.delete("backends/" + be.addr())
            assert wait_until(lambda: list(f.backends()) == [be2.addr()], 10), f.backends()
            echoed(*score(f.port, body), body)
        finally:
            reg.send_signal(signal.SIGTERM)
            out = reg.communicate(timeout=10)[0].decode()
        assert "registered %s" % be2.addr() in out, out
        assert wait_until(lambda: be2.addr() not in f.backends(), 10), f.backends()
    finally:
        f.stop()
        if e:
            e.stop()
        be.stop()
        be2.stop()


@test
def certificate_checked(opts):
    """A backend whose certificate no trusted CA issued (the CA file's or
    the system's store's), or that does not name the address it is reached
    by, is refused (502 after the attempts, the reason counted and logged);
    with the CA (--backend-tls-ca, or SSL_CERT_FILE's bundle) it is served."""
    if needs():
        return needs()
    pki = pki_for(opts, "checked")
    other = tlsutil.Pki(os.path.join(pki.d, "other"), "Other CA")
    be = TlsBackend(opts, pki, (pki.path("backend.pem"), pki.path("backend.key")))
    f = Fleet(opts, 0, start_gateway=False)
    try:
        f.start_gateway(["--backend-tls-ca", other.ca, "--health-check-path", "none"],
                        backends=[], extra_backends=[be.addr()])
        st, _ = score(f.port, b"x")
        assert st == 502, st
        assert metric(f, "prefixgate_tls_handshake_failures_total", side="backends",
                      reason="verify") >= 1
        assert "TLS handshake failed (verify): certificate: unable to get local issuer" in \
            f.log(), f.log()[-1500:]
        f.stop()
        # no --backend-tls-ca: the system's store, which does not hold the
        # test CA, then the bundle SSL_CERT_FILE names, which does
        for bundle, want in ((None, 502), (pki.ca, 200)):
            f = Fleet(opts, 0, start_gateway=False)
            with_env("SSL_CERT_FILE", bundle, f.start_gateway, ["--health-check-path", "none"],
                     backends=[], extra_backends=[be.addr()])
            assert score(f.port, b"x")[0] == want, (bundle, f.log()[-1500:])
            f.stop()
        # the right CA, but not the address it is reached by
        pki.issue("misnamed", "elsewhere.test", "DNS:elsewhere.test,IP:10.9.9.9")
        be.stop()
        be = TlsBackend(opts, pki, (pki.path("misnamed.pem"), pki.path("misnamed.key")))
        f = Fleet(opts, 0, start_gateway=False)
        f.start_gateway(["--backend-tls-ca", pki.ca, "--health-check-path", "none"],
                        backends=[], extra_backends=[be.addr()])
        st, _ = score(f.port, b"x")
        assert st == 502, st
        assert "certificate: IP address mismatch" in f.log(), f.log()[-1500:]
    finally:
        f.stop()
        be.stop()


@test
def client_certificate_to_backend(opts):
    """--backend-tls-cert: a backend that asks for a client certificate gets
    the gateway's; without it the backend refuses the handshake."""
    if needs():
        return needs()
    pki = pki_for(opts, "mtls")
    be = TlsBackend(opts, pki, (pki.path("backend.pem"), pki.path("backend.key")),
                    client_ca=pki.ca)
    f = Fleet(opts, 0, start_gateway=False)
    try:
        f.start_gateway(["--backend-tls-ca", pki.ca, "--backend-tls-cert",
                         pki.path("gwclient.pem"), "--backend-tls-key", pki.path("gwclient.key"),
                         "--health-check-path", "none"], backends=[],
                        extra_backends=[be.addr()])
        body = b"with our certificate"
        echoed(*score(f.port, body), body)
        st, j = f.admin("GET", "/tls")
        assert j["backends"]["subject"] == "CN=gateway-client", j
        f.stop()
        f = Fleet(opts, 0, start_gateway=False)
        f.start_gateway(["--backend-tls-ca", pki.ca, "--health-check-path", "none"],
                        backends=[], extra_backends=[be.addr()])
        assert score(f.port, b"x")[0] == 502
    finally:
        f.stop()
        be.stop()


def main():
    return run_suite(TESTS)


if __name__ == "__main__":
    sys.exit(main())
