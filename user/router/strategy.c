// SPDX-License-Identifier: MIT
/* The table of strategies (strategy.h). */
#include "router/strategy.h"

static const struct pg_strategy_ops *const table[] = {
    [PG_STRATEGY_RANDOM] = &pg_strategy_random,
    [PG_STRATEGY_LEAST_OUTSTANDING] = &pg_strategy_least,
    [PG_STRATEGY_PREFIX_AWARE] = &pg_strategy_prefix,
    [PG_STRATEGY_CACHE_AWARE] = &pg_strategy_cache,
};

_Static_assert(sizeof(table) / sizeof(table[0]) == PG_STRATEGY_CACHE_AWARE + 1,
               "operations for each strategy");

const struct pg_strategy_ops *pg_strategy_of(enum pg_strategy s)
{
	return (unsigned)s < sizeof(table) / sizeof(table[0]) ? table[s] : &pg_strategy_prefix;
}
