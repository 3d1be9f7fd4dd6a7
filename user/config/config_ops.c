// SPDX-License-Identifier: MIT
/*
 * The operations flags' checks (config_internal.h): the admin token and
 * where the admin API may listen. Pure but for reading the token file.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "config/config_internal.h"
#include "config/config_opts.h"

static int check_token(const char *flag, const char *t, char *err, size_t errlen)
{
	size_t n = strlen(t);

	if (n < PG_ADMIN_TOKEN_MIN || n > PG_ADMIN_TOKEN_MAX) {
		pg_errf(err, errlen, "--%s: the token must be %d-%d characters long (it has %zu)",
		        flag, PG_ADMIN_TOKEN_MIN, PG_ADMIN_TOKEN_MAX, n);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (t[i] <= ' ' || t[i] > '~') {
			pg_errf(err, errlen,
			        "--%s: the token may hold visible ASCII characters only "
			        "(no spaces or control characters)",
			        flag);
			return -1;
		}
	}
	return 0;
}

int pg_config_check_ops(struct pg_config *cfg, int *opt, char *err, size_t errlen)
{
	const char *flag = "admin-token";
	char *buf, e[256];
	size_t len, b = 0;

	*opt = O_ADMIN_TOKEN;
	if (cfg->admin_token_file) {
		flag = "admin-token-file";
		*opt = O_ADMIN_TOKEN_FILE;
		if (pg_read_file(cfg->admin_token_file, 4096, &buf, &len, e, sizeof(e))) {
			pg_errf(err, errlen, "--admin-token-file %s: %s", cfg->admin_token_file, e);
			return -1;
		}
		while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' ||
		               buf[len - 1] == ' ' || buf[len - 1] == '\t'))
			buf[--len] = 0;
		while (b < len && (buf[b] == ' ' || buf[b] == '\t' || buf[b] == '\n'))
			b++;
		memmove(buf, buf + b, len - b + 1);
		free(cfg->admin_token);
		cfg->admin_token = buf;
	}
	if (cfg->admin_token && check_token(flag, cfg->admin_token, err, errlen))
		return -1;
	/* 127.0.0.0/8 and ::1 are loopback; anything else (0.0.0.0 and ::
	 * included) is reachable from elsewhere, and the admin API changes the
	 * fleet. */
	if (!cfg->admin_token && !pg_sockaddr_loopback(&cfg->admin)) {
		char a[PG_ADDR_STRLEN];

		*opt = O_ADMIN;
		pg_errf(err, errlen,
		        "--admin %s is not a loopback address: also give --admin-token or "
		        "--admin-token-file (every admin request then needs "
		        "\"Authorization: Bearer TOKEN\")",
		        pg_addr_format(&cfg->admin, a));
		return -1;
	}
	return 0;
}
