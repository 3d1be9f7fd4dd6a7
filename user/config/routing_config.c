// SPDX-License-Identifier: MIT
/*
 * SageMaker RoutingConfig JSON (see config.h for the contract; the
 * strategy names are lib/names.c). Pure parsing, no I/O and no global state.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>
#include "config/config.h"
#include "config/config_internal.h"
#include "lib/json.h"

/* A token's text for an error message: printable ASCII, bounded. */
static const char *tok_text(const struct pg_json *js, uint32_t i, bool unescape, char *buf,
                            size_t cap)
{
	size_t n;

	if (unescape) {
		n = pg_json_str_copy(js, i, buf, cap - 1);
	} else {
		n = js->tok[i].end - js->tok[i].start;
		memcpy(buf, js->src + js->tok[i].start, n < cap - 1 ? n : cap - 1);
	}
	if (n > cap - 1) {
		n = cap - 1;
		memcpy(buf + n - 3, "...", 3);
	}
	buf[n] = 0;
	for (size_t k = 0; k < n; k++)
		if ((unsigned char)buf[k] < 0x20 || (unsigned char)buf[k] > 0x7e)
			buf[k] = '?';
	return buf;
}

static int range_field(const struct pg_json *js, uint32_t v, const char *path, const char *name,
                       int64_t min, int64_t max, uint32_t *out, char *err, size_t errlen)
{
	char num[40];
	int64_t x;
	int rc;

	if (js->tok[v].type != PG_JSON_NUMBER) {
		pg_errf(err, errlen, "%s%s: expected an integer, got %s", path, name,
		        pg_json_type_name(js->tok[v].type));
		return -1;
	}
	rc = pg_json_get_i64(js, v, &x);
	if (rc == -EINVAL) {
		pg_errf(err, errlen, "%s%s: %s is not an integer", path, name,
		        tok_text(js, v, false, num, sizeof(num)));
		return -1;
	}
	if (rc || x < min || x > max) {
		pg_errf(err, errlen, "%s%s: %s is out of range %lld-%lld", path, name,
		        tok_text(js, v, false, num, sizeof(num)), (long long)min, (long long)max);
		return -1;
	}
	*out = (uint32_t)x;
	return 0;
}

/* The integer members a nested config object may hold. */
struct int_field {
	const char *name;
	int64_t min, max;
	size_t off; /* of the uint32_t in struct pg_route_cfg */
};

static const struct int_field prefix_aware_fields[] = {
    {"PrefixLength", PG_PREFIX_LENGTH_MIN, PG_PREFIX_LENGTH_MAX,
     offsetof(struct pg_route_cfg, prefix_length)},
    {"ConcurrencyThreshold", PG_CONCURRENCY_MIN, PG_CONCURRENCY_MAX,
     offsetof(struct pg_route_cfg, concurrency_threshold)},
    {NULL, 0, 0, 0},
};

/* FlowControlConfig, a prefixgate extension (lib/flow.h). */
static const struct int_field flow_fields[] = {
    {"InstanceQueueMs", 0, PG_FLOW_QUEUE_MS_MAX, offsetof(struct pg_route_cfg, flow_queue_ms)},
    {"DeadlineMs", 0, PG_FLOW_DEADLINE_MAX, offsetof(struct pg_route_cfg, flow_deadline_ms)},
    {NULL, 0, 0, 0},
};

/* CacheAwareConfig, a prefixgate extension. */
static const struct int_field cache_aware_fields[] = {
    {"NewConversationChoices", 1, PG_RING_CANDIDATES, offsetof(struct pg_route_cfg, new_choices)},
    {NULL, 0, 0, 0},
};

/* A nested config object at token v (null: absent) of integer members
 * from fields, with its path ("RoutingConfig.Name.") for messages. */
static int sub_object(const struct pg_json *js, uint32_t v, const char *path, const char *name,
                      const struct int_field *fields, struct pg_route_cfg *rc, char *err,
                      size_t errlen)
{
	uint32_t k = pg_json_first(v);
	char sub[96], member[64];

	if (js->tok[v].type == PG_JSON_NULL)
		return 0;
	if (js->tok[v].type != PG_JSON_OBJECT) {
		pg_errf(err, errlen, "%s%s: expected an object, got %s", path, name,
		        pg_json_type_name(js->tok[v].type));
		return -1;
	}
	snprintf(sub, sizeof(sub), "%s%s.", path, name);
	for (uint32_t n = 0; n < js->tok[v].size; n++, k = pg_json_member_next(js, k)) {
		const struct int_field *f = fields;

		while (f->name && !pg_json_str_eq(js, k, f->name, strlen(f->name)))
			f++;
		if (!f->name && fields == cache_aware_fields &&
		    pg_json_str_eq(js, k, "MaxLoadGap", 10)) {
			pg_errf(err, errlen, "%sMaxLoadGap: %s", sub, PG_CA_GAP_REMOVED);
			return -1;
		}
		if (!f->name) {
			pg_errf(err, errlen, "%s%s: unknown field", sub,
			        tok_text(js, k, true, member, sizeof(member)));
			return -1;
		}
		/* InstanceQueueMs "auto": each instance's own service time */
		if (f->off == offsetof(struct pg_route_cfg, flow_queue_ms) &&
		    pg_json_str_eq(js, k + 1, PG_FLOW_QUEUE_AUTO_TEXT, 4)) {
			rc->flow_queue_ms = PG_FLOW_QUEUE_AUTO;
			continue;
		}
		if (range_field(js, k + 1, sub, f->name, f->min, f->max,
		                (uint32_t *)((char *)rc + f->off), err, errlen))
			return -1;
	}
	return 0;
}

static int routing_cfg(const struct pg_json *js, char *err, size_t errlen, struct pg_route_cfg *rc)
{
	uint32_t root = 0, k, v;
	const char *path = "";
	char name[64];
	bool have_strategy = false;

	if (js->tok[0].type != PG_JSON_OBJECT) {
		pg_errf(err, errlen, "expected a JSON object, got %s",
		        pg_json_type_name(js->tok[0].type));
		return -1;
	}
	if (pg_json_find(js, 0, "RoutingConfig", 13) >= 0) {
		/* wrapped: RoutingConfig must then be the only member */
		for (k = 1; !pg_json_str_eq(js, k, "RoutingConfig", 13);)
			k = pg_json_member_next(js, k);
		if (js->tok[0].size != 1) {
			k = k == 1 ? pg_json_member_next(js, 1) : 1;
			pg_errf(err, errlen, "%s: unknown field",
			        tok_text(js, k, true, name, sizeof(name)));
			return -1;
		}
		root = k + 1;
		path = "RoutingConfig.";
		if (js->tok[root].type != PG_JSON_OBJECT) {
			pg_errf(err, errlen, "RoutingConfig: expected an object, got %s",
			        pg_json_type_name(js->tok[root].type));
			return -1;
		}
	}
	k = pg_json_first(root);
	for (uint32_t n = 0; n < js->tok[root].size; n++, k = pg_json_member_next(js, k)) {
		v = k + 1;
		if (pg_json_str_eq(js, k, "RoutingStrategy", 15)) {
			char s[40], all[96];
			size_t l;

			if (js->tok[v].type != PG_JSON_STRING) {
				pg_errf(err, errlen, "%sRoutingStrategy: expected a string, got %s",
				        path, pg_json_type_name(js->tok[v].type));
				return -1;
			}
			l = pg_json_str_copy(js, v, s, sizeof(s));
			if (l > sizeof(s) || pg_strategy_parse(s, l, &rc->strategy)) {
				pg_errf(err, errlen, "%sRoutingStrategy: \"%s\" is not one of %s",
				        path, tok_text(js, v, true, name, sizeof(name)),
				        pg_strategy_list(all, sizeof(all), true, ", ", ", "));
				return -1;
			}
			have_strategy = true;
		} else if (pg_json_str_eq(js, k, "CacheAwareConfig", 16)) {
			if (sub_object(js, v, path, "CacheAwareConfig", cache_aware_fields, rc, err,
			               errlen))
				return -1;
		} else if (pg_json_str_eq(js, k, "FlowControlConfig", 17)) {
			/* given: on, at the default unless it says otherwise */
			if (js->tok[v].type == PG_JSON_OBJECT)
				rc->flow_queue_ms = PG_FLOW_QUEUE_AUTO;
			if (sub_object(js, v, path, "FlowControlConfig", flow_fields, rc, err,
			               errlen))
				return -1;
		} else if (pg_json_str_eq(js, k, "PrefixAwareRoutingConfig", 24)) {
			if (sub_object(js, v, path, "PrefixAwareRoutingConfig", prefix_aware_fields,
			               rc, err, errlen))
				return -1;
		} else {
			pg_errf(err, errlen, "%s%s: unknown field", path,
			        tok_text(js, k, true, name, sizeof(name)));
			return -1;
		}
	}
	if (!have_strategy) {
		char all[96];

		pg_errf(err, errlen, "%sRoutingStrategy: missing (%s)", path,
		        pg_strategy_list(all, sizeof(all), true, ", ", " or "));
		return -1;
	}
	return 0;
}

/* json's fields over *base into *io. */
static int parse_over(const char *json, size_t len, const struct pg_route_cfg *base,
                      struct pg_route_cfg *io, char *err, size_t errlen)
{
	struct pg_route_cfg rc = *base;
	struct pg_json js = {0};
	int ret = -1;

	if (pg_json_parse(&js, json, len))
		pg_errf(err, errlen, "invalid JSON at byte %zu: %s", js.err_pos, js.err_msg);
	else if (!routing_cfg(&js, err, errlen, &rc))
		ret = 0;
	pg_json_free(&js);
	if (!ret)
		*io = rc;
	return ret;
}

int pg_routing_config_parse(const char *json, size_t len, struct pg_route_cfg *io, char *err,
                            size_t errlen)
{
	static const struct pg_route_cfg defaults = {
	    .strategy = PG_STRATEGY_PREFIX_AWARE,
	    .prefix_length = PG_PREFIX_LENGTH_DEFAULT,
	    .concurrency_threshold = PG_CONCURRENCY_DEFAULT,
	    .new_choices = PG_CA_CHOICES_DEFAULT,
	};

	return parse_over(json, len, &defaults, io, err, errlen);
}

int pg_routing_config_update(const char *json, size_t len, struct pg_route_cfg *io, char *err,
                             size_t errlen)
{
	const struct pg_route_cfg base = *io;

	return parse_over(json, len, &base, io, err, errlen);
}
