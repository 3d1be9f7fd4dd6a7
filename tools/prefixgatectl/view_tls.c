// SPDX-License-Identifier: MIT
/*
 * prefixgatectl status: the gateway's listeners and the certificates its
 * HTTPS listener shows (GET /tls), each with its names and expiry; the
 * backends' CA and client certificate. Text lines, or the document as it
 * came for --json.
 */
#include <stdio.h>
#include <string.h>
#include "ctl.h"
#include "lib/json.h"

static int64_t num(const struct pg_json *js, uint32_t obj, const char *name)
{
	int64_t v = pg_json_find(js, obj, name, strlen(name)), x = 0;

	if (v < 0 || pg_json_get_i64(js, (uint32_t)v, &x))
		return 0;
	return x;
}

/* Member name of obj when it is of type t, else -1. */
static int64_t member(const struct pg_json *js, uint32_t obj, const char *name, enum pg_json_type t)
{
	int64_t v = pg_json_find(js, obj, name, strlen(name));

	return v >= 0 && js->tok[v].type == t ? v : -1;
}

/* "in 87 days" / "3 days ago" of a not_after member ({"at","in_s"}). */
static void expiry(FILE *out, const struct pg_json *js, uint32_t cert)
{
	int64_t na = member(js, cert, "chain_not_after", PG_JSON_OBJECT);
	char at[64];
	long long in_s;

	if (na < 0)
		return;
	in_s = (long long)num(js, (uint32_t)na, "in_s");
	fprintf(out, ", expires %s (%s%lld day%s%s)",
	        ctl_json_get_str(js, (uint32_t)na, "at", at, sizeof(at)), in_s < 0 ? "" : "in ",
	        (in_s < 0 ? -in_s : in_s) / 86400,
	        (in_s < 0 ? -in_s : in_s) / 86400 == 1 ? "" : "s", in_s < 0 ? " ago" : "");
}

static void lines(FILE *out, const struct pg_json *js)
{
	char a[256], b[256];
	int64_t ls = member(js, 0, "listeners", PG_JSON_ARRAY);
	int64_t cs = member(js, 0, "certificates", PG_JSON_ARRAY);
	int64_t be = member(js, 0, "backends", PG_JSON_OBJECT);
	uint32_t k, n;

	fputs("listeners ", out);
	for (k = pg_json_first((uint32_t)ls), n = 0; ls >= 0 && n < js->tok[ls].size;
	     k = js->tok[k].next, n++)
		fprintf(out, "%s %s (%s)", n ? "," : "",
		        ctl_json_get_str(js, k, "address", a, sizeof(a)),
		        ctl_json_get_str(js, k, "scheme", b, sizeof(b)));
	if (cs >= 0 && js->tok[cs].size)
		fprintf(out, "; TLS %s and up, generation %lld",
		        ctl_json_get_str(js, 0, "min_version", a, sizeof(a)),
		        (long long)num(js, 0, "generation"));
	fputc('\n', out);
	for (k = pg_json_first((uint32_t)cs), n = 0; cs >= 0 && n < js->tok[cs].size;
	     k = js->tok[k].next, n++) {
		int64_t names = member(js, k, "names", PG_JSON_ARRAY);

		fprintf(out, "cert       %s: %s", ctl_json_get_str(js, k, "cert", a, sizeof(a)),
		        ctl_json_get_str(js, k, "subject", b, sizeof(b)));
		if (names >= 0 && js->tok[names].size) {
			uint32_t j = pg_json_first((uint32_t)names), m = 0;

			fputs(" (", out);
			for (; m < js->tok[names].size; j = js->tok[j].next, m++) {
				size_t l = pg_json_str_copy(js, j, a, sizeof(a) - 1);

				a[l < sizeof(a) - 1 ? l : sizeof(a) - 1] = 0;
				fprintf(out, "%s%s", m ? ", " : "", a);
			}
			fputc(')', out);
		}
		expiry(out, js, k);
		fputc('\n', out);
	}
	if (be >= 0 && member(js, (uint32_t)be, "subject", PG_JSON_STRING) >= 0)
		fprintf(out,
		        "tls        https:// backends checked against %s, our certificate %s\n",
		        ctl_json_get_str(js, (uint32_t)be, "ca", a, sizeof(a)),
		        ctl_json_get_str(js, (uint32_t)be, "subject", b, sizeof(b)));
	else if (be >= 0)
		fprintf(out, "tls        https:// backends checked against %s\n",
		        ctl_json_get_str(js, (uint32_t)be, "ca", a, sizeof(a)));
	if (num(js, 0, "refused"))
		fprintf(out, "reloads    %lld refused, the last: %s\n",
		        (long long)num(js, 0, "refused"),
		        ctl_json_get_str(js, 0, "last_error", a, sizeof(a)));
}

void ctl_view_tls(FILE *out, const struct ctl_opts *o, const struct ctl_http_resp *tls)
{
	struct pg_json js = {0};

	if (!tls || tls->status != 200)
		return;
	if (o->json) {
		fputs(",\"tls\":", out);
		fwrite(tls->body, 1,
		       tls->len && tls->body[tls->len - 1] == '\n' ? tls->len - 1 : tls->len, out);
		return;
	}
	if (pg_json_parse(&js, tls->body, tls->len) == 0 && js.ntok &&
	    js.tok[0].type == PG_JSON_OBJECT)
		lines(out, &js);
	pg_json_free(&js);
}
