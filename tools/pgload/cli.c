// SPDX-License-Identifier: MIT
/* Command line of pgload: a keyword table, strict number parsing; --help
 * prints usage.c's text. */
#include "pgload.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const wl_names[] = {
    [WL_SHARED_PREFIX] = "shared-prefix",
    [WL_MULTI_TURN] = "multi-turn",
    [WL_NO_PREFIX] = "no-prefix",
    [WL_HOT_PREFIX] = "hot-prefix",
    [WL_FIXED] = "fixed",
    [WL_AGENTIC] = "agentic",
    [WL_SHORT_CHAT] = "short-chat",
    [WL_TRACE] = "trace",
};

const char *pg_workload_name(enum wl_kind k)
{
	return wl_names[k];
}

/* Option codes: in the same order as longopts[] (one_option() indexes it). */
enum {
	O_TARGET = 256,
	O_PATH,
	O_MODEL,
	O_MAX_TOKENS,
	O_NO_STREAM,
	O_TIMEOUT,
	O_RATE,
	O_CONCURRENCY,
	O_MAX_CONNS,
	O_DURATION,
	O_REQUESTS,
	O_WORKLOAD,
	O_SEED,
	O_DOCS,
	O_DOC_TOKENS,
	O_ZIPF,
	O_QUESTION_TOKENS,
	O_SYSTEM_TOKENS,
	O_HOT_SHARE,
	O_CONVERSATIONS,
	O_MIN_TURNS,
	O_MAX_TURNS,
	O_USER_TOKENS,
	O_ASSISTANT_TOKENS,
	O_TOOLS,
	O_TOOL_TOKENS,
	O_HISTORY_TOKENS,
	O_HISTORY,
	O_BODY_BYTES,
	O_FIRST_INDEX,
	O_TRACE,
	O_TRACE_START,
	O_TRACE_REQUESTS,
	O_LOAD,
	O_CAPACITY,
	O_SPEEDUP,
	O_HEADER,
	O_LABEL,
	O_CSV,
	O_JSON,
	O_QUIET,
	O_HELP,
};

static const struct option longopts[] = {
    {"target", required_argument, NULL, O_TARGET},
    {"path", required_argument, NULL, O_PATH},
    {"model", required_argument, NULL, O_MODEL},
    {"max-tokens", required_argument, NULL, O_MAX_TOKENS},
    {"no-stream", no_argument, NULL, O_NO_STREAM},
    {"timeout-ms", required_argument, NULL, O_TIMEOUT},
    {"rate", required_argument, NULL, O_RATE},
    {"concurrency", required_argument, NULL, O_CONCURRENCY},
    {"max-conns", required_argument, NULL, O_MAX_CONNS},
    {"duration", required_argument, NULL, O_DURATION},
    {"requests", required_argument, NULL, O_REQUESTS},
    {"workload", required_argument, NULL, O_WORKLOAD},
    {"seed", required_argument, NULL, O_SEED},
    {"docs", required_argument, NULL, O_DOCS},
    {"doc-tokens", required_argument, NULL, O_DOC_TOKENS},
    {"zipf", required_argument, NULL, O_ZIPF},
    {"question-tokens", required_argument, NULL, O_QUESTION_TOKENS},
    {"system-tokens", required_argument, NULL, O_SYSTEM_TOKENS},
    {"hot-share", required_argument, NULL, O_HOT_SHARE},
    {"conversations", required_argument, NULL, O_CONVERSATIONS},
    {"min-turns", required_argument, NULL, O_MIN_TURNS},
    {"max-turns", required_argument, NULL, O_MAX_TURNS},
    {"user-tokens", required_argument, NULL, O_USER_TOKENS},
    {"assistant-tokens", required_argument, NULL, O_ASSISTANT_TOKENS},
    {"tools", required_argument, NULL, O_TOOLS},
    {"tool-tokens", required_argument, NULL, O_TOOL_TOKENS},
    {"history-tokens", required_argument, NULL, O_HISTORY_TOKENS},
    {"history", required_argument, NULL, O_HISTORY},
    {"body-bytes", required_argument, NULL, O_BODY_BYTES},
    {"first-index", required_argument, NULL, O_FIRST_INDEX},
    {"trace", required_argument, NULL, O_TRACE},
    {"trace-start", required_argument, NULL, O_TRACE_START},
    {"trace-requests", required_argument, NULL, O_TRACE_REQUESTS},
    {"load", required_argument, NULL, O_LOAD},
    {"capacity-tokens-per-s", required_argument, NULL, O_CAPACITY},
    {"speedup", required_argument, NULL, O_SPEEDUP},
    {"header", required_argument, NULL, O_HEADER},
    {"label", required_argument, NULL, O_LABEL},
    {"csv", required_argument, NULL, O_CSV},
    {"json", required_argument, NULL, O_JSON},
    {"quiet", no_argument, NULL, O_QUIET},
    {"help", no_argument, NULL, O_HELP},
    {NULL, 0, NULL, 0},
};

/* Parse an integer in [lo, hi] for the option named opt. */
static int num_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < lo || v > hi) {
		fprintf(stderr, "pgload: --%s %s: want an integer in [%llu, %llu]\n", opt, s,
		        (unsigned long long)lo, (unsigned long long)hi);
		return -1;
	}
	*out = v;
	return 0;
}

static int num_uint(const char *opt, const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	uint64_t v;

	if (num_u64(opt, s, lo, hi, &v) == -1)
		return -1;
	*out = (unsigned)v;
	return 0;
}

static int num_double(const char *opt, const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
		fprintf(stderr, "pgload: --%s %s: want a number in [%g, %g]\n", opt, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static int copy_str(const char *opt, const char *s, char *dst, size_t cap)
{
	if (strlen(s) >= cap) {
		fprintf(stderr, "pgload: --%s: longer than %zu bytes\n", opt, cap - 1);
		return -1;
	}
	strcpy(dst, s);
	return 0;
}

/* Names and strings a request head or body will carry verbatim. */
static int plain(const char *opt, const char *s)
{
	for (const char *p = s; *p; p++)
		if (*p <= ' ' || *p == '"' || *p == '\\' || *p == 0x7f) {
			fprintf(stderr, "pgload: --%s %s: no spaces, quotes or control bytes\n",
			        opt, s);
			return -1;
		}
	return 0;
}

/*
 * Append one "NAME: VALUE" request header to o->headers: a token name, a
 * colon, a value without control bytes. Returns 0, or -1 after a message.
 */
static int add_header(struct pg_opts *o, const char *s)
{
	const char *colon = strchr(s, ':');
	size_t n = strlen(s);

	if (!colon || colon == s) {
		fprintf(stderr, "pgload: --header %s: want 'NAME: VALUE'\n", s);
		return -1;
	}
	for (const char *p = s; p < colon; p++)
		if (*p <= ' ' || *p >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}", *p)) {
			fprintf(stderr, "pgload: --header %s: bad header name\n", s);
			return -1;
		}
	for (const char *p = colon + 1; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f) {
			fprintf(stderr, "pgload: --header %s: control byte in the value\n", s);
			return -1;
		}
	if (o->headers_len + n + 3 > sizeof(o->headers)) {
		fprintf(stderr, "pgload: --header: more than %zu bytes of headers\n",
		        sizeof(o->headers) - 1);
		return -1;
	}
	memcpy(o->headers + o->headers_len, s, n);
	memcpy(o->headers + o->headers_len + n, "\r\n", 3);
	o->headers_len += n + 2;
	return 0;
}

/* One numeric IPv4 ADDR:PORT of n bytes at s, appended to o->targets. */
static int add_target(struct pg_opts *o, const char *s, size_t n)
{
	struct pg_target *t = &o->targets[o->ntargets];
	const char *colon;
	struct in_addr a;
	uint64_t port;
	size_t len;

	if (o->ntargets == PG_MAX_TARGETS) {
		fprintf(stderr, "pgload: --target: at most %d targets\n", PG_MAX_TARGETS);
		return -1;
	}
	if (n >= sizeof(t->name)) {
		fprintf(stderr, "pgload: --target %.*s: too long\n", (int)n, s);
		return -1;
	}
	memcpy(t->name, s, n);
	t->name[n] = '\0';
	colon = strrchr(t->name, ':');
	if (!colon || colon == t->name || (size_t)(colon - t->name) >= sizeof(t->host)) {
		fprintf(stderr, "pgload: --target %s: want ADDR:PORT\n", t->name);
		return -1;
	}
	memcpy(t->host, t->name, (size_t)(colon - t->name));
	t->host[colon - t->name] = '\0';
	if (inet_pton(AF_INET, t->host, &a) != 1) {
		fprintf(stderr, "pgload: --target %s: not a numeric IPv4 ADDR:PORT\n", t->name);
		return -1;
	}
	if (num_u64("target port", colon + 1, 1, 65535, &port) == -1)
		return -1;
	t->port = (uint16_t)port;
	/* Fits: PG_MAX_TARGETS names of under 64 bytes, each with its comma. */
	len = strlen(o->target);
	if (o->ntargets)
		o->target[len++] = ',';
	memcpy(o->target + len, t->name, n + 1);
	o->ntargets++;
	return 0;
}

/* ADDR:PORT or a comma list of them, appended to o->targets. */
static int parse_target(struct pg_opts *o, const char *s)
{
	for (;;) {
		const char *comma = strchr(s, ',');
		size_t n = comma ? (size_t)(comma - s) : strlen(s);

		if (add_target(o, s, n) == -1)
			return -1;
		if (!comma)
			return 0;
		s = comma + 1;
	}
}

static void defaults(struct pg_opts *o)
{
	memset(o, 0, sizeof(*o));
	parse_target(o, "127.0.0.1:8080");
	strcpy(o->path, "/v1/chat/completions");
	strcpy(o->model, "mock");
	o->workload = WL_SHARED_PREFIX;
	o->max_conns = 4096;
	o->max_tokens = 32;
	o->stream = true;
	o->timeout_ms = 30000;
	o->seed = 1;
	o->docs = 32;
	o->doc_tokens = 8000;
	o->zipf_s = 1.0;
	o->question_tokens = 50;
	o->system_tokens = 64;
	o->hot_share = 0.5;
	o->conversations = 64;
	o->min_turns = 2;
	o->max_turns = 12;
	o->user_tokens = 60;
	o->assistant_tokens = 200;
	o->tools = 4;
	o->tool_tokens = 450;
	o->history_tokens = 800;
	o->body_bytes = 32768;
}

/* Defaults that depend on the workload, for the options not given. */
static void workload_defaults(struct pg_opts *o, const bool *given)
{
#define UNSET(code) (!given[(code)-O_TARGET])
	if (o->workload == WL_AGENTIC && UNSET(O_SYSTEM_TOKENS))
		o->system_tokens = 10000;
	if (o->workload == WL_TRACE && UNSET(O_PATH))
		strcpy(o->path, "/v1/completions");
	if (o->workload == WL_TRACE && UNSET(O_TIMEOUT))
		o->timeout_ms = PG_TRACE_TIMEOUT_MS;
	if (o->workload != WL_SHORT_CHAT)
		return;
	if (UNSET(O_CONVERSATIONS))
		o->conversations = 256;
	if (UNSET(O_MIN_TURNS))
		o->min_turns = 2;
	if (UNSET(O_MAX_TURNS))
		o->max_turns = 6;
	if (UNSET(O_USER_TOKENS))
		o->user_tokens = 24;
	if (UNSET(O_ASSISTANT_TOKENS))
		o->assistant_tokens = 48;
	if (UNSET(O_SYSTEM_TOKENS))
		o->system_tokens = 0;
#undef UNSET
}

static int one_option(struct pg_opts *o, int opt, const char *arg)
{
	const char *name = longopts[opt - O_TARGET].name;
	uint64_t v;

	switch (opt) {
	case O_TARGET:
		return parse_target(o, arg);
	case O_PATH:
		if (arg[0] != '/' || plain(name, arg) == -1) {
			fprintf(stderr, "pgload: --path %s: want an absolute path\n", arg);
			return -1;
		}
		return copy_str(name, arg, o->path, sizeof(o->path));
	case O_MODEL:
		return plain(name, arg) == -1 ? -1
		                              : copy_str(name, arg, o->model, sizeof(o->model));
	case O_LABEL:
		return plain(name, arg) == -1 ? -1
		                              : copy_str(name, arg, o->label, sizeof(o->label));
	case O_MAX_TOKENS:
		return num_uint(name, arg, 1, 1000000, &o->max_tokens);
	case O_NO_STREAM:
		o->stream = false;
		return 0;
	case O_TIMEOUT:
		return num_uint(name, arg, 1, 3600000, &o->timeout_ms);
	case O_RATE:
		return num_double(name, arg, 1e-3, 1e7, &o->rate);
	case O_CONCURRENCY:
		return num_uint(name, arg, 1, 1000000, &o->concurrency);
	case O_MAX_CONNS:
		return num_uint(name, arg, 1, 1000000, &o->max_conns);
	case O_DURATION:
		return num_double(name, arg, 1e-3, 1e6, &o->duration_s);
	case O_REQUESTS:
		return num_u64(name, arg, 1, UINT32_MAX, &o->requests);
	case O_SEED:
		return num_u64(name, arg, 0, UINT64_MAX, &o->seed);
	case O_DOCS:
		return num_uint(name, arg, 1, 1000000, &o->docs);
	case O_DOC_TOKENS:
		return num_uint(name, arg, 1, 1 << 24, &o->doc_tokens);
	case O_ZIPF:
		return num_double(name, arg, 0, 10, &o->zipf_s);
	case O_QUESTION_TOKENS:
		return num_uint(name, arg, 1, 1 << 20, &o->question_tokens);
	case O_SYSTEM_TOKENS:
		return num_uint(name, arg, 0, 1 << 20, &o->system_tokens);
	case O_HOT_SHARE:
		return num_double(name, arg, 0, 1, &o->hot_share);
	case O_CONVERSATIONS:
		return num_uint(name, arg, 1, 1000000, &o->conversations);
	case O_MIN_TURNS:
		return num_uint(name, arg, 1, 64, &o->min_turns);
	case O_MAX_TURNS:
		return num_uint(name, arg, 1, 64, &o->max_turns);
	case O_USER_TOKENS:
		return num_uint(name, arg, 1, 1 << 16, &o->user_tokens);
	case O_ASSISTANT_TOKENS:
		return num_uint(name, arg, 1, 1 << 16, &o->assistant_tokens);
	case O_TOOLS:
		return num_uint(name, arg, 0, 64, &o->tools);
	case O_TOOL_TOKENS:
		return num_uint(name, arg, 1, 1 << 16, &o->tool_tokens);
	case O_HISTORY_TOKENS:
		return num_uint(name, arg, 4, 1 << 20, &o->history_tokens);
	case O_HISTORY:
		if (strcmp(arg, "server") == 0 || strcmp(arg, "replay") == 0) {
			o->history = arg[0] == 's' ? PG_HIST_SERVER : PG_HIST_REPLAY;
			return 0;
		}
		fprintf(stderr, "pgload: --history %s: want server or replay\n", arg);
		return -1;
	case O_BODY_BYTES:
		if (num_u64(name, arg, 1, 1ULL << 30, &v) == -1)
			return -1;
		o->body_bytes = (size_t)v;
		return 0;
	case O_FIRST_INDEX:
		return num_u64(name, arg, 0, UINT64_MAX / 2, &o->first_index);
	case O_TRACE:
		o->trace_path = arg;
		return 0;
	case O_TRACE_START:
		return num_u64(name, arg, 0, UINT32_MAX, &o->trace_start);
	case O_TRACE_REQUESTS:
		return num_u64(name, arg, 1, UINT32_MAX, &o->trace_requests);
	case O_LOAD:
		return num_double(name, arg, 1e-6, 1e6, &o->load);
	case O_CAPACITY:
		return num_double(name, arg, 1, 1e12, &o->capacity_tps);
	case O_SPEEDUP:
		return num_double(name, arg, 1e-6, 1e6, &o->speedup);
	case O_HEADER:
		return add_header(o, arg);
	case O_CSV:
		o->csv_path = arg;
		return 0;
	case O_JSON:
		o->json_path = arg;
		return 0;
	case O_QUIET:
		o->quiet = true;
		return 0;
	case O_WORKLOAD:
		for (size_t k = 0; k < sizeof(wl_names) / sizeof(wl_names[0]); k++)
			if (strcmp(arg, wl_names[k]) == 0) {
				o->workload = (enum wl_kind)k;
				return 0;
			}
		fprintf(stderr,
		        "pgload: --workload %s: want shared-prefix, multi-turn, "
		        "no-prefix, hot-prefix, agentic, short-chat, fixed or trace\n",
		        arg);
		return -1;
	}
	return -1;
}

/*
 * The trace workload's options: together, complete, and only with it.
 * Returns 0, or -1 after a message. What needs the file (the part within
 * it, W and D above 0) is checked when it is loaded (wl_trace.c).
 */
static int trace_options(const struct pg_opts *o, const bool *given)
{
#define GIVEN(code) (given[(code)-O_TARGET])
	bool any = GIVEN(O_TRACE) || GIVEN(O_TRACE_START) || GIVEN(O_TRACE_REQUESTS) ||
	           GIVEN(O_LOAD) || GIVEN(O_CAPACITY) || GIVEN(O_SPEEDUP);

	if (o->workload != WL_TRACE) {
		if (!any)
			return 0;
		fprintf(stderr, "pgload: --trace, --trace-start, --trace-requests, --load, "
		                "--capacity-tokens-per-s and --speedup are for --workload trace\n");
		return -1;
	}
	if (!o->trace_path) {
		fprintf(stderr,
		        "pgload: --workload trace needs --trace FILE (a JSONL trace, "
		        "gzip'd or not: tools/bench/data/mooncake-conversation.jsonl.gz)\n");
		return -1;
	}
	if (GIVEN(O_LOAD) && GIVEN(O_SPEEDUP)) {
		fprintf(stderr, "pgload: --load and --speedup exclude each other: --load sets the "
		                "speed-up S = RHO x C x D / W, --speedup sets S itself\n");
		return -1;
	}
	if (GIVEN(O_LOAD) != GIVEN(O_CAPACITY)) {
		fprintf(stderr, GIVEN(O_LOAD)
		                    ? "pgload: --load needs --capacity-tokens-per-s C, the fleet's "
		                      "prefill tokens/s (S = RHO x C x D / W)\n"
		                    : "pgload: --capacity-tokens-per-s is used only with --load\n");
		return -1;
	}
	if (o->rate > 0 || o->concurrency) {
		fprintf(stderr, "pgload: --workload trace sends each request at its trace time "
		                "(scaled by --load or --speedup): no --rate or --concurrency\n");
		return -1;
	}
	if (GIVEN(O_FIRST_INDEX)) {
		fprintf(stderr, "pgload: --first-index is not for --workload trace: give "
		                "--trace-start\n");
		return -1;
	}
	return 0;
#undef GIVEN
}

int pg_parse_args(int argc, char **argv, struct pg_opts *o)
{
	bool given[O_HELP - O_TARGET + 1] = {false};
	int opt;

	defaults(o);
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt == O_HELP) {
			fputs(pg_usage, stdout);
			return 1;
		}
		if (opt == '?' || opt == ':') {
			fprintf(stderr, "pgload: bad or incomplete option %s (see --help)\n",
			        argv[optind - 1]);
			return -1;
		}
		if (opt == O_TARGET && !given[O_TARGET - O_TARGET]) {
			o->ntargets = 0; /* the first --target replaces the default */
			o->target[0] = '\0';
		}
		if (one_option(o, opt, optarg) == -1)
			return -1;
		given[opt - O_TARGET] = true;
	}
	if (optind < argc) {
		fprintf(stderr, "pgload: unexpected argument %s (see --help)\n", argv[optind]);
		return -1;
	}
	if (o->rate > 0 && o->concurrency) {
		fprintf(stderr, "pgload: --rate (open loop) and --concurrency (closed loop) "
		                "exclude each other; cap open-loop connections with --max-conns\n");
		return -1;
	}
	if (trace_options(o, given) == -1)
		return -1;
	/* The trace workload runs open loop to the end of its part. */
	if (o->rate <= 0 && !o->concurrency && !pg_scheduled(o))
		o->concurrency = 16;
	if (o->duration_s <= 0 && !o->requests && !pg_scheduled(o))
		o->duration_s = 10;
	workload_defaults(o, given);
	if (o->min_turns > o->max_turns) {
		fprintf(stderr, "pgload: --min-turns %u exceeds --max-turns %u\n", o->min_turns,
		        o->max_turns);
		return -1;
	}
	if (!o->label[0])
		strcpy(o->label, wl_names[o->workload]);
	return 0;
}
