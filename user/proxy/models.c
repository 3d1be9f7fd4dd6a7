// SPDX-License-Identifier: MIT
/* The model pool of a request, and the gateway's own answers about models
 * (models.h). */
#include <string.h>
#include "lib/buf.h"
#include "lib/forward.h"
#include "proxy/models.h"
#include "proxy/worker_state.h"
#include "state/pools.h"
#include "router/route.h"

/* s[0..n) escaped as JSON string content (no quotes) onto b. */
static void json_text(struct pg_buf *b, const char *s, size_t n)
{
	size_t at = b->len;

	pg_buf_json_str(b, s, n);
	if (b->oom || b->len < at + 2)
		return;
	memmove(b->p + at, b->p + at + 1, b->len - at - 1);
	b->len -= 2;
}

/* Model pools, from the head (state/pools.h): the pool of the path, or
 * the body's model to be read; GET /v1/models is the gateway's own answer.
 * true: answered. */
bool pg_pool_head(struct pg_worker *w, struct pg_client *c, const struct pg_http_request *req)
{
	struct pg_exchange *x = &c->x;
	struct pg_buf b = {0};
	int p;

	if (pg_pools_by_model(w->gw) && pg_name_is(req->method, "GET") &&
	    pg_name_is(req->path, "/v1/models")) {
		pg_pools_models_json(w->gw, &b);
		pg_client_answer(w, c, 200, b.p, b.len);
		pg_buf_free(&b);
		return true;
	}
	p = pg_pool_for_head(w->gw, pg_name_is(req->method, "POST"), req->path.p, req->path.len);
	if (p == PG_POOL_UNKNOWN) {
		pg_buf_puts(&b, "{\"error\":{\"message\":\"no model pool serves ");
		json_text(&b, req->method.p, req->method.len);
		pg_buf_puts(&b, " ");
		json_text(&b, req->path.p, req->path.len > 200 ? 200 : req->path.len);
		pg_buf_puts(&b, "\",\"type\":\"invalid_request_error\",\"code\":\"not_found\"}}\n");
		pg_client_answer(w, c, 404, b.p, b.len);
		pg_buf_free(&b);
		return true;
	}
	x->pool = (int8_t)p;
	return false;
}

/* The pool of the body's model; an unknown model (or none) without a
 * catch-all pool is answered as OpenAI does. true: answered. */
bool pg_pool_body(struct pg_worker *w, struct pg_client *c, const struct pg_route_input *in)
{
	char model[PG_MODEL_NAME_MAX];
	struct pg_buf b = {0};
	int mlen, p = pg_pool_for_body(w->gw, in->body, in->body_len, model, &mlen);

	if (p >= 0) {
		c->x.pool = (int8_t)p;
		return false;
	}
	if (mlen < 0) {
		pg_buf_puts(&b, "{\"error\":{\"message\":\"you must provide a model parameter\","
		                "\"type\":\"invalid_request_error\",\"param\":\"model\","
		                "\"code\":null}}\n");
		pg_client_answer(w, c, 400, b.p, b.len);
	} else {
		pg_buf_puts(&b, "{\"error\":{\"message\":\"The model `");
		json_text(&b, model, (size_t)mlen);
		pg_buf_puts(&b, "` does not exist\",\"type\":\"invalid_request_error\","
		                "\"param\":\"model\",\"code\":\"model_not_found\"}}\n");
		pg_client_answer(w, c, 404, b.p, b.len);
	}
	pg_buf_free(&b);
	return true;
}
