/* SPDX-License-Identifier: MIT */
/* Value of one hex digit (either case), or -1: shared by the HTTP parser
 * (chunk sizes, %XX) and the JSON parser (\uXXXX). */
#ifndef PG_HEXVAL_H
#define PG_HEXVAL_H

static inline int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

#endif /* PG_HEXVAL_H */
