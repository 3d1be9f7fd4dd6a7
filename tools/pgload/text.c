// SPDX-License-Identifier: MIT
/*
 * The text of every generated prompt (pg_wl_text, declared in workload.h):
 * words drawn from a fixed vocabulary by a stream seeded from the caller's
 * key, so the same key always gives the same bytes.
 */
#include <stdbool.h>
#include <string.h>

#include "rng.h"
#include "workload.h"

#define VOCAB_SIZE 1024

static char vocab[VOCAB_SIZE][9];
static uint8_t vocab_len[VOCAB_SIZE];
static bool vocab_built;

/* Pronounceable words of 2-8 letters from a fixed seed: text that looks
 * like text in a packet capture, and is the same for every run. */
static void build_vocab(void)
{
	static const char cons[] = "bcdfghjklmnprstvwz", vow[] = "aeiou";
	struct pg_rng r;

	pg_rng_seed(&r, 0x70676c6f6164ULL);
	for (int i = 0; i < VOCAB_SIZE; i++) {
		int len = (int)pg_rng_range(&r, 2, 8);

		for (int j = 0; j < len; j++)
			vocab[i][j] = j % 2 ? vow[pg_rng_next(&r) % 5] : cons[pg_rng_next(&r) % 18];
		vocab_len[i] = (uint8_t)len;
	}
	vocab_built = true;
}

void pg_wl_text(char *out, size_t n, uint64_t key)
{
	struct pg_rng r;
	uint64_t bits = 0;
	int nbits = 0;
	size_t pos = 0;

	if (!vocab_built)
		build_vocab();
	pg_rng_seed(&r, key);
	while (pos < n) {
		unsigned w, len;
		size_t room = n - pos;

		if (nbits < 10) {
			bits = pg_rng_next(&r);
			nbits = 64;
		}
		w = bits & (VOCAB_SIZE - 1);
		bits >>= 10;
		nbits -= 10;
		len = vocab_len[w];
		if (pos == 0) {
			/* First word: no separator. */
		} else if (room >= 2) {
			out[pos++] = ' ';
			room--;
		} else {
			/* One byte left: lengthen the last word instead. */
			out[pos++] = vocab[w][0];
			break;
		}
		if (len > room)
			len = (unsigned)room;
		memcpy(out + pos, vocab[w], len);
		pos += len;
	}
}
