// SPDX-License-Identifier: MIT
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lib/trace.h"

static const char hexd[] = "0123456789abcdef";

/* One lowercase hex digit's value, -1 for any other byte (the field is
 * lowercase: "HEXDIGLC" in the specification). */
static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* 2n hex digits at s into out[n]: false on a bad digit. */
static bool unhex(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

bool pg_traceparent_parse(const char *s, size_t n, struct pg_trace_ctx *out)
{
	uint8_t version;
	struct pg_trace_ctx c;

	/* OWS around a field value is the HTTP parser's to strip; a value
	 * still carrying some is not one the specification allows. */
	if (n < PG_TRACEPARENT_LEN || s[2] != '-' || s[35] != '-' || s[52] != '-' ||
	    !unhex(s, &version, 1) || version == 0xff)
		return false;
	/* version 00 is exactly 55 bytes; a later one may go on after a '-' */
	if (version == 0 ? n != PG_TRACEPARENT_LEN : n > PG_TRACEPARENT_LEN && s[55] != '-')
		return false;
	if (!unhex(s + 3, c.trace_id, PG_TRACE_ID_LEN) ||
	    !unhex(s + 36, c.parent_id, PG_SPAN_ID_LEN) || !unhex(s + 53, &c.flags, 1) ||
	    all_zero(c.trace_id, PG_TRACE_ID_LEN) || all_zero(c.parent_id, PG_SPAN_ID_LEN))
		return false;
	*out = c;
	return true;
}

void pg_trace_hex(char *out, const uint8_t *id, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hexd[id[i] >> 4];
		out[2 * i + 1] = hexd[id[i] & 15];
	}
}

void pg_traceparent_format(char *out, const uint8_t *trace_id, const uint8_t *span_id, bool sampled)
{
	memcpy(out, "00-", 3);
	pg_trace_hex(out + 3, trace_id, PG_TRACE_ID_LEN);
	out[35] = '-';
	pg_trace_hex(out + 36, span_id, PG_SPAN_ID_LEN);
	out[52] = '-';
	out[53] = '0';
	out[54] = sampled ? '1' : '0';
}

int pg_trace_ratio_parse(const char *s, uint64_t *threshold)
{
	char *end;
	double r;

	if (!s || !*s || strchr(s, ' '))
		return -1;
	r = strtod(s, &end);
	if (*end || !isfinite(r) || r < 0 || r > 1)
		return -1;
	/* 2^64 * r, exactly 0 at 0 and every trace at 1 */
	*threshold = r >= 1 ? PG_TRACE_ALL : (uint64_t)(r * 18446744073709551616.0);
	return 0;
}

bool pg_trace_sample(const struct pg_trace_ctx *parent, const uint8_t *trace_id, uint64_t threshold)
{
	uint64_t low = 0;

	if (parent)
		return parent->flags & PG_TRACE_SAMPLED;
	if (threshold == PG_TRACE_ALL)
		return true;
	for (size_t i = PG_TRACE_ID_LEN - 8; i < PG_TRACE_ID_LEN; i++)
		low = low << 8 | trace_id[i];
	return low < threshold;
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

void pg_trace_new_id(uint8_t *id, size_t len, uint64_t r1, uint64_t r2)
{
	uint8_t b[16];

	put_be64(b, r1);
	put_be64(b + 8, r2);
	memcpy(id, b, len < sizeof(b) ? len : sizeof(b));
	if (all_zero(id, len))
		id[len - 1] = 1;
}

/* splitmix64's finalizer: a bijection of 64-bit numbers. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void pg_trace_child_id(uint8_t *out, const uint8_t *span, unsigned k)
{
	uint64_t s = 0, v;

	for (size_t i = 0; i < PG_SPAN_ID_LEN; i++)
		s = s << 8 | span[i];
	/* a bijection of s + k: distinct for distinct k, and mix64(x) == s
	 * for one x only, so a clash with the parent or 0 is moved off */
	v = mix64(s + k);
	if (!v || v == s)
		v = mix64(s + k + 0x9e3779b97f4a7c15ull) | 1;
	put_be64(out, v);
}
