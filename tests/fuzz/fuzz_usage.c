// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over user/lib/usage.c: the input's first byte picks the
 * mode (auto, JSON, server-sent events), the rest is an answer's body.
 * Invariants: the body fed in pieces (their sizes from the input) reports
 * exactly what it does whole; and where every value in it is JSON that
 * json.c accepts, the report is a reference's: the body cut into lines and
 * events as usage.h says, each event parsed whole by json.c and its
 * members walked by the paths usage.h lists (a second statement of them,
 * on tokens rather than bytes).
 */
#include <stdbool.h>
#include <string.h>
#include "fuzz.h"
#include "lib/json.h"
#include "lib/usage.h"

static struct pg_json js;

/* The reference's figures, as the lexer keeps them. */
struct ref {
	uint32_t val[PG_UF_COUNT], got, flags, events;
	bool ok; /* every value was JSON: the report must be this */
};

enum {
	C_OTHER,
	C_ROOT,
	C_USAGE,
	C_PTD,
	C_TIMINGS,
	C_META,
	C_SGLEXT,
	C_DETAILS,
	C_CHOICES,
	C_CHOICE,
	C_DELTA
};

/* usage.h's paths: in container ctx, member name: a figure (field >= 0), a
 * container of ours (into), a content string, or a detail to add. */
static const struct path {
	int ctx;
	const char *name;
	int field, into;
	bool content, detail;
} paths[] = {
    {C_ROOT, "usage", -1, C_USAGE, false, false},
    {C_ROOT, "timings", -1, C_TIMINGS, false, false},
    {C_ROOT, "meta_info", -1, C_META, false, false},
    {C_ROOT, "sglext", -1, C_SGLEXT, false, false},
    {C_ROOT, "choices", -1, C_CHOICES, false, false},
    {C_USAGE, "prompt_tokens", PG_UF_PROMPT, 0, false, false},
    {C_USAGE, "completion_tokens", PG_UF_COMPLETION, 0, false, false},
    {C_USAGE, "prompt_tokens_details", -1, C_PTD, false, false},
    {C_PTD, "cached_tokens", PG_UF_CACHED, 0, false, false},
    {C_META, "prompt_tokens", PG_UF_M_PROMPT, 0, false, false},
    {C_META, "completion_tokens", PG_UF_M_COMPLETION, 0, false, false},
    {C_META, "cached_tokens", PG_UF_M_CACHED, 0, false, false},
    {C_META, "cached_tokens_details", -1, C_DETAILS, false, false},
    {C_TIMINGS, "prompt_n", PG_UF_T_PROMPT, 0, false, false},
    {C_TIMINGS, "cache_n", PG_UF_T_CACHE, 0, false, false},
    {C_TIMINGS, "predicted_n", PG_UF_T_PREDICTED, 0, false, false},
    {C_SGLEXT, "cached_tokens_details", -1, C_DETAILS, false, false},
    {C_DETAILS, "device", -1, 0, false, true},
    {C_DETAILS, "host", -1, 0, false, true},
    {C_DETAILS, "storage", -1, 0, false, true},
    {C_CHOICE, "delta", -1, C_DELTA, false, false},
    {C_CHOICE, "text", -1, 0, true, false},
    {C_DELTA, "content", -1, 0, true, false},
    {C_DELTA, "reasoning_content", -1, 0, true, false},
    {C_DELTA, "reasoning", -1, 0, true, false},
};

static uint32_t sat(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* Number token i as a figure: a non-negative integer, saturated. */
static bool figure(uint32_t i, uint32_t *v)
{
	const struct pg_json_tok *t = &js.tok[i];
	uint64_t x = 0;

	if (t->type != PG_JSON_NUMBER || !(t->flags & PG_JSON_F_INTEGER) || js.src[t->start] == '-')
		return false;
	for (uint32_t k = t->start; k < t->end; k++)
		x = x * 10 + (uint64_t)(js.src[k] - '0') > UINT32_MAX
		        ? (uint64_t)UINT32_MAX + 1
		        : x * 10 + (uint64_t)(js.src[k] - '0');
	*v = sat(x);
	return true;
}

static const struct path *path_of(int ctx, uint32_t name)
{
	const struct pg_json_tok *t = &js.tok[name];

	if (t->flags & PG_JSON_F_ESCAPED)
		return NULL; /* usage.h: ours are plain */
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (paths[i].ctx == ctx && strlen(paths[i].name) == t->end - t->start &&
		    !memcmp(paths[i].name, js.src + t->start, t->end - t->start))
			return &paths[i];
	return NULL;
}

/* Walk value token i, a container of ours ctx (C_OTHER: none). */
static void walk(struct ref *r, uint32_t i, int ctx, bool *content)
{
	const struct pg_json_tok *t = &js.tok[i];
	uint32_t k = pg_json_first(i), details = 0;
	bool any = false;

	if (ctx == C_USAGE)
		r->flags |= PG_USAGE_OBJECT;
	if (ctx == C_TIMINGS)
		r->flags |= PG_USAGE_TIMINGS;
	if (t->type == PG_JSON_ARRAY) {
		for (uint32_t m = 0; m < t->size; m++, k = js.tok[k].next)
			walk(r, k,
			     ctx == C_CHOICES && js.tok[k].type == PG_JSON_OBJECT ? C_CHOICE
			                                                          : C_OTHER,
			     content);
		return;
	}
	if (t->type != PG_JSON_OBJECT)
		return;
	for (uint32_t m = 0; m < t->size; m++, k = pg_json_member_next(&js, k)) {
		const struct path *p = ctx == C_OTHER ? NULL : path_of(ctx, k);
		const struct pg_json_tok *v = &js.tok[k + 1];
		uint32_t x;
		int into = C_OTHER;

		if (p && p->field >= 0 && figure(k + 1, &x)) {
			r->val[p->field] = x;
			r->got |= 1u << p->field;
		} else if (p && p->detail && figure(k + 1, &x)) {
			details = sat((uint64_t)details + x);
			any = true;
		} else if (p && p->content && v->type == PG_JSON_STRING && v->end > v->start) {
			*content = true;
		} else if (p && p->into &&
		           v->type == (p->into == C_CHOICES ? PG_JSON_ARRAY : PG_JSON_OBJECT)) {
			into = p->into;
		}
		walk(r, k + 1, into, content);
	}
	if (ctx == C_DETAILS && any) {
		r->val[PG_UF_DETAILS] = details;
		r->got |= 1u << PG_UF_DETAILS;
	}
}

static bool all_ws(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
			return false;
	return true;
}

/* One value (an event's data, or the whole body): walked if json.c takes
 * it; white space alone is no value; anything else makes r unusable. */
static void value(struct ref *r, const char *s, size_t n)
{
	bool content = false;

	if (all_ws(s, n))
		return;
	if (pg_json_parse(&js, s, n)) {
		r->ok = false;
		return;
	}
	walk(r, 0, js.tok[0].type == PG_JSON_OBJECT ? C_ROOT : C_OTHER, &content);
	r->events += content;
}

/* The reference's server-sent events. */
struct sse {
	struct ref *r;
	char *data;
	size_t len;
	bool has;
};

static void dispatch(struct sse *e)
{
	if (e->has)
		value(e->r, e->data, e->len);
	e->len = 0;
	e->has = false;
}

/* One line, terminated or (last) not. */
static void line(struct sse *e, const char *s, size_t n, bool terminated)
{
	const char *colon = memchr(s, ':', n);
	size_t flen = colon ? (size_t)(colon - s) : n;
	const char *v = colon ? colon + 1 : s + n;
	size_t vlen = colon ? n - flen - 1 : 0;

	if (!n) {
		dispatch(e);
		return;
	}
	if (flen != 4 || memcmp(s, "data", 4))
		return; /* a comment, another field */
	if (vlen && *v == ' ')
		v++, vlen--;
	if (!terminated && !vlen)
		return; /* its value not begun */
	if (vlen && *v == '[') {
		dispatch(e);
		if (vlen == 6 && !memcmp(v, "[DONE]", 6))
			e->r->flags |= PG_USAGE_DONE;
		else if (terminated)
			e->r->flags |= PG_USAGE_BROKEN;
		return;
	}
	if (e->has && !all_ws(e->data, e->len) && !pg_json_parse(&js, e->data, e->len))
		dispatch(e); /* the last event's value is whole: a new one */
	if (e->has)
		e->data[e->len++] = '\n';
	memcpy(e->data + e->len, v, vlen);
	e->len += vlen;
	e->has = true;
}

static void ref_sse(struct ref *r, const char *s, size_t n)
{
	struct sse e = {r, malloc(2 * n + 1), 0, false};
	size_t i = 0;

	FUZZ_CHECK(e.data);
	while (i < n) {
		size_t j = i;

		while (j < n && s[j] != '\n' && s[j] != '\r')
			j++;
		line(&e, s + i, j - i, j < n);
		if (j < n && s[j] == '\r' && j + 1 < n && s[j + 1] == '\n')
			j++;
		i = j + 1;
	}
	/* the event under way: its value must be whole or nothing */
	if (e.has) {
		if (!all_ws(e.data, e.len) && pg_json_parse(&js, e.data, e.len))
			r->ok = false;
		else
			dispatch(&e);
	}
	free(e.data);
}

/* What pg_usage_get makes of the figures (usage.h's order). */
static void report(const struct ref *r, bool sse, struct pg_usage *u)
{
	static const int prompt[] = {PG_UF_PROMPT, PG_UF_M_PROMPT},
	                 cached[] = {PG_UF_CACHED, PG_UF_M_CACHED, PG_UF_T_CACHE, PG_UF_DETAILS},
	                 completion[] = {PG_UF_COMPLETION, PG_UF_M_COMPLETION, PG_UF_T_PREDICTED};
	const uint32_t t = 1u << PG_UF_T_PROMPT | 1u << PG_UF_T_CACHE;

	memset(u, 0, sizeof(*u));
	u->have = r->flags;
	u->events = r->events;
	for (size_t i = 0; i < 2; i++)
		if (r->got >> prompt[i] & 1) {
			u->prompt_tokens = r->val[prompt[i]];
			u->have |= PG_USAGE_PROMPT;
			break;
		}
	if (!(u->have & PG_USAGE_PROMPT) && (r->got & t) == t) {
		u->prompt_tokens = sat((uint64_t)r->val[PG_UF_T_PROMPT] + r->val[PG_UF_T_CACHE]);
		u->have |= PG_USAGE_PROMPT;
	}
	for (size_t i = 0; i < 4; i++)
		if (r->got >> cached[i] & 1) {
			u->cached_tokens = r->val[cached[i]];
			u->cached_src = (uint8_t)(PG_USAGE_SRC_USAGE + i);
			u->have |= PG_USAGE_CACHED;
			break;
		}
	for (size_t i = 0; i < 3; i++)
		if (r->got >> completion[i] & 1) {
			u->completion_tokens = r->val[completion[i]];
			u->have |= PG_USAGE_COMPLETION;
			break;
		}
	if (!(u->have & PG_USAGE_COMPLETION) && sse && r->events) {
		u->completion_tokens = r->events;
		u->have |= PG_USAGE_COUNTED;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pg_usage_parse p;
	struct pg_usage whole, pieces, want;
	struct fuzz_rng rng;
	enum pg_usage_mode mode;
	const char *s = (const char *)data + 1;
	size_t n, skip = 0;
	struct ref r = {.ok = true};
	bool sse;

	if (!size)
		return 0;
	mode = (enum pg_usage_mode)(data[0] % 3);
	n = size - 1;
	pg_usage_init(&p, mode);
	pg_usage_feed(&p, s, n);
	pg_usage_get(&p, &whole);

	fuzz_rng_seed(&rng, data, size < 16 ? size : 16);
	pg_usage_init(&p, mode);
	for (size_t k = 0; k < n;) {
		size_t len = fuzz_piece(&rng, n - k);

		pg_usage_feed(&p, s + k, len);
		k += len;
	}
	pg_usage_get(&p, &pieces);
	FUZZ_CHECK(!memcmp(&whole, &pieces, sizeof(whole)));

	if (mode == PG_USAGE_AUTO) {
		while (skip < n && all_ws(s + skip, 1))
			skip++;
		if (skip == n)
			return 0; /* no mode chosen yet */
		mode = s[skip] == '{' || s[skip] == '[' ? PG_USAGE_JSON : PG_USAGE_SSE;
	}
	sse = mode == PG_USAGE_SSE;
	if (sse) {
		ref_sse(&r, s + skip, n - skip);
	} else {
		value(&r, s, n);
		if (all_ws(s, n))
			r.ok = false; /* no value: not whole */
		r.flags |= PG_USAGE_DONE;
		r.events = r.events ? 1 : 0;
	}
	if (!r.ok)
		return 0;
	report(&r, sse, &want);
	if (memcmp(&whole, &want, sizeof(want))) {
		fprintf(stderr, "have %#x/%#x p %u/%u c %u/%u o %u/%u e %u/%u src %u/%u\n",
		        whole.have, want.have, whole.prompt_tokens, want.prompt_tokens,
		        whole.cached_tokens, want.cached_tokens, whole.completion_tokens,
		        want.completion_tokens, whole.events, want.events, whole.cached_src,
		        want.cached_src);
		FUZZ_CHECK(!"the report is the reference's");
	}
	return 0;
}
