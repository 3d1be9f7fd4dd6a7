// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * prefixgate's shared routing state: pinned by name under --bpf-pin-path so
 * that `bpftool map dump pinned /sys/fs/bpf/prefixgate/pg_backends` shows it,
 * and mmapped by every worker thread, which update counts with atomics.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "prefixgate.h"

/* Backend table: address, health, exact in-flight count, per-decision counts. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, PG_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct pg_backend);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pg_backends SEC(".maps");

/* Consistent-hash rings, two copies per pool swapped by generation;
 * max_entries is set at load from the pool count. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, PG_RING_COPIES);
	__type(key, __u32);
	__type(value, struct pg_ring);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pg_rings SEC(".maps");

/* Live ring generation and routing configuration, one entry per pool
 * (max_entries set at load). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pg_state);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pg_state SEC(".maps");

/* Flow control's queue counters, one entry per pool (max_entries set at load). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pg_flow_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pg_flow SEC(".maps");

/* The model pools: names, models, flags. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, PG_MAX_POOLS);
	__type(key, __u32);
	__type(value, struct pg_pool);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pg_pools SEC(".maps");

/* cache_aware's block index; max_entries is set at load from
 * --cache-capacity (the value here only satisfies the verifier's loader). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pg_ca_slot);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pg_cache_index SEC(".maps");

char LICENSE[] SEC("license") = "Dual MIT/GPL";
