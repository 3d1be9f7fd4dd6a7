// SPDX-License-Identifier: MIT
/*
 * pgload: load generator for prefixgate's demo and benchmarks. See
 * `pgload --help` and pgload.h for how the files divide the work.
 * Exit status: 0 when every request succeeded, 1 when some failed, 2 on a
 * usage or setup error.
 */
#include "pgload.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	struct pg_opts o;
	struct pg_run run = {0};
	int rc = pg_parse_args(argc, argv, &o), status;
	size_t failed = 0;

	if (rc)
		return rc > 0 ? 0 : 2;
	/* Sockets use MSG_NOSIGNAL; this also covers anything else. */
	signal(SIGPIPE, SIG_IGN);
	if (pg_engine_run(&o, &run) == -1)
		return 2;
	for (size_t i = 0; i < run.nrecs; i++)
		failed += run.recs[i].err != PG_OK;
	status = pg_report(&o, &run) == -1 ? 2 : failed || run.arrivals_unsent ? 1 : 0;
	for (unsigned b = 0; b < run.nbackends; b++)
		free(run.backends[b]);
	free(run.recs);
	pg_gaps_free(&run.itl);
	return status;
}
