// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include "sys/log.h"

int pg_log_level = PG_LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void pg_log(enum pg_log_level level, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n;

	/* a reload may change it (--log-level) */
	if ((int)level > __atomic_load_n(&pg_log_level, __ATOMIC_RELAXED))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line),
	             "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ prefixgate %s: ", tm.tm_year + 1900,
	             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	             ts.tv_nsec / 1000000, level_names[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	/* One write per line so lines from several threads never interleave. */
	fprintf(stderr, "%s\n", line);
}
