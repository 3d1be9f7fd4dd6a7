/* SPDX-License-Identifier: MIT */
/* The value of one hex digit is pg_frame_hex() in include/pg_frame.h, the
 * one definition, which the BPF programs use too; call it directly. This
 * old name is kept only for json.c (\uXXXX) and goes when json.c calls
 * pg_frame_hex(). */
#ifndef PG_HEXVAL_H
#define PG_HEXVAL_H

#include "pg_frame.h"

static inline int hexval(unsigned char c)
{
	return pg_frame_hex(c);
}

#endif /* PG_HEXVAL_H */
