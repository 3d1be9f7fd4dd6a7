// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <stdio.h>
#include <unistd.h>
#include "gateway.h"
#include "lib/addr.h"

/* Fine steps up to 100 us, where routing and send times live and where the
 * targets are (10 us, 20 us): a p99 read from the histogram is then within
 * 2-5 us of the true one. Coarse above, for stalls. */
const uint32_t pg_lat_bounds_us[PG_LAT_BUCKETS - 1] = {1,   2,   3,   4,    5,    6,    8,    10,
                                                       12,  15,  20,  25,   30,   40,   50,   75,
                                                       100, 200, 500, 1000, 2000, 5000, 10000};

const char *pg_backend_name(const struct pg_backend *b, char *buf, size_t len)
{
	union pg_sockaddr a;
	char s[PG_ADDR_STRLEN];

	pg_backend_addr_get(b, &a);
	snprintf(buf, len, "%s%s",
	         __atomic_load_n(&b->flags, __ATOMIC_RELAXED) & PG_BACKEND_TLS ? PG_TLS_SCHEME : "",
	         pg_addr_format(&a, s));
	return buf;
}

void pg_gateway_id(const struct pg_gateway *gw, char *buf, size_t len)
{
	char host[256] = "localhost";

	if (gw->cfg->gateway_id) {
		snprintf(buf, len, "%s", gw->cfg->gateway_id);
		return;
	}
	gethostname(host, sizeof(host) - 1);
	snprintf(buf, len, "%.50s:%u", host, gw->admin_port);
}

/* One sample into a latency histogram (bounds pg_lat_bounds_us) and its sum. */
static void lat_record(uint64_t *buckets, uint64_t *sum_ns, uint64_t ns)
{
	unsigned i = 0;

	while (i < PG_LAT_BUCKETS - 1 && ns > (uint64_t)pg_lat_bounds_us[i] * 1000)
		i++;
	__atomic_fetch_add(&buckets[i], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(sum_ns, ns, __ATOMIC_RELAXED);
}

void pg_stats_route_latency(struct pg_worker_stats *st, uint64_t ns)
{
	lat_record(st->route_lat, &st->route_lat_sum_ns, ns);
	__atomic_fetch_add(&st->requests, 1, __ATOMIC_RELAXED);
}

void pg_stats_decide_latency(struct pg_worker_stats *st, uint64_t ns)
{
	lat_record(st->decide_lat, &st->decide_lat_sum_ns, ns);
}

void pg_stats_send_latency(struct pg_worker_stats *st, uint64_t ns)
{
	lat_record(st->send_lat, &st->send_lat_sum_ns, ns);
}
