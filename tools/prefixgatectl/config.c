// SPDX-License-Identifier: MIT
/*
 * prefixgatectl config: the configuration the gateway runs (GET /config),
 * printed as it comes: the configuration file's syntax, so that it can be
 * saved and given to prefixgate -c (check it first with --check).
 */
#include <stdio.h>
#include "ctl.h"

int ctl_cmd_config(const struct ctl_opts *o)
{
	struct ctl_http_resp r = {0};
	char err[1024], msg[256];
	int rc = CTL_ERR;

	if (ctl_http(o, "GET", "/config", NULL, NULL, 0, ctl_timeout(o, CTL_TIMEOUT_DEFAULT), &r,
	             err, sizeof(err))) {
		ctl_err("config: %s", err);
		return CTL_ERR;
	}
	if (r.status != 200) {
		ctl_err("config: admin API %s: HTTP %d: %s", o->admin, r.status,
		        ctl_api_error(&r, msg, sizeof(msg)));
	} else if (fwrite(r.body, 1, r.len, stdout) != r.len || fflush(stdout)) {
		ctl_err("config: writing it: %m");
	} else {
		rc = CTL_OK;
	}
	ctl_http_resp_free(&r);
	return rc;
}
