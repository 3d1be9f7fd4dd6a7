// SPDX-License-Identifier: MIT
/* OpenTelemetry traces' export in /metrics: what reached the collector and
 * what was lost on the way (sys/otel.h). Always shown: 0 while off. */
#include "admin/metrics.h"
#include "sys/otel.h"

void pg_metrics_otel_render(const struct pg_gateway *gw, struct pg_buf *o)
{
	struct pg_otel_counts c;
	const struct {
		const char *name, *help;
		const uint64_t *v;
	} m[] = {
	    {"prefixgate_otlp_spans_exported_total",
	     "Trace spans the OTLP collector took (--otlp-endpoint).", &c.exported},
	    {"prefixgate_otlp_spans_dropped_total",
	     "Trace spans lost: a worker's ring was full, or their export failed.", &c.dropped},
	    {"prefixgate_otlp_export_errors_total",
	     "Exports to the OTLP collector that failed: no connection, past --otlp-timeout, "
	     "or not answered 2xx.",
	     &c.errors},
	};

	pg_otel_counts(gw->otel, &c);
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		pg_metrics_family(o, m[i].name, "counter", m[i].help);
		pg_buf_printf(o, "%s %llu\n", m[i].name, (unsigned long long)*m[i].v);
	}
}
