// SPDX-License-Identifier: MIT
/*
 * Model pools: the lookups of modelpool.h. The model scan reads the body's top
 * level only, skipping strings with the JSON parser's own scan
 * (json_scan.h) and containers by depth, without building tokens: the
 * body is parsed in full later for its key, but the pool (whose
 * PrefixLength that key needs) must be known first.
 */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "lib/json.h"
#include "lib/json_scan.h"
#include "lib/modelpool.h"

bool pg_pool_name_ok(const char *s, size_t len)
{
	if (!len || len >= PG_POOL_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-",
		            s[i]) ||
		    !s[i])
			return false;
	return true;
}

bool pg_pool_reachable(const struct pg_pool_table *t, unsigned p)
{
	if (p >= t->n)
		return p == PG_POOL_DEFAULT; /* no table: the default pool alone */
	return t->pool[p].nmodels || t->pool[p].npaths || (p == PG_POOL_DEFAULT && t->catch_all);
}

const char *pg_pool_table_names(const struct pg_pool_table *t, bool with_default, char *buf,
                                size_t cap)
{
	size_t used = 0;

	buf[0] = 0;
	for (unsigned p = with_default ? 0 : 1; p < t->n && used < cap; p++)
		used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? ", " : "",
		                         t->pool[p].name);
	if (!buf[0])
		snprintf(buf, cap, "%s", with_default ? "default" : "(none)");
	return buf;
}

size_t pg_pool_list_join(char *const *v, size_t n, char *buf, size_t cap)
{
	size_t used = 0, shown = 0;

	buf[0] = 0;
	for (size_t i = 0; i < n; i++, shown++) {
		size_t l = strlen(v[i]) + (i ? 1 : 0);

		if (used + l >= cap)
			break;
		used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? "," : "", v[i]);
	}
	return shown;
}

int pg_pool_find(const struct pg_pool_table *t, const char *name, size_t len)
{
	for (unsigned p = 0; p < t->n; p++)
		if (strlen(t->pool[p].name) == len && !memcmp(t->pool[p].name, name, len))
			return (int)p;
	return -1;
}

int pg_pool_by_model_name(const struct pg_pool_table *t, const char *model, size_t len)
{
	for (unsigned p = 0; p < t->n; p++)
		for (size_t i = 0; i < t->pool[p].nmodels; i++) {
			const char *m = t->pool[p].models[i];

			if (m[0] == model[0] && strlen(m) == len && !memcmp(m, model, len))
				return (int)p;
		}
	return -1;
}

static int catch_all(const struct pg_pool_table *t)
{
	return t->catch_all ? PG_POOL_DEFAULT : PG_POOL_UNKNOWN;
}

int pg_pool_by_path(const struct pg_pool_table *t, bool post, const char *path, size_t len)
{
	int best = -1;
	size_t best_len = 0;

	for (unsigned p = 0; t->by_path && p < t->n; p++)
		for (size_t i = 0; i < t->pool[p].npaths; i++) {
			const char *pre = t->pool[p].paths[i];
			size_t n = strlen(pre);

			if (n > len || memcmp(pre, path, n) || n <= best_len)
				continue;
			if (n == len || pre[n - 1] == '/' || path[n] == '/') {
				best = (int)p;
				best_len = n;
			}
		}
	if (best >= 0)
		return best;
	if (t->by_model && post && len >= 4 && !memcmp(path, "/v1/", 4))
		return PG_POOL_BY_MODEL;
	return catch_all(t);
}

int pg_pool_by_model(const struct pg_pool_table *t, const char *model, int mlen)
{
	int p = mlen >= 0 ? pg_pool_by_model_name(t, model, (size_t)mlen) : -1;

	return p >= 0 ? p : catch_all(t);
}

/* ---- the model scan ------------------------------------------------------ */

static size_t skip_ws(const unsigned char *s, size_t p, size_t len)
{
	while (p < len && (s[p] == ' ' || s[p] == '\t' || s[p] == '\n' || s[p] == '\r'))
		p++;
	return p;
}

static bool is_hex(unsigned char c)
{
	return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

/* A string from its opening quote at p: the offset of its closing quote, or
 * len if it does not end well (truncated, a bad escape or control byte).
 * *escaped: it holds a backslash escape. Non-ASCII is not validated here:
 * an invalid model name simply matches no pool. */
static size_t string_end(const unsigned char *s, size_t p, size_t len, bool *escaped)
{
	*escaped = false;
	for (p++;;) {
		p = pg_json_plain_end(s, p, len);
		if (p >= len)
			return len;
		if (s[p] == '"')
			return p;
		if (s[p] >= 0x80) {
			p++;
			continue;
		}
		if (s[p] != '\\' || p + 1 >= len)
			return len; /* a control byte, or truncated */
		*escaped = true;
		if (s[p + 1] == 'u') {
			if (p + 6 > len || !is_hex(s[p + 2]) || !is_hex(s[p + 3]) ||
			    !is_hex(s[p + 4]) || !is_hex(s[p + 5]))
				return len;
			p += 6;
		} else if (strchr("\"\\/bfnrt", s[p + 1]) && s[p + 1]) {
			p += 2;
		} else {
			return len;
		}
	}
}

/* A string from its opening quote at p, skipped without a look at its
 * content: the offset of the first quote after p not escaped by an odd
 * run of backslashes, or len. memchr finds the quotes; escapes elsewhere
 * cost nothing (string_end stops at each one: several times slower on
 * text with many of them, measured on a 32 KiB chat body). */
static size_t skip_string(const unsigned char *s, size_t p, size_t len)
{
	for (p++; p < len;) {
		const unsigned char *q = memchr(s + p, '"', len - p);
		size_t e, k;

		if (!q)
			return len;
		e = (size_t)(q - s);
		for (k = e; k > p && s[k - 1] == '\\'; k--)
			;
		if (!((e - k) & 1))
			return e;
		p = e + 1;
	}
	return len;
}

/* A value other than a string from p: one past its end, or len. Containers
 * are skipped by depth, their strings by string_end. */
static size_t value_end(const unsigned char *s, size_t p, size_t len)
{
	size_t depth = 0;

	for (; p < len; p++) {
		switch (s[p]) {
		case '"':
			p = skip_string(s, p, len);
			if (p >= len)
				return len;
			break;
		case '{':
		case '[':
			depth++;
			break;
		case '}':
		case ']':
			if (!depth)
				return p;
			if (!--depth)
				return p + 1;
			break;
		case ',':
		case ' ':
		case '\t':
		case '\n':
		case '\r':
			if (!depth)
				return p;
			break;
		default:
			break;
		}
	}
	return len;
}

/* Unescape the string s[a..b) (valid, as string_end checked) into buf of
 * cap bytes: its length, or -1 if longer. */
static int unescape(const char *s, size_t a, size_t b, bool escaped, char *buf, size_t cap)
{
	struct pg_json_tok tok = {
	    .start = (uint32_t)a, .end = (uint32_t)b, .flags = escaped ? PG_JSON_F_ESCAPED : 0};
	struct pg_json js = {.src = s, .len = b + 1, .tok = &tok, .ntok = 1, .cap = 1};
	size_t n;

	if (b >= UINT32_MAX)
		return -1;
	n = pg_json_str_copy(&js, 0, buf, cap);
	return n <= cap ? (int)n : -1;
}

int pg_json_model(const char *body, size_t len, char *buf)
{
	const unsigned char *s = (const unsigned char *)body;
	char name[8];
	size_t p = skip_ws(s, 0, len);
	int found = -1;
	bool esc;

	if (p >= len || s[p] != '{')
		return -1;
	p = skip_ws(s, p + 1, len);
	if (p < len && s[p] == '}')
		return -1;
	while (p < len && s[p] == '"') {
		size_t ne = string_end(s, p, len, &esc), vs, ve;
		bool is_model;

		if (ne >= len)
			break;
		is_model = !esc ? ne - p - 1 == 5 && !memcmp(s + p + 1, "model", 5)
		                : unescape(body, p + 1, ne, true, name, sizeof(name)) == 5 &&
		                      !memcmp(name, "model", 5);
		p = skip_ws(s, ne + 1, len);
		if (p >= len || s[p] != ':')
			break;
		vs = skip_ws(s, p + 1, len);
		if (vs >= len)
			break;
		if (s[vs] == '"') {
			ve = is_model ? string_end(s, vs, len, &esc) : skip_string(s, vs, len);
			if (ve >= len)
				break;
			if (is_model)
				found = unescape(body, vs + 1, ve, esc, buf, PG_MODEL_NAME_MAX);
			ve++;
		} else {
			ve = value_end(s, vs, len);
			if (is_model)
				found = -1; /* a later non-string model wins, as in the parser */
		}
		p = skip_ws(s, ve, len);
		if (p >= len || s[p] != ',')
			break;
		p = skip_ws(s, p + 1, len);
	}
	return found;
}

static void free_list(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void pg_pool_table_free(struct pg_pool_table *t)
{
	for (unsigned p = 0; p < t->n && p < PG_MAX_POOLS; p++) {
		free_list(t->pool[p].models, t->pool[p].nmodels);
		free_list(t->pool[p].paths, t->pool[p].npaths);
		free_list(t->pool[p].backends, t->pool[p].nbackends);
		for (size_t i = 0; i < t->pool[p].nbootstraps; i++)
			free(t->pool[p].bootstraps[i].addr);
		free(t->pool[p].bootstraps);
		free(t->pool[p].routing_file);
	}
	memset(t, 0, sizeof(*t));
}
