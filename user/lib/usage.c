// SPDX-License-Identifier: MIT
/*
 * What an engine's answer reports (usage.h): server-sent events cut into
 * data lines, each value read by a JSON lexer that keeps, per open
 * container, whether it is an object and (for the first few levels) which
 * container of ours it is, and takes a figure when its number ends.
 */
#include <string.h>
#include "lib/json_scan.h"
#include "lib/usage.h"

/* Lexer states. */
enum {
	S_VALUE,       /* a value comes (white space first) */
	S_VALUE_CLOSE, /* after '[': a value or ']' */
	S_KEY_CLOSE,   /* after '{': a member name or '}' */
	S_KEY,         /* after ',' in an object: a member name */
	S_COLON,       /* after a member name */
	S_AFTER,       /* after a value in a container: ',' or its close */
	S_END,         /* the value is whole: white space only */
	S_STR,         /* in a string */
	S_ESC,         /* after a backslash in a string */
	S_NUM,         /* in a number */
	S_LIT,         /* in true, false or null */
	S_BROKEN,      /* not of the form: nothing more until the value's end */
};

/* What a string is to us. */
enum { STR_OTHER, STR_NAME, STR_CONTENT };

/* Which container of ours (ctx[]): PTD is usage.prompt_tokens_details,
 * DETAILS cached_tokens_details, CHOICES an array. */
enum {
	C_OTHER,
	C_ROOT,
	C_USAGE,
	C_PTD,
	C_TIMINGS,
	C_META,
	C_SGLEXT,
	C_DETAILS,
	C_CHOICES,
	C_CHOICE,
	C_DELTA
};

/* What the value of a member is to us (member, member_arg). */
enum {
	A_NONE,
	A_FIELD,   /* arg: enum pg_usage_field */
	A_INTO,    /* arg: the container it opens */
	A_CONTENT, /* a string: an event's content if not empty */
	A_DETAIL,  /* a number added to cached_tokens_details' sum */
};

struct rule {
	uint8_t ctx, act, arg;
	const char *name;
};

static const struct rule rules[] = {
    {C_ROOT, A_INTO, C_USAGE, "usage"},
    {C_ROOT, A_INTO, C_TIMINGS, "timings"},
    {C_ROOT, A_INTO, C_META, "meta_info"},
    {C_ROOT, A_INTO, C_SGLEXT, "sglext"},
    {C_ROOT, A_INTO, C_CHOICES, "choices"},
    {C_USAGE, A_FIELD, PG_UF_PROMPT, "prompt_tokens"},
    {C_USAGE, A_FIELD, PG_UF_COMPLETION, "completion_tokens"},
    {C_USAGE, A_INTO, C_PTD, "prompt_tokens_details"},
    {C_PTD, A_FIELD, PG_UF_CACHED, "cached_tokens"},
    {C_META, A_FIELD, PG_UF_M_PROMPT, "prompt_tokens"},
    {C_META, A_FIELD, PG_UF_M_COMPLETION, "completion_tokens"},
    {C_META, A_FIELD, PG_UF_M_CACHED, "cached_tokens"},
    {C_META, A_INTO, C_DETAILS, "cached_tokens_details"},
    {C_TIMINGS, A_FIELD, PG_UF_T_PROMPT, "prompt_n"},
    {C_TIMINGS, A_FIELD, PG_UF_T_CACHE, "cache_n"},
    {C_TIMINGS, A_FIELD, PG_UF_T_PREDICTED, "predicted_n"},
    {C_SGLEXT, A_INTO, C_DETAILS, "cached_tokens_details"},
    {C_DETAILS, A_DETAIL, 0, "device"},
    {C_DETAILS, A_DETAIL, 0, "host"},
    {C_DETAILS, A_DETAIL, 0, "storage"},
    {C_CHOICE, A_INTO, C_DELTA, "delta"},
    {C_CHOICE, A_CONTENT, 0, "text"},
    {C_DELTA, A_CONTENT, 0, "content"},
    {C_DELTA, A_CONTENT, 0, "reasoning_content"},
    {C_DELTA, A_CONTENT, 0, "reasoning"},
};

/* Server-sent events: where in a line. */
enum {
	L_START, /* a line begins */
	L_FIELD, /* its field name, matching "data" */
	L_SPACE, /* after "data:": one space is skipped */
	L_VALUE, /* the value's first byte */
	L_DATA,  /* the value's bytes */
	L_MARK,  /* a line that began with '[': the end mark or nothing */
	L_SKIP,  /* another field, or a comment */
};

static const char data_field[] = "data";
static const char done_mark[] = "[DONE]";

#define NAME_OTHER 0xff /* name_len of a name none of ours: too long, escaped */

static void lex_reset(struct pg_usage_parse *p)
{
	p->st = S_VALUE;
	p->depth = 0;
	p->member = A_NONE;
}

void pg_usage_init(struct pg_usage_parse *p, enum pg_usage_mode mode)
{
	memset(p, 0, sizeof(*p));
	p->mode = (uint8_t)mode;
	lex_reset(p);
}

static uint8_t ctx_top(const struct pg_usage_parse *p)
{
	return p->depth && p->depth <= PG_USAGE_CTX_DEPTH ? p->ctx[p->depth] : C_OTHER;
}

static bool top_is_obj(const struct pg_usage_parse *p)
{
	return p->is_obj[p->depth / 64] >> (p->depth % 64) & 1;
}

static void broken(struct pg_usage_parse *p)
{
	p->st = S_BROKEN;
	p->flags |= PG_USAGE_BROKEN;
}

static void value_done(struct pg_usage_parse *p)
{
	p->st = p->depth ? S_AFTER : S_END;
	p->member = A_NONE;
}

/* The member whose name is p->name. */
static void resolve(struct pg_usage_parse *p)
{
	uint8_t c = ctx_top(p);

	p->member = A_NONE;
	if (c == C_OTHER || p->name_len == NAME_OTHER)
		return;
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		if (rules[i].ctx == c && strlen(rules[i].name) == p->name_len &&
		    !memcmp(rules[i].name, p->name, p->name_len)) {
			p->member = rules[i].act;
			p->member_arg = rules[i].arg;
			return;
		}
}

static void open_container(struct pg_usage_parse *p, bool obj)
{
	uint8_t c = C_OTHER;

	if (p->depth == PG_JSON_MAX_DEPTH) {
		broken(p);
		return;
	}
	if (!p->depth)
		c = obj ? C_ROOT : C_OTHER;
	else if (p->member == A_INTO && obj == (p->member_arg != C_CHOICES))
		c = p->member_arg;
	p->depth++;
	if (p->depth <= PG_USAGE_CTX_DEPTH)
		p->ctx[p->depth] = c;
	p->is_obj[p->depth / 64] &= ~(1ull << (p->depth % 64));
	p->is_obj[p->depth / 64] |= (uint64_t)obj << (p->depth % 64);
	p->flags |= c == C_USAGE ? PG_USAGE_OBJECT : c == C_TIMINGS ? PG_USAGE_TIMINGS : 0;
	if (c == C_DETAILS) {
		p->details = 0;
		p->details_any = false;
	}
	p->member = A_NONE;
	p->st = obj ? S_KEY_CLOSE : S_VALUE_CLOSE;
}

static void set_field(struct pg_usage_parse *p, unsigned f, uint32_t v)
{
	p->val[f] = v;
	p->got |= 1u << f;
}

static void close_container(struct pg_usage_parse *p)
{
	if (ctx_top(p) == C_DETAILS && p->details_any)
		set_field(p, PG_UF_DETAILS, p->details);
	p->depth--;
	value_done(p);
}

static uint32_t sat32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* A number ended: a figure if it is one of ours and a plain integer. */
static void number_done(struct pg_usage_parse *p)
{
	if (!p->num_bad && p->num_any) {
		if (p->member == A_FIELD)
			set_field(p, p->member_arg, sat32(p->num));
		else if (p->member == A_DETAIL) {
			p->details = sat32((uint64_t)p->details + sat32(p->num));
			p->details_any = true;
		}
	}
	value_done(p);
}

static void content(struct pg_usage_parse *p)
{
	if (p->str == STR_CONTENT && !p->ev_counted) {
		p->ev_counted = true;
		p->events++;
	}
}

/* String bytes s[0..n), n >= 1, none of them a quote or backslash. */
static void str_bytes(struct pg_usage_parse *p, const unsigned char *s, size_t n)
{
	if (p->str == STR_NAME && p->name_len != NAME_OTHER) {
		if (p->name_len + n > PG_USAGE_NAME_MAX) {
			p->name_len = NAME_OTHER;
		} else {
			memcpy(p->name + p->name_len, s, n);
			p->name_len += (uint8_t)n;
		}
	}
	content(p);
}

static void str_done(struct pg_usage_parse *p)
{
	if (p->str == STR_NAME) {
		resolve(p);
		p->st = S_COLON;
		return;
	}
	value_done(p);
}

static const char *const literals[] = {"true", "false", "null"};

/* The first byte c of a value. */
static void value_begin(struct pg_usage_parse *p, unsigned char c)
{
	if (p->depth && !top_is_obj(p)) { /* an array's element: ours in choices */
		p->member = ctx_top(p) == C_CHOICES ? A_INTO : A_NONE;
		p->member_arg = C_CHOICE;
	}
	if (c == '{' || c == '[') {
		open_container(p, c == '{');
	} else if (c == '"') {
		p->st = S_STR;
		p->str = p->member == A_CONTENT ? STR_CONTENT : STR_OTHER;
	} else if (c == '-' || (c >= '0' && c <= '9')) {
		p->st = S_NUM;
		p->num = c == '-' ? 0 : (uint64_t)(c - '0');
		p->num_bad = c == '-';
		p->num_any = c != '-';
	} else if (c == 't' || c == 'f' || c == 'n') {
		p->st = S_LIT;
		p->lit = c == 't' ? 0 : c == 'f' ? 1 : 2;
		p->lit_pos = 1;
	} else {
		broken(p);
	}
}

static bool is_ws(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* One structural byte c (not in a string, number or literal). */
static void structural(struct pg_usage_parse *p, unsigned char c)
{
	if (is_ws(c))
		return;
	switch (p->st) {
	case S_VALUE_CLOSE:
		if (c == ']') {
			close_container(p);
			return;
		}
		/* fall through */
	case S_VALUE:
		value_begin(p, c);
		return;
	case S_KEY_CLOSE:
		if (c == '}') {
			close_container(p);
			return;
		}
		/* fall through */
	case S_KEY:
		if (c != '"') {
			broken(p);
			return;
		}
		p->st = S_STR;
		p->str = STR_NAME;
		p->name_len = 0;
		return;
	case S_COLON:
		if (c == ':')
			p->st = S_VALUE;
		else
			broken(p);
		return;
	case S_AFTER:
		if (c == ',')
			p->st = top_is_obj(p) ? S_KEY : S_VALUE;
		else if (c == (top_is_obj(p) ? '}' : ']'))
			close_container(p);
		else
			broken(p);
		return;
	default: /* S_END: only white space may follow */
		broken(p);
	}
}

/* The lexer over s[0..n). */
static void lex(struct pg_usage_parse *p, const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n && p->st != S_BROKEN) {
		unsigned char c = s[i];

		switch (p->st) {
		case S_STR: {
			size_t e = pg_json_plain_end(s, i, n);

			if (e == i && c >= 0x80)
				e = i + 1; /* non-ASCII: not validated */
			if (e > i) {
				str_bytes(p, s + i, e - i);
				i = e;
			} else if (c == '"') {
				str_done(p);
				i++;
			} else if (c == '\\') {
				p->st = S_ESC;
				if (p->str == STR_NAME)
					p->name_len = NAME_OTHER; /* ours are plain */
				content(p);
				i++;
			} else {
				broken(p); /* a control character */
			}
			continue;
		}
		case S_ESC:
			p->st = S_STR;
			i++;
			continue;
		case S_NUM:
			if (c >= '0' && c <= '9') {
				p->num = p->num * 10 + (uint64_t)(c - '0');
				if (p->num > UINT32_MAX)
					p->num = (uint64_t)UINT32_MAX + 1;
				p->num_any = 1;
				i++;
			} else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
				p->num_bad = 1;
				i++;
			} else {
				number_done(p); /* c is read again in the new state */
			}
			continue;
		case S_LIT: {
			const char *w = literals[p->lit];

			if (!w[p->lit_pos]) {
				value_done(p);
			} else if (c == (unsigned char)w[p->lit_pos]) {
				p->lit_pos++;
				i++;
			} else {
				broken(p);
			}
			continue;
		}
		default:
			structural(p, c);
			i++;
		}
	}
	/* a literal whose last letter was the input's: done already */
	if (p->st == S_LIT && !literals[p->lit][p->lit_pos])
		value_done(p);
}

/* The value is whole (a number ends where the input does). */
static bool whole(const struct pg_usage_parse *p)
{
	return p->st == S_END || (p->st == S_NUM && !p->depth);
}

/* The end of an event: a value left open was cut. */
static void event_end(struct pg_usage_parse *p)
{
	if (p->ev_data && !whole(p) && p->st != S_BROKEN && !(p->st == S_VALUE && !p->depth))
		p->flags |= PG_USAGE_BROKEN;
	lex_reset(p);
	p->ev_data = false;
	p->ev_counted = false;
}

/* A data line begins: a new event if the last one's value is whole. */
static void data_begin(struct pg_usage_parse *p)
{
	if (whole(p))
		event_end(p);
	if (p->ev_data)
		lex(p, (const unsigned char *)"\n", 1); /* lines are joined by LF */
	p->ev_data = true;
}

/* The end of a line (its terminator consumed). */
static void line_end(struct pg_usage_parse *p)
{
	if (p->line == L_START)
		event_end(p); /* a blank line */
	else if (p->line == L_MARK && p->done_pos == sizeof(done_mark) - 1)
		p->flags |= PG_USAGE_DONE;
	else if (p->line == L_MARK)
		p->flags |= PG_USAGE_BROKEN;
	else if ((p->line == L_FIELD && p->field_pos == sizeof(data_field) - 1) ||
	         p->line == L_SPACE || p->line == L_VALUE)
		data_begin(p); /* an empty data line */
	p->line = L_START;
}

/* Bytes of a line, up to (not including) its terminator. */
static size_t line_bytes(struct pg_usage_parse *p, const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];

		switch (p->line) {
		case L_START:
			if (c == ':') {
				p->line = L_SKIP;
				break;
			}
			p->line = L_FIELD;
			p->field_pos = 0;
			/* fall through */
		case L_FIELD:
			if (p->field_pos == sizeof(data_field) - 1 && c == ':') {
				p->line = L_SPACE;
			} else if (p->field_pos < sizeof(data_field) - 1 &&
			           c == (unsigned char)data_field[p->field_pos]) {
				p->field_pos++;
			} else {
				p->line = L_SKIP;
			}
			break;
		case L_SPACE:
			p->line = L_VALUE;
			if (c == ' ')
				break;
			/* fall through */
		case L_VALUE:
			if (c == '[') {
				event_end(p);
				p->line = L_MARK;
				p->done_pos = 0;
				continue;
			}
			data_begin(p);
			p->line = L_DATA;
			continue;
		case L_DATA:
			lex(p, s + i, n - i);
			return n;
		case L_MARK:
			if (p->done_pos < sizeof(done_mark) - 1 &&
			    c == (unsigned char)done_mark[p->done_pos])
				p->done_pos++;
			else
				p->done_pos = UINT8_MAX;
			break;
		default: /* L_SKIP */
			return n;
		}
		i++;
	}
	return n;
}

static void feed_sse(struct pg_usage_parse *p, const unsigned char *s, size_t n)
{
	while (n) {
		const unsigned char *lf = memchr(s, '\n', n), *cr;
		size_t len = lf ? (size_t)(lf - s) : n;

		if (p->cr) { /* CR LF is one terminator */
			p->cr = false;
			if (*s == '\n') {
				s++;
				n--;
				continue;
			}
		}
		cr = memchr(s, '\r', len);
		if (cr)
			len = (size_t)(cr - s);
		line_bytes(p, s, len);
		if (len == n)
			return;
		p->cr = s[len] == '\r';
		line_end(p);
		s += len + 1;
		n -= len + 1;
	}
}

void pg_usage_feed(struct pg_usage_parse *p, const void *data, size_t len)
{
	const unsigned char *s = data;

	while (p->mode == PG_USAGE_AUTO && len) {
		if (is_ws(*s)) {
			s++;
			len--;
		} else {
			p->mode = *s == '{' || *s == '[' ? PG_USAGE_JSON : PG_USAGE_SSE;
		}
	}
	if (p->mode == PG_USAGE_SSE)
		feed_sse(p, s, len);
	else
		lex(p, s, len);
}

/* The first source of figure f that reported it; false if none. */
static bool pick(const struct pg_usage_parse *p, const uint8_t *fields, size_t n, uint32_t *v,
                 size_t *which)
{
	for (size_t i = 0; i < n; i++)
		if (p->got >> fields[i] & 1) {
			*v = p->val[fields[i]];
			*which = i;
			return true;
		}
	return false;
}

void pg_usage_get(const struct pg_usage_parse *p, struct pg_usage *out)
{
	static const uint8_t prompt[] = {PG_UF_PROMPT, PG_UF_M_PROMPT},
	                     cached[] = {PG_UF_CACHED, PG_UF_M_CACHED, PG_UF_T_CACHE,
	                                 PG_UF_DETAILS},
	                     completion[] = {PG_UF_COMPLETION, PG_UF_M_COMPLETION,
	                                     PG_UF_T_PREDICTED};
	static const uint8_t cached_src[] = {PG_USAGE_SRC_USAGE, PG_USAGE_SRC_META,
	                                     PG_USAGE_SRC_TIMINGS, PG_USAGE_SRC_DETAILS};
	const uint32_t timings = 1u << PG_UF_T_PROMPT | 1u << PG_UF_T_CACHE;
	size_t which;

	memset(out, 0, sizeof(*out));
	out->events = p->events;
	out->have = p->flags;
	if (p->mode == PG_USAGE_JSON && whole(p))
		out->have |= PG_USAGE_DONE;
	if (p->mode == PG_USAGE_SSE && p->line == L_MARK && p->done_pos == sizeof(done_mark) - 1)
		out->have |= PG_USAGE_DONE; /* the body ended on the mark's line */
	if (pick(p, prompt, sizeof(prompt), &out->prompt_tokens, &which)) {
		out->have |= PG_USAGE_PROMPT;
	} else if ((p->got & timings) == timings) {
		out->prompt_tokens =
		    sat32((uint64_t)p->val[PG_UF_T_PROMPT] + p->val[PG_UF_T_CACHE]);
		out->have |= PG_USAGE_PROMPT;
	}
	if (pick(p, cached, sizeof(cached), &out->cached_tokens, &which)) {
		out->have |= PG_USAGE_CACHED;
		out->cached_src = cached_src[which];
	}
	if (pick(p, completion, sizeof(completion), &out->completion_tokens, &which)) {
		out->have |= PG_USAGE_COMPLETION;
	} else if (p->mode == PG_USAGE_SSE && p->events) {
		out->completion_tokens = p->events;
		out->have |= PG_USAGE_COUNTED;
	}
}
