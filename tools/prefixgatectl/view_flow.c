// SPDX-License-Identifier: MIT
/*
 * Flow control's queue as prefixgatectl shows it (doc/routing.md "Flow control"):
 * the queue line of status and top, and its JSON object. From the
 * snapshot, so the same whichever source filled it.
 */
#include <stdio.h>
#include "ctl.h"
#include "router/strategy.h"

void ctl_view_queue_line(FILE *out, const struct ctl_snapshot *s)
{
	const struct pg_flow_stats *f = &s->flow;

	if (!s->have_flow || (!s->flow_queue_ms && !f->enqueued))
		return; /* flow control never on */
	fprintf(out,
	        "queue      %u waiting (critical %u, standard %u, sheddable %u), %.1f KiB held; "
	        "%llu sent on after a wait, 429s: %llu expired, %llu late, %llu shed, %llu "
	        "refused; %llu clients gone\n",
	        f->queued, f->queued_class[0], f->queued_class[1], f->queued_class[2],
	        (double)f->queued_bytes / 1024, (unsigned long long)f->dispatched,
	        (unsigned long long)f->expired, (unsigned long long)f->late,
	        (unsigned long long)f->shed, (unsigned long long)f->refused,
	        (unsigned long long)f->gone);
}

void ctl_json_queue(FILE *out, const struct ctl_snapshot *s)
{
	const struct pg_flow_stats *f = &s->flow;
	char q[16];

	fputs(",\"queue\":", out);
	if (!s->have_flow) {
		fputs("null", out);
		return;
	}
	fprintf(out,
	        "{\"InstanceQueueMs\":%s,\"queued\":%u,\"queued_class\":{\"critical\":%u,"
	        "\"standard\":%u,\"sheddable\":%u},\"queued_bytes\":%llu,\"enqueued\":%llu,"
	        "\"dispatched\":%llu,\"expired\":%llu,\"late\":%llu,\"shed\":%llu,"
	        "\"refused\":%llu,\"gone\":%llu}",
	        pg_flow_queue_json(s->flow_queue_ms, q, sizeof(q)), f->queued, f->queued_class[0],
	        f->queued_class[1], f->queued_class[2], (unsigned long long)f->queued_bytes,
	        (unsigned long long)f->enqueued, (unsigned long long)f->dispatched,
	        (unsigned long long)f->expired, (unsigned long long)f->late,
	        (unsigned long long)f->shed, (unsigned long long)f->refused,
	        (unsigned long long)f->gone);
}
