/* SPDX-License-Identifier: MIT */
/*
 * The command line of a unit test of the configuration: ARGS("--flag", "v")
 * is a NULL-terminated list, parsed as prefixgate's argv (after
 * "prefixgate") by pg_config_parse, what it prints (--help, --version)
 * into text[0..cap).
 */
#ifndef PG_TEST_CONFIG_ARGS_H
#define PG_TEST_CONFIG_ARGS_H

#include <stdio.h>
#include "config/config.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static inline int config_args_parse(struct pg_config *cfg, const char *const *args, char *err,
                                    size_t errlen, char *text, size_t cap)
{
	char *argv[32];
	int argc = 0, rc;
	FILE *out = fmemopen(text, cap, "w");

	argv[argc++] = (char *)"prefixgate";
	for (; *args && argc < 31; args++)
		argv[argc++] = (char *)*args;
	argv[argc] = NULL;
	assert_non_null(out);
	err[0] = 0;
	rc = pg_config_parse(cfg, argc, argv, out, err, errlen);
	fclose(out);
	return rc;
}

#endif /* PG_TEST_CONFIG_ARGS_H */
