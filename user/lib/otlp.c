// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/otlp.h"

static struct pg_otlp_attr *attr_add(struct pg_otlp_span *s, const char *key, uint8_t type)
{
	struct pg_otlp_attr *a;

	if (s->nattr >= PG_OTLP_ATTRS_MAX)
		return NULL;
	a = &s->attr[s->nattr++];
	*a = (struct pg_otlp_attr){.key = key, .type = type};
	return a;
}

void pg_otlp_str(struct pg_otlp_span *s, const char *key, const char *v, size_t len)
{
	struct pg_otlp_attr *a = attr_add(s, key, PG_OTLP_STR);

	if (a) {
		a->s = v;
		a->slen = len;
	}
}

void pg_otlp_int(struct pg_otlp_span *s, const char *key, int64_t v)
{
	struct pg_otlp_attr *a = attr_add(s, key, PG_OTLP_INT);

	if (a)
		a->i = v;
}

void pg_otlp_bool(struct pg_otlp_span *s, const char *key, bool v)
{
	struct pg_otlp_attr *a = attr_add(s, key, PG_OTLP_BOOL);

	if (a)
		a->i = v;
}

void pg_otlp_double(struct pg_otlp_span *s, const char *key, double v)
{
	struct pg_otlp_attr *a = attr_add(s, key, PG_OTLP_DOUBLE);

	if (a)
		a->d = v;
}

static void hex_str(struct pg_buf *o, const uint8_t *id, size_t n)
{
	char h[2 * PG_TRACE_ID_LEN];

	pg_trace_hex(h, id, n);
	pg_buf_append(o, "\"", 1);
	pg_buf_append(o, h, 2 * n);
	pg_buf_append(o, "\"", 1);
}

static void key_value(struct pg_buf *o, const char *key, const struct pg_otlp_attr *a)
{
	pg_buf_puts(o, "{\"key\":");
	pg_buf_json_str(o, key, strlen(key));
	pg_buf_puts(o, ",\"value\":{");
	switch (a->type) {
	case PG_OTLP_INT:
		pg_buf_printf(o, "\"intValue\":\"%" PRId64 "\"", a->i);
		break;
	case PG_OTLP_BOOL:
		pg_buf_puts(o, a->i ? "\"boolValue\":true" : "\"boolValue\":false");
		break;
	case PG_OTLP_DOUBLE:
		/* JSON has no NaN or infinity: those become 0 */
		pg_buf_printf(o, "\"doubleValue\":%.17g", isfinite(a->d) ? a->d : 0.0);
		break;
	default:
		pg_buf_puts(o, "\"stringValue\":");
		pg_buf_json_str(o, a->s ? a->s : "", a->s ? a->slen : 0);
	}
	pg_buf_puts(o, "}}");
}

static void attrs(struct pg_buf *o, const struct pg_otlp_attr *a, size_t n)
{
	pg_buf_puts(o, "\"attributes\":[");
	for (size_t i = 0; i < n; i++) {
		if (i)
			pg_buf_append(o, ",", 1);
		key_value(o, a[i].key, &a[i]);
	}
	pg_buf_append(o, "]", 1);
}

static void span(struct pg_buf *o, const struct pg_otlp_span *s)
{
	pg_buf_puts(o, "{\"traceId\":");
	hex_str(o, s->trace_id, PG_TRACE_ID_LEN);
	pg_buf_puts(o, ",\"spanId\":");
	hex_str(o, s->span_id, PG_SPAN_ID_LEN);
	if (s->has_parent) {
		pg_buf_puts(o, ",\"parentSpanId\":");
		hex_str(o, s->parent_id, PG_SPAN_ID_LEN);
	}
	pg_buf_puts(o, ",\"name\":");
	pg_buf_json_str(o, s->name, strlen(s->name));
	pg_buf_printf(o,
	              ",\"kind\":%u,\"startTimeUnixNano\":\"%" PRIu64
	              "\",\"endTimeUnixNano\":\"%" PRIu64 "\",",
	              s->kind, s->start_ns, s->end_ns < s->start_ns ? s->start_ns : s->end_ns);
	attrs(o, s->attr, s->nattr);
	pg_buf_printf(o, ",\"status\":{\"code\":%u}}", s->status);
}

void pg_otlp_open(struct pg_buf *out, const struct pg_otlp_resource *res)
{
	struct pg_otlp_attr ra[2] = {
	    {.key = "service.name", .type = PG_OTLP_STR, .s = res->service},
	    {.key = "service.instance.id", .type = PG_OTLP_STR, .s = res->instance},
	};

	ra[0].slen = strlen(res->service);
	ra[1].slen = res->instance ? strlen(res->instance) : 0;
	pg_buf_puts(out, "{\"resourceSpans\":[{\"resource\":{");
	attrs(out, ra, res->instance ? 2 : 1);
	pg_buf_puts(out, "},\"scopeSpans\":[{\"scope\":{\"name\":\"prefixgate\",\"version\":");
	pg_buf_json_str(out, res->version, strlen(res->version));
	pg_buf_puts(out, "},\"spans\":[");
}

void pg_otlp_add(struct pg_buf *out, const struct pg_otlp_span *s, bool first)
{
	if (!first)
		pg_buf_append(out, ",", 1);
	span(out, s);
}

void pg_otlp_close(struct pg_buf *out)
{
	pg_buf_puts(out, "]}]}]}");
}

void pg_otlp_encode(struct pg_buf *out, const struct pg_otlp_resource *res,
                    const struct pg_otlp_span *spans, size_t n)
{
	pg_otlp_open(out, res);
	for (size_t i = 0; i < n; i++)
		pg_otlp_add(out, &spans[i], i == 0);
	pg_otlp_close(out);
}

int pg_otlp_url_parse(const char *url, struct pg_otlp_url *u, char *err, size_t errlen)
{
	const char *h, *end, *colon, *slash;
	size_t hl, pl;

	memset(u, 0, sizeof(*u));
	if (!strncmp(url, "https://", 8)) {
		snprintf(err, errlen,
		         "\"%s\": only http:// is spoken (a collector beside the gateway)", url);
		return -1;
	}
	if (strncmp(url, "http://", 7)) {
		snprintf(err, errlen, "\"%s\" is not http://HOST:PORT[/PATH]", url);
		return -1;
	}
	h = url + 7;
	slash = strchr(h, '/');
	end = slash ? slash : h + strlen(h);
	if (*h == '[') {
		const char *rb = memchr(h, ']', (size_t)(end - h));

		colon = rb && rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
		hl = rb ? (size_t)(rb - h - 1) : 0;
		h++;
	} else {
		colon = memchr(h, ':', (size_t)(end - h));
		hl = colon ? (size_t)(colon - h) : 0;
	}
	pl = colon ? (size_t)(end - colon - 1) : 0;
	if (!colon || !hl || hl >= sizeof(u->host) || !pl || pl >= sizeof(u->port) ||
	    strspn(colon + 1, "0123456789") < pl || !atoi(colon + 1) || atoi(colon + 1) > 65535 ||
	    memchr(h, '@', hl) || strpbrk(url, " \t\r\n?#")) {
		snprintf(err, errlen, "\"%s\" is not http://HOST:PORT[/PATH]", url);
		return -1;
	}
	memcpy(u->host, h, hl);
	memcpy(u->port, colon + 1, pl);
	memcpy(u->hostport, url + 7, (size_t)(end - url - 7));
	if (!slash || !slash[1])
		snprintf(u->path, sizeof(u->path), "%s", PG_OTLP_PATH);
	else if (strlen(slash) >= sizeof(u->path)) {
		snprintf(err, errlen, "\"%s\": its path is too long", url);
		return -1;
	} else
		snprintf(u->path, sizeof(u->path), "%s", slash);
	return 0;
}
