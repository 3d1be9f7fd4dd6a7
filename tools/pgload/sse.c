// SPDX-License-Identifier: MIT
/* Response-body scanning; see sse.h for what is recognised and why. */
#include "sse.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/*
 * Position just after `"key"` <ws> `:` <ws> for the first (or, with last,
 * the final) occurrence of the key in p[0..n), or NULL.
 */
static const char *find_key(const char *p, size_t n, const char *key, bool last)
{
	size_t kl = strlen(key);
	const char *end = p + n, *found = NULL;

	for (const char *q = p; q + kl + 2 <= end; q++) {
		const char *v;

		q = memchr(q, '"', (size_t)(end - q));
		if (!q || q + kl + 2 > end)
			break;
		if (memcmp(q + 1, key, kl) != 0 || q[kl + 1] != '"')
			continue;
		if (q > p && q[-1] == '\\')
			continue;
		v = q + kl + 2;
		while (v < end && is_ws(*v))
			v++;
		if (v >= end || *v != ':')
			continue;
		v++;
		while (v < end && is_ws(*v))
			v++;
		found = v;
		if (!last)
			break;
	}
	return found;
}

int32_t pg_json_number(const char *p, size_t n, const char *key)
{
	const char *v = find_key(p, n, key, false), *end = p + n;
	int64_t x = 0;

	if (!v || v >= end || *v < '0' || *v > '9')
		return -1;
	for (; v < end && *v >= '0' && *v <= '9'; v++) {
		x = x * 10 + (*v - '0');
		if (x > INT32_MAX)
			return -1;
	}
	return (int32_t)x;
}

/* The string value at v when it is non-empty (at its opening quote), else
 * NULL. */
static const char *nonempty(const char *p, size_t n, const char *v)
{
	return v && v + 1 < p + n && *v == '"' && v[1] != '"' ? v : NULL;
}

/* The first "content" value of p[0..n) (chat) or else its first "text"
 * value (completions) when it is a non-empty string, else NULL. */
static const char *content_of(const char *p, size_t n)
{
	const char *v = nonempty(p, n, find_key(p, n, "content", false));

	return v ? v : nonempty(p, n, find_key(p, n, "text", false));
}

/* Append the raw bytes of the string at v (content_of's) to s->text. */
static void capture(struct pg_scan *s, const char *v, const char *end)
{
	const char *q;

	if (!s->text_max || s->text_over)
		return;
	for (q = v + 1; q < end && *q != '"'; q++)
		if (*q == '\\')
			q++; /* the escaped byte, even a quote */
	if (q >= end || s->text.len + (size_t)(q - v - 1) > s->text_max) {
		s->text_over = true;
		return;
	}
	pg_buf_append(&s->text, v + 1, (size_t)(q - v - 1));
	if (s->text.oom)
		s->text_over = true;
}

/* Take usage numbers from the object that follows `"usage":`, if any. */
static void scan_usage(struct pg_scan *s, const char *p, size_t n, bool last)
{
	const char *v = find_key(p, n, "usage", last);
	size_t rest;

	if (!v || v >= p + n || *v != '{')
		return;
	rest = (size_t)(p + n - v);
	s->prompt_tokens = pg_json_number(v, rest, "prompt_tokens");
	s->completion_tokens = pg_json_number(v, rest, "completion_tokens");
	s->cached_tokens = pg_json_number(v, rest, "cached_tokens");
}

/* One complete SSE line (no line terminator). Returns 1 for content. */
static int sse_line(struct pg_scan *s, const char *p, size_t n)
{
	const char *v;

	if (n && p[n - 1] == '\r')
		n--;
	if (n < 5 || memcmp(p, "data:", 5) != 0)
		return 0; /* comments, event:, id:, blank separators */
	p += 5;
	n -= 5;
	if (n && *p == ' ') {
		p++;
		n--;
	}
	if (n == 6 && memcmp(p, "[DONE]", 6) == 0) {
		s->done = true;
		return 0;
	}
	scan_usage(s, p, n, false);
	if ((v = content_of(p, n))) {
		s->content_events++;
		capture(s, v, p + n);
		return 1;
	}
	return 0;
}

static int append(struct pg_scan *s, const char *p, size_t n, size_t limit)
{
	if (s->buf.len + n > limit) {
		s->overflow = true;
		s->text_over = true; /* whatever content it held is lost */
		return 0;
	}
	pg_buf_append(&s->buf, p, n);
	return s->buf.oom ? -1 : 0;
}

void pg_scan_reset(struct pg_scan *s, bool sse, size_t text_max)
{
	s->sse = sse;
	s->text_max = text_max;
	s->text_over = false;
	pg_buf_reset(&s->text);
	s->overflow = false;
	s->done = false;
	s->content_events = 0;
	s->prompt_tokens = s->cached_tokens = s->completion_tokens = -1;
	pg_buf_reset(&s->buf);
}

int pg_scan_feed(struct pg_scan *s, const char *p, size_t n)
{
	int events = 0;

	if (!s->sse)
		return append(s, p, n, PG_SCAN_MAX_BODY);
	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) : n;

		if (s->overflow) {
			/* Skipping the rest of an over-long line. */
		} else if (!nl) {
			if (append(s, p, take, PG_SCAN_MAX_LINE) == -1)
				return -1;
		} else if (s->buf.len) {
			if (append(s, p, take, PG_SCAN_MAX_LINE) == -1)
				return -1;
			if (!s->overflow)
				events += sse_line(s, s->buf.p, s->buf.len);
			s->buf.len = 0;
		} else {
			/* Whole line inside the input: no copy. */
			events += sse_line(s, p, take);
		}
		if (!nl)
			break;
		s->overflow = false;
		s->buf.len = 0;
		p += take + 1;
		n -= take + 1;
	}
	return events;
}

int pg_scan_finish(struct pg_scan *s)
{
	const char *v;
	int events = 0;

	if (s->sse) {
		/* A last line without a newline still counts. */
		if (s->buf.len && !s->overflow)
			events = sse_line(s, s->buf.p, s->buf.len);
		s->buf.len = 0;
		return events;
	}
	scan_usage(s, s->buf.p, s->buf.len, true);
	if ((v = content_of(s->buf.p, s->buf.len))) {
		s->content_events = 1;
		events = 1;
		capture(s, v, s->buf.p + s->buf.len);
	}
	return events;
}

void pg_scan_free(struct pg_scan *s)
{
	pg_buf_free(&s->buf);
	pg_buf_free(&s->text);
}

bool pg_head_header(const char *p, size_t n, const char *name, const char **val, size_t *vlen)
{
	size_t nl = strlen(name);
	const char *end = p + n;
	const char *line = memchr(p, '\n', n); /* skip the status line */

	while (line && ++line < end) {
		const char *eol = memchr(line, '\n', (size_t)(end - line));
		const char *v, *ve;

		if (!eol)
			break;
		if ((size_t)(eol - line) > nl && line[nl] == ':' &&
		    strncasecmp(line, name, nl) == 0) {
			v = line + nl + 1;
			ve = eol;
			while (v < ve && is_ws(*v))
				v++;
			while (ve > v && is_ws(ve[-1]))
				ve--;
			*val = v;
			*vlen = (size_t)(ve - v);
			return true;
		}
		line = eol;
	}
	return false;
}
