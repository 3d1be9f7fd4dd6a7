// SPDX-License-Identifier: MIT
/* Usage accounting (account.h). */
#include "lib/account.h"

#define ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

const char *const pg_acct_fig_names[PG_ACCT_FIGS] = {"prompt_tokens", "cached_tokens",
                                                     "completion_tokens"};

void pg_use_of(const struct pg_usage *u, const struct pg_use_est *est, struct pg_use *out)
{
	const uint32_t have = u ? u->have : 0;

	*out = (struct pg_use){{est->prompt, est->cached, est->completion}, 0};
	if (have & PG_USAGE_PROMPT) {
		out->n[PG_ACCT_PROMPT] = u->prompt_tokens;
		out->exact |= 1u << PG_ACCT_PROMPT;
	}
	/* no cached_tokens beside a reported prompt: the engine keeps them
	 * to itself (vLLM and SGLang leave them out when 0 too): estimated */
	if (have & PG_USAGE_CACHED) {
		out->n[PG_ACCT_CACHED] = u->cached_tokens;
		out->exact |= 1u << PG_ACCT_CACHED;
	}
	if (out->n[PG_ACCT_CACHED] > out->n[PG_ACCT_PROMPT])
		out->n[PG_ACCT_CACHED] = out->n[PG_ACCT_PROMPT];
	if (have & PG_USAGE_COMPLETION) {
		out->n[PG_ACCT_COMPLETION] = u->completion_tokens;
		out->exact |= 1u << PG_ACCT_COMPLETION;
	} else if (have & PG_USAGE_COUNTED) {
		out->n[PG_ACCT_COMPLETION] = u->events; /* a content event a token */
	}
}

void pg_account_add(struct pg_account *a, enum pg_acct_end end, const struct pg_use *use)
{
	ADD(&a->requests, 1);
	if (end == PG_ACCT_ERROR)
		ADD(&a->errors, 1);
	else if (end == PG_ACCT_THROTTLED)
		ADD(&a->throttled, 1);
	for (unsigned f = 0; use && f < PG_ACCT_FIGS; f++)
		if (use->n[f])
			ADD(&a->tokens[f][(use->exact >> f & 1) ? 0 : 1], use->n[f]);
}

enum pg_acct_end pg_acct_end_of(unsigned status, bool broken)
{
	if (status == 429)
		return PG_ACCT_THROTTLED;
	if (broken || status >= 500)
		return PG_ACCT_ERROR;
	return PG_ACCT_ANSWERED;
}
