/* SPDX-License-Identifier: MIT */
/*
 * Active health checks: a thread of its own sends GET <path> to every
 * member every interval (non-blocking sockets, one poll loop, each probe
 * bounded by a timeout) and marks a member PG_BACKEND_UNHEALTHY after `fall`
 * failures in a row, healthy again after `rise` successes. Passive detection
 * (a refused or reset connection marks a member DOWN for a while) is the
 * workers'; both are needed: passive reacts within one request, active
 * notices a backend that accepts connections but answers errors or hangs,
 * and brings a recovered backend back.
 */
#ifndef PG_HEALTH_H
#define PG_HEALTH_H

#include <stdbool.h>
#include <stdint.h>
#include "gateway.h"

/* One member's run of results (pure: unit-tested). */
struct pg_health_state {
	uint32_t epoch;    /* member this state belongs to */
	uint16_t ok_run;   /* successes in a row */
	uint16_t fail_run; /* failures in a row */
	bool unhealthy;
};

/* Feed one result; returns +1 if the member just became healthy, -1 if it
 * just became unhealthy, 0 otherwise. */
int pg_health_result(struct pg_health_state *st, bool ok, unsigned rise, unsigned fall);

struct pg_scrape;

/* Store a finished scrape's values, taken at now_ms, into backend b
 * (relaxed atomics, metrics_until_ms last with release order); takes:
 * b->takes when the scrape began (the requests it counts had been sent
 * before its own request: pg_work_begun). */
void pg_health_store_scrape(struct pg_backend *b, const struct pg_scrape *s, uint32_t takes,
                            uint64_t now_ms, uint64_t valid_until_ms);

/* A backend whose queue only its engine's report drains (router/work.h
 * pg_work_blind: its speed not measured, answers that do not stream) is
 * scraped this many times as often as --metrics-scrape-interval, at most
 * every PG_SCRAPE_MIN_MS: flow control holds requests until the report
 * shows room, and at the default interval it showed room late enough that
 * the instances had nothing to prefill more than half the time
 * (tools/bench/learn.py, flow at 3x the default speed, no streams: 0.45x
 * the work done without flow control; 0.95x at 50 ms). Only then: a
 * /metrics is tens of kilobytes an engine makes and the checker parses. */
#define PG_SCRAPE_BLIND_DIV 5

/* The interval between a blind backend's scrapes: interval_ms (the
 * configured one) / PG_SCRAPE_BLIND_DIV, never under PG_SCRAPE_MIN_MS nor
 * over interval_ms. Pure: unit-tested. */
static inline unsigned pg_scrape_blind_ms(unsigned interval_ms)
{
	const unsigned ms = interval_ms / PG_SCRAPE_BLIND_DIV;

	if (ms >= PG_SCRAPE_MIN_MS)
		return ms;
	return interval_ms < PG_SCRAPE_MIN_MS ? interval_ms : PG_SCRAPE_MIN_MS;
}

/* Start / stop the checker thread, its state in gw->health (no thread, and
 * gw->health NULL, when both health checks and --metrics-scrape-interval
 * are off). The same thread scrapes each member's GET /metrics (HTTP/1.0,
 * read to EOF, parsed by scrape.h) every --metrics-scrape-interval into the
 * pg_backend scraped fields. Stop after gw->stop is set. */
int pg_health_start(struct pg_gateway *gw, char *err, size_t errlen);
void pg_health_stop(struct pg_gateway *gw);

#endif /* PG_HEALTH_H */
