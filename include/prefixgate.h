/* SPDX-License-Identifier: MIT */
/*
 * prefixgate — the one definition of everything the BPF side and userspace
 * share: constants, map value structs. Included by bpf/ programs (with only
 * <linux/types.h> before it) and by user/ and tools/.
 */
#ifndef PREFIXGATE_H
#define PREFIXGATE_H

#include <linux/types.h>

/* A macro's value as a string literal, for help texts built from constants. */
#define PG_STR_(x) #x
#define PG_STR(x)  PG_STR_(x)

/* Slots in the backends map. Id 0 is never used: 0 means "no backend". */
#ifndef PG_MAX_BACKENDS
#define PG_MAX_BACKENDS 4096
#endif
/* Slots in one consistent-hash ring copy; a key hash picks slot hash >> 48. */
#define PG_RING_SLOT_BITS 16
#define PG_RING_SLOTS     (1u << PG_RING_SLOT_BITS)
/* Ordered distinct candidate backends stored per ring slot. */
#define PG_RING_CANDIDATES 4
/* Ring copies in the rings map per pool: one live, one being rebuilt. */
#define PG_RING_COPIES 2

/* Model pools (user/lib/pool.h): at most this many, declared at start-up;
 * pool 0 is "default". Names are at most PG_POOL_NAME_MAX - 1 bytes. */
#define PG_MAX_POOLS     16
#define PG_POOL_NAME_MAX 32

/* PrefixLength and ConcurrencyThreshold ranges (SageMaker's). */
#define PG_PREFIX_LENGTH_MIN     1024
#define PG_PREFIX_LENGTH_MAX     65536
#define PG_PREFIX_LENGTH_DEFAULT 4096
#define PG_CONCURRENCY_MIN       1
#define PG_CONCURRENCY_MAX       1024
#define PG_CONCURRENCY_DEFAULT   10

/* pg_backend.flags */
#define PG_BACKEND_ACTIVE    0x1  /* slot holds a member (may be draining) */
#define PG_BACKEND_DRAINING  0x2  /* being removed: no new requests */
#define PG_BACKEND_DOWN      0x4  /* refused/reset a connection: skipped until down_until_ms */
#define PG_BACKEND_UNHEALTHY 0x8  /* failing active health checks: skipped until they pass */
#define PG_BACKEND_TLS       0x10 /* https://: spoken to over TLS (set with ACTIVE, never after) */

/* Why a request went where it went; indexes pg_backend.requests[]. */
enum pg_decision {
	PG_DEC_AFFINITY = 0,          /* first ring candidate under the threshold (cache_aware:
	                               * or where its anchor was placed before) */
	PG_DEC_OVERFLOW = 1,          /* a later candidate, or least outstanding */
	PG_DEC_RANDOM = 2,            /* strategy random */
	PG_DEC_LEAST_OUTSTANDING = 3, /* strategy least_outstanding_requests */
	PG_DEC_RETRY = 4,             /* re-dispatch after a failed attempt */
	PG_DEC_EXPLICIT_KEY = 5,      /* affinity by X-Prefixgate-Key / prompt_cache_key */
	PG_DEC_CACHED = 6,            /* cache_aware: where the longest cached prefix is */
	PG_DEC_BALANCED = 7,          /* cache_aware: a later candidate, less recently sent */
	PG_DEC_MAX = 8,
};

enum pg_strategy {
	PG_STRATEGY_RANDOM = 0,
	PG_STRATEGY_LEAST_OUTSTANDING = 1,
	PG_STRATEGY_PREFIX_AWARE = 2,
	PG_STRATEGY_CACHE_AWARE = 3, /* a prefixgate extension (user/router/index.h) */
};

/*
 * cache_aware's block index (user/router/index.h has the rules). The key text
 * is cut into PG_CA_BLOCK-byte blocks, each named by a hash chained over
 * every block before it, so one hash names a whole prefix. At most
 * PG_CA_MAX_BLOCKS blocks of a request are indexed (longer prompts match on
 * their first 256 KiB of key text).
 */
/* 512: hit rates equal at 256/512/1024 on bench workloads (b), (d), (e);
 * 512 costs 4.5% more instructions per route than 1024, 9% less than 256,
 * and matches twice as finely as 1024 (doc/benchmarks.md, "Block size"). */
#ifndef PG_CA_BLOCK /* -DPG_CA_BLOCK=N builds another size, to measure it */
#define PG_CA_BLOCK 512
#endif
#define PG_CA_MAX_BLOCKS (256 * 1024 / PG_CA_BLOCK)
/* Holders remembered per block prefix. */
#define PG_CA_WAYS 4
/* Slots probed from a hash's home slot (open addressing). */
#define PG_CA_PROBE 4
/* --cache-capacity default, tokens of KV cache per instance, and the
 * characters a token stands for (English text; mockllm's tokenizer). */
#define PG_CA_CAPACITY_DEFAULT 262144
#define PG_CA_CHARS_PER_TOKEN  4
/* Index slots per block of one instance's capacity: room for this many
 * instances' distinct prefixes (shared prefixes take one slot for up to
 * PG_CA_WAYS holders). */
#define PG_CA_SLOTS_PER_BLOCK 32
/* CacheAwareConfig.NewConversationChoices: a request nothing cached places
 * (a new conversation or document) goes to the least recently sent of the
 * first N ring candidates of its anchor, ring order breaking ties. 1 (the
 * default): always the first, a choice that depends on the membership
 * alone, so gateways that share no state place a conversation alike. More
 * evens out the instances' shares, for a lone gateway or a fleet that
 * shares its index (doc/routing.md, How it routes). */
#define PG_CA_CHOICES_DEFAULT 1
/* pg_backend.recent: its time constant, and its unit (1/256 request). Two
 * counts within PG_CA_RECENT_TIE of each other are a tie. */
#define PG_CA_RECENT_MS  20000
#define PG_CA_RECENT_ONE 256
#define PG_CA_RECENT_TIE PG_CA_RECENT_ONE

/*
 * One slot of the block index. Array map "pg_cache_index", BPF_F_MMAPABLE,
 * its size fixed at start-up from --cache-capacity. Workers write slots
 * with relaxed atomics and no lock: a torn slot is a wrong hint (a cache
 * miss), never a wrong answer, since every holder is checked against the
 * backend table before use. A holder's stamp is its backend's ca_clock when
 * it was last sent this prefix; it is cached while fewer than its capacity
 * in blocks were sent to that backend since (an LRU model of the engine).
 */
struct pg_ca_slot {
	__u64 hash;                /* chain hash of a block prefix; 0: empty */
	__u32 stamp[PG_CA_WAYS];   /* holder's ca_clock when last sent it */
	__u16 backend[PG_CA_WAYS]; /* holder ids; 0: none */
	/* How much of the traffic passes through this prefix: uses requests
	 * were recorded through it since the index's request count was since
	 * (pg_state.ca_requests; the window slides by halves). A prefix that
	 * takes more than one instance's share is shared (router/index.h). */
	__u32 since;
	__u32 uses;
};
_Static_assert(sizeof(struct pg_ca_slot) == 40, "pg_ca_slot layout");

/*
 * One backend (inference instance). Array map "pg_backends", BPF_F_MMAPABLE:
 * every worker thread (and every prefixgate process sharing the pin path)
 * updates in_flight and requests[] with atomics on the mmapped value; the
 * health-check thread writes the scraped fields (waiting .. kv_query_tokens);
 * the fleet thread (user/fleet/fleet.h) alone writes peer_in_flight and
 * peer_gateways; the control thread alone writes the other fields.
 */
struct pg_backend {
	__u8 addr[16]; /* network byte order; IPv4: the first 4 bytes */
	__u16 family;  /* AF_INET (2) or AF_INET6 (10) */
	__u16 port;    /* host byte order */
	__u16 flags;   /* PG_BACKEND_* */
	__u16 addr_pad;
	__s32 in_flight;            /* requests dispatched and not yet finished: exact */
	__u32 epoch;                /* bumped each time this slot gets a new member */
	__u64 down_until_ms;        /* CLOCK_MONOTONIC ms; DOWN is ignored after it */
	__u64 failures;             /* attempts that failed (connect, reset, timeout) */
	__u64 requests[PG_DEC_MAX]; /* dispatches by decision */
	/*
	 * The backend's own view of itself, scraped from its /metrics (vLLM
	 * names) by the health-check thread every --metrics-scrape-interval;
	 * all zero while never scraped. Valid while CLOCK_MONOTONIC ms <
	 * metrics_until_ms (a failed or missing scrape lets them expire).
	 */
	__u32 waiting;          /* vllm:num_requests_waiting */
	__u32 running;          /* vllm:num_requests_running */
	__u64 metrics_until_ms; /* scraped values valid until; 0: never scraped */
	__u64 kv_hit_tokens;    /* vllm:prefix_cache_hits_total (tokens, cumulative) */
	__u64 kv_query_tokens;  /* vllm:prefix_cache_queries_total (tokens, cumulative) */
	/* cache_aware: blocks sent to it that it did not hold (its LRU clock);
	 * advanced by its capacity when the slot gets a new member, which ages
	 * out everything the index remembers of the old one. */
	__u64 ca_clock;
	/* Fleets: requests other gateways have in flight to this backend (its
	 * address), as the load mode in use estimates it (user/lib/fleet.h):
	 * the sum of the peers' published counts, or the backend's own
	 * running + waiting less in_flight; 0 for a lone gateway. Routing
	 * compares in_flight + peer_in_flight (pg_backend_inflight). */
	__s32 peer_in_flight;
	__u32 peer_gateways; /* peers whose counts peer_in_flight sums */
	__u32 pool;          /* the model pool it serves (index in pg_pools); control thread */
	/* cache_aware: requests dispatched to it lately, in 1/PG_CA_RECENT_ONE
	 * requests: workers add at dispatch, the control thread decays it
	 * (time constant PG_CA_RECENT_MS; user/router/view.h). What
	 * CacheAwareConfig.NewConversationChoices compares. */
	__u32 recent;
	/* cache_aware's load model (user/router/work.h): the prefill work of the
	 * requests sent to it whose first token has not come (prompt tokens
	 * less what its cache was believed to hold), and their number. Workers
	 * add at dispatch and take back at the first response byte, or when an
	 * attempt ends without one. */
	__u64 prefill_tokens;
	__u32 prefill_reqs;
	__u32 fit_obs; /* first tokens its speed was learned from (saturating); 0:
	                * fit_* are the pool's other members' (router/load.h) */
	/* Since when its prefill engine has been computing the queue's head
	 * (router/work.h pg_work_queued): the later of the queue's start
	 * (prefill_reqs 0 -> 1) and the end of the last prefill whose first
	 * token was seen; CLOCK_MONOTONIC ms. */
	__u64 head_since_ms;
	/* Its speed as learned from the first tokens it gave (work.h):
	 * TTFT = overhead + work / rate + decoding requests x decode. Written
	 * by the worker that saw the first token; until one is seen, by the
	 * control thread, the median of its pool's members that have (all 0:
	 * none has, the defaults apply). */
	__u32 fit_rate;        /* prefill tokens per second */
	__u32 fit_overhead_us; /* fixed part of a TTFT */
	__u32 fit_decode_us;   /* added per request decoding on it */
	/* Fleets: the prefill work the other gateways have queued on it, and
	 * its requests (the fleet thread writes them, as peer_in_flight). */
	__u64 peer_prefill_tokens;
	/* cache_aware: its KV cache in index blocks, as it reported it
	 * (vllm:cache_config_info); 0: unknown, --cache-capacity applies. The
	 * health-check thread writes it. */
	__u32 ca_capacity_blocks;
	__u32 peer_prefill_reqs;
	/* cache_aware in a fleet (user/router/work.h): the latest first token this
	 * gateway saw from it (workers), and the latest the other gateways saw
	 * (the fleet thread: their messages' ages taken off their arrival);
	 * CLOCK_MONOTONIC ns of this host, 0: none. */
	__u64 first_ns;
	__u64 peer_first_ns;
	/* When the scraped fields (waiting .. kv_query_tokens) were taken,
	 * CLOCK_MONOTONIC ms (0: never): flow control trusts an engine's
	 * report of requests waiting only while it is this fresh
	 * (user/router/route.c). */
	__u64 scraped_ms;
	/* The prefill work of a request sent to it, on average (tokens;
	 * workers, at dispatch, an exponential average over the last
	 * PG_WORK_AVG_N): with its speed, its service time, the room flow
	 * control gives it by default (user/router/work.h). */
	__u32 work_avg;
	/* Requests of its queue seen to leave it (first tokens, answers'
	 * heads; workers add), and their count when the scraped fields were
	 * taken (the health-check thread): the engine's report of requests
	 * waiting less those seen to leave since is what flow control trusts
	 * (user/router/work.h pg_work_waiting). */
	__u32 firsts;
	__u32 firsts_at_scrape;
	/* cache_aware: its cache as its answers showed it (user/router/
	 * capacity.h), in index blocks (0: nothing learned; the index takes it
	 * before ca_capacity_blocks) and in sequences (0: no bound). */
	__u32 ca_learned_blocks;
	__u32 ca_learned_seqs;
	/* Attempts this gateway sent it (workers add; their order is the
	 * order they joined its queue), and their count when the scraped
	 * fields were taken: with the engine's requests waiting, which of ours
	 * it has begun (user/router/work.h pg_work_begun). */
	__u32 takes;
	__u32 takes_at_scrape;
	/* Flow control: a request sent to it to learn its speed (its speed not
	 * measured) was cut at its deadline; no other is sent there to learn
	 * it before this CLOCK_MONOTONIC ms (user/router/route.c explore). */
	__u64 explore_after_ms;
	/* While its speed is not measured (no stream's first token): its
	 * answers that did not stream as a fit of their whole time against
	 * the queue each joined, a bound on its first tokens a deadline is
	 * judged on (user/router/route.c); 0: none yet. Written as fit_*. */
	__u32 bound_rate;        /* tokens per second */
	__u32 bound_overhead_us; /* fixed part */
};
_Static_assert(sizeof(struct pg_backend) == 232 + 8 * PG_DEC_MAX, "pg_backend layout");
_Static_assert(sizeof(struct pg_backend) % 8 == 0, "pg_backend alignment");

/*
 * One copy of the consistent-hash ring. Array map "pg_rings" with
 * PG_RING_COPIES entries per pool (pool p's at p * PG_RING_COPIES: its
 * max_entries is set at start-up from the pool count), BPF_F_MMAPABLE. slot[s] lists up to
 * PG_RING_CANDIDATES distinct backend ids (0 = none) in preference order for
 * key hashes whose top PG_RING_SLOT_BITS bits are s.
 *
 * seq is a seqlock: odd while the control thread writes the copy. Readers
 * retry if seq was odd or changed across their read, so no lookup uses a
 * half-built ring.
 */
struct pg_ring {
	__u64 seq;
	__u64 generation; /* membership generation this copy was built from */
	__u32 nbackends;  /* members placed in this copy */
	__u32 pad;
	__u16 slot[PG_RING_SLOTS][PG_RING_CANDIDATES];
};
_Static_assert(sizeof(struct pg_ring) == 24 + 2 * PG_RING_SLOTS * PG_RING_CANDIDATES,
               "pg_ring layout");

/*
 * Routing state. Array map "pg_state" with one entry per pool (max_entries
 * set at start-up), BPF_F_MMAPABLE. Entry p holds pool p's ring generation
 * (its low bit selects the live copy among pool p's in pg_rings), its
 * RoutingConfig and member count; the gateway-wide fields (ca_capacity_blocks,
 * ca_slots) are only meaningful in entry 0.
 *
 * Whether a gateway still writes these maps (they stay pinned after it
 * exits), in entry 0: pid is the gateway's process id while it runs, 0 once
 * it exited cleanly; its control thread sets heartbeat_ms (CLOCK_MONOTONIC
 * ms) every 100 ms, so a gateway killed with SIGKILL leaves a heartbeat
 * that stops.
 */
struct pg_state {
	__u64 ring_generation;       /* live ring: pg_rings[ring_generation & 1] */
	__u32 strategy;              /* enum pg_strategy */
	__u32 prefix_length;         /* PrefixLength */
	__u32 concurrency_threshold; /* ConcurrencyThreshold */
	__u32 nbackends;             /* active members */
	__u64 remapped_ppm;          /* keys moved by the last change, per million */
	__u32 ca_capacity_blocks;    /* cache_aware: each instance's capacity, in blocks */
	__u32 flow_queue_ms;         /* FlowControlConfig.InstanceQueueMs; 0: no flow control */
	__u32 ca_slots;              /* entries of pg_cache_index (a power of two) */
	__u32 pid;                   /* the gateway's pid; 0: it exited */
	__u64 heartbeat_ms;          /* CLOCK_MONOTONIC ms of its last control tick */
	__u32 ca_choices;            /* cache_aware: CacheAwareConfig.NewConversationChoices */
	__u32 flow_deadline_ms; /* FlowControlConfig.DeadlineMs: the default deadline; 0: none */
	__u64 ca_requests;      /* cache_aware: requests recorded in the index (its clock) */
};
_Static_assert(sizeof(struct pg_state) == 72, "pg_state layout");

/*
 * Flow control's queue (doc/routing.md "Flow control"), as counters. Array map
 * "pg_flow", one entry per pool like pg_state, BPF_F_MMAPABLE; the
 * workers update it with atomics as requests wait and leave, so bpftool
 * shows the queue as it stands. Nothing in BPF reads it.
 */
#define PG_FLOW_CLASSES 3 /* critical, standard, sheddable */
struct pg_flow_stats {
	__u32 queued;                        /* requests waiting now */
	__u32 queued_class[PG_FLOW_CLASSES]; /* ... by class */
	__u64 queued_bytes;                  /* the memory they hold */
	__u64 enqueued;                      /* requests that waited, in all */
	__u64 dispatched;                    /* ... and went on to an instance */
	__u64 wait_ms_total;                 /* the waits of those, summed */
	__u64 expired;                       /* 429: their deadline passed while waiting */
	__u64 late;                          /* 429: first token predicted past the deadline */
	__u64 shed;                          /* 429: sheddable, made room for a newer request */
	__u64 refused;                       /* 429: the queue's bounds were reached */
	__u64 gone;                          /* their client left while they waited */
	__u64 bypassed;                      /* could not wait (body not held whole): sent on */
};
_Static_assert(sizeof(struct pg_flow_stats) == 96, "pg_flow_stats layout");

/* A heartbeat older than this: no gateway writes the maps any more. */
#define PG_HEARTBEAT_STALE_MS 5000

enum pg_state_liveness {
	PG_STATE_LIVE = 0,   /* a gateway is running on these maps */
	PG_STATE_EXITED = 1, /* its gateway exited cleanly (pid 0) */
	PG_STATE_STALE = 2,  /* its heartbeat stopped, or its process is gone */
};

/* Liveness of maps whose state is s, at CLOCK_MONOTONIC ms now;
 * pid_alive: the process s->pid exists (the caller's kill(pid, 0)). */
static inline enum pg_state_liveness pg_state_liveness(const struct pg_state *s, __u64 now,
                                                       int pid_alive)
{
	if (!s->pid)
		return PG_STATE_EXITED;
	if (!pid_alive || now > s->heartbeat_ms + PG_HEARTBEAT_STALE_MS)
		return PG_STATE_STALE;
	return PG_STATE_LIVE;
}

/* pg_pool.flags */
#define PG_POOL_ACTIVE    0x1 /* declared */
#define PG_POOL_CATCH_ALL 0x2 /* takes requests no other pool claims (the default pool) */
#define PG_POOL_DECODE    0x4 /* the decode set of pool .decode (prefill/decode) */

/*
 * One model pool, as configured. Array map "pg_pools" with PG_MAX_POOLS
 * entries, written once at start-up: for bpftool and prefixgatectl (the
 * request path uses the pool table in user memory, user/lib/pool.h).
 */
struct pg_pool {
	char name[PG_POOL_NAME_MAX];
	__u32 flags;      /* PG_POOL_* */
	__u32 nmodels;    /* model names it serves */
	char models[248]; /* the first of them, comma-separated, NUL-terminated */
	__u32 npaths;     /* path prefixes it serves */
	__u32 pool_pad;
	char paths[128]; /* the first of them, comma-separated, NUL-terminated */
	/* Prefill/decode disaggregation: the protocol (0 none, 1 vllm, 2
	 * sglang) and the index of its decode set's pool (its own members are
	 * the prefill instances); a decode set has PG_POOL_DECODE and its
	 * prefill pool's index in decode. */
	__u32 pd;
	__u32 decode;
};
_Static_assert(sizeof(struct pg_pool) == 432, "pg_pool layout");

#endif /* PREFIXGATE_H */
