// SPDX-License-Identifier: MIT
/*
 * prefixgatectl pools: the model pools, from the pinned maps (pg_pools, and
 * pool p's entry of pg_state) when they are there, else from the admin API
 * (GET /pools).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "ctl.h"
#include "lib/names.h"
#include "prefixgate.h"

static int from_maps(const struct ctl_opts *o)
{
	LIBBPF_OPTS(bpf_obj_get_opts, gopts, .file_flags = BPF_F_RDONLY);
	struct bpf_map_info info = {0};
	uint32_t ilen = sizeof(info);
	char path[300];
	int pfd, sfd, rc = CTL_OK;

	snprintf(path, sizeof(path), "%s/pg_pools", o->pin_path);
	pfd = bpf_obj_get_opts(path, &gopts);
	snprintf(path, sizeof(path), "%s/pg_state", o->pin_path);
	sfd = bpf_obj_get_opts(path, &gopts);
	if (pfd < 0 || sfd < 0 || bpf_obj_get_info_by_fd(sfd, &info, &ilen)) {
		if (pfd >= 0)
			close(pfd);
		if (sfd >= 0)
			close(sfd);
		return -1;
	}
	if (o->json)
		printf("[");
	else
		printf("%-16s %-9s %-8s %-26s %8s %6s %5s %s\n", "POOL", "CATCHALL", "BACKENDS",
		       "STRATEGY", "PREFIX", "THRESH", "GEN", "MODELS");
	for (uint32_t p = 0; p < info.max_entries && p < PG_MAX_POOLS; p++) {
		struct pg_pool pool;
		struct pg_state st;

		if (bpf_map_lookup_elem(pfd, &p, &pool) || bpf_map_lookup_elem(sfd, &p, &st)) {
			fprintf(stderr, "prefixgatectl: reading pool %u: %s\n", p, strerror(errno));
			rc = CTL_ERR;
			break;
		}
		pool.name[sizeof(pool.name) - 1] = 0;
		pool.models[sizeof(pool.models) - 1] = 0;
		if (o->json)
			printf("%s{\"name\":\"%s\",\"catch_all\":%s,\"backends\":%u,\"strategy\":"
			       "\"%s\",\"prefix_length\":%u,\"concurrency_threshold\":%u,"
			       "\"ring_generation\":%llu,\"nmodels\":%u,\"models\":\"%s\"}",
			       p ? "," : "", pool.name[0] ? pool.name : "default",
			       pool.flags & PG_POOL_CATCH_ALL ? "true" : "false", st.nbackends,
			       pg_strategy_name((enum pg_strategy)st.strategy), st.prefix_length,
			       st.concurrency_threshold, (unsigned long long)st.ring_generation,
			       pool.nmodels, pool.models);
		else
			printf("%-16s %-9s %-8u %-26s %8u %6u %5llu %s\n",
			       pool.name[0] ? pool.name : "default",
			       pool.flags & PG_POOL_CATCH_ALL ? "yes" : "no", st.nbackends,
			       pg_strategy_name((enum pg_strategy)st.strategy), st.prefix_length,
			       st.concurrency_threshold, (unsigned long long)st.ring_generation,
			       pool.models[0] ? pool.models : "-");
	}
	if (o->json)
		printf("]\n");
	close(pfd);
	close(sfd);
	return rc;
}

int ctl_cmd_pools(const struct ctl_opts *o)
{
	struct ctl_http_resp r = {0};
	char err[512], msg[512];

	if (o->source != CTL_SRC_API) {
		int rc = from_maps(o);

		if (rc >= 0 || o->source == CTL_SRC_MAPS) {
			if (rc < 0)
				fprintf(stderr, "prefixgatectl: no pool maps under %s\n",
				        o->pin_path);
			return rc < 0 ? CTL_ERR : rc;
		}
		fprintf(stderr, "prefixgatectl: no maps pinned under %s: asking the admin API\n",
		        o->pin_path);
	}
	if (ctl_http(o, "GET", "/pools", NULL, NULL, 0, ctl_timeout(o, CTL_TIMEOUT_DEFAULT), &r,
	             err, sizeof(err))) {
		fprintf(stderr, "prefixgatectl: %s\n", err);
		return CTL_ERR;
	}
	if (r.status != 200) {
		fprintf(stderr, "prefixgatectl: GET /pools: %s\n",
		        ctl_api_error(&r, msg, sizeof(msg)));
		ctl_http_resp_free(&r);
		return CTL_ERR;
	}
	fwrite(r.body, 1, r.len, stdout);
	ctl_http_resp_free(&r);
	return CTL_OK;
}
