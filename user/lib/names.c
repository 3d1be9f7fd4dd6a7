// SPDX-License-Identifier: MIT
/* The names of the routing enums (names.h). */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "lib/key.h"
#include "lib/names.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *const decision_names[PG_DEC_MAX] = {
    [PG_DEC_AFFINITY] = "affinity", [PG_DEC_OVERFLOW] = "overflow",
    [PG_DEC_RANDOM] = "random",     [PG_DEC_LEAST_OUTSTANDING] = "least_outstanding",
    [PG_DEC_RETRY] = "retry",       [PG_DEC_EXPLICIT_KEY] = "explicit_key",
    [PG_DEC_CACHED] = "cached",     [PG_DEC_BALANCED] = "balanced",
};

/* Each strategy in SageMaker's spelling and as the flag spells it. */
static const struct {
	const char *name, *flag;
} strategies[] = {
    [PG_STRATEGY_RANDOM] = {"RANDOM", "random"},
    [PG_STRATEGY_LEAST_OUTSTANDING] = {"LEAST_OUTSTANDING_REQUESTS", "least_outstanding_requests"},
    [PG_STRATEGY_PREFIX_AWARE] = {"PREFIX_AWARE", "prefix_aware"},
    [PG_STRATEGY_CACHE_AWARE] = {"CACHE_AWARE", "cache_aware"},
};
_Static_assert(COUNT(strategies) == PG_STRATEGY_COUNT, "a name for each strategy");

static const char *const load_signals[] = {
    [PG_LOAD_INFLIGHT] = "inflight",
    [PG_LOAD_BACKEND] = "backend",
    [PG_LOAD_BOTH] = "both",
};
_Static_assert(COUNT(load_signals) == PG_LOAD_SIGNAL_COUNT, "a name for each load signal");

static const char *const key_sources[] = {
    [PG_KEY_SRC_RAW] = "raw",
    [PG_KEY_SRC_MESSAGES] = "messages",
    [PG_KEY_SRC_HEADER] = "header",
    [PG_KEY_SRC_CACHE_FIELD] = "prompt_cache_key",
    [PG_KEY_SRC_PROMPT] = "prompt",
    [PG_KEY_SRC_INPUT] = "input",
    [PG_KEY_SRC_PREVIOUS_RESPONSE] = "previous_response_id",
};
_Static_assert(COUNT(key_sources) == PG_KEY_SRC_COUNT, "a name for each key source");

const char *pg_decision_name(unsigned decision)
{
	return decision < PG_DEC_MAX ? decision_names[decision] : "unknown";
}

int pg_strategy_parse(const char *s, size_t len, enum pg_strategy *out)
{
	for (unsigned i = 0; i < COUNT(strategies); i++) {
		if (strlen(strategies[i].name) == len && !strncasecmp(s, strategies[i].name, len)) {
			*out = (enum pg_strategy)i;
			return 0;
		}
	}
	return -1;
}

const char *pg_strategy_flag(enum pg_strategy s)
{
	return (unsigned)s < COUNT(strategies) ? strategies[s].flag : "unknown";
}

const char *pg_strategy_name(enum pg_strategy s)
{
	return (unsigned)s < COUNT(strategies) ? strategies[s].name : "UNKNOWN";
}

/* names[0..n) joined into buf as pg_strategy_list says. */
static const char *join(char *buf, size_t len, const char *const *names, size_t stride, size_t n,
                        const char *sep, const char *last)
{
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++) {
		const char *name = *(const char *const *)((const char *)names + i * stride);
		int k = snprintf(buf + used, len - used, "%s%s",
		                 i == 0       ? ""
		                 : i + 1 == n ? last
		                              : sep,
		                 name);

		used += k > 0 ? (size_t)k : 0;
	}
	return buf;
}

const char *pg_strategy_list(char *buf, size_t len, bool sagemaker, const char *sep,
                             const char *last)
{
	return join(buf, len, sagemaker ? &strategies[0].name : &strategies[0].flag,
	            sizeof(strategies[0]), COUNT(strategies), sep, last);
}

const char *pg_load_signal_list(char *buf, size_t len, const char *sep)
{
	return join(buf, len, load_signals, sizeof(load_signals[0]), COUNT(load_signals), sep, sep);
}

const char *pg_load_signal_name(enum pg_load_signal s)
{
	return (unsigned)s < COUNT(load_signals) ? load_signals[s] : "unknown";
}

int pg_load_signal_parse(const char *s, enum pg_load_signal *out)
{
	for (unsigned i = 0; i < COUNT(load_signals); i++) {
		if (!strcasecmp(s, load_signals[i])) {
			*out = (enum pg_load_signal)i;
			return 0;
		}
	}
	return -1;
}

const char *pg_key_source_name(unsigned source)
{
	return source < COUNT(key_sources) ? key_sources[source] : "unknown";
}
