/* SPDX-License-Identifier: MIT */
/* Logging to stderr: one line per event, with time and level. Off the fast
 * path: workers log only rare events (a backend going down, a bad request
 * is not logged). */
#ifndef PG_LOG_H
#define PG_LOG_H

enum pg_log_level { PG_LOG_ERROR, PG_LOG_WARN, PG_LOG_INFO, PG_LOG_DEBUG };

extern int pg_log_level;

void pg_log(enum pg_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define pg_error(...) pg_log(PG_LOG_ERROR, __VA_ARGS__)
#define pg_warn(...)  pg_log(PG_LOG_WARN, __VA_ARGS__)
#define pg_info(...)  pg_log(PG_LOG_INFO, __VA_ARGS__)
#define pg_debug(...)                                                                              \
	do {                                                                                       \
		if (__atomic_load_n(&pg_log_level, __ATOMIC_RELAXED) >= PG_LOG_DEBUG)              \
			pg_log(PG_LOG_DEBUG, __VA_ARGS__);                                         \
	} while (0)

#endif /* PG_LOG_H */
