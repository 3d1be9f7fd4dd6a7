// SPDX-License-Identifier: MIT
/*
 * prefixgatectl: command line, help and dispatch. Options are one table
 * (name, value, commands it applies to, help) that both the parser and
 * --help read, so no option is accepted undocumented. Options may come
 * before or after the command; "--" ends them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "ctl.h"
#include "lib/modelpool.h"

enum cmd {
	C_NONE = -1,
	C_STATUS,
	C_ROUTE,
	C_BACKENDS,
	C_TOP,
	C_POOLS,
	C_CONFIG,
	C_REGISTER,
	C_FLEET,
	C_HELP,
	NCMDS
};

#define ALL     ((1u << NCMDS) - 1)
#define ONLY(c) (1u << (c))

static const struct cmd_def {
	const char *name;
	const char *usage; /* after "prefixgatectl [OPTION]... " */
	const char *summary;
	const char *help; /* what it does, several lines */
} cmds[NCMDS] = {
    [C_STATUS] = {"status", "status", "backends, rings and routing config",
                  "Backends (address, health up/down/unhealthy/draining, in-flight, requests by\n"
                  "routing decision, failures, share of their pool's ring slots, pool, DNS\n"
                  "name), the ring (generation, members) and the routing config, of each model\n"
                  "pool. Read straight from the BPF maps pinned under --pin-path while a live\n"
                  "gateway writes them, so it works when the admin API is unreachable (DNS\n"
                  "names are asked of it when it answers); if no maps are pinned there\n"
                  "(prefixgate not running, run with --no-bpf, or another --bpf-pin-path) or\n"
                  "they are stale, it says so on stderr and asks the admin API instead. The\n"
                  "output is the same from either source but for its source line.\n"},
    [C_ROUTE] = {"route", "route [--path PATH] [--key KEY] FILE|-",
                 "dry run: where a body would go, why",
                 "Dry run through the admin API (POST /route): which backend a request with\n"
                 "this body (FILE, or - for standard input) would go to, why, the ring\n"
                 "candidates and the prefix key's hash and length. No traffic is sent and no\n"
                 "counter changes. --path picks the API the body is for (default: none, the\n"
                 "raw-bytes key as for /invocations); --key sets an explicit key as the\n"
                 "X-Prefixgate-Key header would. Exit status 1 if no backend is usable.\n"},
    [C_BACKENDS] = {"backends", "backends list|add|remove|drain [ADDR:PORT] [--pool NAME]",
                    "list or change backends",
                    "list     the backends table (as in status; from the maps, else the API)\n"
                    "add      add a backend (POST /backends) to the default pool, or to\n"
                    "         --pool NAME; a draining one is re-activated\n"
                    "remove   drain a backend (DELETE /backends/ADDR:PORT): no new requests;\n"
                    "         the gateway removes it once its in-flight requests finish\n"
                    "drain    remove, then wait until it is gone, printing its in-flight count;\n"
                    "         gives up after --timeout seconds (default 300; it stays draining)\n"},
    [C_TOP] = {"top", "top [--interval SEC] [--count N]", "live per-backend rates",
               "A live view, refreshed every --interval seconds: per-backend request rate\n"
               "and decisions per second (from the counters' change), in-flight, share of\n"
               "the interval's requests and of its pool's ring slots, pool. From the pinned\n"
               "maps, else the admin API. Stops after --count refreshes or on Ctrl-C. The\n"
               "screen is cleared between refreshes only when standard output is a\n"
               "terminal; with --json each refresh is one JSON object on its own line.\n"},
    [C_POOLS] = {"pools", "pools", "model pools: models, paths, members, routing config",
                 "The model pools: name, whether it takes models no other pool serves, its\n"
                 "members and how many are up, RoutingConfig, ring generation, models and\n"
                 "paths. Read as status reads: from the pinned maps (pg_pools, each pool's\n"
                 "pg_state and pg_rings entries) while a live gateway writes them, else from\n"
                 "the admin API (GET /pools), the same table or JSON either way; stale maps\n"
                 "are marked STALE (exit status 3).\n"},
    [C_CONFIG] = {"config", "config", "the configuration it runs, as a configuration file",
                  "The gateway's configuration as a configuration file (GET /config): the\n"
                  "file and the flags it was started with merged, as the last reload left\n"
                  "them, each pool's RoutingConfig as it is live (PUT /routing included);\n"
                  "options at their defaults are left out. Save it and check it with\n"
                  "prefixgate -c FILE --check before using it.\n"},
    [C_REGISTER] =
        {"register", "register --etcd URL --address ADDR:PORT [--ttl N] [--pool NAME]",
         "register a backend in etcd under a lease",
         "Grant an etcd lease of --ttl seconds, put P/backends/ID (ID: --id, else the\n"
         "address) = {\"address\":ADDR:PORT,\"state\":\"active\"} (and \"pool\":NAME\n"
         "with --pool: a model pool, or a decode set, NAME-decode) bound to it, and\n"
         "keep the lease alive until SIGTERM or SIGINT, which revoke it: every gateway\n"
         "then drains the backend. If this process dies, the key expires after the TTL.\n"},
    [C_FLEET] = {"fleet", "fleet --etcd URL", "the gateways in etcd, and whether they agree",
                 "List the gateways registered under P/gateways/ (id, address, version, the\n"
                 "etcd revision each applied, backends, ring digest). Exit status 1 if their\n"
                 "ring digests differ (they would route some keys differently) or none is\n"
                 "registered; differing revisions alone are a change still propagating.\n"},
    [C_HELP] = {"help", "help [COMMAND]", "this help, or a command's",
                "Print the help of prefixgatectl or of COMMAND.\n"},
};

enum opt_id {
	O_PIN_PATH,
	O_ADMIN,
	O_TOKEN_FILE,
	O_JSON,
	O_SOURCE,
	O_TIMEOUT,
	O_PATH,
	O_KEY,
	O_POOL,
	O_INTERVAL,
	O_COUNT,
	O_ETCD,
	O_PREFIX,
	O_ADDRESS,
	O_TTL,
	O_ID,
	O_ETCD_USER,
	O_ETCD_PASSWORD,
	O_HELP,
	O_VERSION,
	NOPTS
};

static const struct opt {
	const char *name, *arg; /* arg NULL: takes no value */
	unsigned cmds;          /* commands it applies to */
	const char *help;
} opts[NOPTS] = {
    [O_PIN_PATH] = {"pin-path", "DIR", ALL,
                    "where prefixgate pins its BPF maps: its\n"
                    "--bpf-pin-path (default " CTL_PIN_PATH_DEFAULT ")"},
    [O_ADMIN] = {"admin", "ADDR:PORT", ALL,
                 "prefixgate's admin API: its --admin\n"
                 "(default " CTL_ADMIN_DEFAULT ")"},
    [O_TOKEN_FILE] = {"admin-token-file", "FILE", ALL,
                      "the admin token (prefixgate's --admin-token),\n"
                      "read from FILE (default: $PREFIXGATE_ADMIN_TOKEN,\n"
                      "else none)"},
    [O_JSON] = {"json", NULL, ALL, "JSON output for scripts (default: tables)"},
    [O_SOURCE] = {"source", "auto|maps|api",
                  ONLY(C_STATUS) | ONLY(C_BACKENDS) | ONLY(C_TOP) | ONLY(C_POOLS),
                  "what status, backends list, top and pools read:\n"
                  "the pinned maps, the admin API, or auto:\n"
                  "the maps if a live gateway writes them, else\n"
                  "the API (default auto)"},
    [O_TIMEOUT] = {"timeout", "SEC", ALL,
                   "give up after SEC seconds, 0.1-86400\n"
                   "(default 10; backends drain: the whole\n"
                   "drain, default 300)"},
    [O_PATH] = {"path", "PATH", ONLY(C_ROUTE),
                "route: the request path whose API decides\n"
                "the key, e.g. /v1/chat/completions\n"
                "(default: none, raw-bytes key)"},
    [O_KEY] = {"key", "KEY", ONLY(C_ROUTE),
               "route: an explicit key, as the\nX-Prefixgate-Key header sets"},
    [O_POOL] = {"pool", "NAME", ONLY(C_BACKENDS) | ONLY(C_REGISTER),
                "backends add, register: the model pool it\n"
                "joins (default: the default pool)"},
    [O_INTERVAL] = {"interval", "SEC", ONLY(C_TOP),
                    "top: seconds between refreshes, 0.1-3600\n(default 1)"},
    [O_COUNT] = {"count", "N", ONLY(C_TOP),
                 "top: stop after N refreshes, 0-1000000000\n"
                 "(default 0: until Ctrl-C)"},
    [O_ETCD] = {"etcd", "URL,...", ONLY(C_REGISTER) | ONLY(C_FLEET),
                "etcd endpoints, http://host:port"},
    [O_PREFIX] = {"prefix", "P", ONLY(C_REGISTER) | ONLY(C_FLEET),
                  "the gateways' --etcd-prefix\n(default " PG_ETCD_PREFIX_DEFAULT ")"},
    [O_ADDRESS] = {"address", "ADDR:PORT", ONLY(C_REGISTER), "register: the backend's address"},
    [O_TTL] = {"ttl", "N", ONLY(C_REGISTER), "register: lease seconds, 2-3600 (default 10)"},
    [O_ID] = {"id", "ID", ONLY(C_REGISTER),
              "register: the key's last part\n(default: the address)"},
    [O_ETCD_USER] = {"etcd-user", "NAME", ONLY(C_REGISTER) | ONLY(C_FLEET),
                     "etcd authentication user"},
    [O_ETCD_PASSWORD] = {"etcd-password-file", "FILE", ONLY(C_REGISTER) | ONLY(C_FLEET),
                         "that user's password, from FILE"},
    [O_HELP] = {"help", NULL, ALL, "print help (of the command, if one is\ngiven) and exit"},
    [O_VERSION] = {"version", NULL, ALL, "print the version and exit"},
};

static void print_opt(FILE *out, const struct opt *op)
{
	char left[48];
	const char *h = op->help, *nl;

	snprintf(left, sizeof(left), "--%s%s%s", op->name, op->arg ? " " : "",
	         op->arg ? op->arg : "");
	fprintf(out, "  %-24s", left);
	for (bool first = true; *h; first = false, h = nl ? nl + 1 : h + strlen(h)) {
		nl = strchr(h, '\n');
		fprintf(out, "%s%.*s\n", first ? "  " : "                            ",
		        (int)(nl ? nl - h : (long)strlen(h)), h);
	}
}

static void usage(FILE *out, int c)
{
	if (c != C_NONE && c != C_HELP) {
		fprintf(out, "Usage: prefixgatectl [OPTION]... %s\n\n%s\nOptions:\n", cmds[c].usage,
		        cmds[c].help);
		for (int i = 0; i < NOPTS; i++)
			if (opts[i].cmds & ONLY(c))
				print_opt(out, &opts[i]);
		fprintf(out, "\nExit status: 0 ok, 1 runtime error, 2 usage error, 3 status,\n"
		             "backends list, top or pools read stale maps (no live gateway writes\n"
		             "them).\n");
		return;
	}
	fprintf(out, "Usage: prefixgatectl [OPTION]... COMMAND [ARG]...\n"
	             "Inspect and manage a running prefixgate through its pinned BPF maps\n"
	             "and its admin API.\n\nCommands:\n");
	for (int i = 0; i < NCMDS; i++)
		fprintf(out, "  %-40s %s\n", cmds[i].usage, cmds[i].summary);
	fprintf(out, "\nOptions (before or after the command, as \"--opt value\" or "
	             "\"--opt=value\"):\n");
	for (int i = 0; i < NOPTS; i++)
		print_opt(out, &opts[i]);
	fprintf(out, "\n\"prefixgatectl COMMAND --help\" describes a command.\n"
	             "Exit status: 0 ok, 1 runtime error (the message names what failed),\n"
	             "2 usage error, 3 status, backends list, top or pools read stale maps\n"
	             "(no live gateway writes them).\n");
}

static int usage_error(int c, const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "prefixgatectl: ");
	fprintf(stderr, fmt, a, b);
	fprintf(stderr, "\n(see prefixgatectl %s%s--help)\n", c >= 0 ? cmds[c].name : "",
	        c >= 0 ? " " : "");
	return CTL_USAGE;
}

/* A decimal number (fraction allowed) in [min, max]. */
static bool parse_num(const char *v, double min, double max, double *out)
{
	char *end;
	double x;

	if (!*v || strchr(v, 'x') || strchr(v, 'X'))
		return false;
	x = strtod(v, &end);
	if (*end || !(x >= min && x <= max))
		return false;
	*out = x;
	return true;
}

/* The token in FILE, surrounding white space dropped (as prefixgate reads
 * its --admin-token-file). 0, or -2 having said why. */
static int read_token(struct ctl_opts *o, const char *file)
{
	FILE *fp = fopen(file, "re");
	char *t = o->token_buf;
	size_t n;

	if (!fp) {
		fprintf(stderr, "prefixgatectl: --admin-token-file %s: %m\n", file);
		return -2;
	}
	n = fread(t, 1, sizeof(o->token_buf) - 1, fp);
	fclose(fp);
	t[n] = 0;
	while (n && strchr(" \t\r\n", t[n - 1]))
		t[--n] = 0;
	while (*t && strchr(" \t\r\n", *t))
		t++;
	if (!*t || strpbrk(t, "\r\n")) {
		fprintf(stderr, "prefixgatectl: --admin-token-file %s: not one token on one line\n",
		        file);
		return -2;
	}
	o->token = t;
	return 0;
}

static int set_opt(struct ctl_opts *o, enum opt_id id, const char *v)
{
	static const char *const srcs[] = {"auto", "maps", "api"};
	double x;

	switch (id) {
	case O_PIN_PATH:
		if (!*v || strlen(v) > 255)
			return -1;
		o->pin_path = v;
		return 0;
	case O_ADMIN: {
		char e[160];

		o->admin = v;
		if (pg_addr_parse(v, &o->admin_sa, e, sizeof(e))) {
			fprintf(stderr, "prefixgatectl: --admin: %s\n", e);
			return -2;
		}
		return 0;
	}
	case O_TOKEN_FILE:
		return read_token(o, v);
	case O_JSON:
		o->json = true;
		return 0;
	case O_SOURCE:
		for (int i = 0; i < 3; i++) {
			if (!strcmp(v, srcs[i])) {
				o->source = (enum ctl_source_kind)i;
				return 0;
			}
		}
		return -1;
	case O_TIMEOUT:
		if (!parse_num(v, 0.1, 86400, &o->timeout))
			return -1;
		return 0;
	case O_PATH:
		o->path = v;
		return v[0] == '/' ? 0 : -1;
	case O_KEY:
		o->key = v;
		return 0;
	case O_POOL:
		o->pool = v;
		return pg_pool_name_ok(v, strlen(v)) ? 0 : -1;
	case O_INTERVAL:
		return parse_num(v, 0.1, 3600, &o->interval) ? 0 : -1;
	case O_COUNT:
		if (!parse_num(v, 0, 1e9, &x) || x != (double)(long)x)
			return -1;
		o->count = (long)x;
		return 0;
	case O_ETCD:
		o->etcd = v;
		return 0;
	case O_PREFIX:
		o->prefix = v;
		return *v ? 0 : -1;
	case O_ADDRESS:
		o->address = v;
		return 0;
	case O_TTL:
		if (!parse_num(v, 2, 3600, &x) || x != (double)(long)x)
			return -1;
		o->ttl = (unsigned)x;
		return 0;
	case O_ID:
		o->id = v;
		return *v && !strchr(v, '/') ? 0 : -1;
	case O_ETCD_USER:
		o->etcd_user = v;
		return 0;
	case O_ETCD_PASSWORD:
		o->etcd_password_file = v;
		return 0;
	default:
		return 0;
	}
}

static int find_cmd(const char *name)
{
	for (int i = 0; i < NCMDS; i++)
		if (!strcmp(name, cmds[i].name))
			return i;
	return C_NONE;
}

int main(int argc, char **argv)
{
	static struct ctl_opts o = {.pin_path = CTL_PIN_PATH_DEFAULT,
	                            .admin = CTL_ADMIN_DEFAULT,
	                            .interval = 1.0,
	                            .prefix = PG_ETCD_PREFIX_DEFAULT,
	                            .ttl = 10};
	unsigned given = 0;
	const char *pos[8];
	size_t npos = 0;
	bool help = false, only_pos = false;
	int c = C_NONE, rc;

	pg_addr_parse(CTL_ADMIN_DEFAULT, &o.admin_sa, NULL, 0);
	if (getenv("PREFIXGATE_ADMIN_TOKEN") && *getenv("PREFIXGATE_ADMIN_TOKEN"))
		o.token = getenv("PREFIXGATE_ADMIN_TOKEN");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq, *v = NULL;
		size_t nl;
		int id;

		if (only_pos || strncmp(a, "--", 2) || !a[2]) {
			if (!only_pos && !strcmp(a, "--")) {
				only_pos = true;
				continue;
			}
			if (!strcmp(a, "-h") && !only_pos) {
				help = true;
				continue;
			}
			if (npos == sizeof(pos) / sizeof(pos[0]))
				return usage_error(C_NONE, "too many arguments (from \"%s\")%s", a,
				                   "");
			pos[npos++] = a;
			continue;
		}
		eq = strchr(a, '=');
		nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		for (id = 0; id < NOPTS; id++)
			if (strlen(opts[id].name) == nl && !strncmp(a + 2, opts[id].name, nl))
				break;
		if (id == NOPTS)
			return usage_error(C_NONE, "unknown option %s%s", a, "");
		if (opts[id].arg) {
			if (eq)
				v = eq + 1;
			else if (i + 1 < argc)
				v = argv[++i];
			else
				return usage_error(C_NONE, "--%s needs a value (%s)", opts[id].name,
				                   opts[id].arg);
		} else if (eq) {
			return usage_error(C_NONE, "--%s takes no value%s", opts[id].name, "");
		}
		given |= 1u << id;
		if (id == O_HELP)
			help = true;
		if (id == O_VERSION) {
			printf("prefixgatectl %s\n", CTL_VERSION);
			return CTL_OK;
		}
		rc = set_opt(&o, (enum opt_id)id, v);
		if (rc == -2)
			return CTL_USAGE;
		if (rc)
			return usage_error(C_NONE, "--%s: invalid value \"%s\"", opts[id].name, v);
	}
	if (npos)
		c = find_cmd(pos[0]);
	if (npos && c == C_NONE)
		return usage_error(C_NONE, "unknown command \"%s\"%s", pos[0], "");
	if (c == C_HELP) {
		c = npos > 1 ? find_cmd(pos[1]) : C_NONE;
		if (npos > 1 && c == C_NONE)
			return usage_error(C_NONE, "help: unknown command \"%s\"%s", pos[1], "");
		help = true;
	}
	if (help) {
		usage(stdout, c);
		return CTL_OK;
	}
	if (c == C_NONE) {
		usage(stderr, C_NONE);
		return CTL_USAGE;
	}
	for (int id = 0; id < NOPTS; id++)
		if ((given >> id & 1) && !(opts[id].cmds & ONLY(c)))
			return usage_error(c, "--%s does not apply to %s", opts[id].name,
			                   cmds[c].name);
	switch (c) {
	case C_STATUS:
	case C_TOP:
		if (npos != 1)
			return usage_error(c, "%s takes no argument%s", cmds[c].name, "");
		return c == C_STATUS ? ctl_cmd_status(&o, false) : ctl_cmd_top(&o);
	case C_POOLS:
	case C_CONFIG:
		if (npos != 1)
			return usage_error(c, "%s takes no argument%s", cmds[c].name, "");
		return c == C_POOLS ? ctl_cmd_pools(&o) : ctl_cmd_config(&o);
	case C_ROUTE:
		if (npos != 2)
			return usage_error(c, "route needs one FILE (or - for standard input)%s%s",
			                   "", "");
		return ctl_cmd_route(&o, pos[1]);
	case C_REGISTER:
	case C_FLEET:
		if (npos != 1)
			return usage_error(c, "%s takes no argument%s", cmds[c].name, "");
		if (!o.etcd)
			return usage_error(c, "%s needs --etcd URL%s", cmds[c].name, "");
		if (c == C_REGISTER && !o.address)
			return usage_error(c, "register needs --address ADDR:PORT%s%s", "", "");
		return c == C_REGISTER ? ctl_cmd_register(&o) : ctl_cmd_fleet(&o);
	case C_BACKENDS:
		if (o.pool && !(npos == 3 && !strcmp(pos[1], "add")))
			return usage_error(c, "--pool applies to backends add only%s%s", "", "");
		if (npos == 2 && !strcmp(pos[1], "list"))
			return ctl_cmd_status(&o, true);
		if (npos == 3 && !strcmp(pos[1], "add"))
			return ctl_cmd_backends_add(&o, pos[2]);
		if (npos == 3 && (!strcmp(pos[1], "remove") || !strcmp(pos[1], "drain")))
			return ctl_cmd_backends_remove(&o, pos[2], pos[1][0] == 'd');
		return usage_error(c,
		                   "backends: expected list, add ADDR:PORT, remove ADDR:PORT "
		                   "or drain ADDR:PORT%s%s",
		                   "", "");
	default:
		return CTL_USAGE;
	}
}
