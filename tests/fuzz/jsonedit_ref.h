/* SPDX-License-Identifier: MIT */
/*
 * A reference for user/lib/jsonedit.c, written apart from it: what an
 * edited object must hold, member by member, checked against the output's
 * own parse. Shared by the unit test (tests/unit/test_jsonedit.c) and the
 * fuzz target (fuzz_jsonedit.c). Header-only.
 */
#ifndef PG_JSONEDIT_REF_H
#define PG_JSONEDIT_REF_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "lib/json.h"
#include "lib/jsonedit.h"

struct ref_member {
	char *name; /* unescaped */
	size_t nlen;
	const char *val; /* raw */
	size_t vlen;
};

static char *ref_name(const struct pg_json *js, uint32_t k, size_t *n)
{
	char probe[1];
	size_t len = pg_json_str_copy(js, k, probe, 0);
	char *s = malloc(len + 1);

	pg_json_str_copy(js, k, s, len);
	*n = len;
	return s;
}

static void ref_raw(const struct pg_json *js, uint32_t v, const char **p, size_t *n)
{
	const struct pg_json_tok *t = &js->tok[v];
	size_t a = t->type == PG_JSON_STRING ? t->start - 1 : t->start;
	size_t b = t->type == PG_JSON_STRING ? t->end + 1 : t->end;

	*p = js->src + a;
	*n = b - a;
}

/* The members of parse js's root object. */
static size_t ref_members(const struct pg_json *js, struct ref_member *m)
{
	uint32_t k = pg_json_first(0);

	for (uint32_t i = 0; i < js->tok[0].size; i++, k = pg_json_member_next(js, k)) {
		m[i].name = ref_name(js, k, &m[i].nlen);
		ref_raw(js, k + 1, &m[i].val, &m[i].vlen);
	}
	return js->tok[0].size;
}

static bool ref_same(const char *a, size_t an, const char *b, size_t bn)
{
	return an == bn && !memcmp(a, b, an);
}

/*
 * NULL when out[0..olen) is in[0..ilen) (a JSON object) with edits
 * e[0..n) applied as jsonedit.h says; else what is wrong.
 */
static const char *jedit_check(const char *in, size_t ilen, const struct pg_jedit *e, size_t n,
                               const char *out, size_t olen)
{
	struct pg_json a = {0}, b = {0};
	struct ref_member *am = NULL, *bm = NULL, *want = NULL;
	size_t na = 0, nb = 0, nw = 0;
	bool done[PG_JEDIT_MAX] = {false}, touched = false;
	const char *err = NULL;

	if (pg_json_parse(&a, in, ilen) || a.tok[0].type != PG_JSON_OBJECT) {
		err = "input is not an object";
		goto out;
	}
	if (pg_json_parse(&b, out, olen) || b.tok[0].type != PG_JSON_OBJECT) {
		err = "output is not a JSON object";
		goto out;
	}
	am = calloc(a.tok[0].size + 1, sizeof(*am));
	bm = calloc(b.tok[0].size + 1, sizeof(*bm));
	want = calloc(a.tok[0].size + n + 1, sizeof(*want));
	na = ref_members(&a, am);
	nb = ref_members(&b, bm);
	for (size_t i = 0; i < na; i++) {
		size_t j = 0;

		while (j < n && !ref_same(am[i].name, am[i].nlen, e[j].name, e[j].nlen))
			j++;
		if (j == n) {
			want[nw++] = am[i];
			continue;
		}
		touched = true;
		if (!e[j].value || done[j])
			continue;
		want[nw] = am[i];
		want[nw].val = e[j].value;
		want[nw++].vlen = e[j].vlen;
		done[j] = true;
	}
	for (size_t j = 0; j < n; j++)
		if (!done[j] && e[j].value) {
			want[nw++] = (struct ref_member){(char *)e[j].name, e[j].nlen, e[j].value,
			                                 e[j].vlen};
			touched = true;
		}
	if (nw != nb) {
		err = "member count";
		goto out;
	}
	for (size_t i = 0; i < nw; i++)
		if (!ref_same(want[i].name, want[i].nlen, bm[i].name, bm[i].nlen) ||
		    !ref_same(want[i].val, want[i].vlen, bm[i].val, bm[i].vlen)) {
			err = "a member differs";
			goto out;
		}
	if (!touched && !ref_same(in, ilen, out, olen))
		err = "nothing edited, yet the bytes changed";
out:
	for (size_t i = 0; am && i < na; i++)
		free(am[i].name);
	for (size_t i = 0; bm && i < nb; i++)
		free(bm[i].name);
	free(am);
	free(bm);
	free(want);
	pg_json_free(&a);
	pg_json_free(&b);
	return err;
}

#endif /* PG_JSONEDIT_REF_H */
