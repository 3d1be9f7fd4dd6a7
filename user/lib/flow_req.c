// SPDX-License-Identifier: MIT
/* What a request says of itself to flow control (flow.h): its class, its
 * deadline, its tenant. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <xxhash.h>

#include "lib/flow.h"

const char *const pg_prio_names[PG_PRIO_COUNT] = {
    [PG_PRIO_CRITICAL] = "critical",
    [PG_PRIO_STANDARD] = "standard",
    [PG_PRIO_SHEDDABLE] = "sheddable",
};

int pg_flow_prio_parse(const char *v, size_t n, enum pg_prio *out)
{
	for (unsigned c = 0; c < PG_PRIO_COUNT; c++)
		if (n == strlen(pg_prio_names[c]) && !strncasecmp(v, pg_prio_names[c], n)) {
			*out = (enum pg_prio)c;
			return 0;
		}
	return -1;
}

int pg_flow_deadline_parse(const char *v, size_t n, uint32_t max, uint32_t *ms)
{
	uint64_t x = 0;

	if (!n || n > 10)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	if (!x || x > max)
		return -1;
	*ms = (uint32_t)x;
	return 0;
}

int pg_flow_bearer(const char *v, size_t n, const char **tok, size_t *tok_len)
{
	size_t i = 6;

	if (n < 7 || strncasecmp(v, "bearer", 6) || (v[6] != ' ' && v[6] != '\t'))
		return -1;
	while (i < n && (v[i] == ' ' || v[i] == '\t'))
		i++;
	if (i == n)
		return -1;
	*tok = v + i;
	*tok_len = n - i;
	return 0;
}

static bool label_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '.' || ch == '_' || ch == ':' || ch == '@' || ch == '-';
}

uint64_t pg_flow_label(const char *v, size_t n, bool secret, char *label)
{
	bool own = !secret && n && n <= PG_FLOW_LABEL_MAX;
	uint64_t h;

	for (size_t i = 0; own && i < n; i++)
		own = label_char(v[i]);
	if (own) {
		memcpy(label, v, n);
		label[n] = 0;
	} else {
		snprintf(label, PG_FLOW_LABEL_MAX + 1, "t-%012llx",
		         (unsigned long long)(XXH3_64bits(v, n) >> 16));
	}
	h = XXH3_64bits(label, strlen(label));
	return h ? h : 1;
}
