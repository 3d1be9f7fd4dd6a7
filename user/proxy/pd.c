// SPDX-License-Identifier: MIT
/* Prefill/decode disaggregation in a worker (pd.h). */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include "lib/forward.h"
#include "lib/json.h"
#include "lib/pd.h"
#include "proxy/body.h"
#include "proxy/frame.h"
#include "proxy/pd.h"
#include "proxy/worker_state.h"
#include "state/pools.h"
#include "sys/log.h"
#include "proxy/sock.h"

#define STAT(w, f) __atomic_fetch_add(&(w)->stats->f, 1, __ATOMIC_RELAXED)

bool pg_pd_pool(const struct pg_gateway *gw, unsigned pool)
{
	const struct pg_pool_table *t = pg_pools_table(gw);

	return t && pool < t->n && t->pool[pool].pd && t->pool[pool].decode;
}

static const struct pg_pool_cfg *pool_cfg(const struct pg_gateway *gw, unsigned pool)
{
	return &pg_pools_table(gw)->pool[pool];
}

struct pg_pd_x *pg_pd_new(const struct pg_gateway *gw, unsigned pool)
{
	struct pg_pd_x *pd = calloc(1, sizeof(*pd));

	if (!pd)
		abort();
	pd->proto = pool_cfg(gw, pool)->pd;
	return pd;
}

static char *memdup(const char *p, size_t n)
{
	char *q = malloc(n ? n : 1);

	if (!q)
		abort(); /* out of memory: as pg_bytes_append */
	return memcpy(q, p, n);
}

/* --- the decode leg: the exchange's own attempt ---------------------------------- */

/* What the decode leg sends: the request's head with body's length, then
 * body (owned: taken, else copied), in place of what x held. */
static void decode_request(struct pg_worker *w, struct pg_exchange *x, const char *body, size_t len,
                           char *owned)
{
	struct pg_pd_x *pd = x->pd;

	x->fwd_len = 0;
	pg_fwd_with_length(pd->head, pd->head_len, len, &x->fwd, &x->fwd_len, &x->fwd_cap);
	x->fwd_head = x->fwd_len;
	x->fwd_close = false;
	pg_hold_give(w, &x->hold);
	x->held = owned ? owned : memdup(body, len);
	x->hold = (struct pg_hold){.buf = x->held, .cap = len ? len : 1};
	x->held_len = len;
	x->body = (struct pg_frame){.kind = PG_FRAME_LENGTH};
}

static void decode_go(struct pg_worker *w, struct pg_client *c, const char *body, size_t len)
{
	decode_request(w, &c->x, body, len, NULL);
	pg_attempt(w, c, c->x.choice.backend, c->x.choice.decision, false);
}

/* The same with body of the decode leg's own (b's, taken: b is emptied). */
static void decode_go_buf(struct pg_worker *w, struct pg_client *c, struct pg_buf *b)
{
	decode_request(w, &c->x, b->p, b->len, b->p);
	*b = (struct pg_buf){0};
	pg_attempt(w, c, c->x.choice.backend, c->x.choice.decision, false);
}

/* --- the prefill leg -------------------------------------------------------------- */

/* Its slot and place in the prefill instance's queue, given back. */
static void leg_release(struct pg_worker *w, struct pg_pd_x *pd)
{
	pg_slot_give(w, pd->prefill, &pd->load, &pd->counted);
}

/* Its connection: back to the pool when its answer ended (ended) and the
 * rules of any backend connection allow it (boundary.h: its request
 * was sent whole, before the answer; the answer allowed keep-alive and
 * ended at its framing, nothing after it), else closed. */
static void leg_close(struct pg_worker *w, struct pg_pd_x *pd, bool ended)
{
	struct pg_upstream *u = pd->u;

	if (!u)
		return;
	pd->u = NULL;
	u->leg = false;
	if (ended && pg_pool_reusable(w, u, true, false)) {
		u->c = NULL;
		pg_pool_put(w, u);
	} else {
		pg_upstream_close(w, u);
	}
}

/* The prefill request for id: the request's head, then body, b's (taken
 * when it starts: b is emptied; not copied, but queued after the head). */
static bool leg_start(struct pg_worker *w, struct pg_client *c, uint16_t id, struct pg_buf *b)
{
	struct pg_exchange *x = &c->x;
	struct pg_pd_x *pd = x->pd;
	struct pg_upstream *u = pd->fresh ? NULL : pg_pool_get(w, id);
	char *req = NULL;
	size_t rlen = 0, rcap = 0;

	if (!u && !(u = pg_upstream_new(w, id, PG_DP_COPY, c)))
		return false;
	pd->prefill = id;
	pd->u = u;
	u->leg = true;
	u->c = c;
	u->state = PG_U_HEAD;
	u->hlen = 0;
	u->early = false;
	pg_buf_reset(&pd->ans);
	pd->ans_head = 0;
	pd->status = 0;
	pd->answered = false;
	pd->sent_ms = w->now_ms;
	pg_slot_take(w, id, pd->pchoice.decision, pg_work_on(&x->key, &pd->pchoice, id), &pd->load,
	             &pd->counted);
	pg_fwd_with_length(pd->head, pd->head_len, b->len, &req, &rlen, &rcap);
	pg_sock_queue(w, &u->s, req, rlen, -1, true);
	pg_sock_queue(w, &u->s, b->p, b->len, -1, true);
	*b = (struct pg_buf){0};
	pg_sock_recv(w, &u->s);
	return true;
}

/* The prefill instance's IP address, as SGLang's bootstrap_host. */
static void bootstrap_host(const struct pg_backend *b, char *out, size_t cap)
{
	inet_ntop(b->family, b->addr, out, (socklen_t)cap);
}

/* Its bootstrap port: the one prefill=ADDR@PORT gave it, else the pool's. */
static uint16_t bootstrap_port(const struct pg_gateway *gw, unsigned pool, uint16_t id)
{
	const struct pg_pool_cfg *pc = pool_cfg(gw, pool);
	char name[PG_ADDR_STRLEN];

	pg_backend_name(&gw->maps.backends[id], name, sizeof(name));
	for (size_t i = 0; i < pc->nbootstraps; i++)
		if (!strcmp(pc->bootstraps[i].addr, name))
			return pc->bootstraps[i].port;
	return pc->bootstrap_port;
}

/* --- sending --------------------------------------------------------------------- */

static void prefill_failed(struct pg_worker *w, struct pg_client *c, const char *why);

/* The body's parse, once for the request (a retry's fresh prefill and the
 * decode leg's body reuse it): whether it is JSON. */
static bool request_parse(struct pg_pd_x *pd)
{
	if (!pd->parsed)
		pd->parsed = pg_json_parse(&pd->req, pd->body, pd->body_len) ? -1 : 1;
	return pd->parsed > 0;
}

void pg_pd_send(struct pg_worker *w, struct pg_client *c)
{
	struct pg_exchange *x = &c->x;
	struct pg_pd_x *pd = x->pd;
	const unsigned pool = x->pool > 0 ? (unsigned)x->pool : 0;
	struct pg_buf b = {0};
	char host[INET6_ADDRSTRLEN];
	uint16_t p = pd->pchoice.backend;
	int rc = -1;

	c->state = PG_C_WAIT;
	if (pd->route == PG_PDR_ALONE) {
		STAT(w, pd_alone);
		decode_go(w, c, pd->body, pd->body_len);
		return;
	}
	/* (room for the edits at once: no copy as the body grows) */
	if (request_parse(pd) && pg_buf_reserve(&b, pd->body_len + 1024)) {
		if (pd->proto == PG_PD_VLLM) {
			rc = pg_pd_vllm_prefill_body(&pd->req, &b);
		} else {
			bootstrap_host(&w->gw->maps.backends[p], host, sizeof(host));
			rc = pg_pd_sglang_body(&pd->req, host, bootstrap_port(w->gw, pool, p),
			                       pg_worker_rand(w), &b);
		}
	}
	if (rc) { /* not a JSON object: nothing to disaggregate */
		pg_buf_free(&b);
		STAT(w, pd_alone);
		pd->route = PG_PDR_ALONE;
		decode_go(w, c, pd->body, pd->body_len);
		return;
	}
	STAT(w, pd_pairs);
	if (pd->proto == PG_PD_SGLANG) { /* both at once, the same body */
		struct pg_buf d = {0};

		pg_buf_append(&d, b.p, b.len);
		if (!leg_start(w, c, p, &d)) {
			pg_buf_free(&d);
			pg_buf_free(&b);
			prefill_failed(w, c, "no connection");
			return;
		}
		decode_go_buf(w, c, &b);
		return;
	}
	if (!leg_start(w, c, p, &b)) {
		pg_buf_free(&b);
		prefill_failed(w, c, "no connection");
	}
}

bool pg_pd_start(struct pg_worker *w, struct pg_client *c, bool whole)
{
	struct pg_exchange *x = &c->x;
	struct pg_pd_x *pd = x->pd;

	if (!whole) {
		/* a body too large to hold whole: the decode instance alone,
		 * streamed as any request's */
		pd->route = PG_PDR_ALONE;
		STAT(w, pd_alone);
		c->state = PG_C_STREAM;
	} else {
		pd->head = memdup(x->fwd, x->fwd_head);
		pd->head_len = x->fwd_head;
		if (x->kbuf) {
			pd->body = memdup(x->kbuf, x->klen);
			pd->body_len = x->klen;
		} else {
			pd->body = memdup(x->held ? x->held : "", x->held_len);
			pd->body_len = x->held_len;
		}
	}
	free(x->kbuf);
	x->kbuf = NULL;
	x->klen = x->kcap = 0;
	if (whole)
		pg_pd_send(w, c);
	else
		pg_attempt(w, c, x->choice.backend, x->choice.decision, false);
	return true;
}

/* --- the prefill's answer ----------------------------------------------------------- */

/* The answer's body, decoded if chunked, into out. */
static void answer_body(const struct pg_pd_x *pd, struct pg_buf *out)
{
	const char *p = pd->ans.p + pd->ans_head;
	size_t len = pd->ans.len - pd->ans_head;
	struct pg_frame f;

	if (!pd->chunked) {
		pg_buf_append(out, p, len);
		return;
	}
	pg_chunked_init(&f);
	for (size_t off = 0; off < len;) {
		size_t used, doff, dlen;
		enum pg_chunked_rc rc =
		    pg_chunked_feed(&f, p + off, len - off, &used, &doff, &dlen);

		if (rc == PG_CHUNKED_ERROR)
			return;
		pg_buf_append(out, p + off + doff, dlen);
		off += used;
		if (rc == PG_CHUNKED_DONE || !used)
			return;
	}
}

/* The prefill answered whole (vLLM: its transfer parameters go to the
 * decode leg; SGLang: it is dropped); at its framing's end (ended), or
 * with its connection's. */
static void leg_done(struct pg_worker *w, struct pg_client *c, bool ended)
{
	struct pg_exchange *x = &c->x;
	struct pg_pd_x *pd = x->pd;
	struct pg_json ans = {0};
	struct pg_buf body = {0}, dec = {0};
	const char *params, *why = "the prefill's answer is not JSON";
	size_t plen;
	int status = pd->status;

	leg_release(w, pd);
	leg_close(w, pd, ended);
	if (status < 200 || status >= 300) {
		char msg[64];

		snprintf(msg, sizeof(msg), "it answered %d", status);
		prefill_failed(w, c, msg);
		return;
	}
	if (pd->proto == PG_PD_SGLANG) {
		pd->answered = true;
		return;
	}
	answer_body(pd, &body);
	if (body.oom || pg_json_parse(&ans, body.p ? body.p : "", body.len) ||
	    pg_pd_vllm_params(&ans, &params, &plen, &why) || !request_parse(pd) ||
	    !pg_buf_reserve(&dec, pd->body_len + plen + 64) ||
	    pg_pd_vllm_decode_body(&pd->req, params, plen, &dec)) {
		char name[PG_ADDR_STRLEN];

		pg_warn("prefill/decode: %s (prefill %s)", why,
		        pg_backend_name(&w->gw->maps.backends[pd->prefill], name, sizeof(name)));
		pg_client_error(w, c, 502, "prefill answer without usable kv_transfer_params");
	} else {
		decode_go_buf(w, c, &dec);
	}
	pg_json_free(&ans);
	pg_buf_free(&body);
	pg_buf_free(&dec);
}

bool pg_pd_leg_data(struct pg_worker *w, struct pg_upstream *u, const char *data, size_t len)
{
	struct pg_client *c = u->c;
	struct pg_pd_x *pd = c ? c->x.pd : NULL;
	struct pg_http_response resp;
	size_t take = 0;
	bool done = false;
	ssize_t n;

	if (!pd || pd->u != u) {
		pg_upstream_close(w, u);
		return false;
	}
	if (pd->ans.len + len > PG_PD_ANSWER_MAX) {
		pg_pd_leg_failed(w, u, "prefill answer too large", false);
		return false;
	}
	pg_buf_append(&pd->ans, data, len);
	while (!pd->ans_head) {
		n = pg_http_parse_response(pd->ans.p, pd->ans.len, false, &resp);
		if (n == 0)
			return false;
		if (n < 0) {
			pg_pd_leg_failed(w, u, "invalid response head", true);
			return false;
		}
		if (resp.status < 200) { /* an interim answer: dropped */
			memmove(pd->ans.p, pd->ans.p + n, pd->ans.len - (size_t)n);
			pd->ans.len -= (size_t)n;
			continue;
		}
		/* a 1-token answer: its first token is its end (router/load.h) */
		pg_exchange_first_token(w, c, &pd->load, pg_now_ns());
		pd->ans_head = (size_t)n;
		pd->status = resp.status;
		pd->chunked = resp.body == PG_BODY_CHUNKED;
		u->keep_alive = resp.keep_alive;
		u->early = u->s.qbytes != 0; /* answered before it had the whole request */
		done = pg_response_frame(&resp, &u->frame);
		data = pd->ans.p + n;
		len = pd->ans.len - (size_t)n;
	}
	/* the end of its body, as any response's (a body framed by the
	 * connection ends with it: pg_pd_leg_failed) */
	if (!done && !pg_frame_take(&u->frame, data, len, &take, &done, NULL, NULL)) {
		pg_pd_leg_failed(w, u, "bad chunked answer", true);
		return false;
	}
	if (take < len)
		u->keep_alive = false; /* bytes after the answer: never reused */
	if (done)
		leg_done(w, c, true);
	return false;
}

/* The prefill leg failed (closed, its slot given back): another prefill
 * instance, else the decode instance alone. */
static void prefill_failed(struct pg_worker *w, struct pg_client *c, const char *why)
{
	struct pg_exchange *x = &c->x;
	struct pg_pd_x *pd = x->pd;
	char name[PG_ADDR_STRLEN];

	pg_debug("prefill/decode: prefill %s failed: %s",
	         pg_backend_name(&w->gw->maps.backends[pd->prefill], name, sizeof(name)), why);
	__atomic_fetch_add(&w->gw->maps.backends[pd->prefill].failures, 1, __ATOMIC_RELAXED);
	STAT(w, pd_prefill_failures);
	pg_idset_add(&pd->ptried, pd->prefill);
	if (pd->proto == PG_PD_SGLANG) {
		if (x->resp_started || pd->answered)
			return; /* the decode answers: its fate is its own */
		/* it waits for a room that will not fill: it goes too */
		pg_attempt_abandon(w, c);
	}
	pg_dispatch_again(w, c,
	                  ++pd->ptries < PG_PD_PREFILL_TRIES ? PG_AGAIN_PREFILL : PG_AGAIN_ALONE);
}

void pg_pd_leg_failed(struct pg_worker *w, struct pg_upstream *u, const char *why, bool down)
{
	struct pg_client *c = u->c;
	struct pg_pd_x *pd = c ? c->x.pd : NULL;

	if (!pd || pd->u != u) {
		pg_upstream_close(w, u);
		return;
	}
	if (!why && pd->ans_head && u->frame.kind == PG_FRAME_NONE) {
		leg_done(w, c, false); /* an answer that ends with the connection */
		return;
	}
	if (u->reused && !pd->ans.len && !pd->fresh) {
		/* a kept connection the instance had closed: the same prefill,
		 * on a fresh one */
		leg_release(w, pd);
		leg_close(w, pd, false);
		pd->fresh = true;
		pg_pd_send(w, c);
		return;
	}
	if (down) {
		struct pg_backend *b = &w->gw->maps.backends[pd->prefill];

		__atomic_store_n(&b->down_until_ms, w->now_ms + PG_DOWN_MS, __ATOMIC_RELAXED);
		__atomic_fetch_or(&b->flags, PG_BACKEND_DOWN, __ATOMIC_RELAXED);
	}
	leg_release(w, pd);
	leg_close(w, pd, false);
	prefill_failed(w, c, why ? why : "connection closed before its answer");
}

void pg_pd_decode_failed(struct pg_worker *w, struct pg_client *c, const char *why)
{
	struct pg_exchange *x = &c->x;
	struct pg_pd_x *pd = x->pd;

	pg_debug("prefill/decode: decode leg failed: %s", why);
	pg_idset_add(&pd->dtried, x->backend);
	leg_release(w, pd); /* sglang: its prefill, if still under way */
	leg_close(w, pd, false);
	if (++pd->dtries >= PG_PD_DECODE_TRIES) {
		pg_client_error(w, c, 502, "decode instances failed");
		return;
	}
	STAT(w, pd_decode_retries);
	if (!pd->head) {
		/* its body streams to the decode instance alone (not held:
		 * there is no pair to make): another decode instance */
		pg_dispatch_again(w, c, PG_AGAIN_ATTEMPT);
		return;
	}
	pd->ptries = 0; /* a fresh pair */
	pd->fresh = false;
	pg_dispatch_again(w, c, PG_AGAIN_PAIR);
}

void pg_pd_free(struct pg_worker *w, struct pg_exchange *x)
{
	struct pg_pd_x *pd = x->pd;

	if (!pd)
		return;
	leg_release(w, pd);
	leg_close(w, pd, false);
	free(pd->head);
	free(pd->body);
	pg_json_free(&pd->req); /* (zeroed when never made) */
	pg_buf_free(&pd->ans);
	free(pd);
	x->pd = NULL;
}

void pg_pd_tick(struct pg_worker *w, struct pg_client *c)
{
	struct pg_pd_x *pd = c->x.pd;

	if (pd && pd->u && !pd->ans_head &&
	    w->now_ms - pd->sent_ms >= w->gw->cfg->timeouts.first_byte_ms)
		pg_pd_leg_failed(w, pd->u, "no answer in --first-byte-timeout", false);
}
