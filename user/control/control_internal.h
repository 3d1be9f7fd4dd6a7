/* SPDX-License-Identifier: MIT */
/*
 * Shared by the control thread (control.c) and the reload of a
 * configuration file (control_reload.c). Not part of the public API.
 */
#ifndef PG_CONTROL_INTERNAL_H
#define PG_CONTROL_INTERNAL_H

#include "gateway.h"

/* A reload with a configuration file (control_reload.c): read it and the
 * command line again; refused whole on any error (logged FILE:LINE), else
 * what changes live applied and logged, what needs a restart told. 0, or
 * -1 (refused). */
int pg_control_reload_conf(struct pg_gateway *gw);

#endif /* PG_CONTROL_INTERNAL_H */
