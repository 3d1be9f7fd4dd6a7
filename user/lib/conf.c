// SPDX-License-Identifier: MIT
/* The configuration file's syntax (conf.h). Pure: no I/O, no global state. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/conf.h"

void pg_conf_err_add(struct pg_conf_errs *e, unsigned line, const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL;
	int n;

	e->n++;
	if (e->n > PG_CONF_ERRS_MAX)
		return;
	if (!e->v && !(e->v = calloc(PG_CONF_ERRS_MAX, sizeof(*e->v)))) {
		e->oom = true;
		e->n--;
		return;
	}
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0) {
		e->oom = true;
		e->n--;
		return;
	}
	e->v[e->n - 1] = (struct pg_conf_err){.line = line, .msg = msg};
}

void pg_conf_errs_free(struct pg_conf_errs *e)
{
	for (size_t i = 0; i < pg_conf_errs_kept(e); i++)
		free(e->v[i].msg);
	free(e->v);
	*e = (struct pg_conf_errs){0};
}

void pg_conf_free(struct pg_conf *c)
{
	for (size_t i = 0; i < c->n; i++) {
		for (size_t k = 0; k < c->d[i].nw; k++)
			free(c->d[i].w[k]);
		free(c->d[i].w);
	}
	free(c->d);
	*c = (struct pg_conf){0};
}

const char *pg_conf_shown(const char *word, char *buf, size_t cap)
{
	size_t n = 0, max = cap - 1 < 64 ? cap - 1 : 64;

	for (; word[n] && n < max; n++)
		buf[n] = word[n] >= 0x20 && word[n] < 0x7f ? word[n] : '?';
	if (word[n] && n >= 3)
		memcpy(buf + n - 3, "...", 3);
	buf[n] = 0;
	return buf;
}

/* ---- parsing ----------------------------------------------------------- */

/* The directive being read: its words so far. */
struct cur {
	char **w;
	size_t nw, cap;
	unsigned line;
};

struct parser {
	struct pg_conf *out;
	struct pg_conf_errs *errs;
	/* the open blocks' indexes; DEAD: a block whose line had an error,
	 * its directives dropped (so that one error is told once) */
	int stack[PG_CONF_DEPTH_MAX];
	int depth, dead;
	struct cur cur;
	bool oom;
};

#define DEAD (-2)

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Ends an unquoted word. */
static bool is_special(char c)
{
	return c == ';' || c == '{' || c == '}' || c == '#' || c == '"';
}

static bool is_control(unsigned char c)
{
	return (c < 0x20 && c != '\t' && c != '\r' && c != '\n') || c == 0x7f;
}

static void cur_drop(struct cur *c)
{
	for (size_t i = 0; i < c->nw; i++)
		free(c->w[i]);
	c->nw = 0;
}

static void add_word(struct parser *ps, unsigned line, const char *s, size_t n)
{
	struct cur *c = &ps->cur;
	char *w;

	if (c->nw == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 8;
		char **nw = realloc(c->w, cap * sizeof(*nw));

		if (!nw) {
			ps->oom = true;
			return;
		}
		c->w = nw;
		c->cap = cap;
	}
	if (!c->nw)
		c->line = line;
	w = malloc(n + 1);
	if (!w) {
		ps->oom = true;
		return;
	}
	memcpy(w, s, n);
	w[n] = 0;
	c->w[c->nw++] = w;
}

/* The words read become a directive (a block when block). */
static int end_directive(struct parser *ps, bool block)
{
	struct pg_conf *o = ps->out;
	struct pg_conf_dir *nd;
	struct cur *c = &ps->cur;

	if (!c->nw)
		return -1;
	if (ps->dead) {
		cur_drop(c);
		return DEAD;
	}
	nd = realloc(o->d, (o->n + 1) * sizeof(*nd));
	if (!nd) {
		ps->oom = true;
		cur_drop(c);
		return -1;
	}
	o->d = nd;
	nd[o->n] = (struct pg_conf_dir){
	    .line = c->line,
	    .parent = ps->depth ? ps->stack[ps->depth - 1] : -1,
	    .block = block,
	    .nw = c->nw,
	    .w = malloc(c->nw * sizeof(char *)),
	};
	if (!nd[o->n].w) {
		ps->oom = true;
		cur_drop(c);
		return -1;
	}
	memcpy(nd[o->n].w, c->w, c->nw * sizeof(char *));
	c->nw = 0;
	return (int)o->n++;
}

/* A quoted word starting at the '"' at s[*i]; *i ends past the closing '"'.
 * 0, or -1 having said why. */
static int quoted(struct parser *ps, const char *s, size_t n, size_t *i, unsigned line)
{
	char *w = malloc(n - *i), *o = w;
	size_t k = *i + 1;

	if (!w) {
		ps->oom = true;
		return -1;
	}
	for (; k < n && s[k] != '"' && s[k] != '\n'; k++) {
		if (s[k] == '\\' && k + 1 < n && (s[k + 1] == '"' || s[k + 1] == '\\')) {
			*o++ = s[++k];
		} else if (s[k] == '\\') {
			pg_conf_err_add(
			    ps->errs, line,
			    "unknown escape \\%c in a quoted word (it knows \\\" and \\\\)",
			    k + 1 < n && s[k + 1] > 0x20 && s[k + 1] < 0x7f ? s[k + 1] : '?');
			free(w);
			return -1;
		} else if (is_control((unsigned char)s[k]) || s[k] == '\r') {
			pg_conf_err_add(ps->errs, line, "control character 0x%02x in a quoted word",
			                (unsigned char)s[k]);
			free(w);
			return -1;
		} else {
			*o++ = s[k];
		}
	}
	if (k == n || s[k] != '"') {
		pg_conf_err_add(ps->errs, line,
		                "a quoted word is not closed on its line (a '\"' is missing)");
		free(w);
		return -1;
	}
	*i = k + 1;
	if (*i < n && !is_space(s[*i]) && s[*i] != '\n' && s[*i] != ';' && s[*i] != '{' &&
	    s[*i] != '}' && s[*i] != '#') {
		pg_conf_err_add(ps->errs, line,
		                "a quoted word is followed by '%c' (leave a space between words)",
		                s[*i] > 0x20 && s[*i] < 0x7f ? s[*i] : '?');
		free(w);
		return -1;
	}
	add_word(ps, line, w, (size_t)(o - w));
	free(w);
	return 0;
}

/* '{': the words read open a block. */
static int open_block(struct parser *ps, unsigned line)
{
	int at;

	if (!ps->cur.nw) {
		pg_conf_err_add(ps->errs, line,
		                "'{' without a name before it on its line (a block is "
		                "NAME [VALUE]... { ... })");
		return -1;
	}
	if (ps->depth == PG_CONF_DEPTH_MAX) {
		pg_conf_err_add(ps->errs, line, "blocks nest at most %d deep", PG_CONF_DEPTH_MAX);
		cur_drop(&ps->cur);
		return -1;
	}
	at = end_directive(ps, true);
	if (at < 0 && at != DEAD)
		return -1;
	ps->dead += at == DEAD;
	ps->stack[ps->depth++] = at;
	return 0;
}

/* '}': the innermost block ends. */
static void close_block(struct parser *ps)
{
	ps->dead -= ps->stack[--ps->depth] == DEAD;
}

/* One line, s[0..n) without its '\n'. On an error the rest of the line is
 * skipped, and the directive it was in dropped. */
static void parse_line(struct parser *ps, const char *s, size_t n, unsigned line)
{
	size_t i = 0;

	while (i < n && !ps->oom) {
		char c = s[i];

		if (is_space(c)) {
			i++;
		} else if (c == '#') {
			break;
		} else if (c == ';') {
			end_directive(ps, false);
			i++;
		} else if (c == '{') {
			if (open_block(ps, line))
				goto skip;
			i++;
		} else if (c == '}') {
			end_directive(ps, false);
			if (!ps->depth) {
				pg_conf_err_add(ps->errs, line, "'}' closes no block");
				goto skip;
			}
			close_block(ps);
			i++;
		} else if (c == '"') {
			if (quoted(ps, s, n, &i, line))
				goto skip;
		} else if (is_control((unsigned char)c)) {
			pg_conf_err_add(ps->errs, line, "control character 0x%02x",
			                (unsigned char)c);
			goto skip;
		} else {
			size_t b = i;

			while (i < n && !is_space(s[i]) && !is_special(s[i]) &&
			       !is_control((unsigned char)s[i]))
				i++;
			if (i < n && s[i] == '"') {
				pg_conf_err_add(
				    ps->errs, line,
				    "'\"' inside a word (quote the whole word: \"...\")");
				goto skip;
			}
			add_word(ps, line, s + b, i - b);
		}
	}
	/* the end of a line ends a directive */
	end_directive(ps, false);
	return;
skip:
	cur_drop(&ps->cur);
	/* the rest of the line still opens and closes blocks: one it opens
	 * is skipped whole (DEAD), its '}' with it */
	for (int extra = 0; i < n && s[i] != '#'; i++) {
		if (s[i] == '{' && ps->depth < PG_CONF_DEPTH_MAX) {
			ps->stack[ps->depth++] = DEAD;
			ps->dead++;
		} else if (s[i] == '{') {
			extra++;
		} else if (s[i] == '}' && extra) {
			extra--;
		} else if (s[i] == '}' && ps->depth) {
			close_block(ps);
		}
	}
}

int pg_conf_parse(const char *text, size_t len, struct pg_conf *out, struct pg_conf_errs *errs)
{
	struct parser ps = {.out = out, .errs = errs};
	size_t before = errs->n, pos = 0;
	unsigned line = 0;

	*out = (struct pg_conf){0};
	while (pos < len && !ps.oom) {
		const char *b = text + pos, *nl = memchr(b, '\n', len - pos);
		size_t l = nl ? (size_t)(nl - b) : len - pos;

		pos += l + 1;
		parse_line(&ps, b, l, ++line);
	}
	cur_drop(&ps.cur);
	free(ps.cur.w);
	if (ps.oom) {
		pg_conf_err_add(errs, line, "out of memory");
	} else {
		/* the innermost first: that is the one that lacks its '}' */
		while (ps.depth > 0) {
			const struct pg_conf_dir *d;
			char name[80];

			if (ps.stack[--ps.depth] == DEAD)
				continue;
			d = &out->d[ps.stack[ps.depth]];
			pg_conf_err_add(errs, d->line, "block \"%s\" is not closed ('}' missing)",
			                pg_conf_shown(d->w[0], name, sizeof(name)));
		}
	}
	return errs->n > before || errs->oom ? -1 : 0;
}

/* ---- writing ----------------------------------------------------------- */

bool pg_conf_needs_quotes(const char *word)
{
	if (!*word)
		return true;
	for (const char *p = word; *p; p++)
		if (is_space(*p) || is_special(*p))
			return true;
	return false;
}

const char *pg_conf_word(const char *word, char *buf, size_t cap)
{
	size_t n = 0;

	for (const char *p = word; *p; p++)
		if (is_control((unsigned char)*p) || *p == '\r' || *p == '\n')
			return NULL;
	if (!pg_conf_needs_quotes(word)) {
		if (strlen(word) >= cap)
			return NULL;
		return strcpy(buf, word);
	}
	if (cap < 3)
		return NULL;
	buf[n++] = '"';
	for (const char *p = word; *p; p++) {
		if (n + 4 > cap)
			return NULL;
		if (*p == '"' || *p == '\\')
			buf[n++] = '\\';
		buf[n++] = *p;
	}
	buf[n++] = '"';
	buf[n] = 0;
	return buf;
}
