/* SPDX-License-Identifier: MIT */
/*
 * Prefix-key extraction, pure: which bytes of a request decide where it goes
 * (the routing contract of doc/routing.md "How it routes"), and their XXH3-64 hash.
 *
 * - JSON APIs (POST /v1/chat/completions, /v1/completions, /v1/responses,
 *   /v1/embeddings; Anthropic's /v1/messages): the extracted prompt text,
 *   cut at prefix_length Unicode code points after JSON unescaping.
 *   Invariant to JSON whitespace, key order and every other field.
 * - Any other path: the first prefix_length bytes of the raw body.
 * - X-Prefixgate-Key header, else the body field "prompt_cache_key" (chat,
 *   completions, responses), else a Responses request's
 *   "previous_response_id", replaces the extracted key (explicit key).
 * - Unparseable JSON (or a body too large to buffer whole) falls back to the
 *   raw-bytes key; out->fallback says so. Never an error. The whole body is
 *   checked as JSON; the shape the grammar below asks for only until the
 *   text has prefix_length code points: past that, a part of the wrong
 *   shape ends the text instead (and the walk reads nothing further).
 *
 * Key text of the OpenAI APIs, as Unicode code points (hashed as UTF-8).
 * TEXT(s) is the unescaped string s with each ESC, US, RS or GS in it
 * preceded by an ESC, so no separator can come from the text itself and the
 * mapping below is injective (up to the cut):
 *
 *   chat        = [ CANON(tools) RS ] { TEXT(role) US content RS }...
 *   content     = TEXT(string) | TEXT(text_1) GS TEXT(text_2) GS ...
 *                 (the "text" of parts of type "text", in order; other
 *                 parts are ignored; a null or missing content is empty)
 *   completions = TEXT(prompt)                      prompt is a string
 *               | TEXT(s_1) RS TEXT(s_2) ...        an array of strings
 *               | ids                               an array of token ids
 *               | ids RS ids ...                    an array of arrays of ids
 *   ids         = { DECIMAL(id) US }...
 *   embeddings  = as completions, of "input"
 *   messages    = [ CANON(tools) RS ] [ "system" US content RS ] chat's messages
 *                 (Anthropic: "system" is a string or text blocks, as content)
 *   responses   = [ CANON(tools) RS ] [ "system" US TEXT(instructions) RS ] input
 *   input       = "user" US TEXT(string) RS         input is a string
 *               | { item }...                       an array of items
 *   item        = TEXT(role) US content RS          a message: "type" "message" or
 *                                                   none, and a "role"; its parts of
 *                                                   type input_text / output_text
 *               | CANON(item) RS                    any other item (function calls
 *                                                   and their outputs, ...)
 *
 * CANON(v) is v in canonical JSON: no whitespace, object members sorted by
 * unescaped name (code point order; duplicates keep document order), strings
 * with only '"', '\\' and control characters escaped (\b \f \n \r \t, else
 * \u00xx lowercase), numbers as written. A "tools" that is null counts as
 * absent. So a string prompt and a one-element array of it, or a string
 * content and a single text part, give the same key; a role that is null or
 * missing is empty. Anything else malformed (messages not an array of
 * objects, a role or text that is not a string, a mixed prompt array, a
 * token id that is not an integer) makes the body unusable: raw fallback.
 * A lone surrogate escape counts as U+FFFD (json.h).
 *
 * The text is cut after prefix_length code points (separators and escapes
 * count), never inside a UTF-8 sequence; pg_key.length is that count.
 * So an Anthropic body and the chat body with the same system prompt and
 * messages have the same key, and a Responses string input is the one user
 * message it stands for.
 *
 * prompt_cache_key, previous_response_id (non-empty top-level strings) and
 * X-Prefixgate-Key are used whole, as bytes; pg_key.length is then their
 * byte count.
 */
#ifndef PG_KEY_H
#define PG_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/http.h"
#include "lib/json.h"
#include "prefixgate.h"

/* OpenAI bodies are buffered whole to extract their key, up to this size;
 * beyond it the raw-bytes key is used (fallback) and the body is streamed. */
#define PG_KEY_JSON_BODY_MAX (16u * 1024 * 1024)

/* Separators of the key text (ASCII control characters, which JSON strings
 * can carry only as escapes). */
#define PG_KEY_ESC 0x1b /* makes the next code point literal text */
#define PG_KEY_GS  0x1d /* between the text parts of one content */
#define PG_KEY_RS  0x1e /* after tools and each message; between prompts */
#define PG_KEY_US  0x1f /* after a role; after each token id */

enum pg_api {
	PG_API_RAW = 0,         /* any other path: raw body bytes */
	PG_API_CHAT = 1,        /* POST /v1/chat/completions */
	PG_API_COMPLETIONS = 2, /* POST /v1/completions */
	PG_API_RESPONSES = 3,   /* POST /v1/responses (OpenAI Responses) */
	PG_API_MESSAGES = 4,    /* POST /v1/messages (Anthropic Messages) */
	PG_API_EMBEDDINGS = 5,  /* POST /v1/embeddings */
};
#define PG_API_COUNT (PG_API_EMBEDDINGS + 1)

enum pg_key_source {
	PG_KEY_SRC_RAW = 0,               /* first prefix_length raw body bytes */
	PG_KEY_SRC_MESSAGES = 1,          /* chat / Anthropic: tools, system, messages */
	PG_KEY_SRC_HEADER = 2,            /* X-Prefixgate-Key */
	PG_KEY_SRC_CACHE_FIELD = 3,       /* prompt_cache_key body field */
	PG_KEY_SRC_PROMPT = 4,            /* completions: prompt */
	PG_KEY_SRC_INPUT = 5,             /* responses: tools, instructions, input;
	                                   * embeddings: input */
	PG_KEY_SRC_PREVIOUS_RESPONSE = 6, /* responses: previous_response_id */
};
#define PG_KEY_SRC_COUNT (PG_KEY_SRC_PREVIOUS_RESPONSE + 1)

/* The key was given by the client (routing decision explicit_key), not
 * extracted from the prompt. */
static inline bool pg_key_source_explicit(unsigned source)
{
	return source == PG_KEY_SRC_HEADER || source == PG_KEY_SRC_CACHE_FIELD ||
	       source == PG_KEY_SRC_PREVIOUS_RESPONSE;
}

/* The key is extracted prompt text, in code points. */
static inline bool pg_key_source_text(unsigned source)
{
	return source == PG_KEY_SRC_MESSAGES || source == PG_KEY_SRC_PROMPT ||
	       source == PG_KEY_SRC_INPUT;
}

struct pg_key {
	uint64_t hash;   /* XXH3-64 of the key bytes */
	uint64_t anchor; /* cache_aware's anchor (pg_key_blocks; route.c may move it
	                  * past a shared prefix); else hash */
	uint32_t length; /* key length: code points (text sources) or bytes */
	uint32_t tokens; /* cache_aware: the prompt's tokens, estimated
	                  * (PG_CA_CHARS_PER_TOKEN bytes of its text, or of the body) */
	uint8_t source;  /* enum pg_key_source */
	bool fallback;   /* JSON API, but the JSON could not be used */
	bool stream;     /* the JSON body asks for a streamed response */
	bool ahead;      /* computed from the body's parse made as it arrived */
	/* Flow control's (lib/flow.h), from a JSON body: max_tokens (or
	 * max_completion_tokens, max_output_tokens; 0: none), and where the
	 * "user" string's bytes are in the body (user_len 0: none). */
	uint32_t max_tokens;
	uint32_t user_off, user_len;
};

/* API by method and path (path without query string). */
enum pg_api pg_key_api(struct pg_str method, struct pg_str path);

/* Body bytes the key needs before it can be computed: prefix_length for raw
 * (with cache_aware's blocks, the blocks' limit, PG_CA_MAX_BLOCKS x
 * PG_CA_BLOCK), PG_KEY_JSON_BODY_MAX for OpenAI APIs (the whole body, up
 * to that). */
size_t pg_key_body_need(enum pg_api api, uint32_t prefix_length, bool blocks);

/*
 * Body bytes a request holds before it is routed: what its key needs
 * (pg_key_body_need), the whole JSON body when by_model (a model pool is
 * read from the body), never more than the body. length: its
 * Content-Length, or -1 for a chunked body (its size unknown). A body too
 * big to hold for its JSON is keyed on its raw prefix, and its model read
 * from the first PG_PREFIX_LENGTH_MAX bytes.
 */
uint64_t pg_key_hold(enum pg_api api, uint32_t prefix_length, bool blocks, bool by_model,
                     int64_t length);

/*
 * Compute the key of a request. header_key: X-Prefixgate-Key (len 0 if
 * absent). body/body_len: the body bytes held (decoded if chunked);
 * complete: they are the whole body. An OpenAI body that is not complete
 * falls back to the raw key. text (may be NULL): receives the key bytes, up
 * to text_cap; *text_len (may be NULL) gets the full key length in bytes.
 * Returns 0. May allocate (parse tokens, key text); frees all before return.
 */
int pg_key_compute(enum pg_api api, struct pg_str header_key, const char *body, size_t body_len,
                   bool complete, uint32_t prefix_length, struct pg_key *out, char *text,
                   size_t text_cap, size_t *text_len);

/*
 * cache_aware's view of a request (router/index.h): the key text, past
 * PrefixLength (up to PG_CA_MAX_BLOCKS blocks), cut into PG_CA_BLOCK-byte
 * blocks named by chained hashes, and the anchor that places a request
 * nothing cached decides:
 *   chat, messages, responses:
 *           the text before the first message whose role is "user" (tools,
 *           system prompt, instructions), then up to PrefixLength code points of that
 *           message (through its RS if shorter). So a conversation keeps its
 *           anchor every turn, and one long system prompt or tool list for
 *           every user does not pin them all to one instance.
 *   other:  the PREFIX_AWARE key text (first PrefixLength code points or
 *           raw bytes).
 *   explicit keys: their hash, and no blocks.
 */
struct pg_key_blocks {
	uint32_t n;                       /* whole blocks indexed */
	uint32_t anchor_len;              /* key text bytes the anchor covers */
	uint64_t anchor;                  /* XXH3-64 of them */
	uint32_t text_len;                /* key text bytes in all (up to the limit) */
	uint64_t whole;                   /* names the whole key text; never 0 */
	uint64_t chain[PG_CA_MAX_BLOCKS]; /* chain[i]: hash of blocks 0..i; never 0 */
};

/*
 * The chain hash of a PG_CA_BLOCK-byte block whose prefix's chain hash is
 * prev (0 for the first block): h = (prev ^ prev >> 29) * 0xbf58476d1ce4e5b9
 * ^ XXH3-64(block), then h ^ h >> 32 (each step a bijection), so one hash
 * names the whole prefix. Each block hashes on its own, so the CPU overlaps
 * them: 64 blocks took 1.8 us against 2.9 us for XXH3 seeded with the
 * previous hash (19,200 against 21,300 instructions; doc/benchmarks.md, Routing
 * cost). Gateways of a fleet exchange these hashes: ones of different
 * definitions never match, they only miss.
 */
uint64_t pg_key_chain_next(uint64_t prev, const char *block);

/* kb from a key text t[0..n) whose anchor is t[0..anchor_end): the
 * blocks' chain, the anchor's hash, the whole text's name. */
void pg_key_blocks_of(struct pg_key_blocks *kb, const char *t, size_t n, size_t anchor_end);

/*
 * The window a body's JSON is parsed with first (json.h): a parse of it
 * made as the body arrived (pg_json_stream) with this window is used as
 * it is. blocks: for cache_aware's key (pg_key_compute_blocks()).
 */
size_t pg_key_window(bool blocks, uint32_t prefix_length);

/*
 * Memory a caller keeps from one key to the next (a worker's), so that a
 * key allocates nothing once it has grown: the key text, and the tokens of
 * a body parsed here. A buffer grown past PG_SPARE_KEEP (lib/spare.h: a
 * rare huge body) is freed after its key. Zero it to start; one thread.
 */
struct pg_key_scratch {
	char *text;
	size_t text_cap;
	struct pg_json js;
};
void pg_key_scratch_free(struct pg_key_scratch *ks);

/*
 * pg_key_compute_blocks() (kb non-NULL) or pg_key_compute() without its
 * text (kb NULL), given the body's JSON parsed as it arrived (pre, may be
 * NULL): used when it is whole (pre->rc <= 0) and was made with
 * pg_key_window()'s window over these body_len bytes; else the body is
 * parsed here. The key is the same either way. ks: scratch memory (NULL:
 * allocated and freed here).
 */
int pg_key_compute_ahead(enum pg_api api, struct pg_str header_key, const char *body,
                         size_t body_len, bool complete, const struct pg_json_stream *pre,
                         uint32_t prefix_length, struct pg_key *out, struct pg_key_blocks *kb,
                         struct pg_key_scratch *ks);

/* pg_key_compute (out is the same key), plus cache_aware's blocks. */
static inline int pg_key_compute_blocks(enum pg_api api, struct pg_str header_key, const char *body,
                                        size_t body_len, bool complete, uint32_t prefix_length,
                                        struct pg_key *out, struct pg_key_blocks *kb)
{
	return pg_key_compute_ahead(api, header_key, body, body_len, complete, NULL, prefix_length,
	                            out, kb, NULL);
}

#endif /* PG_KEY_H */
