#!/usr/bin/env python3
"""make soak: mixed traffic through prefixgate for --duration seconds
(default 600) while backends are killed and restarted, members removed and
re-added and the routing config changed; every response is checked.

One more backend answers early (tools/bench/earlybackend.py, as vLLM's
--api-key 401): "early" requests carry long bodies (Content-Length or
chunked, uploaded in paced pieces) and a wrong key; mockllm echoes them,
the early backend answers 401 before reading the body, keeps the connection
alive and skips the body by its framing. Every request carries a unique
X-Client tag, which the early backend echoes.

Pass criteria (exit 0 only if all hold):
  - 0 mixed or corrupted bytes: every complete response is exactly what
    its request asked for (request-body CRC echoed, bulk body pattern,
    one stream id and the right number of events per SSE stream, the
    early backend's answer naming the request's own tag);
  - 0 framing problems in what the early backend received: each of its
    connections' bytes, re-parsed with correct framing, is whole requests,
    each carrying one request's tag only;
  - failures only where chaos explains them (a backend killed mid-request,
    or no backend up): 502 before a response started, or a truncated
    response; never a wrong byte;
  - in-flight counts back to 0 once traffic stops;
  - no leaked fds: after the soak every member is removed, and prefixgate's
    open fds return to what they were before traffic;
  - RSS flat: growth from the first quarter of the run to its end below
    16 MiB.
Figures are printed and saved to build/soak/result.json."""
import argparse
import json
import os
import random
import re
import socket
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet  # noqa: E402
from earlybackend import EarlyBackend  # noqa: E402
from netutil import mock_pattern as pattern  # noqa: E402

STREAM_MAX = 20  # the most content events a "stream" request asks for


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = {}

    def add(self, k, n=1):
        with self.lock:
            self.c[k] = self.c.get(k, 0) + n


def read_http(sock_file):
    """Parse one response: (status, headers, body, complete)."""
    line = sock_file.readline()
    if not line:
        return None, {}, b"", False
    status = int(line.split()[1])
    h = {}
    while True:
        l = sock_file.readline()
        if not l:
            return status, h, b"", False
        l = l.strip()
        if not l:
            break
        k, v = l.split(b":", 1)
        h[k.strip().lower().decode()] = v.strip().decode()
    body = b""
    if "content-length" in h:
        n = int(h["content-length"])
        body = sock_file.read(n)
        return status, h, body, len(body) == n
    if h.get("transfer-encoding") == "chunked":
        while True:
            size_line = sock_file.readline()
            if not size_line:
                return status, h, body, False
            n = int(size_line.strip().split(b";")[0], 16)
            if n == 0:
                sock_file.readline()
                return status, h, body, True
            part = sock_file.read(n + 2)
            if len(part) < n + 2:
                return status, h, body + part, False
            body += part[:n]
    return status, h, body, True


def stream_content(resp):
    """(ids, content pieces) of a streamed chat response's events."""
    events = [json.loads(e[6:]) for e in resp.split(b"\n\n") if e.startswith(b"data: {")]
    return ({e["id"] for e in events},
            [e["choices"][0]["delta"].get("content", "") for e in events if e["choices"]])


def mock_words(port, n):
    """mockllm's first n output tokens, asked of one instance directly
    (its prompt.c is their one definition): what a stream of n events
    through the gateway must carry."""
    body = b'{"messages":[{"role":"user","content":"words"}],"stream":true}'
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: s\r\nContent-Length: %d\r\n"
                     b"X-Mock-Chunks: %d\r\n\r\n" % (len(body), n) + body)
        status, _, resp, complete = read_http(sock.makefile("rb"))
    words = [w for w in stream_content(resp)[1] if w]
    if status != 200 or not complete or len(words) != n:
        raise RuntimeError("mockllm's output words: status %s, %d of %d" % (status, len(words), n))
    return words


def early_ok(h, resp, tag, status):
    """A response of the early backend must name this request's tag."""
    try:
        j = json.loads(resp)
    except ValueError:
        return False
    return j.get("client") == tag and j.get("status") == status


def paced(sock, data, piece=65536):
    for i in range(0, len(data), piece):
        sock.sendall(data[i:i + piece])
        time.sleep(0.002)


def paced_quiet(sock, data):
    try:
        paced(sock, data)
    except OSError:
        pass  # the gateway closed after an early answer


def client(port, deadline, seed, st, words):
    rng = random.Random(seed)
    sock = None
    f = None
    n_req = 0
    while time.monotonic() < deadline:
        if sock is None or rng.random() < 0.05:
            if sock:
                sock.close()
            sock = socket.create_connection(("127.0.0.1", port), timeout=15)
            f = sock.makefile("rb")
        kind = rng.choices(["echo", "stream", "bulk", "abort", "early"], [5, 3, 1, 1, 2])[0]
        n_req += 1
        tag = b"s%d-%d" % (seed, n_req)
        th = b"X-Client: %s\r\n" % tag
        try:
            if kind == "echo":
                body = rng.randbytes(rng.randint(0, 256 * 1024))
                sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: s\r\n%sContent-Length: %d\r\n\r\n"
                             % (th, len(body)) + body)
                status, h, resp, complete = read_http(f)
                if "x-early-backend" in h:
                    st.add("ok" if complete and early_ok(h, resp, tag.decode(), 401) else "CORRUPT")
                elif status == 200 and complete:
                    ok = (int(h["x-body-length"]) == len(body) and
                          int(h["x-body-crc32"], 16) == zlib.crc32(body))
                    st.add("ok" if ok else "CORRUPT")
                else:
                    st.add("failed:%s" % status)
                    sock = None
            elif kind == "stream":
                n = rng.randint(1, STREAM_MAX)
                body = json.dumps({"messages": [{"role": "user", "content": "s%d" % rng.random()}],
                                   "stream": True}).encode()
                sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: s\r\n%sContent-Length: %d\r\n"
                             b"X-Mock-Chunks: %d\r\nX-Mock-Chunk-Interval-Ms: 5\r\n\r\n" % (th, len(body), n)
                             + body)
                status, h, resp, complete = read_http(f)
                if "x-early-backend" in h:
                    st.add("ok" if complete and early_ok(h, resp, tag.decode(), 401) else "CORRUPT")
                elif status == 200 and complete:
                    ids, pieces = stream_content(resp)
                    ok = (len(ids) == 1 and "".join(pieces) == "".join(words[:n]) and
                          resp.rstrip().endswith(b"[DONE]"))
                    st.add("ok" if ok else "CORRUPT")
                else:
                    st.add("failed:%s" % status)
                    sock = None
            elif kind == "bulk":
                n = rng.randint(1, 4 << 20)
                chunked = rng.random() < 0.5
                sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: s\r\n%sContent-Length: 0\r\n"
                             b"X-Mock-Response-Bytes: %d\r\n%s\r\n" %
                             (th, n, b"X-Mock-Chunked: 1\r\n" if chunked else b""))
                status, h, resp, complete = read_http(f)
                if "x-early-backend" in h:
                    st.add("ok" if complete and early_ok(h, resp, tag.decode(), 401) else "CORRUPT")
                elif status == 200 and complete:
                    st.add("ok" if resp == pattern(n) else "CORRUPT")
                else:
                    st.add("failed:%s" % status)
                    sock = None
            elif kind == "early":  # a long body and a wrong key
                body = (b"#%s#" % tag) * (rng.randint(64 << 10, 1 << 20) // (len(tag) + 2))
                chunked = rng.random() < 0.5
                head = b"POST /invocations HTTP/1.1\r\nHost: s\r\n%sAuthorization: Bearer tok-%s\r\n" % (
                    th, tag)
                if chunked:
                    wire = head + b"Transfer-Encoding: chunked\r\n\r\n" + b"".join(
                        b"%x\r\n%s\r\n" % (len(body[i:i + 32768]), body[i:i + 32768])
                        for i in range(0, len(body), 32768)) + b"0\r\n\r\n"
                else:
                    wire = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
                up = threading.Thread(target=lambda: paced_quiet(sock, wire), daemon=True)
                up.start()
                status, h, resp, complete = read_http(f)
                if "x-early-backend" in h:
                    st.add("ok" if complete and early_ok(h, resp, tag.decode(), 401) else "CORRUPT")
                elif status == 200 and complete:
                    ok = (int(h["x-body-length"]) == len(body) and
                          int(h["x-body-crc32"], 16) == zlib.crc32(body))
                    st.add("ok" if ok else "CORRUPT")
                else:
                    st.add("failed:%s" % status)
                    sock = None
                up.join(30)
                if up.is_alive():
                    st.add("failed:upload-stalled")
                    sock = None
            else:  # abort mid-stream
                body = b'{"messages":[{"role":"user","content":"abort"}],"stream":true}'
                sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: s\r\nContent-Length: %d\r\n"
                             b"X-Mock-Chunks: 200\r\nX-Mock-Chunk-Interval-Ms: 10\r\n\r\n" % len(body)
                             + body)
                sock.recv(rng.randint(1, 2000))
                sock.close()
                sock = None
                st.add("aborted")
            if sock is not None and kind != "abort" and h.get("connection") == "close":
                sock = None  # its last response (a spliced stream, an early answer)
        except (OSError, ValueError, IndexError, KeyError) as e:
            st.add("failed:%s" % type(e).__name__)
            sock = None
    if sock:
        sock.close()


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def rss_kb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--duration", type=int, default=600)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--instances", type=int, default=4)
    opts = ap.parse_args()
    logdir = os.path.join(opts.build, "soak")
    os.makedirs(logdir, exist_ok=True)
    inst = fleet.Instances(opts.build, opts.instances, logdir)
    # tags only: random echo bodies may hold anything else
    early = EarlyBackend("skip", 401, keep=16 << 20, markers=[
        re.compile(rb"X-Client: (s\d+-\d+)"), re.compile(rb"tok-(s\d+-\d+)"),
        re.compile(rb"#(s\d+-\d+)#")])
    gw = fleet.Gateway(opts.build, inst.addrs() + [early.addr()], logdir,
                       ["--health-check-interval", "500", "--health-fall", "2"])
    pid = gw.proc.pid
    fds0 = fd_count(pid)
    st = Stats()
    deadline = time.monotonic() + opts.duration
    words = mock_words(inst.ports[0], STREAM_MAX)
    threads = [threading.Thread(target=client, args=(gw.port, deadline, i, st, words))
               for i in range(opts.clients)]
    for t in threads:
        t.start()
    rng = random.Random(99)
    rss = []
    chaos = {"kills": 0, "removes": 0, "routing_changes": 0}
    t_start = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(min(3, max(0, deadline - time.monotonic())))
        rss.append((time.monotonic() - t_start, rss_kb(pid)))
        action = rng.choice(["kill", "remove", "routing", "none"])
        i = rng.randrange(opts.instances)
        if action == "kill":
            inst.procs[i].kill()
            inst.procs[i].wait()
            time.sleep(1)
            inst.procs[i] = fleet.spawn([os.path.join(opts.build, "mockllm"), "--listen",
                                         "127.0.0.1:%d" % inst.ports[i], "--id", "i%d" % i],
                                        os.path.join(logdir, "mockllm-%d.log" % i))
            chaos["kills"] += 1
        elif action == "remove":
            addr = inst.addrs()[i]
            fleet.admin_request(gw.admin, "DELETE", "/backends/" + addr)
            time.sleep(1)
            fleet.admin_request(gw.admin, "POST", "/backends", json.dumps({"address": addr}))
            chaos["removes"] += 1
        elif action == "routing":
            s = rng.choice(["RANDOM", "LEAST_OUTSTANDING_REQUESTS", "PREFIX_AWARE"])
            fleet.admin_request(gw.admin, "PUT", "/routing", json.dumps({"RoutingStrategy": s}))
            chaos["routing_changes"] += 1
    for t in threads:
        t.join(60)
    # Checks after traffic.
    time.sleep(1)
    inflight = sum(b["in_flight"] for b in json.loads(fleet.get(gw.admin, "/backends")))
    for a in inst.addrs() + [early.addr()]:
        fleet.admin_request(gw.admin, "DELETE", "/backends/" + a)
    time.sleep(1.5)  # drains finish, the workers' ticks close pooled connections
    fds1 = fd_count(pid)
    quarter = [kb for t, kb in rss if t >= opts.duration / 4][:1] or [rss[0][1]]
    growth_kb = rss[-1][1] - quarter[0]
    rc = gw.stop()
    inst.stop()
    early.stop()
    framing = early.audit()
    for p in framing[:10]:
        print("early backend:", p)
    c = st.c
    total = sum(c.values())
    corrupt = c.get("CORRUPT", 0)
    res = {"duration_s": opts.duration, "responses": total, "counts": c, "chaos": chaos,
           "in_flight_after": inflight, "fds_before": fds0, "fds_after": fds1,
           "rss_kb_first_quarter": quarter[0], "rss_kb_end": rss[-1][1],
           "rss_growth_kb": growth_kb, "exit_code": rc,
           "early_backend_conns": len(early.conns), "early_framing_problems": len(framing)}
    json.dump(res, open(os.path.join(logdir, "result.json"), "w"), indent=1)
    print(json.dumps(res, indent=1))
    checks = {"0 corrupt responses": corrupt == 0,
              "0 framing problems (early)": not framing,
              "in-flight back to 0": inflight == 0,
              "no leaked fds": fds1 <= fds0,
              "RSS flat (< 16 MiB growth)": growth_kb < 16 * 1024,
              "clean exit": rc == 0,
              "traffic flowed": c.get("ok", 0) > total * 0.5}
    for k, v in checks.items():
        print("%-28s %s" % (k, "yes" if v else "NO"))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
