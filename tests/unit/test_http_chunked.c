// SPDX-License-Identifier: MIT
/* Unit tests for user/lib/http_chunked.c: the chunked decoder, fed whole,
 * byte by byte and in random pieces. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "lib/http.h"

#define S(lit) lit, sizeof(lit) - 1

/* ---- chunked decoder ---------------------------------------------------- */

/*
 * Feed in[0..len) in pieces of the sizes step() picks; collects decoded data
 * into out. Returns the final rc; *used gets the total bytes consumed.
 */
static int chunked_run(const char *in, size_t len, size_t (*step)(unsigned *), unsigned seed,
                       char *out, size_t *outlen, size_t *used)
{
	struct pg_frame c;
	size_t pos = 0;
	int rc = PG_CHUNKED_MORE;

	pg_chunked_init(&c);
	*outlen = 0;
	while (pos < len) {
		size_t n = step(&seed);
		if (n > len - pos)
			n = len - pos;
		size_t off = 0;
		/* one piece may take several calls: one per data span */
		do {
			size_t consumed, doff, dlen;
			rc = pg_chunked_feed(&c, in + pos + off, n - off, &consumed, &doff, &dlen);
			assert_true(consumed <= n - off);
			if (rc == PG_CHUNKED_DATA) {
				assert_true(dlen > 0 && doff + dlen == consumed);
				memcpy(out + *outlen, in + pos + off + doff, dlen);
				*outlen += dlen;
			} else {
				assert_int_equal(dlen, 0);
			}
			off += consumed;
			if (rc == PG_CHUNKED_DONE || rc == PG_CHUNKED_ERROR) {
				*used = pos + off;
				return rc;
			}
		} while (off < n);
		pos += n;
	}
	*used = pos;
	return rc;
}

static size_t step_all(unsigned *s)
{
	(void)s;
	return SIZE_MAX;
}

static size_t step_one(unsigned *s)
{
	(void)s;
	return 1;
}

static size_t step_random(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return 1 + (*s >> 16) % 13;
}

struct chunk_case {
	const char *in;
	size_t len;
	const char *data; /* decoded; NULL: the input must be rejected */
	size_t tail;      /* bytes after the body that must stay unconsumed */
};

static const struct chunk_case chunk_cases[] = {
    {S("5\r\nhello\r\n0\r\n\r\n"), "hello", 0},
    {S("5;a=b;c=\"q\\\"x;y\"\r\nhello\r\n1A ; ext\r\nabcdefghijklmnopqrstuvwxyz\r\n"
       "0\r\nTrailer: x\r\nT2:\r\n\r\n"),
     "helloabcdefghijklmnopqrstuvwxyz", 0},
    {S("5 ; a = b ;c\r\nhello\r\n0;last\r\n\r\n"), "hello", 0},
    {S("000000000000000A\r\n0123456789\r\n00\r\n\r\n"), "0123456789", 0},
    {S("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\nGET / HTTP/1.1\r\n"), "abcde", 16},
    {S("0\r\n\r\n"), "", 0},
    {S("\r\n"), NULL, 0},
    {S("g\r\n"), NULL, 0},
    {S("-1\r\n"), NULL, 0},
    {S("0x5\r\n"), NULL, 0},
    {S("5\r\nhelloX\r\n0\r\n\r\n"), NULL, 0},
    {S("5\r\nhello\n0\r\n\r\n"), NULL, 0},
    {S("5\r\nhello\r0\r\n\r\n"), NULL, 0},
    {S("5\r\nhello\rX0\r\n\r\n"), NULL, 0},
    {S("5\nhello\r\n0\r\n\r\n"), NULL, 0},
    {S("5\r\r\nhello\r\n"), NULL, 0},
    {S("00000000000000005\r\nhello\r\n"), NULL, 0},
    {S("FFFFFFFFFFFFFFFFF\r\n"), NULL, 0},
    {S("5 \r\nhello\r\n"), NULL, 0},
    {S("5;\r\nhello\r\n"), NULL, 0},
    {S("5;a=\r\nhello\r\n"), NULL, 0},
    {S("5;a=\"x\r\nhello\r\n"), NULL, 0},
    {S("5;a b\r\nhello\r\n"), NULL, 0},
    {S("5;a=b c\r\nhello\r\n"), NULL, 0},
    {S("5;a=\"x\"y\r\nhello\r\n"), NULL, 0},
    {S("5;a@=b\r\nhello\r\n"), NULL, 0},
    {S("0\r\nBad Trailer: x\r\n\r\n"), NULL, 0},
    {S("0\r\n obs: fold\r\n\r\n"), NULL, 0},
    {S("0\r\nT: a\nb\r\n\r\n"), NULL, 0},
    {S("0\r\nT: a\0\r\n\r\n"), NULL, 0},
    {S("0\r\n\n"), NULL, 0},
    {S("0\r\n\r\r"), NULL, 0},
    {S("0\r\nT x\r\n\r\n"), NULL, 0},
};

static void test_chunked_cases(void **state)
{
	size_t (*steps[])(unsigned *) = {step_all, step_one, step_random};
	static char out[256];
	(void)state;
	for (size_t i = 0; i < sizeof(chunk_cases) / sizeof(chunk_cases[0]); i++) {
		const struct chunk_case *c = &chunk_cases[i];
		for (size_t s = 0; s < 3; s++) {
			for (unsigned seed = 1; seed <= (s == 2 ? 50u : 1u); seed++) {
				size_t outlen, used;
				int rc =
				    chunked_run(c->in, c->len, steps[s], seed, out, &outlen, &used);
				if (!c->data) {
					if (rc != PG_CHUNKED_ERROR)
						fail_msg("chunk_cases[%zu] step %zu: rc %d", i, s,
						         rc);
					continue;
				}
				if (rc != PG_CHUNKED_DONE || used != c->len - c->tail)
					fail_msg(
					    "chunk_cases[%zu] step %zu seed %u: rc %d used %zu", i,
					    s, seed, rc, used);
				assert_int_equal(outlen, strlen(c->data));
				assert_memory_equal(out, c->data, outlen);
			}
		}
	}
}

/* A larger body, random chunk sizes, split at every byte and at random. */
static void test_chunked_roundtrip(void **state)
{
	enum { DATA = 20000 };
	char *data = malloc(DATA), *enc = malloc(DATA * 2), *out = malloc(DATA);
	size_t (*steps[])(unsigned *) = {step_all, step_one, step_random};
	unsigned s = 7;
	size_t elen = 0;
	(void)state;

	assert_non_null(data);
	assert_non_null(enc);
	assert_non_null(out);
	for (size_t i = 0; i < DATA; i++)
		data[i] = (char)(i * 131 + 7);
	for (size_t pos = 0; pos < DATA;) {
		s = s * 1103515245u + 12345u;
		size_t n = 1 + (s >> 16) % 3000;
		if (n > DATA - pos)
			n = DATA - pos;
		elen += (size_t)sprintf(enc + elen, (s & 1) ? "%zx;k=\"v\"\r\n" : "%zX\r\n", n);
		memcpy(enc + elen, data + pos, n);
		elen += n;
		memcpy(enc + elen, "\r\n", 2);
		elen += 2;
		pos += n;
	}
	elen += (size_t)sprintf(enc + elen, "0\r\nX-Checksum: 1\r\n\r\n");
	for (size_t k = 0; k < 3; k++) {
		for (unsigned seed = 1; seed <= 20; seed++) {
			size_t outlen, used;
			assert_int_equal(
			    chunked_run(enc, elen, steps[k], seed, out, &outlen, &used),
			    PG_CHUNKED_DONE);
			assert_int_equal(used, elen);
			assert_int_equal(outlen, DATA);
			assert_memory_equal(out, data, DATA);
		}
	}
	free(data);
	free(enc);
	free(out);
}

static void test_chunked_edges(void **state)
{
	struct pg_frame c;
	size_t consumed, off, len;
	char *big = malloc(80 * 1024);
	(void)state;
	assert_non_null(big);

	/* 16 hex digits of F: a huge but legal size; data flows */
	pg_chunked_init(&c);
	assert_int_equal(pg_chunked_feed(&c, S("FFFFFFFFFFFFFFFF\r\nxyz"), &consumed, &off, &len),
	                 PG_CHUNKED_DATA);
	assert_int_equal(off, 18);
	assert_int_equal(len, 3);
	assert_int_equal(consumed, 21);

	/* errors are sticky; DONE consumes nothing more */
	pg_chunked_init(&c);
	assert_int_equal(pg_chunked_feed(&c, S("z"), &consumed, &off, &len), PG_CHUNKED_ERROR);
	assert_int_equal(pg_chunked_feed(&c, S("0\r\n\r\n"), &consumed, &off, &len),
	                 PG_CHUNKED_ERROR);
	pg_chunked_init(&c);
	assert_int_equal(pg_chunked_feed(&c, S("0\r\n\r\n"), &consumed, &off, &len),
	                 PG_CHUNKED_DONE);
	assert_int_equal(pg_chunked_feed(&c, S("0\r\n\r\n"), &consumed, &off, &len),
	                 PG_CHUNKED_DONE);
	assert_int_equal(consumed, 0);

	/* trailers: 64 KiB in total is the bound */
	size_t n = (size_t)sprintf(big, "0\r\n");
	while (n < 66 * 1024)
		n += (size_t)sprintf(big + n, "T: %0100d\r\n", 0);
	memcpy(big + n, "\r\n", 2);
	pg_chunked_init(&c);
	assert_int_equal(pg_chunked_feed(&c, big, n + 2, &consumed, &off, &len), PG_CHUNKED_ERROR);
	pg_chunked_init(&c);
	assert_int_equal(pg_chunked_feed(&c, big, 3 + 60 * 1024, &consumed, &off, &len),
	                 PG_CHUNKED_MORE);

	/* one chunk-size line (extensions) is bounded too */
	n = (size_t)sprintf(big, "1");
	while (n < 5000)
		n += (size_t)sprintf(big + n, ";e=%d", 1);
	pg_chunked_init(&c);
	assert_int_equal(pg_chunked_feed(&c, big, n, &consumed, &off, &len), PG_CHUNKED_ERROR);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_chunked_cases),
	    cmocka_unit_test(test_chunked_roundtrip),
	    cmocka_unit_test(test_chunked_edges),
	};
	return cmocka_run_group_tests_name("http_chunked", tests, NULL, NULL);
}
