// SPDX-License-Identifier: MIT
/*
 * The configuration file's syntax (lib/conf.h), table-driven: texts and the
 * directives they give (line, nesting, words); bad texts and the one error
 * each gives (its line and message); every error of a text told at once;
 * words written back (pg_conf_word) read back as themselves.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/conf.h"

/* The directives as "LINE >..>name w1 w2 {" lines, one '>' a level. */
static void dump(const struct pg_conf *c, char *out, size_t cap)
{
	size_t n = 0;

	out[0] = 0;
	for (size_t i = 0; i < c->n; i++) {
		const struct pg_conf_dir *d = &c->d[i];
		int depth = 0;

		for (int p = d->parent; p >= 0; p = c->d[p].parent)
			depth++;
		n += (size_t)snprintf(out + n, cap - n, "%u %.*s", d->line, depth, ">>>>>>>>");
		for (size_t k = 0; k < d->nw; k++)
			n += (size_t)snprintf(out + n, cap - n, "%s[%s]", k ? " " : "", d->w[k]);
		n += (size_t)snprintf(out + n, cap - n, "%s\n", d->block ? " {" : "");
	}
}

static void test_good(void **state)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
	    {"", ""},
	    {"# only a comment\n\n   \n", ""},
	    {"listen 0.0.0.0:8080;\n", "1 [listen] [0.0.0.0:8080]\n"},
	    {"listen 0.0.0.0:8080", "1 [listen] [0.0.0.0:8080]\n"},
	    {"a 1; b 2 ; c\n", "1 [a] [1]\n1 [b] [2]\n1 [c]\n"},
	    {"a 1 # comment; b 2\nc", "1 [a] [1]\n2 [c]\n"},
	    {"a\r\nb 2\r\n", "1 [a]\n2 [b] [2]\n"},
	    {"\ta\t1\t\n", "1 [a] [1]\n"},
	    {";;;\n a;;\n", "2 [a]\n"},
	    {"pool llama {\n  model m1 m2;\n  backend b\n}\n",
	     "1 [pool] [llama] {\n2 >[model] [m1] [m2]\n3 >[backend] [b]\n"},
	    {"pool a { model x; backend y } pool b {}\n",
	     "1 [pool] [a] {\n1 >[model] [x]\n1 >[backend] [y]\n1 [pool] [b] {\n"},
	    {"a {\n b {\n  c 1\n }\n d\n}\ne\n", "1 [a] {\n2 >[b] {\n3 >>[c] [1]\n5 >[d]\n7 [e]\n"},
	    {"model \"m 2\" \"a;b{c}#d\" \"\" x\n", "1 [model] [m 2] [a;b{c}#d] [] [x]\n"},
	    {"q \"say \\\"hi\\\" \\\\ there\"\n", "1 [q] [say \"hi\" \\ there]\n"},
	    {"p a\\b c:d/e,f=g\n", "1 [p] [a\\b] [c:d/e,f=g]\n"},
	    {"m Llama-3.1-8B \xc3\xa9t\xc3\xa9\n", "1 [m] [Llama-3.1-8B] [\xc3\xa9t\xc3\xa9]\n"},
	    {"x \"q\";y\n", "1 [x] [q]\n1 [y]\n"},
	};
	char out[2048];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_conf c;
		struct pg_conf_errs e = {0};
		int rc = pg_conf_parse(cases[i].text, strlen(cases[i].text), &c, &e);

		if (rc)
			fail_msg("case %zu: error %u: %s", i, e.v ? e.v[0].line : 0,
			         e.v ? e.v[0].msg : "?");
		dump(&c, out, sizeof(out));
		if (strcmp(out, cases[i].want))
			fail_msg("case %zu:\n%s\nexpected\n%s", i, out, cases[i].want);
		pg_conf_free(&c);
		pg_conf_errs_free(&e);
	}
}

/* Each bad text gives exactly one error, at its line, saying what. */
static void test_bad(void **state)
{
	static const struct {
		const char *text;
		unsigned line;
		const char *msg;
		size_t len; /* 0: strlen */
	} cases[] = {
	    {"a \"open\n", 1, "a quoted word is not closed on its line (a '\"' is missing)", 0},
	    {"a 1\nb \"x\\n\"\n", 2, "unknown escape \\n in a quoted word (it knows \\\" and \\\\)",
	     0},
	    {"a\nb\n}\n", 3, "'}' closes no block", 0},
	    {"{ a }\n", 1,
	     "'{' without a name before it on its line (a block is NAME [VALUE]... "
	     "{ ... })",
	     0},
	    {"pool a\n{\nmodel x\n}\n", 2,
	     "'{' without a name before it on its line (a block is NAME [VALUE]... { ... })", 0},
	    {"x 1\npool a {\n model m\n", 2, "block \"pool\" is not closed ('}' missing)", 0},
	    {"a b\"c\"\n", 1, "'\"' inside a word (quote the whole word: \"...\")", 0},
	    {"a \"b\"c\n", 1, "a quoted word is followed by 'c' (leave a space between words)", 0},
	    {"a \x01\n", 1, "control character 0x01", 0},
	    {"a\nb \"x\x7fy\"\n", 2, "control character 0x7f in a quoted word", 0},
	    {"a 1\n\0b\n", 2, "control character 0x00", 7},
	    {"a{b{c{d{e{f{g{h{i{}}}}}}}}}\n", 1, "blocks nest at most 8 deep", 0},
	    /* a bad line that opens a block: its directives and '}' go with it */
	    {"pool \"a {\n model x\n}\nlisten :80\n", 1,
	     "a quoted word is not closed on its line (a '\"' is missing)", 0},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_conf c;
		struct pg_conf_errs e = {0};
		size_t len = cases[i].len ? cases[i].len : strlen(cases[i].text);
		int rc;

		rc = pg_conf_parse(cases[i].text, len, &c, &e);
		if (rc != -1 || e.n != 1)
			fail_msg("case %zu: rc %d, %zu errors (first: %u %s)", i, rc, e.n,
			         e.n ? e.v[0].line : 0, e.n ? e.v[0].msg : "");
		if (e.v[0].line != cases[i].line || strcmp(e.v[0].msg, cases[i].msg))
			fail_msg("case %zu: %u: \"%s\", expected %u: \"%s\"", i, e.v[0].line,
			         e.v[0].msg, cases[i].line, cases[i].msg);
		pg_conf_free(&c);
		pg_conf_errs_free(&e);
	}
}

/* Every error of a text, each at its line; what is good around them is
 * read. */
static void test_every_error(void **state)
{
	static const char text[] = "a \"x\nb 1\n}\nc y\"z\nd 2\n";
	struct pg_conf c;
	struct pg_conf_errs e = {0};
	char out[256];

	(void)state;
	assert_int_equal(pg_conf_parse(text, sizeof(text) - 1, &c, &e), -1);
	assert_int_equal(e.n, 3);
	assert_int_equal(e.v[0].line, 1);
	assert_int_equal(e.v[1].line, 3);
	assert_int_equal(e.v[2].line, 4);
	dump(&c, out, sizeof(out));
	assert_string_equal(out, "2 [b] [1]\n5 [d] [2]\n");
	pg_conf_free(&c);
	pg_conf_errs_free(&e);
	/* past PG_CONF_ERRS_MAX, counted but not kept */
	{
		size_t n = 3 * (PG_CONF_ERRS_MAX + 10);
		char *many = malloc(n);

		assert_non_null(many);
		for (size_t i = 0; i < n; i += 3)
			memcpy(many + i, "}\n\n", 3);
		assert_int_equal(pg_conf_parse(many, n, &c, &e), -1);
		assert_int_equal(e.n, PG_CONF_ERRS_MAX + 10);
		assert_int_equal(pg_conf_errs_kept(&e), PG_CONF_ERRS_MAX);
		assert_int_equal(e.v[PG_CONF_ERRS_MAX - 1].line, 2 * PG_CONF_ERRS_MAX - 1);
		pg_conf_free(&c);
		pg_conf_errs_free(&e);
		free(many);
	}
}

/* pg_conf_word writes what reads back as the same word. */
static void test_words(void **state)
{
	static const char *const words[] = {
	    "plain",
	    "",
	    "two words",
	    "a;b",
	    "{",
	    "}",
	    "#x",
	    "q\"uote",
	    "back\\slash\\",
	    "tab\there",
	    "meta-llama/Llama-3.1-8B-Instruct",
	    "\xc3\xa9",
	    "x=y,z",
	};
	char buf[128], text[160], shown[80];

	(void)state;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		struct pg_conf c;
		struct pg_conf_errs e = {0};

		assert_non_null(pg_conf_word(words[i], buf, sizeof(buf)));
		snprintf(text, sizeof(text), "d %s;\n", buf);
		if (pg_conf_parse(text, strlen(text), &c, &e) || c.n != 1 || c.d[0].nw != 2 ||
		    strcmp(c.d[0].w[1], words[i]))
			fail_msg("word %zu \"%s\" written as %s does not read back", i, words[i],
			         buf);
		pg_conf_free(&c);
		pg_conf_errs_free(&e);
	}
	assert_null(pg_conf_word("line\nbreak", buf, sizeof(buf)));
	assert_null(pg_conf_word("bell\x07", buf, sizeof(buf)));
	assert_null(pg_conf_word("too long for it", buf, 8));
	assert_string_equal(pg_conf_shown("a\x01z", shown, sizeof(shown)), "a?z");
	memset(text, 'x', 100);
	text[100] = 0;
	assert_int_equal(strlen(pg_conf_shown(text, shown, sizeof(shown))), 64);
	assert_string_equal(shown + 61, "...");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good),
	    cmocka_unit_test(test_bad),
	    cmocka_unit_test(test_every_error),
	    cmocka_unit_test(test_words),
	};

	return cmocka_run_group_tests_name("conf", tests, NULL, NULL);
}
