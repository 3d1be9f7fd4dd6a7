// SPDX-License-Identifier: MIT
/*
 * Which slot (sequence of the one context) a request runs on, and the
 * requests waiting for one. Pure: no I/O, no clock (the caller passes a
 * counter for "recently used").
 *
 * The choice is llama.cpp's server's (get_available_slot): among the idle
 * slots, the one whose cached tokens share the longest common prefix with
 * the prompt, if that prefix is more than `similarity` of the prompt;
 * otherwise the idle slot used least recently. A slot keeps the tokens of
 * the last request it ran (its prompt and the reply, less the last token,
 * which is never evaluated): the next request on it computes only what
 * follows their common prefix. There is no cache shared between slots and
 * none kept in host memory: a prompt evicted from its slot is gone.
 * Requests that find no idle slot wait, first come first served.
 */

/** Number of leading elements a and b share. */
export function commonPrefix(a, b) {
	const n = Math.min(a.length, b.length);
	let i = 0;
	while (i < n && a[i] === b[i])
		i++;
	return i;
}

export class Slots {
	/**
	 * @param {number} n slots
	 * @param {number} similarity the share of a prompt a slot's common prefix
	 *   must pass to be chosen for it (llama.cpp: --slot-prompt-similarity)
	 */
	constructor(n, similarity) {
		this.similarity = similarity;
		this.slots = Array.from({length: n}, (_, id) => ({id, busy: false, tokens: [], used: 0}));
		this.waiting = [];
		this.tick = 0;
	}

	get running() {
		return this.slots.filter((s) => s.busy).length;
	}

	/** The idle slot for prompt tokens, or null if every slot is busy. */
	choose(tokens) {
		let best = null, bestSim = 0, lru = null;
		for (const s of this.slots) {
			if (s.busy)
				continue;
			if (s.tokens.length && tokens.length) {
				const sim = commonPrefix(s.tokens, tokens) / tokens.length;
				if (sim > bestSim && sim > this.similarity) {
					best = s;
					bestSim = sim;
				}
			}
			if (!lru || s.used < lru.used)
				lru = s;
		}
		return best || lru;
	}

	/** A slot for tokens: at once if one is idle, else when one is freed.
	 * The promise's owner calls release(slot, tokens) when done; cancel()
	 * takes a request that still waits out of the queue, its promise then
	 * resolving to null. */
	acquire(tokens) {
		const s = this.waiting.length ? null : this.choose(tokens);
		if (s) {
			s.busy = true;
			return {promise: Promise.resolve(s), cancel: () => {}};
		}
		let entry;
		const promise = new Promise((resolve) => {
			entry = {tokens, resolve};
			this.waiting.push(entry);
		});
		return {
			promise,
			cancel: () => {
				const i = this.waiting.indexOf(entry);
				if (i >= 0) {
					this.waiting.splice(i, 1);
					entry.resolve(null);
				}
			},
		};
	}

	/** The slot is idle again, holding `tokens` (what its sequence has
	 * evaluated); the first waiting request takes an idle slot. */
	release(slot, tokens) {
		slot.busy = false;
		slot.tokens = tokens;
		slot.used = ++this.tick;
		if (this.waiting.length) {
			const w = this.waiting.shift();
			const s = this.choose(w.tokens);
			s.busy = true;
			w.resolve(s);
		}
	}
}
