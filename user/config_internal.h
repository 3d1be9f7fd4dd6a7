/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the configuration parsers (config.c, routing_config.c).
 * Not part of the public API: include only from those files.
 */
#ifndef PG_CONFIG_INTERNAL_H
#define PG_CONFIG_INTERNAL_H

#include <stddef.h>

/*
 * printf-format one error message into err (errlen bytes, always
 * NUL-terminated, truncated if longer). errlen 0 means the caller does not
 * want the message: nothing is written and err may be NULL.
 */
__attribute__((format(printf, 3, 4))) void pg_errf(char *err, size_t errlen, const char *fmt, ...);

#endif /* PG_CONFIG_INTERNAL_H */
