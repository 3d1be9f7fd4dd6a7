"""A PKI made when it is needed with Debian's openssl command: a CA, server
certificates with the names asked for (EC P-256), client certificates for
mTLS, certificates valid in the past (expired), a second CA. Nothing is kept
in the tree, nothing can expire there. Used by the tls bench part (tls.py)
and the e2e suites (tests/e2e: harness.py --tls, test_tls*.py)."""
import os
import shutil
import ssl
import subprocess

CA_CONF = """[ca]
default_ca = test
[test]
dir = {d}
database = {d}/index.txt
new_certs_dir = {d}/new
serial = {d}/serial
default_md = sha256
policy = any
copy_extensions = copy
unique_subject = no
[any]
commonName = supplied
[ext_server]
basicConstraints = CA:FALSE
subjectAltName = {san}
extendedKeyUsage = serverAuth
[ext_client]
basicConstraints = CA:FALSE
extendedKeyUsage = clientAuth
[ext_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
"""


def have_openssl():
    return shutil.which("openssl") is not None


def run(*args, cwd=None):
    r = subprocess.run(["openssl"] + list(args), cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("openssl %s: %s" % (" ".join(args[:3]), r.stderr[-600:]))
    return r.stdout


class Pki:
    """A CA in directory d and the certificates it signs."""

    def __init__(self, d, name="Test CA"):
        self.d = d
        os.makedirs(os.path.join(d, "new"), exist_ok=True)
        open(os.path.join(d, "index.txt"), "w").close()
        with open(os.path.join(d, "serial"), "w") as f:
            f.write(os.urandom(16).hex() + "\n")  # 128 random bits, as CAs give
        self.ca_key = self.path("ca.key")
        self.ca = self.path("ca.pem")
        self.key(self.ca_key)
        self._conf("DNS:unused")
        run("req", "-new", "-x509", "-key", self.ca_key, "-out", self.ca, "-days", "30",
            "-subj", "/CN=" + name, "-config", self.conf_path, "-extensions", "ext_ca")

    def path(self, name):
        return os.path.join(self.d, name)

    def key(self, path):
        run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)
        return path

    def _conf(self, san):
        self.conf_path = self.path("ca.cnf")
        with open(self.conf_path, "w") as f:
            f.write(CA_CONF.format(d=self.d, san=san))

    def issue(self, name, cn, san=None, client=False, start=None, end=None, days=10, key=None):
        """Certificate NAME.pem for cn (san: "DNS:a,IP:127.0.0.1"), key NAME.key;
        start/end: "YYYYMMDDHHMMSSZ" to place it in the past. (cert, key)."""
        key = key or self.key(self.path(name + ".key"))
        csr = self.path(name + ".csr")
        cert = self.path(name + ".pem")
        run("req", "-new", "-key", key, "-out", csr, "-subj", "/CN=" + cn)
        self._conf(san or ("DNS:" + cn))
        args = ["ca", "-batch", "-config", self.conf_path, "-in", csr, "-out", cert,
                "-cert", self.ca, "-keyfile", self.ca_key, "-notext",
                "-extensions", "ext_client" if client else "ext_server"]
        if start:
            args += ["-startdate", start, "-enddate", end]
        else:
            args += ["-days", str(days)]
        run(*args)
        return cert, key

    def serial(self, cert):
        return run("x509", "-in", cert, "-noout", "-serial").strip().split("=")[1]


def server_pki(d):
    """The usual set: a CA, a certificate for 127.0.0.1 / localhost /
    gw.test (server.pem, server.key). Made once per directory."""
    if os.path.exists(os.path.join(d, "server.pem")):
        p = Pki.__new__(Pki)
        p.d = d
        p.ca = p.path("ca.pem")
        p.ca_key = p.path("ca.key")
        p.conf_path = p.path("ca.cnf")
        return p
    p = Pki(d)
    p.issue("server", "gw.test", "DNS:gw.test,DNS:localhost,IP:127.0.0.1")
    return p


def client_context(ca, cert=None, key=None, version=None):
    """An ssl.SSLContext that trusts ca (and shows cert/key)."""
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    if version:
        ctx.minimum_version = ctx.maximum_version = version
    return ctx
