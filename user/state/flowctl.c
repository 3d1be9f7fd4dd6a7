// SPDX-License-Identifier: MIT
/* Flow control's gateway-wide state (flowctl.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "state/flowctl.h"

const uint32_t pg_flow_wait_bounds_ms[PG_FLOW_WAIT_BUCKETS - 1] = {
    1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000,
};

struct pg_flowctl *pg_flowctl_new(const struct pg_config *cfg, unsigned nworkers, char *err,
                                  size_t errlen)
{
	const struct pg_flow_cfg *fc = &cfg->flow;
	struct pg_flowctl *f = calloc(1, sizeof(*f));
	unsigned n = nworkers ? nworkers : 1;

	if (!f || !(f->wake = aligned_alloc(64, sizeof(*f->wake) * n))) {
		free(f);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	memset(f->wake, 0, sizeof(*f->wake) * n);
	for (unsigned i = 0; i < n; i++)
		for (unsigned p = 0; p < PG_MAX_POOLS; p++)
			f->wake[i].best[p] = UINT64_MAX;
	f->nworkers = n;
	for (unsigned i = 0; i < n; i++) {
		f->wake[i].fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (f->wake[i].fd == -1) {
			snprintf(err, errlen, "eventfd: %s", strerror(errno));
			f->nworkers = i;
			pg_flowctl_free(f);
			return NULL;
		}
	}
	/* the bounds are the gateway's: each worker holds its part */
	f->lim.max_requests = (fc->max_queued + n - 1) / n;
	f->lim.max_bytes = (fc->max_bytes + n - 1) / n;
	f->lim.starve_ms = fc->starve_ms;
	f->src = fc->tenant_src;
	f->header = fc->tenant_header;
	f->tenants.t[0].weight = 1;
	strcpy(f->tenants.t[0].label, "other");
	f->tenants.t[0].prio = -1;
	for (size_t i = 0; i < fc->ntenants; i++) {
		const struct pg_tenant_cfg *tc = &fc->tenants[i];
		char label[PG_FLOW_LABEL_MAX + 1];
		uint64_t key = pg_flow_label(tc->name, strlen(tc->name), false, label);
		struct pg_flow_tenant *t = &f->tenants.t[pg_flow_tenant(&f->tenants, key, label)];

		t->weight = tc->weight ? tc->weight : 1;
		t->prio = (int8_t)tc->prio;
	}
	return f;
}

void pg_flowctl_free(struct pg_flowctl *f)
{
	if (!f)
		return;
	for (unsigned i = 0; i < f->nworkers; i++)
		close(f->wake[i].fd);
	free(f->wake);
	free(f);
}

void pg_flow_hist_add(struct pg_flow_hist *h, uint64_t us)
{
	unsigned i = 0;

	while (i < PG_FLOW_WAIT_BUCKETS - 1 && us > (uint64_t)pg_flow_wait_bounds_ms[i] * 1000)
		i++;
	__atomic_fetch_add(&h->b[i], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->sum_us, us, __ATOMIC_RELAXED);
}

int pg_flowctl_better(const struct pg_flowctl *f, unsigned self, unsigned pool, uint64_t rank)
{
	int best = -1;

	for (unsigned i = 0; i < f->nworkers; i++) {
		uint64_t r = __atomic_load_n(&f->wake[i].best[pool], __ATOMIC_RELAXED);

		if (i != self && r < rank) {
			rank = r;
			best = (int)i;
		}
	}
	return best;
}

void pg_flowctl_kick(struct pg_flowctl *f, unsigned i)
{
	static const uint64_t one = 1;
	struct pg_flow_wake *k = &f->wake[i];
	ssize_t r;

	if (__atomic_exchange_n(&k->kicked, 1, __ATOMIC_ACQ_REL))
		return;
	/* fails only with the counter full, which reading it empties */
	r = write(k->fd, &one, sizeof(one));
	(void)r;
}

void pg_flowctl_wake(struct pg_flowctl *f, unsigned self)
{
	for (unsigned i = 0; i < f->nworkers; i++)
		if (i != self && __atomic_load_n(&f->wake[i].waiting, __ATOMIC_RELAXED))
			pg_flowctl_kick(f, i);
}
