// SPDX-License-Identifier: MIT
/*
 * Loading a request trace (trace.h) and the numbers that scale its replay:
 * W, the tokens an infinite prefix cache would not hold, and D, its span.
 * Lines are parsed strictly with the gateway's JSON parser, so a damaged
 * file is refused with its line number rather than replayed wrong.
 */
#include "trace.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "lib/buf.h"

/* Room for one more request and nids more ids. */
static int grow(struct pg_trace *t, size_t nids)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4096;
		struct pg_trace_req *r = realloc(t->req, cap * sizeof(*r));

		if (!r)
			return -1;
		t->req = r;
		t->cap = cap;
	}
	if (t->nids + nids > t->ids_cap) {
		size_t cap = t->ids_cap ? t->ids_cap : 65536;
		uint32_t *ids;

		while (cap < t->nids + nids)
			cap *= 2;
		ids = realloc(t->ids, cap * sizeof(*ids));
		if (!ids)
			return -1;
		t->ids = ids;
		t->ids_cap = cap;
	}
	return 0;
}

/* Member v (a token index, -1: absent) as an integer in [lo, hi]. */
static int member_int(const struct pg_json *js, int64_t v, const char *name, int64_t lo, int64_t hi,
                      int64_t *out, char *err, size_t errlen)
{
	if (v < 0) {
		snprintf(err, errlen, "no \"%s\"", name);
		return -1;
	}
	if (js->tok[v].type != PG_JSON_NUMBER || pg_json_get_i64(js, (uint32_t)v, out) ||
	    *out < lo || *out > hi) {
		snprintf(err, errlen, "\"%s\": want an integer in [%lld, %lld]", name,
		         (long long)lo, (long long)hi);
		return -1;
	}
	return 0;
}

static bool blank(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
			return false;
	return true;
}

int pg_trace_add_line(struct pg_trace *t, struct pg_json *js, const char *line, size_t len,
                      char *err, size_t errlen)
{
	static const struct pg_json_name names[4] = {
	    {"timestamp", 9}, {"input_length", 12}, {"output_length", 13}, {"hash_ids", 8}};
	int64_t v[4], ts, in, out;
	struct pg_trace_req *r;
	uint32_t ids, k;

	if (blank(line, len))
		return 1;
	if (pg_json_parse(js, line, len) == -1) {
		snprintf(err, errlen, "not JSON: %s at byte %zu", js->err_msg, js->err_pos);
		return -1;
	}
	if (!pg_json_find_n(js, 0, names, 4, v)) {
		snprintf(err, errlen, "not a JSON object");
		return -1;
	}
	/* Timestamps up to 2^53 ms: exact as doubles, as the schedule uses them. */
	if (member_int(js, v[0], "timestamp", 0, (int64_t)1 << 53, &ts, err, errlen) ||
	    member_int(js, v[1], "input_length", 1, PG_TRACE_MAX_TOKENS, &in, err, errlen) ||
	    member_int(js, v[2], "output_length", 0, PG_TRACE_MAX_TOKENS, &out, err, errlen))
		return -1;
	if (v[3] < 0 || js->tok[v[3]].type != PG_JSON_ARRAY) {
		snprintf(err, errlen, "\"hash_ids\": want an array of block ids");
		return -1;
	}
	if (t->n && (uint64_t)ts < t->req[t->n - 1].ts_ms) {
		snprintf(err, errlen, "\"timestamp\" %lld is before the previous line's %llu",
		         (long long)ts, (unsigned long long)t->req[t->n - 1].ts_ms);
		return -1;
	}
	ids = js->tok[v[3]].size;
	if (t->nids + ids > PG_TRACE_MAX_IDS) {
		snprintf(err, errlen, "more than %u block ids in all", PG_TRACE_MAX_IDS);
		return -1;
	}
	if (grow(t, ids) == -1) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	k = (uint32_t)pg_json_first((uint32_t)v[3]);
	for (uint32_t i = 0; i < ids; i++, k = js->tok[k].next) {
		int64_t id;

		if (js->tok[k].type != PG_JSON_NUMBER || pg_json_get_i64(js, k, &id) || id < 0 ||
		    id > UINT32_MAX) {
			snprintf(err, errlen, "\"hash_ids\"[%u]: want an integer in [0, %u]", i,
			         UINT32_MAX);
			return -1;
		}
		t->ids[t->nids + i] = (uint32_t)id;
	}
	r = &t->req[t->n++];
	*r = (struct pg_trace_req){
	    .ts_ms = (uint64_t)ts,
	    .input_len = (uint32_t)in,
	    .output_len = (uint32_t)out,
	    .first_id = (uint32_t)t->nids,
	    .nids = ids,
	};
	t->nids += ids;
	return 0;
}

/*
 * The next line of f into b (without its newline). Returns 1 with a line,
 * 0 at the end, -1 on a read error or an over-long line (*why says which).
 */
static int read_line(gzFile f, struct pg_buf *b, const char **why)
{
	char chunk[65536];

	b->len = 0;
	for (;;) {
		size_t n;

		if (!gzgets(f, chunk, sizeof(chunk))) {
			int zerr;
			const char *msg = gzerror(f, &zerr);

			if (zerr != Z_OK && zerr != Z_STREAM_END) {
				*why = msg;
				return -1;
			}
			return b->len ? 1 : 0; /* a last line without a newline counts */
		}
		n = strlen(chunk);
		if (n && chunk[n - 1] == '\n') {
			pg_buf_append(b, chunk, n - 1);
			break;
		}
		pg_buf_append(b, chunk, n);
		if (b->len > PG_TRACE_MAX_LINE) {
			*why = "line longer than 16 MiB: not a trace line";
			return -1;
		}
	}
	if (b->oom) {
		*why = "out of memory";
		return -1;
	}
	return 1;
}

int pg_trace_load(struct pg_trace *t, const char *path)
{
	struct pg_json js = {0};
	struct pg_buf line = {0};
	const char *why = NULL;
	char err[160];
	size_t lineno = 0;
	gzFile f;
	int rc;

	errno = 0;
	f = gzopen(path, "rb");
	if (!f) {
		fprintf(stderr, "pgload: --trace %s: %s\n", path,
		        errno ? strerror(errno) : "cannot open");
		return -1;
	}
	gzbuffer(f, 1 << 17);
	while ((rc = read_line(f, &line, &why)) == 1) {
		lineno++;
		if (pg_trace_add_line(t, &js, line.p, line.len, err, sizeof(err)) == -1) {
			fprintf(stderr, "pgload: --trace %s:%zu: %s\n", path, lineno, err);
			rc = -1;
			break;
		}
	}
	if (rc == -1 && why) {
		size_t pl = strlen(path);

		/* zlib's messages start with the path: say it once. */
		if (strncmp(why, path, pl) == 0 && strncmp(why + pl, ": ", 2) == 0)
			why += pl + 2;
		fprintf(stderr, "pgload: --trace %s:%zu: %s\n", path, lineno + 1, why);
	}
	if (rc == 0 && !t->n) {
		fprintf(stderr, "pgload: --trace %s: no requests in it\n", path);
		rc = -1;
	}
	gzclose(f);
	pg_json_free(&js);
	pg_buf_free(&line);
	return rc;
}

void pg_trace_free(struct pg_trace *t)
{
	free(t->req);
	free(t->ids);
	memset(t, 0, sizeof(*t));
}

/*
 * A set of uint32 ids: open addressing, linear probing, Fibonacci hashing.
 * UINT32_MAX marks an empty slot, so that id is kept aside.
 */
struct idset {
	uint32_t *slot;
	unsigned bits;
	bool has_max;
	uint64_t n;
};

/* Adds id; returns whether it was there already. */
static bool idset_add(struct idset *s, uint32_t id)
{
	size_t mask = ((size_t)1 << s->bits) - 1;
	size_t i;

	if (id == UINT32_MAX) {
		bool had = s->has_max;

		s->n += !had;
		s->has_max = true;
		return had;
	}
	for (i = (uint32_t)(id * 2654435769u) >> (32 - s->bits);; i = (i + 1) & mask) {
		if (s->slot[i] == id)
			return true;
		if (s->slot[i] == UINT32_MAX) {
			s->slot[i] = id;
			s->n++;
			return false;
		}
	}
}

static bool idset_has(const struct idset *s, uint32_t id)
{
	size_t mask = ((size_t)1 << s->bits) - 1;

	if (id == UINT32_MAX)
		return s->has_max;
	for (size_t i = (uint32_t)(id * 2654435769u) >> (32 - s->bits);; i = (i + 1) & mask) {
		if (s->slot[i] == id)
			return true;
		if (s->slot[i] == UINT32_MAX)
			return false;
	}
}

int pg_trace_uncached(const struct pg_trace *t, uint64_t *w, uint64_t *distinct)
{
	struct idset s = {.bits = 10};
	uint64_t miss = 0;

	/* At most half full: no more distinct ids than ids. */
	while (((size_t)1 << s.bits) < 2 * t->nids)
		s.bits++;
	s.slot = malloc(((size_t)1 << s.bits) * sizeof(*s.slot));
	if (!s.slot)
		return -1;
	memset(s.slot, 0xff, ((size_t)1 << s.bits) * sizeof(*s.slot));
	for (size_t i = 0; i < t->n; i++) {
		const struct pg_trace_req *r = &t->req[i];
		const uint32_t *ids = t->ids + r->first_id;
		uint64_t hit = 0;

		while (hit < r->nids && idset_has(&s, ids[hit]))
			hit++;
		hit *= PG_TRACE_BLOCK_TOKENS;
		miss += r->input_len - (hit < r->input_len ? hit : r->input_len);
		for (uint32_t k = 0; k < r->nids; k++)
			idset_add(&s, ids[k]);
	}
	*w = miss;
	*distinct = s.n;
	free(s.slot);
	return 0;
}

double pg_trace_span_s(const struct pg_trace *t)
{
	if (t->n < 2)
		return 0;
	return (double)(t->req[t->n - 1].ts_ms - t->req[0].ts_ms) / 1000.0;
}

uint64_t pg_trace_offset_ns(const struct pg_trace *t, size_t first, size_t k, double s)
{
	uint64_t ms = t->req[first + k].ts_ms - t->req[first].ts_ms;

	return (uint64_t)llround((double)ms * 1e6 / s);
}
