/* SPDX-License-Identifier: MIT */
/*
 * What start-up needs of the system, checked before anything starts, at
 * start-up and by --check alike (config.h struct pg_need: what a
 * configuration needs), so that a configuration --check passes does not
 * exit 2 at start for want of a directory, a user or a readable file:
 *  - --user NAME: such a user, not root, and the privilege to become it
 *    (CAP_SETUID and CAP_SETGID);
 *  - with --user, every file a reload reads again (-c FILE,
 *    --backends-file, --routing-config, --admin-token-file, a pool's
 *    routing-config=) readable by NAME, and --etcd-state-file's
 *    directory writable by NAME: a reload, or the state file, would fail
 *    after the drop;
 *  - --access-log: a file that can be opened for appending (it exists
 *    and is writable, or its directory takes it);
 *  - --etcd-password-file readable;
 *  - --check only: --listen and --admin bindable where that does not
 *    depend on the moment (a port below 1024 without
 *    CAP_NET_BIND_SERVICE, an address of no interface). A port in use is
 *    not told: during a reload the running gateway holds it.
 * Each error is added at its directive's line (a flag's: line 0), as the
 * configuration's own errors are.
 */
#ifndef PG_PREFLIGHT_H
#define PG_PREFLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include "config/config.h"
#include "lib/conf.h"

/* Check what cfg needs (binds too when check: --check); the errors found
 * added to errs. Their number. */
size_t pg_preflight(const struct pg_config *cfg, bool check, struct pg_conf_errs *errs);

#endif /* PG_PREFLIGHT_H */
