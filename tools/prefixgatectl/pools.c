// SPDX-License-Identifier: MIT
/*
 * prefixgatectl pools: the model pools, read as status reads the gateway
 * (source.c): from the pinned maps (pg_pools, and pool p's entries of
 * pg_state and pg_rings) while a live gateway writes them, else from the
 * admin API (GET /pools); maps no live gateway writes are shown STALE
 * (exit 3). Printed by view_pools.c, the same from either source.
 */
#include <stdio.h>
#include <stdlib.h>
#include "ctl.h"

int ctl_cmd_pools(const struct ctl_opts *o)
{
	struct ctl_snapshot *s = malloc(sizeof(*s));
	struct ctl_source src;
	char err[2048];
	int rc = CTL_ERR;

	if (!s) {
		ctl_err("out of memory");
		return CTL_ERR;
	}
	if (ctl_source_open(&src, o, err, sizeof(err))) {
		ctl_err("%s", err);
		free(s);
		return CTL_ERR;
	}
	if (ctl_snapshot_take(&src, s, err, sizeof(err))) {
		ctl_err("%s", err);
	} else {
		if (s->stale && !o->json)
			printf("source     BPF maps pinned at %s: STALE, %s (no gateway updates "
			       "them)\n\n",
			       o->pin_path, s->stale_why);
		ctl_view_pools(stdout, o, s);
		rc = s->stale ? CTL_STALE : CTL_OK;
	}
	ctl_source_close(&src);
	free(s);
	return rc;
}
