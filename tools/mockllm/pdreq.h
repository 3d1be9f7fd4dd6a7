/* SPDX-License-Identifier: MIT */
/*
 * Prefill/decode disaggregation: which leg of a pair a request is, from its
 * body, checked as strictly as a router's mistake should be caught. Pure:
 * no I/O. What an instance of each --role does with each leg is in pd.c;
 * the two protocols, as the routers drive them (../shared/PEERS.md):
 *
 * vLLM with NIXL (--pd-protocol vllm). The prefill leg carries
 * "kv_transfer_params": {"do_remote_decode": true, ...} with "stream": false,
 * no "stream_options", "max_tokens": 1 (and "max_completion_tokens": 1 if
 * present). Its answer carries kv_transfer_params naming the blocks, which
 * the router copies into the original request: the decode leg, with
 * {"do_remote_prefill": true, "remote_engine_id", "remote_block_ids",
 * "remote_host", "remote_port"} ("tp_size" optional). A request whose
 * kv_transfer_params set neither flag is a plain request, as in vLLM.
 *
 * SGLang (--pd-protocol sglang). Both legs are the same body with
 * "bootstrap_host", "bootstrap_port" and "bootstrap_room" (an integer in
 * [0, 2^63 - 1]); for a batch (a completions "prompt" that is a list of
 * prompts) each is an array with one element per prompt, every element
 * naming the same prefill, the rooms distinct.
 *
 * A role instance refuses (400) the other protocol's fields, the other
 * role's leg, and a leg with a field missing or of the wrong type; a
 * request with no field of either protocol is a plain one (served as a
 * mixed instance would: a router's fallback to one instance works).
 */
#ifndef MOCKLLM_PDREQ_H
#define MOCKLLM_PDREQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"

#define PD_MAX_ROOMS    64           /* bootstrap rooms in one (batch) request */
#define PD_MAX_BLOCK_ID (1ull << 53) /* block ids stay exact in any JSON reader */
#define PD_HOST_MAX     64           /* a numeric address and its NUL */
#define PD_ENGINE_MAX   128
#define PD_ERR_MAX      320

enum pd_role {
	PD_ROLE_MIXED = 0, /* no disaggregation: every field of it ignored */
	PD_ROLE_PREFILL,
	PD_ROLE_DECODE,
};

enum pd_proto {
	PD_PROTO_VLLM = 0,
	PD_PROTO_SGLANG,
};

enum pd_leg {
	PD_LEG_PLAIN = 0,      /* served as a mixed instance serves it */
	PD_LEG_VLLM_PREFILL,   /* prefill; answer with kv_transfer_params; pin the blocks */
	PD_LEG_VLLM_DECODE,    /* pull the blocks from the prefill named, then decode */
	PD_LEG_SGLANG_PREFILL, /* prefill; hand the KV to the rooms */
	PD_LEG_SGLANG_DECODE,  /* register the rooms, wait for their KV, then decode */
};

struct pd_req {
	enum pd_leg leg;
	/* PD_LEG_VLLM_DECODE: the transfer to pull */
	char engine[PD_ENGINE_MAX];
	char host[PD_HOST_MAX]; /* remote_host, or the SGLang legs' bootstrap_host */
	uint16_t port;          /* remote_port, or bootstrap_port */
	uint64_t *block_ids;    /* malloc'd; NULL when there are none */
	size_t nblocks;
	/* SGLang legs: the rooms, one per prompt of the batch */
	size_t nrooms;
	uint64_t room[PD_MAX_ROOMS];
};

/*
 * Which leg body[0..len) is on an instance of this role and protocol;
 * bootstrap_port: a prefill instance's own (SGLang: the prefill leg must
 * name it). chat: /v1/chat/completions (one prompt), else /v1/completions.
 * A body that is not a JSON object is PD_LEG_PLAIN (the completion
 * endpoint answers its 400). Returns 0, or -1 with err (NUL-terminated,
 * naming the field) for a 400; *out is then PD_LEG_PLAIN and holds no
 * memory. Free with pd_req_free().
 */
int pd_req_parse(const char *body, size_t len, bool chat, enum pd_role role, enum pd_proto proto,
                 uint16_t bootstrap_port, struct pd_req *out, char err[PD_ERR_MAX]);
void pd_req_free(struct pd_req *r);

/*
 * A prefill's answer's kv_transfer_params, vLLM's: ,"kv_transfer_params":
 * {"do_remote_prefill":true,"do_remote_decode":false,"remote_block_ids":
 * [first, ..., first + n - 1],"remote_engine_id":..,"remote_host":..,
 * "remote_port":..,"tp_size":1} appended to b (engine and host plain
 * ASCII without quotes or backslashes).
 */
void pd_kv_params_json(struct pg_buf *b, const char *engine, uint64_t first_id, size_t n,
                       const char *host, uint16_t port);

#endif /* MOCKLLM_PDREQ_H */
