/* SPDX-License-Identifier: MIT */
/*
 * The configuration file's syntax (doc/configuration.md "Configuration file"), pure: text
 * in, directives with their line numbers out; what a directive means is
 * config/config_file.c's.
 *
 *   # a comment, to the end of the line
 *   listen 0.0.0.0:8080;
 *   pool llama {
 *       model meta-llama/Llama-3.1-8B-Instruct "llama 3";
 *       backend 10.0.0.1:8000 10.0.0.2:8000
 *   }
 *
 * A directive is a name and its values (words), ended by ';' or by the end
 * of its line: it never continues on the next line. A name followed by '{'
 * opens a block of directives, closed by '}'; '{' must be on the block's
 * line, '}' anywhere. A word is a run of anything but white space and
 * ; { } # ", or "a quoted word" on one line, where \" and \\ stand for
 * " and \. NUL and other control characters but tab are refused.
 *
 * Every error is collected (pg_conf_errs) with its line, and parsing goes
 * on at the next line, so that one pass reports all of them.
 */
#ifndef PG_CONF_H
#define PG_CONF_H

#include <stdbool.h>
#include <stddef.h>

#define PG_CONF_DEPTH_MAX 8   /* blocks nest at most this deep */
#define PG_CONF_ERRS_MAX  100 /* errors kept; those past it are only counted */

/* One directive. Blocks are flattened: a block's directives follow it in
 * the array, their parent its index. */
struct pg_conf_dir {
	unsigned line; /* of its name */
	int parent;    /* the block it is in, -1: the top level */
	bool block;    /* it opens a block */
	size_t nw;     /* words: w[0] the name, w[1..nw) its values; nw >= 1 */
	char **w;      /* owned */
};

struct pg_conf {
	struct pg_conf_dir *d; /* owned */
	size_t n;
};

/* Errors of one configuration. line 0: not from the file (the command
 * line's). Zero-initialise; free with pg_conf_errs_free. */
struct pg_conf_err {
	unsigned line;
	char *msg; /* owned */
};
struct pg_conf_errs {
	struct pg_conf_err *v; /* the first PG_CONF_ERRS_MAX, in order */
	size_t n;              /* errors in all (n > PG_CONF_ERRS_MAX: some not kept) */
	bool oom;              /* an error could not be kept for want of memory */
};

/* Add an error at line (0: none). */
void pg_conf_err_add(struct pg_conf_errs *e, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* How many are kept in e->v. */
static inline size_t pg_conf_errs_kept(const struct pg_conf_errs *e)
{
	return e->n < PG_CONF_ERRS_MAX ? e->n : PG_CONF_ERRS_MAX;
}
void pg_conf_errs_free(struct pg_conf_errs *e);

/*
 * Parse text[0..len) into *out (zeroed first). 0, or -1 with each error
 * added to errs (the directives parsed are in *out either way: free it).
 * Out of memory is an error too.
 */
int pg_conf_parse(const char *text, size_t len, struct pg_conf *out, struct pg_conf_errs *errs);
void pg_conf_free(struct pg_conf *c);

/* Whether word must be quoted to be read back as itself (it is empty, or
 * holds white space or one of ; { } # "). */
bool pg_conf_needs_quotes(const char *word);

/*
 * word as the file writes it into buf (cap bytes): as it is, or quoted
 * with " and \ escaped. Returns buf, or NULL when it does not fit or
 * holds a character no word can (a control character but tab, which
 * only a quoted word can hold).
 */
const char *pg_conf_word(const char *word, char *buf, size_t cap);

/* word for an error message: printable ASCII, at most 64 characters (then
 * "..."), into buf (at least 72 bytes). Returns buf. */
const char *pg_conf_shown(const char *word, char *buf, size_t cap);

#endif /* PG_CONF_H */
