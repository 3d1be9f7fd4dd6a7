/* SPDX-License-Identifier: MIT */
/* Value of one hex digit (either case), or -1: shared by the HTTP parser
 * (chunk sizes, %XX) and the JSON parser (\uXXXX). One definition, in
 * include/pg_frame.h, which the BPF programs use too. */
#ifndef PG_HEXVAL_H
#define PG_HEXVAL_H

#include "pg_frame.h"

static inline int hexval(unsigned char c)
{
	return pg_frame_hex(c);
}

#endif /* PG_HEXVAL_H */
