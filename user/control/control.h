/* SPDX-License-Identifier: MIT */
/*
 * The control thread: it reads the configuration files at start-up and on
 * SIGHUP (or when --backends-file changes), then polls what the gateway is
 * told from outside and applies it on one thread: the admin listener
 * (admin/admin_listener.h, whose requests admin/admin.h answers), etcd's
 * views (fleet/etcd.h), the answers to DNS lookups of backend names, and
 * each PG_CONTROL_TICK_MS the membership's periodic work
 * (members/members.h) and the metrics' samples.
 *
 * --backends-file is re-read whenever it changes (inotify on its
 * directory: written in place, or replaced by rename).
 *
 * SIGHUP re-reads --backends-file (syncs membership) and --routing-config:
 * the routing config file is applied only if its content changed since it
 * was last read, so --strategy/--prefix-length/--concurrency-threshold
 * overrides and PUT /routing changes survive a SIGHUP that did not touch
 * the file; when the file does change, it replaces all three fields. With
 * a configuration file (-c), SIGHUP reads it again (control_reload.c).
 *
 * One gateway per process: the thread's state is process-wide.
 */
#ifndef PG_CONTROL_H
#define PG_CONTROL_H

#include <stddef.h>
#include <stdint.h>
#include "gateway.h"

/* Tick period of the control thread. */
#define PG_CONTROL_TICK_MS 100

/*
 * Before any worker starts: write gw->cfg->route into gw->maps.state, add
 * every gw->cfg->backends entry and every line of gw->cfg->backends_file,
 * build and publish the ring (zero backends is allowed: the gateway answers
 * 502 until some are added). 0, or -1 with err naming the cause (a file
 * error names FILE:LINE).
 */
int pg_control_init(struct pg_gateway *gw, char *err, size_t errlen);

/*
 * Open the admin listener on gw->cfg->admin and start the control thread.
 * The caller has blocked SIGHUP (and SIGINT/SIGTERM) in every thread; the
 * control thread reads SIGHUP through a signalfd. 0, or -1 with err set
 * (e.g. "--admin 127.0.0.1:9090: bind: Address already in use").
 */
int pg_control_start(struct pg_gateway *gw, char *err, size_t errlen);

/* Stop the control thread (it also stops by itself once gw->stop is set)
 * and close the listener and connections. Safe if it never started. */
void pg_control_stop(struct pg_gateway *gw);

/* Port the admin listener is bound to (useful with port 0), or 0. */
uint16_t pg_control_admin_port(void);

/* Re-read --backends-file and --routing-config as on SIGHUP, logging what
 * changed. 0, or -1 if a file could not be used (logged; that part of the
 * configuration is left unchanged). */
int pg_control_reload(struct pg_gateway *gw);

#endif /* PG_CONTROL_H */
