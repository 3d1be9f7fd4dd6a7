// SPDX-License-Identifier: MIT
/*
 * The commands: status, backends list, top (from a snapshot source), and
 * route, backends add / remove / drain (through the admin API). Each returns
 * an exit status (ctl.h) and has said on stderr what failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "config/config.h"
#include "ctl.h"
#include "lib/buf.h"
#include "lib/json.h"

void ctl_err(const char *fmt, ...)
{
	va_list ap;

	fputs("prefixgatectl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- status, backends list, top ----------------------------------------------- */

int ctl_cmd_status(const struct ctl_opts *o, bool backends_only)
{
	struct ctl_snapshot *s = malloc(sizeof(*s));
	struct ctl_source src;
	char err[2048];
	int rc = CTL_ERR;

	if (!s) {
		ctl_err("out of memory");
		return CTL_ERR;
	}
	if (ctl_source_open(&src, o, err, sizeof(err))) {
		ctl_err("%s", err);
		free(s);
		return CTL_ERR;
	}
	if (ctl_snapshot_take(&src, s, err, sizeof(err))) {
		ctl_err("%s", err);
	} else {
		struct ctl_http_resp tls = {0};

		/* the listeners and certificates: the admin API's alone (none
		 * when it cannot be reached; the maps know nothing of them) */
		if (!backends_only &&
		    ctl_http(o, "GET", "/tls", NULL, NULL, 0, ctl_timeout(o, CTL_TIMEOUT_DEFAULT),
		             &tls, err, sizeof(err)))
			tls.status = 0;
		ctl_view_status(stdout, o, s, backends_only, &tls);
		ctl_http_resp_free(&tls);
		rc = s->stale ? CTL_STALE : CTL_OK;
	}
	ctl_source_close(&src);
	free(s);
	return rc;
}

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* Sleep s seconds; false if Ctrl-C came first. */
static bool nap(double s)
{
	double end = ctl_now() + s, left;

	while (!interrupted && (left = end - ctl_now()) > 0) {
		struct timespec ts = {.tv_sec = (time_t)left,
		                      .tv_nsec = (long)((left - (time_t)left) * 1e9)};

		nanosleep(&ts, NULL); /* EINTR: the loop re-checks */
	}
	return !interrupted;
}

int ctl_cmd_top(const struct ctl_opts *o)
{
	struct ctl_snapshot *s[2] = {malloc(sizeof(*s[0])), malloc(sizeof(*s[1]))};
	struct sigaction sa = {.sa_handler = on_sigint}; /* no SA_RESTART: wake the sleep */
	bool tty = isatty(STDOUT_FILENO) && !o->json;
	struct ctl_source src;
	char err[2048];
	int rc = CTL_ERR, cur = 0;

	if (!s[0] || !s[1]) {
		ctl_err("out of memory");
		goto out_free;
	}
	if (ctl_source_open(&src, o, err, sizeof(err))) {
		ctl_err("%s", err);
		goto out_free;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (ctl_snapshot_take(&src, s[0], err, sizeof(err)))
		goto fail;
	for (long n = 0; !o->count || n < o->count; n++) {
		if (!nap(o->interval))
			break;
		if (ctl_source_check(&src, err, sizeof(err)) ||
		    ctl_snapshot_take(&src, s[!cur], err, sizeof(err)))
			goto fail;
		cur = !cur;
		if (tty)
			fputs("\033[H\033[2J", stdout); /* home, clear screen */
		else if (n && !o->json)
			fputc('\n', stdout);
		ctl_view_top(stdout, o, s[!cur], s[cur]);
	}
	rc = s[cur]->stale ? CTL_STALE : CTL_OK;
	goto out;
fail:
	ctl_err("%s", err);
out:
	ctl_source_close(&src);
out_free:
	free(s[0]);
	free(s[1]);
	return rc;
}

/* ---- route ---------------------------------------------------------------------- */

static int read_input(const char *file, char **buf, size_t *len)
{
	struct pg_buf b = {0};
	int fd = strcmp(file, "-") ? open(file, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
	ssize_t r = 0;

	if (fd == -1) {
		ctl_err("route: %s: %s", file, strerror(errno));
		goto fail;
	}
	for (;;) {
		char *d = b.len > CTL_BODY_MAX ? NULL : pg_buf_reserve(&b, 65536);

		if (!d) {
			ctl_err("route: %s: %s", file,
			        b.len > CTL_BODY_MAX ? "larger than 16 MiB (the admin API's limit)"
			                             : "out of memory");
			goto fail;
		}
		r = read(fd, d, b.cap - b.len);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		b.len += (size_t)r;
	}
	if (r == -1) {
		ctl_err("route: reading %s: %s", file, strerror(errno));
		goto fail;
	}
	if (b.len > CTL_BODY_MAX) {
		ctl_err("route: %s: larger than 16 MiB (the admin API's limit)", file);
		goto fail;
	}
	if (fd != STDIN_FILENO)
		close(fd);
	*buf = b.p;
	*len = b.len;
	return 0;
fail:
	if (fd != -1 && fd != STDIN_FILENO)
		close(fd);
	pg_buf_free(&b);
	return -1;
}

/* String member name of object 0 into buf ("" if absent or not a string). */
static const char *jstr(const struct pg_json *js, const char *name, char *buf, size_t cap)
{
	int64_t v = pg_json_find(js, 0, name, strlen(name));
	size_t n = 0;

	if (v >= 0 && js->tok[v].type == PG_JSON_STRING) {
		n = pg_json_str_copy(js, (uint32_t)v, buf, cap - 1);
		if (n > cap - 1)
			n = cap - 1;
	}
	buf[n] = 0;
	return buf;
}

static long long jnum(const struct pg_json *js, const char *name)
{
	int64_t v = pg_json_find(js, 0, name, strlen(name)), x = -1;

	if (v >= 0)
		pg_json_get_i64(js, (uint32_t)v, &x);
	return x;
}

static void print_route(const struct pg_json *js)
{
	char a[160], b[160], c[64], preview[1200];
	int64_t v = pg_json_find(js, 0, "candidates", 10), f;
	bool raw;

	printf("backend      %s", jstr(js, "backend", a, sizeof(a))[0] ? a : "none");
	if (jnum(js, "backend_id") > 0)
		printf(" (id %lld)", jnum(js, "backend_id"));
	printf("\nreason       %s\n",
	       jstr(js, "reason", a, sizeof(a))[0] ? a : jstr(js, "error", b, sizeof(b)));
	printf("pool         %s\n", jstr(js, "pool", c, sizeof(c))[0] ? c : "default");
	/* a prefill/decode pool: backend is the decode instance */
	if (jstr(js, "pd_route", c, sizeof(c))[0] && !strcmp(c, "pair"))
		printf("prefill      %s (%s), then the decode instance above\n",
		       jstr(js, "prefill", a, sizeof(a)), jstr(js, "prefill_reason", b, sizeof(b)));
	else if (c[0])
		printf("prefill      none: the decode instance above alone\n");
	printf("candidates   ");
	jstr(js, "strategy", c, sizeof(c));
	if (v >= 0 && js->tok[v].type == PG_JSON_ARRAY && js->tok[v].size) {
		uint32_t k = pg_json_first((uint32_t)v);

		for (uint32_t n = 0; n < js->tok[v].size; n++, k = js->tok[k].next) {
			size_t l = pg_json_str_copy(js, k, a, sizeof(a) - 1);

			a[l < sizeof(a) ? l : sizeof(a) - 1] = 0;
			printf("%s%s", n ? ", " : "", a);
		}
		printf("  (ring order)\n");
	} else if (!jstr(js, "backend", a, sizeof(a))[0]) {
		printf("-  (no usable backend)\n");
	} else {
		/* random and least_outstanding_requests choose without the ring */
		printf("-  (%s does not use the ring)\n", c);
	}
	f = pg_json_find(js, 0, "fallback", 8);
	/* extracted prompt text is counted in characters, every other key
	 * (raw body, header, prompt_cache_key, previous_response_id) in bytes */
	jstr(js, "key_source", c, sizeof(c));
	raw = strcmp(c, "messages") && strcmp(c, "prompt") && strcmp(c, "input");
	jstr(js, "api", a, sizeof(a));
	printf("key          hash %s, length %lld %s, source %s, api %s%s\n",
	       jstr(js, "key_hash", b, sizeof(b)), jnum(js, "key_length"),
	       raw ? "bytes" : "characters", jstr(js, "key_source", c, sizeof(c)), a,
	       f >= 0 && js->tok[f].type == PG_JSON_TRUE ? " (JSON unusable: raw-bytes key)" : "");
	printf("strategy     %s, ring generation %lld\n", jstr(js, "strategy", a, sizeof(a)),
	       jnum(js, "ring_generation"));
	jstr(js, "key_preview", preview, sizeof(preview));
	for (char *p = preview; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
	printf("key preview  \"%.200s%s\"\n", preview, strlen(preview) > 200 ? "..." : "");
}

/* Append "?name=value" (or "&...") to the request target, value encoded. */
static int add_param(char *t, size_t cap, size_t *n, const char *name, const char *value)
{
	int w = snprintf(t + *n, cap - *n, "%c%s=", strchr(t, '?') ? '&' : '?', name);

	if (w < 0 || (size_t)w >= cap - *n)
		return -1;
	*n += (size_t)w;
	return ctl_url_encode(value, t, cap, n) ? 0 : -1;
}

int ctl_cmd_route(const struct ctl_opts *o, const char *file)
{
	struct ctl_http_resp r = {0};
	struct pg_json js = {0};
	char target[4096] = "/route", err[1024], msg[256];
	size_t n = strlen(target), len;
	char *body;
	int rc = CTL_ERR;

	if ((o->path && add_param(target, sizeof(target), &n, "path", o->path)) ||
	    (o->key && add_param(target, sizeof(target), &n, "key", o->key))) {
		ctl_err("route: --path/--key too long");
		return CTL_USAGE;
	}
	if (read_input(file, &body, &len))
		return CTL_ERR;
	if (ctl_http(o, "POST", target, "application/octet-stream", body, len,
	             ctl_timeout(o, CTL_TIMEOUT_DEFAULT), &r, err, sizeof(err))) {
		ctl_err("route: %s", err);
		goto out;
	}
	if (r.status != 200 && r.status != 503) {
		ctl_err("route: admin API %s: HTTP %d: %s", o->admin, r.status,
		        ctl_api_error(&r, msg, sizeof(msg)));
		goto out;
	}
	if (pg_json_parse(&js, r.body, r.len) || js.tok[0].type != PG_JSON_OBJECT) {
		ctl_err("route: admin API %s: the reply is not a JSON object", o->admin);
		goto out;
	}
	if (o->json)
		fwrite(r.body, 1, r.len, stdout);
	else
		print_route(&js);
	if (r.status == 503)
		ctl_err("route: %s",
		        jstr(&js, "error", msg, sizeof(msg))[0] ? msg : "no usable backend");
	rc = r.status == 200 ? CTL_OK : CTL_ERR;
out:
	pg_json_free(&js);
	ctl_http_resp_free(&r);
	free(body);
	return rc;
}
