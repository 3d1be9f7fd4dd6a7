#!/usr/bin/env python3
"""The tls part of make bench: TLS terminated by prefixgate, HAProxy and
nginx (Debian's, OpenSSL 3), each in front of the same 2 mockllm instances
(answering at once), over loopback, with one certificate made now (EC
P-256, a test CA: tlsutil.py) and the same protocols and ciphers
(prefixgate's defaults: TLS 1.2/1.3, AES-128-GCM first).

Each round runs every proxy, in an order rotated from round to round:
  new      new TLS connections/s with full handshakes: build/tlsload, 32
           slots, each connection one GET /health with Connection: close;
           the proxies with ONE worker each (prefixgate --workers 1,
           HAProxy nbthread 1, nginx worker_processes 1); CPU per
           connection: every task of the proxy plus every kernel thread,
           from /proc/*/task/*/schedstat (cpu.py), over the run;
  resumed  the same, each slot resuming the session its last connection
           got (TLS 1.3 tickets);
  ka32     keep-alive requests/s over TLS at 32 connections (wrk -t2 -c32;
           a 1 KiB chat body, one token out), 2 workers each; CPU per
           request over that run as above;
  c1       one connection, one request at a time (wrk -t1 -c1 --latency):
           p50, and what it adds to the instances' own (plain, direct,
           same body) in the same round.
The client (tlsload, wrk) shares the 2 CPUs with the proxy: new
connections/s is where the client's own handshake cost can be the limit,
so CPU per connection is the figure that compares the proxies.
Reported: the median of the rounds, each ratio against HAProxy, PASS/MISS
for issue 32's targets (new connections/s full and resumed >= HAProxy's,
keep-alive requests/s >= 1.1x HAProxy's, added p50 <= HAProxy's, CPU per
request <= HAProxy's). Then testssl.sh (Debian's testssl.sh) against
prefixgate's listener, its output kept whole.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu  # noqa: E402
import fleet  # noqa: E402
import tlsutil  # noqa: E402

CIPHERS = ("ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
           "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
           "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305")
SUITES = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
INSTANT = ["--prefill-tokens-per-s", "1e9", "--ttft-overhead-ms", "0",
           "--decode-ms-per-token", "0"]
PROXIES = ("prefixgate", "haproxy", "nginx")
BODY = json.dumps({"model": "m", "max_tokens": 1, "stream": False, "messages": [
    {"role": "system", "content": "You answer questions about orders. " * 20},
    {"role": "user", "content": "Where is my order 4711? " * 8}]})


def start_proxies(build, addrs, logdir, pki, workers):
    """{name: (process, TLS port)} with `workers` workers each."""
    cert, key = pki.path("server.pem"), pki.path("server.key")
    combined = pki.path("combined.pem")
    with open(combined, "w") as f:
        f.write(open(cert).read() + open(key).read())
    port = fleet.free_port()
    gw = fleet.Gateway(build, addrs, logdir, [
        "--workers", str(workers), "--log-level", "warn", "--tls-listen", "127.0.0.1:%d" % port,
        "--tls-cert", cert, "--tls-key", key])
    gw.tls_port = port
    hp = fleet.HAProxy(addrs, logdir, threads=workers, tls=(combined, CIPHERS, SUITES))
    ng = fleet.Nginx(addrs, logdir, workers=workers, tls=(cert, key, CIPHERS, SUITES))
    return {"prefixgate": gw, "haproxy": hp, "nginx": ng}


def measured(proxy, fn):
    """Run fn(); (its result, CPU ns of the proxy's tasks, of the kernel threads)."""
    roles = {pid: "proxy" for pid in cpu.tree([proxy.proc.pid])}
    c0 = cpu.cpu_ns_by_role(roles)
    r = fn()
    c1 = cpu.cpu_ns_by_role(roles)
    return r, c1["proxy"] - c0["proxy"], c1["kernel"] - c0["kernel"]


def tlsload(build, port, secs, resume):
    cmd = [os.path.join(build, "tlsload"), "--connect", "127.0.0.1:%d" % port, "--conns", "32",
           "--seconds", str(secs)] + (["--resume"] if resume else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 30).stdout
    return json.loads(out.strip().splitlines()[-1])


def wrk_script(logdir):
    path = os.path.join(logdir, "tls-post.lua")
    with open(path, "w") as f:
        f.write('wrk.method = "POST"\nwrk.body = %s\n'
                'wrk.headers["Content-Type"] = "application/json"\n' % json.dumps(BODY))
    return path


def parse_ms(v, unit):
    return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def wrk(url, conns, threads, secs, script):
    out = subprocess.run(["wrk", "-t%d" % threads, "-c%d" % conns, "-d%ds" % secs, "--latency",
                          "-s", script, url], capture_output=True, text=True,
                         timeout=secs + 30).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p50 = re.search(r"\s50%\s+([\d.]+)(us|ms|s)\b", out)
    total = re.search(r"(\d+) requests in", out)
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if not rps or not p50 or not total:
        raise RuntimeError("wrk %s: %s" % (url, out[-600:]))
    return {"rps": float(rps.group(1)), "p50_ms": parse_ms(*p50.groups()),
            "requests": int(total.group(1)),
            "errors": (int(errs.group(1)) if errs else 0) +
            (sum(int(x) for x in sock.groups()) if sock else 0)}


def med(xs):
    xs = sorted(x for x in xs if x is not None)
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2.0 if n else float("nan")


def one_round(opts, rnd, one, two, script, direct_url):
    """Every measure of one round, proxies in an order rotated by rnd."""
    order = PROXIES[rnd % 3:] + PROXIES[:rnd % 3]
    res = {p: {} for p in PROXIES}
    for p in order:  # one worker: new connections, full then resumed
        for kind, resume in (("new", False), ("resumed", True)):
            r, pns, kns = measured(one[p], lambda: tlsload(opts.build, one[p].tls_port,
                                                          opts.seconds, resume))
            n = max(1, r["conns"])
            r.update(cpu_us=(pns + kns) / 1e3 / n, proxy_us=pns / 1e3 / n)
            res[p][kind] = r
    d = wrk(direct_url, 1, 1, opts.seconds, script)
    for p in order:  # two workers: keep-alive at 32 connections, then one
        url = "https://127.0.0.1:%d/v1/chat/completions" % two[p].tls_port
        r, pns, kns = measured(two[p], lambda: wrk(url, 32, 2, opts.seconds, script))
        n = max(1, r["requests"])
        r.update(cpu_us=(pns + kns) / 1e3 / n, proxy_us=pns / 1e3 / n)
        res[p]["ka32"] = r
        c1 = wrk(url, 1, 1, opts.seconds, script)
        c1["added_p50_us"] = (c1["p50_ms"] - d["p50_ms"]) * 1e3
        res[p]["c1"] = c1
    res["direct_p50_ms"] = d["p50_ms"]
    return res


def summarize(rounds):
    out = {}
    for p in PROXIES:
        out[p] = {
            "new_per_s": med([r[p]["new"]["per_s"] for r in rounds]),
            "new_cpu_us": med([r[p]["new"]["cpu_us"] for r in rounds]),
            "new_proxy_us": med([r[p]["new"]["proxy_us"] for r in rounds]),
            "res_per_s": med([r[p]["resumed"]["per_s"] for r in rounds]),
            "res_cpu_us": med([r[p]["resumed"]["cpu_us"] for r in rounds]),
            "res_share": med([r[p]["resumed"]["resumed"] / max(1, r[p]["resumed"]["conns"])
                              for r in rounds]),
            "ka_rps": med([r[p]["ka32"]["rps"] for r in rounds]),
            "ka_cpu_us": med([r[p]["ka32"]["cpu_us"] for r in rounds]),
            "ka_proxy_us": med([r[p]["ka32"]["proxy_us"] for r in rounds]),
            "c1_p50_us": med([r[p]["c1"]["p50_ms"] * 1e3 for r in rounds]),
            "added_p50_us": med([r[p]["c1"]["added_p50_us"] for r in rounds]),
            "errors": sum(r[p]["new"]["errors"] + r[p]["resumed"]["errors"] +
                          r[p]["ka32"]["errors"] + r[p]["c1"]["errors"] for r in rounds),
            "client_cpu_share": med([r[p]["new"]["cpu_s"] / max(1e-9, r[p]["new"]["seconds"])
                                     for r in rounds]),
        }
    return out


def report(s, rounds, opts):
    hp = s["haproxy"]
    lines = ["TLS termination, %d rounds of %d s each measure, medians; ratios against "
             "HAProxy's" % (opts.rounds, opts.seconds), ""]
    hdr = "%-11s %10s %8s %10s %8s %7s %10s %9s %8s %9s %6s" % (
        "proxy", "new/s", "us/conn", "resumed/s", "us/conn", "resumed", "ka32 req/s", "us/req",
        "c1 p50us", "added us", "errors")
    lines.append(hdr)
    for p in PROXIES:
        x = s[p]
        lines.append("%-11s %10.0f %8.1f %10.0f %8.1f %6.0f%% %10.0f %9.1f %8.0f %9.0f %6d" % (
            p, x["new_per_s"], x["new_cpu_us"], x["res_per_s"], x["res_cpu_us"],
            x["res_share"] * 100, x["ka_rps"], x["ka_cpu_us"], x["c1_p50_us"],
            x["added_p50_us"], x["errors"]))
    lines += ["", "us/conn, us/req: CPU of the proxy's tasks and the kernel threads per "
              "connection (one worker) or request (two workers); the proxy's own alone: " +
              ", ".join("%s %.1f / %.1f" % (p, s[p]["new_proxy_us"], s[p]["ka_proxy_us"])
                        for p in PROXIES),
              "the client (tlsload) used %.0f-%.0f%% of a CPU in the new-connection runs "
              "(near 100%%: it, not the proxy, set the pace)" % (
                  min(s[p]["client_cpu_share"] for p in PROXIES) * 100,
                  max(s[p]["client_cpu_share"] for p in PROXIES) * 100),
              "direct (the instances, plain, one connection): p50 %.0f us" %
              (med([r["direct_p50_ms"] for r in rounds]) * 1e3), ""]
    pg = s["prefixgate"]

    def target(name, ok, how, per=None):
        """per: (the round's figure against HAProxy's, whether it meets
        the target): the spread of the rounds beside the medians' ratio."""
        if per:
            vals = [per[0](r["prefixgate"], r["haproxy"]) for r in rounds]
            how += "; per round %.2f-%.2fx, %d of %d met" % (
                min(vals), max(vals), sum(1 for v in vals if per[1](v)), len(vals))
        lines.append("%-52s %s  (%s)" % (name, "PASS" if ok else "MISS", how))

    r_new = pg["new_per_s"] / hp["new_per_s"]
    r_new_cpu = hp["new_cpu_us"] / pg["new_cpu_us"]
    r_res = pg["res_per_s"] / hp["res_per_s"]
    r_res_cpu = hp["res_cpu_us"] / pg["res_cpu_us"]
    lines.append("Targets (issue 32):")
    at_least = (lambda v: v >= 1.0)
    at_most = (lambda v: v <= 1.0)
    target("new connections/s, full, one worker >= HAProxy's", r_new >= 1.0,
           "%.2fx its connections/s" % r_new,
           (lambda a, b: a["new"]["per_s"] / b["new"]["per_s"], at_least))
    target("  the same per CPU-second of the proxy", r_new_cpu >= 1.0,
           "%.2fx its connections per CPU-second" % r_new_cpu,
           (lambda a, b: b["new"]["cpu_us"] / a["new"]["cpu_us"], at_least))
    target("new connections/s, resumed, one worker >= HAProxy's", r_res >= 1.0,
           "%.2fx its connections/s" % r_res,
           (lambda a, b: a["resumed"]["per_s"] / b["resumed"]["per_s"], at_least))
    target("  the same per CPU-second of the proxy", r_res_cpu >= 1.0,
           "%.2fx its connections per CPU-second" % r_res_cpu,
           (lambda a, b: b["resumed"]["cpu_us"] / a["resumed"]["cpu_us"], at_least))
    r_ka = pg["ka_rps"] / hp["ka_rps"]
    target("keep-alive requests/s, 32 connections >= 1.1x HAProxy's", r_ka >= 1.1,
           "%.2fx" % r_ka, (lambda a, b: a["ka32"]["rps"] / b["ka32"]["rps"],
                            lambda v: v >= 1.1))
    target("added p50, one connection <= HAProxy's",
           pg["added_p50_us"] <= hp["added_p50_us"],
           "%.0f us against %.0f us" % (pg["added_p50_us"], hp["added_p50_us"]),
           (lambda a, b: a["c1"]["added_p50_us"] / b["c1"]["added_p50_us"], at_most))
    target("CPU per request <= HAProxy's",
           pg["ka_cpu_us"] <= hp["ka_cpu_us"],
           "%.1f us against %.1f us: %.2fx" % (pg["ka_cpu_us"], hp["ka_cpu_us"],
                                              pg["ka_cpu_us"] / hp["ka_cpu_us"]),
           (lambda a, b: a["ka32"]["cpu_us"] / b["ka32"]["cpu_us"], at_most))
    lines.append("(connections/s: the client shares the 2 CPUs with the proxy and can set "
                 "the pace; connections per CPU-second of the proxy is the figure it cannot "
                 "cap)")
    return lines


def testssl(port, ca):
    """testssl.sh against port: its output (protocols, cipher categories,
    forward secrecy, server defaults, vulnerabilities), or why not."""
    exe = shutil.which("testssl") or shutil.which("testssl.sh")
    if not exe:
        return ["testssl.sh: not installed (Debian: testssl.sh); not run"]
    r = subprocess.run([exe, "--quiet", "--color", "0", "--warnings", "off", "--ip", "one",
                        "--add-ca", ca, "-p", "-s", "-f", "-S", "-U", "127.0.0.1:%d" % port],
                       capture_output=True, text=True, timeout=1800)
    out = [l.rstrip() for l in r.stdout.splitlines()
           if l.strip() and "No engine or GOST" not in l]
    return ["testssl.sh against prefixgate's TLS listener (%s --add-ca TEST-CA -p -s -f -S -U; "
            "the certificate is a test CA's, made for this run):" % os.path.basename(exe)] + out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="build/bench")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--no-testssl", action="store_true")
    ap.add_argument("--report-from", metavar="JSON",
                    help="measure nothing: print the report of a run's tls.json again")
    opts = ap.parse_args()
    if opts.report_from:
        with open(opts.report_from) as f:
            rounds = json.load(f)["rounds"]
        opts.rounds = len(rounds)
        for line in report(summarize(rounds), rounds, opts):
            print(line)
        return 0
    for tool in ("haproxy", "nginx", "wrk"):
        if not shutil.which(tool):
            print("tls: %s not installed (make bench installs it)" % tool)
            return 1
    logdir = os.path.join(opts.out, "tls")
    os.makedirs(logdir, exist_ok=True)
    # a CA and a certificate of this run's (not one a previous run left)
    shutil.rmtree(os.path.join(logdir, "pki"), ignore_errors=True)
    pki = tlsutil.server_pki(os.path.abspath(os.path.join(logdir, "pki")))
    inst = fleet.Instances(opts.build, 2, logdir, INSTANT)
    script = wrk_script(logdir)
    one = start_proxies(opts.build, inst.addrs(), logdir, pki, 1)
    two = start_proxies(opts.build, inst.addrs(), logdir, pki, 2)
    rounds = []
    try:
        for rnd in range(opts.rounds):
            print("round %d of %d ..." % (rnd + 1, opts.rounds))
            sys.stdout.flush()
            rounds.append(one_round(opts, rnd, one, two, script,
                                    "http://%s/v1/chat/completions" % inst.addrs()[0]))
        s = summarize(rounds)
        with open(os.path.join(opts.out, "tls.json"), "w") as f:
            json.dump({"rounds": rounds, "summary": s}, f, indent=1)
        for line in report(s, rounds, opts):
            print(line)
        if not opts.no_testssl:
            print("")
            for line in testssl(two["prefixgate"].tls_port, pki.ca):
                print(line)
    finally:
        for d in (one, two):
            for p in d.values():
                p.stop()
        inst.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
