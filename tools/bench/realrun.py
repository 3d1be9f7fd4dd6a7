"""Sending a real-engine workload (realwl.py) and summing it up: what the
tests, the bench part "real" and the demo share.

drive() sends the requests in order from `concurrency` client threads, a
request of a conversation only after its previous turn was answered
(ordered=True); each is timed from its send to its first token (the first
streamed event with a choice) and to its end, and keeps the engine's own
account: prompt, cached and completion tokens (usage), which engine served
it (X-Backend-Id). Every wait is bounded by the client's timeout."""
import http.client
import json
import threading
import time


def send(port, body, path="/v1/chat/completions", timeout=120.0):
    """One request: {status, ttft_ms, e2e_ms, prompt, cached, completion,
    backend, text, error, timings (llamaserve's, as llama.cpp's server
    gives them)}."""
    rec = {"status": None, "ttft_ms": None, "e2e_ms": None, "prompt": None, "cached": None,
           "completion": None, "backend": None, "text": "", "error": None, "timings": None}
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        rec["status"], rec["backend"] = r.status, r.getheader("X-Backend-Id")
        usage, parts = None, []
        if r.status == 200 and (r.getheader("Content-Type") or "").startswith(
                "text/event-stream"):
            while True:
                line = r.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                ev = json.loads(line[6:])
                if "error" in ev:
                    rec["error"] = ev["error"].get("message")
                for c in ev.get("choices") or []:
                    if rec["ttft_ms"] is None:
                        rec["ttft_ms"] = (time.monotonic() - t0) * 1000
                    parts.append(c.get("text") or (c.get("delta") or {}).get("content") or "")
                usage = ev.get("usage") or usage
                rec["timings"] = ev.get("timings") or rec["timings"]
        else:
            data = r.read()
            rec["ttft_ms"] = (time.monotonic() - t0) * 1000
            ans = json.loads(data) if data else {}
            if r.status != 200:
                rec["error"] = (ans.get("error") or {}).get("message") or data[:200].decode(
                    errors="replace")
            for c in ans.get("choices") or []:
                parts.append(c.get("text") or (c.get("message") or {}).get("content") or "")
            usage = ans.get("usage")
            rec["timings"] = ans.get("timings")
        rec["e2e_ms"] = (time.monotonic() - t0) * 1000
        rec["text"] = "".join(parts)
        if usage:
            rec["prompt"] = usage.get("prompt_tokens")
            rec["completion"] = usage.get("completion_tokens")
            rec["cached"] = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    except (OSError, ValueError, http.client.HTTPException) as e:
        rec["error"] = repr(e)
    finally:
        conn.close()
    return rec


def drive(port, reqs, concurrency=2, ordered=True, path="/v1/chat/completions", timeout=120.0):
    """Send reqs (realwl.py's) to 127.0.0.1:port; one record (send()'s,
    plus group and turn) per request, in their order."""
    out = [None] * len(reqs)
    done = [threading.Event() for _ in reqs]
    prev, last = {}, {}
    for i, q in enumerate(reqs):
        if ordered and q["group"] in last:
            prev[i] = last[q["group"]]
        last[q["group"]] = i
    nxt = [0]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(reqs):
                return
            if i in prev:
                done[prev[i]].wait(timeout)
            rec = send(port, reqs[i]["body"], path, timeout)
            rec.update(group=reqs[i]["group"], turn=reqs[i]["turn"])
            out[i] = rec
            done[i].set()

    ts = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout * (len(reqs) + 1))
    return [r or {"error": "not sent", "status": None} for r in out]


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(recs, backends=()):
    """TTFT p50/p90 (ms), the engines' cached-token share, each engine's
    share of requests (backends: every engine's id, so that one given
    nothing shows 0), failures."""
    ok = [r for r in recs if r.get("status") == 200 and not r.get("error")]
    ttft = [r["ttft_ms"] for r in ok]
    prompt = sum(r["prompt"] or 0 for r in ok)
    cached = sum(r["cached"] or 0 for r in ok)
    per = {b: 0 for b in backends}
    for r in ok:
        per[r["backend"]] = per.get(r["backend"], 0) + 1
    n = float(len(ok)) or 1.0
    shares = {b: 100.0 * c / n for b, c in per.items()}
    return {"requests": len(recs), "ok": len(ok), "errors": len(recs) - len(ok),
            "ttft_p50": pct(ttft, 50), "ttft_p90": pct(ttft, 90),
            "prompt_tokens": prompt, "cached_tokens": cached,
            "cached_share": cached / prompt if prompt else 0.0, "shares": shares,
            "share_min": min(shares.values()) if shares else 0.0,
            "share_max": max(shares.values()) if shares else 0.0}
