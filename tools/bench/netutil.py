"""Loopback helpers shared by the e2e tests (tests/e2e/harness.py) and the
benchmarks (tools/bench): free ports that no outgoing connection can take,
the body mockllm sends for X-Mock-Response-Bytes, and reading a
Prometheus text (the gateway's /metrics, mockllm's)."""
import random
import socket


def free_port():
    """A free loopback port below the kernel's ephemeral range, so that no
    outgoing connection (whose local port comes from that range) can take
    it between now and the moment a server binds it."""
    try:
        low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    lo, hi = max(1024, low - 12000), low
    for _ in range(200):
        port = random.randrange(lo, hi)
        if port in _GIVEN:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        _GIVEN.add(port)
        return port
    raise RuntimeError("no free port below %d" % low)


_GIVEN = set()


def mock_pattern(n):
    """The body mockllm sends for X-Mock-Response-Bytes: n."""
    out = bytearray()
    off = 0
    while len(out) < n:
        out += b"%015d\n" % off
        off += 16
    return bytes(out[:n])


def metric_samples(text):
    """{'name{labels}': value} of every sample line of a Prometheus text."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def metric_family(text, name):
    """{'name{labels}': value} of the samples of one family."""
    return {k: v for k, v in metric_samples(text).items() if k.split("{", 1)[0] == name}
