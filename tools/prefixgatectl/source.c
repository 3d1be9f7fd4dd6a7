// SPDX-License-Identifier: MIT
/*
 * Where snapshots come from: the pinned BPF maps while a live gateway
 * writes them (source_maps.c), else the admin API (source_api.c). Either
 * way a snapshot holds the same things, computed the same way, so every
 * view prints the same whichever source it read. The maps do not know the
 * DNS name a member came from; those are asked of the admin API when it
 * answers (a label, not state: without it the maps are shown all the
 * same).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "ctl.h"

/* The admin API is asked for the members' DNS names this long at most
 * when the maps are the source (the maps answer without it). */
#define NAMES_TIMEOUT_S 1.0

double ctl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int ctl_source_open(struct ctl_source *s, const struct ctl_opts *o, char *err, size_t errlen)
{
	char merr[1024] = "", aerr[512];

	memset(s, 0, sizeof(*s));
	s->o = o;
	if (o->source != CTL_SRC_API) {
		if (!ctl_maps_open(&s->maps, o->pin_path, merr, sizeof(merr))) {
			s->kind = CTL_SRC_MAPS;
			if (ctl_maps_live(s->maps, s->stale_why, sizeof(s->stale_why)))
				return 0;
			/* Left behind by a gateway that is gone: a live one's API
			 * says more (auto), else they are shown as stale. */
			if (o->source == CTL_SRC_AUTO && !ctl_api_check(o, aerr, sizeof(aerr))) {
				fprintf(
				    stderr,
				    "prefixgatectl: the maps pinned at %s are stale (%s); using "
				    "the admin API at %s\n",
				    o->pin_path, s->stale_why, o->admin);
				ctl_source_close(s);
				s->kind = CTL_SRC_API;
				s->stale_why[0] = '\0';
				return 0;
			}
			s->stale = true;
			fprintf(stderr, "prefixgatectl: the maps pinned at %s are stale (%s)%s%s\n",
			        o->pin_path, s->stale_why,
			        o->source == CTL_SRC_AUTO ? "; and the admin API: " : "",
			        o->source == CTL_SRC_AUTO ? aerr : "");
			return 0;
		}
		if (o->source == CTL_SRC_MAPS) {
			snprintf(err, errlen, "%s", merr);
			return -1;
		}
	}
	if (ctl_api_check(o, aerr, sizeof(aerr))) {
		if (merr[0])
			snprintf(err, errlen, "%s; and the admin API fallback failed: %s", merr,
			         aerr);
		else
			snprintf(err, errlen, "%s", aerr);
		return -1;
	}
	if (merr[0])
		fprintf(stderr, "prefixgatectl: %s; using the admin API at %s\n", merr, o->admin);
	s->kind = CTL_SRC_API;
	return 0;
}

void ctl_source_close(struct ctl_source *s)
{
	ctl_maps_close(s->maps);
	s->maps = NULL;
}

int ctl_source_check(struct ctl_source *s, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_obj_get_opts, gopts, .file_flags = BPF_F_RDONLY);
	struct bpf_map_info info = {0};
	uint32_t ilen = sizeof(info);
	char path[300];
	int fd, rc = 0;

	if (s->kind != CTL_SRC_MAPS)
		return 0;
	snprintf(path, sizeof(path), "%s/pg_state", ctl_maps_pin(s->maps));
	fd = bpf_obj_get_opts(path, &gopts);
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &ilen) ||
	    info.id != ctl_maps_state_id(s->maps)) {
		snprintf(err, errlen, "prefixgate %s: the maps under %s are gone or were replaced",
		         fd < 0 && errno == ENOENT ? "stopped" : "restarted",
		         ctl_maps_pin(s->maps));
		rc = -1;
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

void ctl_merge_names(struct ctl_snapshot *s, const struct ctl_snapshot *api)
{
	for (size_t i = 0; i < api->n; i++) {
		const struct ctl_backend *a = &api->b[i];

		if (a->id) { /* a member: its name, if it has one */
			for (size_t j = 0; a->name[0] && j < s->n; j++)
				if (!strcmp(s->b[j].addr, a->addr))
					memcpy(s->b[j].name, a->name, sizeof(a->name));
			continue;
		}
		if (s->n >= PG_MAX_BACKENDS)
			break;
		s->b[s->n] = *a; /* a name standing for no address */
		s->b[s->n].pool = 0;
		for (unsigned p = 0; p < s->npools && a->pool < api->npools; p++)
			if (!strcmp(s->pool[p].name, api->pool[a->pool].name))
				s->b[s->n].pool = p;
		s->n++;
	}
}

/* The maps' snapshot, with the DNS names the admin API knows (if it
 * answers within NAMES_TIMEOUT_S). */
static int maps_snapshot_named(struct ctl_source *s, struct ctl_snapshot *snap, char *err,
                               size_t errlen)
{
	struct ctl_opts o = *s->o;
	struct ctl_snapshot *api;
	char aerr[512];

	if (ctl_maps_snapshot(s->maps, snap, err, errlen))
		return -1;
	if (s->stale) /* no gateway writes them: no name belongs to them */
		return 0;
	o.timeout = o.timeout > 0 && o.timeout < NAMES_TIMEOUT_S ? o.timeout : NAMES_TIMEOUT_S;
	api = malloc(sizeof(*api));
	if (api && !ctl_api_snapshot(&o, api, aerr, sizeof(aerr)))
		ctl_merge_names(snap, api);
	free(api);
	return 0;
}

int ctl_snapshot_take(struct ctl_source *s, struct ctl_snapshot *snap, char *err, size_t errlen)
{
	memset(snap, 0, sizeof(*snap));
	if (s->kind == CTL_SRC_MAPS) {
		snap->stale = s->stale;
		snprintf(snap->stale_why, sizeof(snap->stale_why), "%s",
		         s->stale ? s->stale_why : "");
		return maps_snapshot_named(s, snap, err, errlen);
	}
	return ctl_api_snapshot(s->o, snap, err, errlen);
}
