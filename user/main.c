// SPDX-License-Identifier: MIT
/*
 * prefixgate: prefix-aware HTTP router for LLM inference fleets.
 * Startup order: configuration -> what it needs of the system (preflight.h,
 * also all --check does beyond the configuration) -> shared routing state
 * (BPF maps or shared memory) -> membership and ring -> workers -> control
 * thread; then wait for SIGINT/SIGTERM and undo it all in reverse. With
 * --user, privileges are dropped once everything privileged is done
 * (privilege.h); at the first SIGINT/SIGTERM the gateway drains
 * (lifecycle.h) before stopping.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sys/accesslog.h"
#include "router/index.h"
#include "control/control.h"
#include "members/members.h"
#include "datapath/datapath.h"
#include "fleet/fleet.h"
#include "members/health.h"
#include "admin/metrics.h"
#include "lib/conf.h"
#include "state/flowctl.h"
#include "state/quotas.h"
#include "fleet/etcd.h"
#include "router/load.h"
#include "router/capacity.h"
#include "state/pools.h"
#include "state/routestats.h"
#include "sys/journal.h"
#include "sys/lifecycle.h"
#include "sys/log.h"
#include "sys/otel.h"
#include "sys/preflight.h"
#include "sys/privilege.h"
#include "tls/tls.h"
#include "proxy/worker.h"

static int open_state(struct pg_gateway *gw, const struct pg_config *cfg)
{
	uint32_t slots = pg_ca_slots_for(cfg->cache_capacity, PG_CA_SLOTS_MIN);
	unsigned npools = pg_pools_count(cfg);
	char err[512];
	int rc;

	if (cfg->no_bpf) {
		rc = pg_maps_open_pools(&gw->maps, false, "", slots, npools, err, sizeof(err));
		if (!rc)
			pg_info(
			    "routing state in shared memory (--no-bpf): not visible to bpftool");
	} else {
		rc = pg_maps_open_pools(&gw->maps, true, cfg->pin_path, slots, npools, err,
		                        sizeof(err));
		if (rc == -EPERM || rc == -EACCES) {
			pg_warn("BPF maps unavailable: %s; falling back to shared memory", err);
			rc = pg_maps_open_pools(&gw->maps, false, "", slots, npools, err,
			                        sizeof(err));
		} else if (!rc) {
			pg_info("routing state in BPF maps pinned at %s "
			        "(bpftool map dump pinned %s/pg_backends)",
			        cfg->pin_path, cfg->pin_path);
		}
	}
	if (rc) {
		pg_error("%s", err);
		return rc;
	}
	gw->maps.state->ca_capacity_blocks = pg_ca_capacity_blocks(cfg->cache_capacity);
	if (cfg->route.strategy == PG_STRATEGY_CACHE_AWARE)
		pg_info("cache_aware block index: %u slots (%zu KiB), %u blocks of %d bytes per "
		        "instance",
		        slots, (size_t)slots * sizeof(struct pg_ca_slot) / 1024,
		        gw->maps.state->ca_capacity_blocks, PG_CA_BLOCK);
	return 0;
}

/* --user: keep CAP_BPF only if bpf(2) calls happen at run time (the splice
 * data paths update their maps per connection) and this kernel refuses them
 * to an unprivileged user; then become the user. */
static int drop_privileges(struct pg_gateway *gw, const struct pg_priv *priv)
{
	uint64_t keep = 0;
	char err[512];

	if (gw->maps.bpf && pg_datapath_mode(gw) != PG_DP_COPY &&
	    pg_priv_bpf_ops_need_cap(priv, pg_maps_state_fd(&gw->maps)))
		keep |= 1ull << CAP_BPF;
	if (pg_priv_drop(priv, keep, err, sizeof(err))) {
		pg_error("dropping privileges failed: %s", err);
		return -1;
	}
	return 0;
}

/* A gateway holds two sockets per request in flight plus idle keep-alive
 * connections: the default soft limit of 1024 descriptors is far too low. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
			pg_warn("raising the open-files limit: %s", strerror(errno));
	}
}

int main(int argc, char **argv)
{
	struct pg_gateway gw = {.stop_fd = -1};
	struct pg_config cfg;
	struct pg_priv priv = {0};
	struct pg_conf_errs errs = {0};
	char err[512], addr[PG_ADDR_STRLEN];
	unsigned started = 0;
	sigset_t sigs;
	int rc, sig, status = 1;

	rc = pg_config_parse_all(&cfg, argc, argv, stdout, &errs);
	/* what it needs of the system, before anything starts (preflight.h):
	 * told as the configuration's own errors */
	if (rc == 0 && pg_preflight(&cfg, cfg.check, &errs)) {
		const bool check = cfg.check;

		pg_config_free(&cfg);
		cfg.check = check;
		rc = 2;
	}
	if (rc == 1 || rc == 2) {
		pg_config_errs_print(stderr, &errs, cfg.conf_path);
		if (rc == 2 && cfg.check)
			fprintf(stderr,
			        "prefixgate: %s: the configuration is not valid (%zu error%s)\n",
			        cfg.conf_path ? cfg.conf_path : "the command line", errs.n,
			        errs.n == 1 ? "" : "s");
		pg_conf_errs_free(&errs);
		/* --check: 1, as a test fails; else 2, a configuration error */
		if (rc == 1 || cfg.check)
			return rc == 1 ? 0 : 1;
		status = 2;
		goto out_status;
	}
	pg_log_level = cfg.log_level;
	if (cfg.check) {
		printf("prefixgate: %s: the configuration is valid\n",
		       cfg.conf_path ? cfg.conf_path : "the command line");
		pg_config_free(&cfg);
		return 0;
	}
	if (cfg.conf_path)
		pg_info("configuration file %s", cfg.conf_path);
	/* Before any thread exists: what it sets is inherited by all. */
	if (cfg.user && pg_priv_prepare(&priv, cfg.user, err, sizeof(err))) {
		fprintf(stderr, "prefixgate: %s\n", err);
		status = 2;
		goto out_cfg;
	}
	/* Signals go to sigwait() here and to the control thread's signalfd;
	 * block them before any thread exists so every thread inherits that. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit();

	gw.cfg = &cfg;
	gw.nworkers = cfg.workers ? cfg.workers : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	if (!gw.nworkers)
		gw.nworkers = 1;
	if (open_state(&gw, &cfg))
		goto out_cfg;
	/* wakes the threads at stop (pg_gateway_stop); should it fail, they
	 * notice stop at their next 100 ms turn */
	gw.stop_fd = eventfd(0, EFD_CLOEXEC);
	/* data path (datapath.c): an explicit kernel path that cannot load exits 2 */
	if (pg_datapath_init(&gw, cfg.splice_budget, err, sizeof(err))) {
		fprintf(stderr, "prefixgate: %s\n", err);
		status = 2;
		goto out_maps;
	}
	/* before the members: an https:// one's name is kept for its checks */
	if (pg_tls_init(&gw, err, sizeof(err))) {
		fprintf(stderr, "prefixgate: %s\n", err);
		status = 2;
		goto out_maps;
	}
	/* before the members: the ring's are its first lines */
	if (cfg.route_journal &&
	    !(gw.journal = pg_journal_open(cfg.route_journal, gw.nworkers, err, sizeof(err)))) {
		fprintf(stderr, "prefixgate: %s\n", err);
		status = 2;
		goto out_maps;
	}
	if (pg_control_init(&gw, err, sizeof(err))) {
		pg_error("%s", err);
		goto out_maps;
	}
	gw.stats = aligned_alloc(64, sizeof(*gw.stats) * gw.nworkers);
	gw.workers = calloc(gw.nworkers, sizeof(*gw.workers));
	gw.rstats = pg_rstats_create(gw.nworkers);
	gw.mwin = pg_metrics_window_create();
	gw.router.speeds = pg_speeds_new();
	gw.router.caps = pg_capacities_new();
	if (!gw.stats || !gw.workers || !gw.rstats || !gw.mwin || !gw.router.speeds ||
	    !gw.router.caps) {
		pg_error("out of memory");
		goto out_workers;
	}
	/* always: a routing config may turn flow control on at any time */
	gw.flow = pg_flowctl_new(&cfg, gw.nworkers, err, sizeof(err));
	if (!gw.flow) {
		pg_error("flow control: %s", err);
		goto out_workers;
	}
	gw.quotas = pg_quotas_new(&cfg.flow, gw.flow);
	if (!gw.quotas) {
		pg_error("quotas: out of memory");
		goto out_workers;
	}
	pg_etcd_quotas(&gw); /* (the first view was applied before they were made) */
	memset(gw.stats, 0, sizeof(*gw.stats) * gw.nworkers);
	if (pg_fleet_init(&gw, err, sizeof(err))) {
		pg_error("%s", err);
		goto out_workers;
	}
	rc = pg_alog_start(&gw, cfg.access_log, err, sizeof(err));
	if (rc) {
		pg_error("%s", err);
		if (rc == PG_ALOG_EFILE)
			status = 2; /* a configuration error, as for a bad flag */
		goto out_workers;
	}
	if (pg_otel_start(&gw, err, sizeof(err))) {
		pg_error("%s", err);
		goto out_workers;
	}
	for (; started < gw.nworkers; started++) {
		if (pg_worker_start(&gw, started, &gw.workers[started], err, sizeof(err))) {
			pg_error("%s", err);
			goto out_workers;
		}
	}
	if (pg_control_start(&gw, err, sizeof(err))) {
		pg_error("%s", err);
		goto out_workers;
	}
	if (pg_health_start(&gw, err, sizeof(err))) {
		pg_error("%s", err);
		pg_control_stop(&gw);
		goto out_workers;
	}
	if (pg_fleet_start(&gw, err, sizeof(err))) {
		pg_error("%s", err);
		pg_health_stop(&gw);
		pg_control_stop(&gw);
		goto out_workers;
	}
	if (cfg.user && drop_privileges(&gw, &priv)) {
		pg_fleet_stop(&gw);
		pg_health_stop(&gw);
		pg_control_stop(&gw);
		goto out_workers;
	}
	pg_info("listening on %s with %u worker%s, strategy %s, PrefixLength %u, "
	        "ConcurrencyThreshold %u, data path %s",
	        pg_addr_format(&cfg.listen, addr), gw.nworkers, gw.nworkers == 1 ? "" : "s",
	        pg_strategy_flag(gw.maps.state->strategy), gw.maps.state->prefix_length,
	        gw.maps.state->concurrency_threshold, pg_datapath_name(&gw));
	for (unsigned p = 0; gw.pools && p < cfg.pools.n; p++)
		pg_info("pool %s: %zu model%s, %zu path%s, %s PrefixLength %u ConcurrencyThreshold "
		        "%u, %u backend%s%s",
		        cfg.pools.pool[p].name, cfg.pools.pool[p].nmodels,
		        cfg.pools.pool[p].nmodels == 1 ? "" : "s", cfg.pools.pool[p].npaths,
		        cfg.pools.pool[p].npaths == 1 ? "" : "s",
		        pg_strategy_flag(gw.maps.state[p].strategy), gw.maps.state[p].prefix_length,
		        gw.maps.state[p].concurrency_threshold, gw.maps.state[p].nbackends,
		        gw.maps.state[p].nbackends == 1 ? "" : "s",
		        !p && cfg.pools.catch_all ? ", takes every model no other pool serves"
		                                  : "");

	sigdelset(&sigs, SIGHUP);
	while (sigwait(&sigs, &sig) == 0 && sig != SIGINT && sig != SIGTERM)
		;
	pg_info("signal %d: stopping", sig);
	status = 0;
	pg_drain(&gw, cfg.shutdown_timeout_s, &sigs);
	pg_gateway_stop(&gw);
	pg_fleet_stop(&gw);
	pg_health_stop(&gw);
	pg_control_stop(&gw);
out_workers:
	pg_gateway_stop(&gw);
	while (started)
		pg_worker_join(gw.workers[--started]);
	pg_alog_stop(&gw);  /* after the workers: every record is in */
	pg_otel_stop(&gw);  /* the same */
	pg_fleet_stop(&gw); /* (again after a failed start: frees what init made) */
	pg_metrics_window_free(gw.mwin);
	pg_speeds_free(gw.router.speeds);
	pg_capacities_free(gw.router.caps);
	pg_quotas_free(gw.quotas);
	pg_flowctl_free(gw.flow);
	pg_rstats_free(gw.rstats);
	free(gw.workers);
	free(gw.stats);
out_maps:
	pg_journal_close(gw.journal); /* after the workers and the control thread */
	pg_tls_free(&gw);             /* after the workers: no connection holds it */
	pg_datapath_fini(&gw);        /* data path (datapath.c) */
	pg_pools_free(&gw);
	pg_maps_close(&gw.maps);
	if (gw.stop_fd != -1)
		close(gw.stop_fd);
out_cfg:
	pg_config_free(&cfg);
out_status:
	/* A supervisor does not restart after 2 (prefixgate.service:
	 * RestartPreventExitStatus=2): say so, beside the cause logged above. */
	if (status == 2)
		fprintf(stderr, "prefixgate: exit status 2, a configuration error (the line above "
		                "says which): fix it and start again; prefixgate.service does not "
		                "restart after it\n");
	return status;
}
