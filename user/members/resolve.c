// SPDX-License-Identifier: MIT
/*
 * The resolver of backend names (members_internal.h): one c-ares channel,
 * driven from the control thread's poll loop, never blocking it and never
 * on the request path. Each name is looked up (A and AAAA, /etc/hosts
 * first) every --resolve-interval; answers go to pg_ctl_name_answer.
 */
#include <ares.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "members/members.h"
#include "members/members_internal.h"
#include "members/resolve.h"
#include "sys/log.h"

static ares_channel chan;
static bool have_chan;
static unsigned interval_ms;

int pg_resolve_init(const struct pg_config *cfg, char *err, size_t errlen)
{
	struct ares_options o = {0};
	int rc;

	if (have_chan)
		return 0;
	interval_ms = cfg->resolve_ms;
	if ((rc = ares_library_init(ARES_LIB_INIT_ALL)) != ARES_SUCCESS)
		goto fail;
	/* /etc/hosts, then DNS; a query gives up after 2 x 1 s per server. */
	o.lookups = (char *)"fb";
	o.timeout = 1000;
	o.tries = 2;
	rc = ares_init_options(&chan, &o, ARES_OPT_LOOKUPS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
	if (rc != ARES_SUCCESS)
		goto fail;
	if (cfg->resolver &&
	    (rc = ares_set_servers_ports_csv(chan, cfg->resolver)) != ARES_SUCCESS) {
		ares_destroy(chan);
		snprintf(err, errlen, "--resolver %s: %s", cfg->resolver, ares_strerror(rc));
		return -1;
	}
	have_chan = true;
	return 0;
fail:
	snprintf(err, errlen, "resolver: %s", ares_strerror(rc));
	return -1;
}

static enum pg_dns_status status_of(int rc)
{
	switch (rc) {
	case ARES_SUCCESS:
		return PG_DNS_OK;
	case ARES_ENOTFOUND:
	case ARES_ENODATA:
	case ARES_ENONAME:
		return PG_DNS_NONAME;
	default:
		return PG_DNS_FAIL;
	}
}

/* arg packs the name's index and generation: an answer for a name freed
 * (or freed and reused) since the query started is dropped. */
static void answered(void *arg, int rc, int timeouts, struct ares_addrinfo *ai)
{
	uintptr_t v = (uintptr_t)arg;
	int k = (int)(v >> 32);
	uint32_t gen = (uint32_t)v;
	struct pg_name *nm = &pg_ctl.names[k];
	union pg_sockaddr *addrs = NULL;
	size_t n = 0, cap = 0;
	char why[96];

	(void)timeouts;
	if (rc == ARES_EDESTRUCTION || rc == ARES_ECANCELLED || nm->gen != gen || !nm->host[0])
		goto out;
	nm->querying = false;
	nm->next_ms = pg_now_ms() + interval_ms;
	for (struct ares_addrinfo_node *p = ai ? ai->nodes : NULL; p; p = p->ai_next)
		cap++;
	addrs = calloc(cap + 1, sizeof(*addrs));
	if (!addrs) {
		rc = ARES_ENOMEM;
		cap = 0;
	}
	for (struct ares_addrinfo_node *p = ai && cap ? ai->nodes : NULL; p; p = p->ai_next) {
		if (p->ai_family == AF_INET && p->ai_addrlen >= sizeof(struct sockaddr_in))
			memcpy(&addrs[n++].in, p->ai_addr, sizeof(struct sockaddr_in));
		else if (p->ai_family == AF_INET6 && p->ai_addrlen >= sizeof(struct sockaddr_in6))
			memcpy(&addrs[n++].in6, p->ai_addr, sizeof(struct sockaddr_in6));
	}
	snprintf(why, sizeof(why), "lookup failed (%s)", ares_strerror(rc));
	pg_ctl_name_answer(pg_ctl.gw, k, status_of(rc), addrs, n, why);
out:
	free(addrs);
	if (ai)
		ares_freeaddrinfo(ai);
}

void pg_resolve_due(struct pg_gateway *gw, uint64_t now_ms)
{
	struct ares_addrinfo_hints h = {.ai_family = AF_UNSPEC, .ai_flags = ARES_AI_NOSORT};

	(void)gw;
	if (!have_chan)
		return;
	for (int k = 0; k < PG_MAX_NAMES; k++) {
		struct pg_name *nm = &pg_ctl.names[k];

		if (!nm->host[0] || nm->querying || nm->next_ms > now_ms)
			continue;
		nm->querying = true;
		/* The callback may run from inside this call (/etc/hosts). */
		ares_getaddrinfo(chan, nm->host, NULL, &h, answered,
		                 (void *)((uintptr_t)k << 32 | nm->gen));
	}
}

int pg_resolve_pollfds(struct pollfd *pfd, int max)
{
	ares_socket_t socks[ARES_GETSOCK_MAXNUM];
	unsigned bits;
	int n = 0;

	if (!have_chan)
		return 0;
	bits = (unsigned)ares_getsock(chan, socks, ARES_GETSOCK_MAXNUM);
	for (int i = 0; i < ARES_GETSOCK_MAXNUM && n < max; i++) {
		/* ARES_GETSOCK_WRITABLE's own 1 << 31 overflows an int: unsigned here. */
		short ev = (short)((bits & 1u << i ? POLLIN : 0) |
		                   (bits & 1u << (i + ARES_GETSOCK_MAXNUM) ? POLLOUT : 0));

		if (ev)
			pfd[n++] = (struct pollfd){.fd = socks[i], .events = ev};
	}
	return n;
}

void pg_resolve_process(struct pg_gateway *gw, const struct pollfd *pfd, int n)
{
	(void)gw;
	if (!have_chan)
		return;
	for (int i = 0; i < n; i++) {
		if (!pfd[i].revents)
			continue;
		ares_process_fd(chan,
		                pfd[i].revents & (POLLIN | POLLERR | POLLHUP) ? pfd[i].fd
		                                                              : ARES_SOCKET_BAD,
		                pfd[i].revents & POLLOUT ? pfd[i].fd : ARES_SOCKET_BAD);
	}
	/* Timeouts and retries. */
	ares_process_fd(chan, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
}

static bool any_querying(void)
{
	for (int k = 0; k < PG_MAX_NAMES; k++)
		if (pg_ctl.names[k].host[0] && pg_ctl.names[k].querying)
			return true;
	return false;
}

void pg_resolve_settle(struct pg_gateway *gw, unsigned ms)
{
	const uint64_t end = pg_now_ms() + ms;
	struct pollfd pfd[ARES_GETSOCK_MAXNUM];

	pg_resolve_due(gw, pg_now_ms());
	while (have_chan && any_querying() && pg_now_ms() < end) {
		int n = pg_resolve_pollfds(pfd, ARES_GETSOCK_MAXNUM);

		poll(pfd, (nfds_t)n, 50);
		pg_resolve_process(gw, pfd, n);
	}
}

void pg_resolve_fini(void)
{
	if (!have_chan)
		return;
	ares_destroy(chan);
	ares_library_cleanup();
	have_chan = false;
	for (int k = 0; k < PG_MAX_NAMES; k++)
		pg_ctl.names[k].querying = false;
}
