// SPDX-License-Identifier: MIT
/*
 * The header fields the gateway knows by name (http.h pg_http_field_kind):
 * the parser classifies each field as it reads it (http.c: framing, Host,
 * Expect, the key) and keeps a request field's kind, by which the
 * forwarder drops or rewrites it (forward.c: hop-by-hop and identity
 * fields); a response's fields, not kept, are classified again as they
 * are written. One comparison a field, not one per name known.
 */
#include "lib/http.h"
#include "lib/http_internal.h"

enum pg_http_field pg_http_field_kind(const char *s, size_t n)
{
	switch (n) {
	case 2:
		return EQ(s, n, "te") ? PG_HF_TE : PG_HF_OTHER;
	case 4:
		return EQ(s, n, "host") ? PG_HF_HOST : PG_HF_OTHER;
	case 6:
		return EQ(s, n, "expect") ? PG_HF_EXPECT : PG_HF_OTHER;
	case 7:
		return EQ(s, n, "upgrade")   ? PG_HF_UPGRADE
		       : EQ(s, n, "trailer") ? PG_HF_TRAILER
		                             : PG_HF_OTHER;
	case 10:
		return EQ(s, n, "connection")   ? PG_HF_CONNECTION
		       : EQ(s, n, "keep-alive") ? PG_HF_KEEP_ALIVE
		                                : PG_HF_OTHER;
	case 12:
		return EQ(s, n, "x-request-id") ? PG_HF_X_REQUEST_ID : PG_HF_OTHER;
	case 13:
		return EQ(s, n, "authorization") ? PG_HF_AUTHORIZATION : PG_HF_OTHER;
	case 14:
		return EQ_US(s, n, "content-length") ? PG_HF_CONTENT_LENGTH : PG_HF_OTHER;
	case 15:
		return EQ(s, n, "x-forwarded-for") ? PG_HF_X_FORWARDED_FOR : PG_HF_OTHER;
	case 16:
		return EQ(s, n, "proxy-connection")   ? PG_HF_PROXY_CONNECTION
		       : EQ(s, n, "x-prefixgate-key") ? PG_HF_X_PREFIXGATE_KEY
		       : EQ(s, n, "content-encoding") ? PG_HF_CONTENT_ENCODING
		                                      : PG_HF_OTHER;
	case 17:
		return EQ_US(s, n, "transfer-encoding") ? PG_HF_TRANSFER_ENCODING : PG_HF_OTHER;
	case 21:
		return EQ(s, n, "x-prefixgate-priority") ? PG_HF_X_PREFIXGATE_PRIORITY
		                                         : PG_HF_OTHER;
	case 24:
		return EQ(s, n, "x-prefixgate-deadline-ms") ? PG_HF_X_PREFIXGATE_DEADLINE_MS
		                                            : PG_HF_OTHER;
	default:
		return PG_HF_OTHER;
	}
}
