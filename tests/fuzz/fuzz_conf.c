// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over the configuration file: its syntax (lib/conf.c)
 * and its meaning (config/config_file.c, config_load.c), and the
 * configuration written back (config_render.c).
 *
 * Invariants: the syntax parser's directives are well formed (a name, a
 * line within the text, a parent that is an earlier block) and every
 * error has a line within the text and a message; the directives written
 * back word by word (pg_conf_word) parse to the same directives; a
 * configuration either fails with at least one error, every one with a
 * message, or is accepted, and then what pg_config_render writes of it
 * is accepted too and written back the same (it reads back as itself);
 * everything is freed (LeakSanitizer checks).
 *
 * File arguments: the values of the directives that read a file
 * (routing-config, backends-file, admin-token-file) are replaced by one of
 * three fixture files (a routing config, a backends file, a token) or a
 * missing one, so the fuzzer never opens a device or FIFO that could block.
 */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include "config/config.h"
#include "fuzz.h"
#include "lib/buf.h"
#include "lib/conf.h"

static char dir[64], fixture[4][96];

static void cleanup(void)
{
	for (int i = 0; i < 3; i++)
		unlink(fixture[i]);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "/tmp/pg-fuzz-conf-XXXXXX");
	FUZZ_CHECK(mkdtemp(dir));
	snprintf(fixture[0], sizeof(fixture[0]), "%s/routing.json", dir);
	snprintf(fixture[1], sizeof(fixture[1]), "%s/backends", dir);
	snprintf(fixture[2], sizeof(fixture[2]), "%s/token", dir);
	snprintf(fixture[3], sizeof(fixture[3]), "%s/missing", dir);
	fuzz_write_file(fixture[0],
	                "{\"RoutingStrategy\":\"CACHE_AWARE\",\"PrefixAwareRoutingConfig\":"
	                "{\"PrefixLength\":2048},\"FlowControlConfig\":{}}\n");
	fuzz_write_file(fixture[1], "10.9.0.1:8000\n10.9.0.2:8000 # b\n");
	fuzz_write_file(fixture[2], "0123456789abcdef0123456789\n");
	atexit(cleanup);
	return 0;
}

static unsigned lines_of(const uint8_t *p, size_t n)
{
	unsigned l = 1;

	for (size_t i = 0; i < n; i++)
		l += p[i] == '\n';
	return l;
}

static void check_errs(const struct pg_conf_errs *e, unsigned lines)
{
	for (size_t i = 0; i < pg_conf_errs_kept(e); i++)
		FUZZ_CHECK(e->v[i].line <= lines && e->v[i].msg && e->v[i].msg[0]);
}

/* c written back: each directive's words, blocks opened and closed;
 * file-reading directives' values replaced by fixtures. false: a word
 * cannot be written (it cannot happen: the parser refuses such words). */
static bool write_back(const struct pg_conf *c, bool fixtures, struct pg_buf *out)
{
	char q[4096];
	int depth = 0, stack[PG_CONF_DEPTH_MAX + 1];

	for (size_t i = 0; i < c->n; i++) {
		const struct pg_conf_dir *d = &c->d[i];
		const char *name = d->w[0];
		int f = !strcmp(name, "routing-config")     ? 0
		        : !strcmp(name, "backends-file")    ? 1
		        : !strcmp(name, "admin-token-file") ? 2
		                                            : -1;

		while (depth && stack[depth - 1] != d->parent) {
			pg_buf_puts(out, "}\n");
			depth--;
		}
		for (size_t k = 0; k < d->nw; k++) {
			const char *w = d->w[k];

			if (fixtures && k && f >= 0)
				w = fixture[(d->w[k][0] & 1) ? 3 : f];
			if (!pg_conf_word(w, q, sizeof(q)))
				return false;
			pg_buf_printf(out, "%s%s", k ? " " : "", q);
		}
		if (d->block) {
			pg_buf_puts(out, " {\n");
			FUZZ_CHECK(depth < PG_CONF_DEPTH_MAX);
			stack[depth++] = (int)i;
		} else {
			pg_buf_puts(out, ";\n");
		}
	}
	while (depth--)
		pg_buf_puts(out, "}\n");
	return !out->oom;
}

static bool same_conf(const struct pg_conf *a, const struct pg_conf *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		if (a->d[i].nw != b->d[i].nw || a->d[i].parent != b->d[i].parent ||
		    a->d[i].block != b->d[i].block)
			return false;
		for (size_t k = 0; k < a->d[i].nw; k++)
			if (strcmp(a->d[i].w[k], b->d[i].w[k]))
				return false;
	}
	return true;
}

/* The configuration of text: accepted or refused with errors; accepted,
 * written back, read back, written back the same. */
static void check_config(const char *text, size_t len)
{
	struct pg_config cfg, again;
	struct pg_conf_errs e = {0};
	struct pg_buf one = {0}, two = {0};
	bool token;

	if (pg_config_parse_text(&cfg, "f.conf", text, len, 1, (char *[]){"prefixgate", NULL},
	                         &e)) {
		FUZZ_CHECK(e.n > 0);
		check_errs(&e, lines_of((const uint8_t *)text, len) + 1);
		FUZZ_CHECK(!cfg.conf && !cfg.backends);
		pg_conf_errs_free(&e);
		return;
	}
	FUZZ_CHECK(e.n == 0);
	/* a token given directly is not written back */
	token = cfg.admin_token && !cfg.admin_token_file;
	pg_config_render(&cfg, NULL, &one);
	pg_buf_append(&one, "", 1);
	pg_config_free(&cfg);
	if (!token && !one.oom) {
		int rc = pg_config_parse_text(&again, "again.conf", one.p, one.len - 1, 1,
		                              (char *[]){"prefixgate", NULL}, &e);

		if (rc) {
			fprintf(stderr, "written back:\n%s\nrefused: %u: %s\n", one.p,
			        e.n ? e.v[0].line : 0, e.n ? e.v[0].msg : "");
			FUZZ_CHECK(rc == 0);
		}
		pg_config_render(&again, NULL, &two);
		pg_buf_append(&two, "", 1);
		pg_config_free(&again);
		if (strcmp(one.p, two.p))
			fprintf(stderr, "written:\n%s\nread back and written:\n%s\n", one.p, two.p);
		FUZZ_CHECK(!strcmp(one.p, two.p));
	}
	pg_conf_errs_free(&e);
	pg_buf_free(&one);
	pg_buf_free(&two);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const unsigned lines = lines_of(data, size);
	struct pg_conf c, back;
	struct pg_conf_errs e = {0}, e2 = {0};
	struct pg_buf out = {0};
	int rc;

	if (size > 64 * 1024)
		return 0;
	rc = pg_conf_parse((const char *)data, size, &c, &e);
	FUZZ_CHECK((rc == 0) == (e.n == 0));
	check_errs(&e, lines);
	for (size_t i = 0; i < c.n; i++) {
		FUZZ_CHECK(c.d[i].nw >= 1 && c.d[i].line >= 1 && c.d[i].line <= lines);
		FUZZ_CHECK(c.d[i].parent < (int)i);
		FUZZ_CHECK(c.d[i].parent < 0 || c.d[c.d[i].parent].block);
	}
	/* the directives written back read back the same */
	if (write_back(&c, false, &out)) {
		FUZZ_CHECK(pg_conf_parse(out.p, out.len, &back, &e2) == 0);
		FUZZ_CHECK(same_conf(&c, &back));
		pg_conf_free(&back);
	}
	/* and mean something, or not: with the file arguments made safe */
	pg_buf_reset(&out);
	if (write_back(&c, true, &out))
		check_config(out.p ? out.p : "", out.len);
	pg_buf_free(&out);
	pg_conf_free(&c);
	pg_conf_errs_free(&e);
	pg_conf_errs_free(&e2);
	return 0;
}
