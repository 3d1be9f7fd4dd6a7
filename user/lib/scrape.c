// SPDX-License-Identifier: MIT
/* Incremental reader of a backend's /metrics response (scrape.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/scrape.h"

static const char *const series_names[PG_SCRAPE_NSERIES] = {
    [PG_SCRAPE_HITS] = "vllm:prefix_cache_hits_total",
    [PG_SCRAPE_QUERIES] = "vllm:prefix_cache_queries_total",
    [PG_SCRAPE_WAITING] = "vllm:num_requests_waiting",
    [PG_SCRAPE_RUNNING] = "vllm:num_requests_running",
    [PG_SCRAPE_KV_TOKENS] = "vllm:cache_config_info",
};

/* Other engines' names of the same series (SGLang's). */
static const struct {
	const char *name;
	enum pg_scrape_series series;
} aliases[] = {
    {"sglang:num_queue_reqs", PG_SCRAPE_WAITING},
    {"sglang:num_running_reqs", PG_SCRAPE_RUNNING},
};

/* The unsigned number of label name="..." in labels l[0..n) (the text
 * between the braces), or -1. */
static double label_number(const char *l, size_t n, const char *name)
{
	const size_t nl = strlen(name);
	size_t i = 0;

	while (i < n) {
		size_t k = i, v;
		char num[32], *end;
		double x;

		while (k < n && l[k] != '=')
			k++;
		if (k + 1 >= n || l[k + 1] != '"')
			return -1;
		for (v = k + 2; v < n && l[v] != '"'; v++)
			if (l[v] == '\\')
				v++;
		if (v >= n)
			return -1;
		if (k - i == nl && !memcmp(l + i, name, nl) && v - k - 2 < sizeof(num) &&
		    v > k + 2) {
			memcpy(num, l + k + 2, v - k - 2);
			num[v - k - 2] = 0;
			x = strtod(num, &end);
			return *end || !isfinite(x) || x < 0 ? -1 : x;
		}
		i = v + 1;
		while (i < n && (l[i] == ',' || l[i] == ' '))
			i++;
	}
	return -1;
}

void pg_scrape_init(struct pg_scrape *s)
{
	memset(s, 0, sizeof(*s));
}

void pg_scrape_line(struct pg_scrape *s, const char *line, size_t len)
{
	char num[64];
	size_t i = 0, nl, vl;
	int which = -1;
	double v;
	char *end;

	while (i < len && line[i] != '{' && line[i] != ' ' && line[i] != '\t')
		i++;
	nl = i;
	for (int k = 0; k < PG_SCRAPE_NSERIES; k++)
		if (strlen(series_names[k]) == nl && !memcmp(line, series_names[k], nl))
			which = k;
	for (size_t k = 0; k < sizeof(aliases) / sizeof(aliases[0]); k++)
		if (strlen(aliases[k].name) == nl && !memcmp(line, aliases[k].name, nl))
			which = (int)aliases[k].series;
	if (which < 0)
		return;
	if (i < len && line[i] == '{') { /* labels: skip to the '}' outside quotes */
		bool quoted = false;
		size_t open = i + 1;

		for (i++; i < len; i++) {
			if (quoted && line[i] == '\\')
				i++;
			else if (line[i] == '"')
				quoted = !quoted;
			else if (!quoted && line[i] == '}')
				break;
		}
		if (i++ >= len)
			return;
		if (which == PG_SCRAPE_KV_TOKENS) { /* its figures are labels */
			double bs = label_number(line + open, i - 1 - open, "block_size"),
			       nb = label_number(line + open, i - 1 - open, "num_gpu_blocks");

			if (bs > 0 && nb > 0) {
				s->value[which] += bs * nb;
				s->seen |= 1u << which;
			}
			return;
		}
	} else if (which == PG_SCRAPE_KV_TOKENS) {
		return;
	}
	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	for (vl = 0; i + vl < len && line[i + vl] != ' ' && line[i + vl] != '\t'; vl++)
		;
	if (!vl || vl >= sizeof(num))
		return;
	memcpy(num, line + i, vl);
	num[vl] = 0;
	v = strtod(num, &end);
	if (*end || !isfinite(v) || v < 0)
		return;
	s->value[which] += v;
	s->seen |= 1u << which;
}

/* One complete line of the response (without its "\n" or "\r\n"). */
static void one_line(struct pg_scrape *s, char *line, size_t len)
{
	if (len && line[len - 1] == '\r')
		len--;
	line[len] = 0;
	switch (s->phase) {
	case 0:
		if (sscanf(line, "HTTP/1.%*d %d", &s->status) != 1 || s->status != 200)
			s->phase = -1;
		else
			s->phase = 1;
		break;
	case 1:
		if (!len)
			s->phase = 2;
		break;
	case 2:
		if (len && line[0] != '#')
			pg_scrape_line(s, line, len);
		break;
	}
}

int pg_scrape_feed(struct pg_scrape *s, const char *p, size_t n)
{
	s->total += n;
	if (s->total > PG_SCRAPE_MAX_BYTES)
		s->phase = -1;
	for (size_t i = 0; i < n && s->phase >= 0; i++) {
		if (p[i] == '\n') {
			if (!s->overlong)
				one_line(s, s->line, s->llen);
			else if (s->phase < 2)
				s->phase = -1; /* a status line or header this long: not for us */
			s->llen = 0;
			s->overlong = false;
		} else if (s->llen < PG_SCRAPE_LINE_MAX) {
			s->line[s->llen++] = p[i];
		} else {
			s->overlong = true;
		}
	}
	return s->phase < 0 ? -1 : 0;
}

int pg_scrape_finish(struct pg_scrape *s)
{
	if (s->phase == 2 && s->llen && !s->overlong)
		one_line(s, s->line, s->llen);
	s->llen = 0;
	return s->phase == 2 ? 0 : -1;
}
