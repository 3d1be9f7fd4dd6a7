// SPDX-License-Identifier: MIT
/*
 * etcd JSON gateway codec (etcd.h): base64, request bodies and the parsing
 * of responses and watch lines. The view and what is derived from it are in
 * etcd_view.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/etcd.h"
#include "lib/json.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void pg_b64_encode(struct pg_buf *o, const void *src, size_t len)
{
	const unsigned char *s = src;
	char *d = pg_buf_extend(o, (len + 2) / 3 * 4);

	if (!d)
		return;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)s[i + 1] << 8;
		if (i + 2 < len)
			v |= s[i + 2];
		*d++ = b64[v >> 18 & 63];
		*d++ = b64[v >> 12 & 63];
		*d++ = i + 1 < len ? b64[v >> 6 & 63] : '=';
		*d++ = i + 2 < len ? b64[v & 63] : '=';
	}
}

static int b64_val(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;

	return p ? (int)(p - b64) : -1;
}

int pg_b64_decode(const char *src, size_t len, char *out, size_t *outlen)
{
	size_t n = 0;

	if (len % 4)
		return -1;
	for (size_t i = 0; i < len; i += 4) {
		int v[4], pad = 0;

		for (int k = 0; k < 4; k++) {
			if (src[i + k] == '=' && i + 4 == len && k >= 2) {
				v[k] = 0;
				pad++;
				continue;
			}
			if (pad || (v[k] = b64_val(src[i + k])) < 0)
				return -1;
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
		             (uint32_t)v[3];
		out[n++] = (char)(w >> 16);
		if (pad < 2)
			out[n++] = (char)(w >> 8);
		if (pad < 1)
			out[n++] = (char)w;
	}
	*outlen = n;
	return 0;
}

/* "name":"<base64 of s[0..n)>" */
static void b64_member(struct pg_buf *o, const char *name, const void *s, size_t n)
{
	pg_buf_printf(o, "\"%s\":\"", name);
	pg_b64_encode(o, s, n);
	pg_buf_puts(o, "\"");
}

/* key and, for a prefix, range_end: the key with its last byte + 1 (a key
 * of only 0xff bytes has no end: "\0", every key from it). */
static void key_range(struct pg_buf *o, const char *key, bool prefix)
{
	size_t n = strlen(key);
	char end[512];

	b64_member(o, "key", key, n);
	if (!prefix)
		return;
	if (n > sizeof(end))
		n = sizeof(end);
	memcpy(end, key, n);
	while (n && (unsigned char)end[n - 1] == 0xff)
		n--;
	if (n)
		end[n - 1]++;
	else
		end[n++] = 0;
	pg_buf_puts(o, ",");
	b64_member(o, "range_end", end, n);
}

void pg_etcd_body_range(struct pg_buf *o, const char *key, bool prefix, bool serializable,
                        bool count_only)
{
	pg_buf_puts(o, "{");
	key_range(o, key, prefix);
	if (serializable)
		pg_buf_puts(o, ",\"serializable\":true");
	if (count_only)
		pg_buf_puts(o, ",\"count_only\":true");
	pg_buf_puts(o, "}");
}

void pg_etcd_body_range_newest(struct pg_buf *o, const char *prefix)
{
	pg_buf_puts(o, "{");
	key_range(o, prefix, true);
	pg_buf_puts(o, ",\"limit\":\"1\",\"sort_order\":\"DESCEND\",\"sort_target\":\"MOD\","
	               "\"keys_only\":true}");
}

void pg_etcd_body_put(struct pg_buf *o, const char *key, const char *val, size_t vlen,
                      int64_t lease)
{
	pg_buf_puts(o, "{");
	b64_member(o, "key", key, strlen(key));
	pg_buf_puts(o, ",");
	b64_member(o, "value", val, vlen);
	if (lease)
		pg_buf_printf(o, ",\"lease\":\"%lld\"", (long long)lease);
	pg_buf_puts(o, "}");
}

void pg_etcd_body_delete(struct pg_buf *o, const char *key)
{
	pg_buf_puts(o, "{");
	key_range(o, key, false);
	pg_buf_puts(o, "}");
}

void pg_etcd_body_watch(struct pg_buf *o, const char *prefix, int64_t start_revision)
{
	pg_buf_puts(o, "{\"create_request\":{");
	key_range(o, prefix, true);
	pg_buf_printf(o, ",\"start_revision\":\"%lld\",\"progress_notify\":true}}",
	              (long long)start_revision);
}

void pg_etcd_body_lease_grant(struct pg_buf *o, unsigned ttl_s)
{
	pg_buf_printf(o, "{\"TTL\":\"%u\"}", ttl_s);
}

void pg_etcd_body_lease_id(struct pg_buf *o, int64_t id)
{
	pg_buf_printf(o, "{\"ID\":\"%lld\"}", (long long)id);
}

void pg_etcd_body_auth(struct pg_buf *o, const char *user, const char *password)
{
	pg_buf_puts(o, "{\"name\":");
	pg_buf_json_str(o, user, strlen(user));
	pg_buf_puts(o, ",\"password\":");
	pg_buf_json_str(o, password, strlen(password));
	pg_buf_puts(o, "}");
}

/* ---- responses ----------------------------------------------------------- */

static int64_t member(const struct pg_json *js, int64_t obj, const char *name)
{
	return obj < 0 ? -1 : pg_json_find(js, (uint32_t)obj, name, strlen(name));
}

/* An int64 written as a string (the gateway's way) or as a number. */
static int get_i64(const struct pg_json *js, int64_t i, int64_t *out)
{
	char buf[24], *end;
	size_t n;

	if (i < 0)
		return 0;
	if (js->tok[i].type == PG_JSON_NUMBER)
		return pg_json_get_i64(js, (uint32_t)i, out) ? -1 : 0;
	if (js->tok[i].type != PG_JSON_STRING)
		return -1;
	n = pg_json_str_copy(js, (uint32_t)i, buf, sizeof(buf) - 1);
	if (!n || n >= sizeof(buf))
		return -1;
	buf[n] = 0;
	errno = 0;
	*out = strtoll(buf, &end, 10);
	return *end || errno ? -1 : 0;
}

static bool get_bool(const struct pg_json *js, int64_t i)
{
	return i >= 0 && js->tok[i].type == PG_JSON_TRUE;
}

/* A base64 string member as a NUL-terminated malloc'ed copy (absent: ""). */
static int get_b64(const struct pg_json *js, int64_t i, char **out, size_t *len)
{
	size_t n, dn = 0;
	char *tmp;

	*out = NULL;
	if (i >= 0 && js->tok[i].type != PG_JSON_STRING)
		return -1;
	n = i < 0 ? 0 : js->tok[i].end - js->tok[i].start;
	tmp = malloc(n + 1);
	*out = malloc(n / 4 * 3 + 1);
	if (!tmp || !*out) {
		free(tmp);
		return -1;
	}
	if (n)
		n = pg_json_str_copy(js, (uint32_t)i, tmp, n);
	if (pg_b64_decode(tmp, n, *out, &dn)) {
		free(tmp);
		return -1;
	}
	free(tmp);
	(*out)[dn] = 0;
	if (len)
		*len = dn;
	return 0;
}

/* One {"key","value","mod_revision"} object into kv. */
static int get_kv(const struct pg_json *js, int64_t o, struct pg_etcd_kv *kv)
{
	if (o < 0 || js->tok[o].type != PG_JSON_OBJECT)
		return -1;
	if (get_b64(js, member(js, o, "key"), &kv->key, NULL) ||
	    get_b64(js, member(js, o, "value"), &kv->val, &kv->vlen) ||
	    get_i64(js, member(js, o, "mod_revision"), &kv->mod_revision))
		return -1;
	return 0;
}

/* kvs (range) or events (watch): each event is {"type"?,"kv":{...}}. */
static int get_kvs(const struct pg_json *js, int64_t arr, bool events, struct pg_etcd_resp *r)
{
	uint32_t k, n;

	if (arr < 0)
		return 0;
	if (js->tok[arr].type != PG_JSON_ARRAY)
		return -1;
	r->kv = calloc(js->tok[arr].size + 1, sizeof(*r->kv));
	if (!r->kv)
		return -1;
	for (k = pg_json_first((uint32_t)arr), n = 0; n < js->tok[arr].size;
	     n++, k = js->tok[k].next) {
		struct pg_etcd_kv *kv = &r->kv[r->nkv++];
		int64_t t = events ? member(js, k, "type") : -1;

		if (get_kv(js, events ? member(js, k, "kv") : k, kv))
			return -1;
		kv->deleted = t >= 0 && pg_json_str_eq(js, (uint32_t)t, "DELETE", 6);
	}
	return 0;
}

/* "error" as a string (unary calls: with "code") or an object (a watch
 * stream's: grpc_code, message). */
static void get_error(const struct pg_json *js, int64_t top, struct pg_etcd_resp *r)
{
	int64_t e = member(js, top, "error"), c = member(js, top, "code"), m, code = 0;

	if (e < 0)
		return;
	if (js->tok[e].type == PG_JSON_OBJECT) {
		c = member(js, e, "grpc_code");
		m = member(js, e, "message");
	} else {
		m = e;
	}
	if (get_i64(js, c, &code) || !code)
		code = 2; /* UNKNOWN: an error without a usable code is still one */
	r->code = (int)code;
	snprintf(r->error, sizeof(r->error), "error");
	if (m >= 0 && js->tok[m].type == PG_JSON_STRING) {
		size_t n = pg_json_str_copy(js, (uint32_t)m, r->error, sizeof(r->error) - 1);

		r->error[n < sizeof(r->error) ? n : sizeof(r->error) - 1] = 0;
	}
}

int pg_etcd_parse(const char *json, size_t len, struct pg_etcd_resp *r, char *err, size_t errlen)
{
	struct pg_json js = {0};
	int64_t top = 0, res, tok;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	if (pg_json_parse(&js, json, len)) {
		snprintf(err, errlen, "invalid JSON at byte %zu: %s", js.err_pos, js.err_msg);
		goto out;
	}
	snprintf(err, errlen, "unexpected response shape");
	if (js.tok[0].type != PG_JSON_OBJECT)
		goto out;
	get_error(&js, 0, r);
	res = member(&js, 0, "result"); /* watch lines and keepalive answers */
	if (res >= 0) {
		if (js.tok[res].type != PG_JSON_OBJECT)
			goto out;
		top = res;
	}
	if (get_i64(&js, member(&js, member(&js, top, "header"), "revision"), &r->revision) ||
	    get_i64(&js, member(&js, top, "compact_revision"), &r->compact_revision) ||
	    get_i64(&js, member(&js, top, "ID"), &r->lease_id) ||
	    get_i64(&js, member(&js, top, "TTL"), &r->ttl) ||
	    get_i64(&js, member(&js, top, "count"), &r->count))
		goto out;
	r->created = get_bool(&js, member(&js, top, "created"));
	r->canceled = get_bool(&js, member(&js, top, "canceled"));
	if (r->canceled && !r->code) {
		int64_t why = member(&js, top, "cancel_reason");

		if (why >= 0 && js.tok[why].type == PG_JSON_STRING) {
			size_t n =
			    pg_json_str_copy(&js, (uint32_t)why, r->error, sizeof(r->error) - 1);

			r->error[n < sizeof(r->error) ? n : sizeof(r->error) - 1] = 0;
		}
	}
	tok = member(&js, top, "token");
	if (tok >= 0 && js.tok[tok].type == PG_JSON_STRING) {
		size_t n = js.tok[tok].end - js.tok[tok].start;

		r->token = malloc(n + 1);
		if (!r->token)
			goto out;
		r->token[pg_json_str_copy(&js, (uint32_t)tok, r->token, n)] = 0;
	}
	if (get_kvs(&js, member(&js, top, "kvs"), false, r) ||
	    get_kvs(&js, member(&js, top, "events"), true, r))
		goto out;
	rc = 0;
	err[0] = 0;
out:
	if (rc)
		pg_etcd_resp_free(r);
	pg_json_free(&js);
	return rc;
}

void pg_etcd_resp_free(struct pg_etcd_resp *r)
{
	for (size_t i = 0; i < r->nkv; i++) {
		free(r->kv[i].key);
		free(r->kv[i].val);
	}
	free(r->kv);
	free(r->token);
	memset(r, 0, sizeof(*r));
}
