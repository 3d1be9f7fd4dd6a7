#!/usr/bin/env python3
"""Model pools end to end: mockllm instances (each answers with its --id in
X-Backend-Id) behind one prefixgate with --pool flags, real traffic on
loopback.

- two pools serving different models: each model's requests reach only its
  own pool's members;
- an unknown model gets OpenAI's 404 model_not_found JSON error, a missing
  model a 400, unless the default pool is the catch-all;
- GET /v1/models on the proxy port lists every pool's models;
- each pool has its own RoutingConfig: PUT /routing?pool=NAME changes that
  pool alone, GET /pools and /metrics show it;
- POST /backends with a pool, a path pool for a non-OpenAI API;
- a gateway without --pool is one default pool, unchanged (/v1/models goes
  to the backends, no pool labels in the metrics);
- bpf mode: the pools are in the pinned maps (bpftool, prefixgatectl pools).

usage: test_pools.py --build DIR [--tools DIR] --mode shm|bpf [-k SUBSTRING]
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Fleet, metric_family, run_suite, shm_only, wait_until  # noqa: E402

TESTS = []
GW = ["--health-check-path", "none", "--metrics-scrape-interval", "0"]
MOCK = {i: ["--time-scale", "100"] for i in range(5)}


def test(fn):
    TESTS.append(fn)
    return fn


def pools_fleet(opts, extra=(), backends=()):
    """b0, b1 serve model alpha (pool a); b2, b3 model beta (pool b); b4 is
    spare. backends: names given as plain --backend (the default pool)."""
    f = Fleet(opts, n=5, mock_args=MOCK, start_gateway=False)
    try:
        f.start_gateway(GW + [
            "--pool", "a:model=alpha,alpha-2",
            "--pool", "a:backend=%s,%s" % (f.addr("b0"), f.addr("b1")),
            "--pool", "b:model=beta",
            "--pool", "b:backend=%s,%s" % (f.addr("b2"), f.addr("b3")),
        ] + list(extra), backends=list(backends))
    except Exception:
        f.stop_quietly()
        raise
    return f


def chat(model, text):
    body = {"messages": [{"role": "user", "content": text}], "max_tokens": 2}
    if model is not None:
        body["model"] = model
    return json.dumps(body)


def who(f, model, text, path="/v1/chat/completions"):
    st, h, data = f.post(path, chat(model, text))
    assert st == 200, "%s: %s %s" % (model, st, data[:300])
    return h["x-backend-id"]


@test
@shm_only
def two_pools_route_to_own_members(opts):
    f = pools_fleet(opts)
    try:
        seen = {"alpha": set(), "alpha-2": set(), "beta": set()}
        for i in range(40):
            for m in seen:
                seen[m].add(who(f, m, "question number %d about %s" % (i, m)))
        assert seen["alpha"] | seen["alpha-2"] <= {"b0", "b1"}, seen
        assert seen["beta"] <= {"b2", "b3"}, seen
        # prefix-aware spreads distinct prompts over both members of each pool
        assert seen["alpha"] == {"b0", "b1"} and seen["beta"] == {"b2", "b3"}, seen
        # the same prompt sticks to one member of its pool
        assert len({who(f, "beta", "the same prompt") for _ in range(8)}) == 1
        # the dry run agrees with real traffic and names the pool
        r = f.dry_run(chat("beta", "the same prompt"), path="/v1/chat/completions")
        assert r["pool"] == "b" and f.name_of(r["backend"]) == who(f, "beta", "the same prompt")
        b = f.backends()
        assert {b[f.addr(n)]["pool"] for n in ("b0", "b1")} == {"a"}, b
        assert {b[f.addr(n)]["pool"] for n in ("b2", "b3")} == {"b"}, b
        assert f.idle()
    finally:
        f.stop()


@test
@shm_only
def unknown_model_is_404_json(opts):
    f = pools_fleet(opts)
    try:
        st, h, data = f.post("/v1/chat/completions", chat("gamma", "hello"))
        assert st == 404, (st, data)
        assert h["content-type"] == "application/json"
        e = json.loads(data)["error"]
        assert e["code"] == "model_not_found" and e["type"] == "invalid_request_error", e
        assert "gamma" in e["message"], e
        # a name with JSON escapes is unescaped before the lookup (and in the message)
        st, _, data = f.post("/v1/chat/completions", '{"model":"g\\"x\\u00e9","messages":[]}')
        assert st == 404 and json.loads(data)["error"]["message"] == \
            "The model `g\"x\u00e9` does not exist", data
        st, h, data = f.post("/v1/chat/completions", '{"model":"\\u0062eta","messages":'
                             '[{"role":"user","content":"hi"}]}')
        assert st == 200 and h["x-backend-id"] in ("b2", "b3"), (st, data)
        st, _, data = f.post("/v1/chat/completions", chat(None, "hello"))
        assert st == 400 and json.loads(data)["error"]["param"] == "model", (st, data)
        # no pool serves other paths either (no catch-all)
        st, _, data = f.request("GET", "/health")
        assert st == 404 and json.loads(data)["error"]["code"] == "not_found", (st, data)
    finally:
        f.stop()


@test
@shm_only
def v1_models_lists_the_pools(opts):
    f = pools_fleet(opts)
    try:
        st, h, data = f.request("GET", "/v1/models")
        assert st == 200 and h["content-type"] == "application/json", (st, h)
        r = json.loads(data)
        assert r["object"] == "list"
        got = {(m["id"], m["pool"]) for m in r["data"]}
        assert got == {("alpha", "a"), ("alpha-2", "a"), ("beta", "b")}, got
        assert all(m["object"] == "model" for m in r["data"])
    finally:
        f.stop()


@test
@shm_only
def per_pool_routing_config(opts):
    f = pools_fleet(opts, extra=["--pool", "a:prefix-length=2048"])
    try:
        st, r = f.admin("GET", "/routing?pool=a")
        assert st == 200 and r["PrefixAwareRoutingConfig"]["PrefixLength"] == 2048, r
        st, r = f.admin("GET", "/routing?pool=b")
        assert r["PrefixAwareRoutingConfig"]["PrefixLength"] == 4096, r
        st, r = f.admin("PUT", "/routing?pool=b", {"RoutingStrategy": "RANDOM"})
        assert st == 200 and r["RoutingStrategy"] == "RANDOM", (st, r)
        assert f.admin("GET", "/routing?pool=b")[1]["RoutingStrategy"] == "RANDOM"
        assert f.admin("GET", "/routing?pool=a")[1]["RoutingStrategy"] == "PREFIX_AWARE"
        assert f.admin("GET", "/routing")[1]["RoutingStrategy"] == "PREFIX_AWARE"
        assert f.admin("GET", "/routing?pool=nope")[0] == 404
        for i in range(20):
            who(f, "beta", "random %d" % i)
            who(f, "alpha", "affinity %d" % i)
        b = f.backends()
        for n in ("b2", "b3"):
            d = b[f.addr(n)]["requests_by_decision"]
            assert d["affinity"] == 0 and d["random"] > 0, (n, d)
        for n in ("b0", "b1"):
            d = b[f.addr(n)]["requests_by_decision"]
            assert d["random"] == 0, (n, d)
        pools = {p["name"]: p for p in f.admin("GET", "/pools")[1]}
        assert pools["b"]["routing"]["RoutingStrategy"] == "RANDOM", pools
        assert pools["a"]["models"] == ["alpha", "alpha-2"] and pools["a"]["backends"] == 2
        assert pools["default"]["catch_all"] is False
        m = f.metrics()
        assert 'prefixgate_pool_routing_strategy{pool="b",strategy="RANDOM"} 1' in m
        assert 'prefixgate_pool_prefix_length{pool="a"} 2048' in m
        assert 'pool="b",decision="random"}' in m
        assert "routing config of pool b (PUT /routing)" in f.log()
    finally:
        f.stop()


@test
@shm_only
def admin_adds_to_a_pool(opts):
    f = pools_fleet(opts)
    try:
        st, r = f.admin("POST", "/backends", {"address": f.addr("b4"), "pool": "b"})
        assert st == 201 and r["pool"] == "b", (st, r)
        pools = {p["name"]: p for p in f.admin("GET", "/pools")[1]}
        assert pools["b"]["members"] == [f.addr(n) for n in ("b2", "b3", "b4")] and \
            pools["b"]["backends"] == 3, pools["b"]
        st, r = f.admin("POST", "/backends", {"address": f.addr("b4"), "pool": "a"})
        assert st == 409 and "pool b" in r["error"], (st, r)
        assert f.admin("POST", "/backends", {"address": "127.0.0.1:1", "pool": "x"})[0] == 400
        seen = {who(f, "beta", "spread %d" % i) for i in range(60)}
        assert "b4" in seen and seen <= {"b2", "b3", "b4"}, seen
        assert {who(f, "alpha", "spread %d" % i) for i in range(30)} <= {"b0", "b1"}
        assert [b["address"] for b in f.admin("GET", "/backends?pool=a")[1]] == \
            [f.addr("b0"), f.addr("b1")]
        st, _ = f.admin("DELETE", "/backends/" + f.addr("b4"))
        assert st == 202
        assert f.idle()
        assert {who(f, "beta", "spread %d" % i) for i in range(30)} <= {"b2", "b3"}
        # no pool, and the default pool takes no requests here: refused,
        # rather than a member that would get no traffic
        assert wait_until(lambda: f.addr("b4") not in f.backends(), 5)
        st, r = f.admin("POST", "/backends", {"address": f.addr("b4")})
        assert st == 400 and "the default pool takes no requests" in r["error"] and \
            "name one of a, b" in r["error"], (st, r)
        assert f.addr("b4") not in f.backends()
        # prefixgatectl backends add --pool
        ctl = [os.path.join(opts.tools, "prefixgatectl"), "--admin",
               "127.0.0.1:%d" % f.admin_port, "backends", "add", f.addr("b4")]
        r = subprocess.run(ctl, capture_output=True, text=True, timeout=20)
        assert r.returncode == 1 and "HTTP 400" in r.stderr and "name one of a, b" in \
            r.stderr, (r.returncode, r.stderr)
        r = subprocess.run(ctl + ["--pool", "b"], capture_output=True, text=True, timeout=20)
        assert r.returncode == 0 and "to pool b" in r.stdout, (r.returncode, r.stderr)
        assert f.backends()[f.addr("b4")]["pool"] == "b"
    finally:
        f.stop()


@test
@shm_only
def default_pool_catches_the_rest(opts):
    # b4 given as a plain --backend: the default pool, which then takes
    # every model no pool serves; /invocations goes to its path pool.
    f = pools_fleet(opts, backends=["b4"], extra=["--pool", "sm:path=/invocations",
                                                  "--pool", "sm:backend=%s" % "127.0.0.1:1"])
    try:
        assert who(f, "gamma", "hello") == "b4"
        assert who(f, None, "no model at all") == "b4"
        assert who(f, "alpha", "hello") in ("b0", "b1")
        st, _, _ = f.request("GET", "/health")  # reaches b4 (mockllm answers)
        assert st == 200
        # the path pool's only member refuses connections: 502, never b4
        st, _, data = f.post("/invocations", "raw bytes")
        assert st == 502, (st, data)
        st, r = f.admin("POST", "/backends", {"address": f.addr("b3"), "pool": "sm"})
        assert st == 409  # b3 is pool b's
        pools = {p["name"]: p for p in f.admin("GET", "/pools")[1]}
        assert pools["default"]["catch_all"] is True and pools["sm"]["paths"] == ["/invocations"]
        # the start-up lines count in words that agree with their numbers
        assert wait_until(lambda: "listening on" in f.log(), 5), f.log()
        assert re.search(r"pool sm: 0 models, 1 path, prefix_aware PrefixLength 4096 "
                         r"ConcurrencyThreshold \d+, 1 backend$", f.log(), re.M), f.log()
        assert not re.search(r"\b1 (backends|workers|models|paths|pools)\b", f.log()), f.log()
    finally:
        f.stop()


@test
@shm_only
def backends_file_names_pools(opts):
    f = Fleet(opts, n=4, mock_args=MOCK, start_gateway=False)
    path = os.path.join(f.tmp, "backends-pools")
    try:
        with open(path, "w") as fh:
            fh.write("%s pool=a\n%s pool=a\n%s pool=b  # beta\n" % (
                f.addr("b0"), f.addr("b1"), f.addr("b2")))
        f.start_gateway(GW + ["--pool", "a:model=alpha", "--pool", "b:model=beta",
                              "--backends-file", path], backends=[])
        assert {who(f, "beta", "q %d" % i) for i in range(20)} == {"b2"}
        assert {who(f, "alpha", "q %d" % i) for i in range(20)} <= {"b0", "b1"}
        # every line names a pool: nothing catches unknown models
        assert f.post("/v1/chat/completions", chat("gamma", "x"))[0] == 404
        # move b1 to pool b, add b3 to it: re-read on change (inotify)
        with open(path + ".new", "w") as fh:
            fh.write("%s pool=a\n%s pool=b\n%s pool=b\n%s pool=b\n" % (
                f.addr("b0"), f.addr("b1"), f.addr("b2"), f.addr("b3")))
        os.rename(path + ".new", path)
        assert wait_until(lambda: {p["name"]: p["backends"] for p in
                                   f.admin("GET", "/pools")[1]} == {"default": 0, "a": 1,
                                                                     "b": 3}, 10)
        assert {who(f, "alpha", "q %d" % i) for i in range(20)} == {"b0"}
        assert {who(f, "beta", "q %d" % i) for i in range(40)} == {"b1", "b2", "b3"}
        # a file the gateway cannot use is refused, naming FILE:LINE, and
        # nothing changes: a pool it does not have; words after the pool; a
        # line for the default pool, which takes no requests here
        for text, want in (
                ("%s pool=a\n%s pool=zz\n", "%s:2: pool=zz: no such pool (the pools: "
                                             "default, a, b)" % path),
                ("%s pool=a\n%s pool=b junk\n", '%s:2: unexpected "junk" after the '
                                                 'address' % path),
                ("%s pool=a\n%s\n", "%s:2: %s: the default pool takes no requests" % (
                    path, f.addr("b1")))):
            with open(path + ".new", "w") as fh:
                fh.write(text % (f.addr("b0"), f.addr("b1")))
            os.rename(path + ".new", path)
            assert wait_until(lambda: want in f.log(), 10), (want, f.log()[-1500:])
            assert {who(f, "beta", "q %d" % i) for i in range(40)} == {"b1", "b2", "b3"}
    finally:
        f.stop()


@test
@shm_only
def backends_file_errors_at_start(opts):
    """At start-up the same errors exit 2, naming the file and line."""
    f = Fleet(opts, n=1, mock_args=MOCK, start_gateway=False)
    path = os.path.join(f.tmp, "backends-bad")
    gw = [os.path.join(opts.build, "prefixgate"), "--no-bpf", "--pool", "a:model=alpha",
          "--backends-file", path]
    try:
        for text, want in (("%s pool=a junk\n", 'line 1: unexpected "junk" after the address'),
                           ("\n%s pool=qwen\n", "line 2: pool=qwen: no such pool (the pools: "
                                                "default, a)")):
            with open(path, "w") as fh:
                fh.write(text % f.addr("b0"))
            r = subprocess.run(gw, capture_output=True, timeout=10)
            err = r.stderr.decode()
            assert r.returncode == 2 and "--backends-file %s: %s" % (path, want) in err, err
    finally:
        f.stop()


@test
@shm_only
def pool_without_members_is_told(opts):
    """A pool requests reach but no member serves: /health says degraded,
    naming it; prefixgatectl route names the pool and why no backend."""
    f = pools_fleet(opts, extra=["--pool", "c:model=gamma"])
    ctl = [os.path.join(opts.tools, "prefixgatectl"), "--admin", "127.0.0.1:%d" % f.admin_port,
           "route", "--path", "/v1/chat/completions", "-"]
    try:
        assert f.post("/v1/chat/completions", chat("gamma", "x"))[0] == 502
        st, h = f.admin("GET", "/health")
        assert st == 200 and h["status"] == "degraded" and h["degraded_pools"] == [
            {"pool": "c", "backends": 0, "healthy": 0}], (st, h)
        r = subprocess.run(ctl, input=chat("gamma", "hello"), capture_output=True, text=True,
                           timeout=20)
        assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
        assert "pool         c\n" in r.stdout and "ring is not used" not in r.stdout, r.stdout
        assert "no usable backend in pool c (no member)" in r.stdout + r.stderr, r
        r = subprocess.run(ctl, input=chat("beta", "hello"), capture_output=True, text=True,
                           timeout=20)
        assert r.returncode == 0 and "pool         b\n" in r.stdout and "(ring order)" in \
            r.stdout, (r.returncode, r.stdout, r.stderr)
        st, _ = f.admin("PUT", "/routing?pool=b", {"RoutingStrategy": "RANDOM"})
        r = subprocess.run(ctl, input=chat("beta", "hello"), capture_output=True, text=True,
                           timeout=20)
        assert r.returncode == 0 and "(random does not use the ring)" in r.stdout, r.stdout
    finally:
        f.stop()


def digests(f):
    """{pool or None: digest} of prefixgate_ring_digest_info."""
    out = {}
    for k in metric_family(f.metrics(), "prefixgate_ring_digest_info"):
        m = re.match(r'prefixgate_ring_digest_info\{(?:pool="([^"]*)",)?digest="([0-9a-f]{16})"\}', k)
        assert m, k
        out[m.group(1)] = m.group(2)
    return out


@test
@shm_only
def ring_digests_match_the_log(opts):
    """With pools, every digest prefixgate_ring_digest_info shows is in the
    log: each pool's (labelled pool) and the folded one, after a change too."""
    f = pools_fleet(opts)
    try:
        for step in range(2):
            d = digests(f)
            assert set(d) == {None, "default", "a", "b"}, d
            log = f.log()
            for pool in ("a", "b"):
                assert re.search(r"pool %s ring generation \d+: .*digest %s" % (pool, d[pool]),
                                 log), (pool, d[pool], log[-2000:])
            assert "ring digest %s (the 3 pools' digests folded" % d[None] in log, \
                (d[None], log[-2000:])
            if not step:
                st, _ = f.admin("POST", "/backends", {"address": f.addr("b4"), "pool": "b"})
                assert st == 201
                assert wait_until(lambda: digests(f)["b"] != d["b"], 5)
    finally:
        f.stop()


@test
@shm_only
def no_pools_is_unchanged(opts):
    f = Fleet(opts, n=2, mock_args=MOCK, gw_args=GW)
    try:
        st, h, data = f.request("GET", "/v1/models")  # the backend's answer, not ours
        assert st == 200 and "x-backend-id" in h, (st, h)
        assert who(f, "anything", "hello") in ("b0", "b1")
        assert who(f, None, "hello") in ("b0", "b1")
        pools = f.admin("GET", "/pools")[1]
        assert len(pools) == 1 and pools[0]["name"] == "default" and pools[0]["catch_all"]
        assert all(b["pool"] == "default" for b in f.backends().values())
        m = f.metrics()
        assert "pool=" not in m and "prefixgate_pool_" not in m
        assert "pool " not in f.log()
        assert f.admin("PUT", "/routing", {"RoutingStrategy": "RANDOM"})[0] == 200
        assert f.admin("GET", "/routing")[1]["RoutingStrategy"] == "RANDOM"
    finally:
        f.stop()


@test
def bpf_maps_show_pools(opts):
    if opts.mode != "bpf":
        return "SKIP the pinned maps exist in bpf mode only"
    f = pools_fleet(opts)
    try:
        out = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", f.pin + "/pg_pools"],
                             capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        dump = out.stdout
        assert '"a"' in dump or "alpha" in dump, dump[:500]
        out = subprocess.run(["bpftool", "-j", "map", "show", "pinned", f.pin + "/pg_state"],
                             capture_output=True, text=True, timeout=20)
        assert json.loads(out.stdout)["max_entries"] == 3, out.stdout
        out = subprocess.run(["bpftool", "-j", "map", "show", "pinned", f.pin + "/pg_rings"],
                             capture_output=True, text=True, timeout=20)
        assert json.loads(out.stdout)["max_entries"] == 6, out.stdout
        ctl = os.path.join(opts.tools, "prefixgatectl")
        out = subprocess.run([ctl, "--pin-path", f.pin, "--json", "pools"],
                             capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        pools = {p["name"]: p for p in json.loads(out.stdout)}
        assert pools["a"]["models"] == ["alpha", "alpha-2"] and pools["a"]["backends"] == 2, \
            pools
        assert pools["b"]["backends"] == 2 and not pools["default"]["catch_all"], pools
        # the same document from the admin API
        api = subprocess.run([ctl, "--pin-path", f.pin, "--admin", "127.0.0.1:%d" % f.admin_port,
                              "--source", "api", "--json", "pools"], capture_output=True,
                             text=True, timeout=20)
        assert api.returncode == 0 and json.loads(api.stdout) == json.loads(out.stdout), \
            (api.stdout, out.stdout)
        out = subprocess.run([ctl, "--pin-path", f.pin, "status"], capture_output=True,
                             text=True, timeout=20)
        assert out.returncode == 0, out.stderr
    finally:
        f.stop()


if __name__ == "__main__":
    sys.exit(run_suite(TESTS))
