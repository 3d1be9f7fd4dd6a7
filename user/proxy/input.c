// SPDX-License-Identifier: MIT
/* A client connection's unconsumed input (input.h). */
#include <stdlib.h>
#include <string.h>
#include "lib/buf.h"
#include "lib/spare.h"
#include "proxy/conn.h"
#include "proxy/input.h"

void pg_in_consume(struct pg_client *c, size_t n)
{
	if (!n)
		return; /* c->in may be NULL: no arithmetic on it */
	c->in += n;
	c->in_len -= n;
	if (!c->in_len)
		c->in = c->in_buf; /* empty: the next bytes start at the front */
}

void pg_in_room(struct pg_spares *sp, struct pg_client *c, size_t need, size_t reserve)
{
	size_t off = c->in_buf ? (size_t)(c->in - c->in_buf) : 0;
	size_t want = reserve > need ? reserve : need;

	if (want > c->in_cap) {
		size_t ncap = 0;
		char *nb = pg_spare_take(sp, want, &ncap);

		if (!nb && !pg_grow(&nb, &ncap, want))
			abort(); /* out of memory: nothing sane is left to do */
		if (c->in_len)
			memcpy(nb, c->in, c->in_len);
		pg_spare_give(sp, c->in_buf, c->in_cap);
		c->in_buf = c->in = nb;
		c->in_cap = ncap;
	} else if (off + want > c->in_cap) {
		memmove(c->in_buf, c->in, c->in_len);
		c->in = c->in_buf;
	}
}

void pg_in_append(struct pg_spares *sp, struct pg_client *c, const char *data, size_t n,
                  size_t reserve)
{
	pg_in_room(sp, c, c->in_len + n, reserve);
	memcpy(c->in + c->in_len, data, n);
	c->in_len += n;
}
