// SPDX-License-Identifier: MIT
/*
 * One engine: a model, one context of N sequences (the slots), and a
 * request's run on its slot.
 *
 * A run reuses what its slot holds: adaptStateToTokens() erases the
 * sequence's KV past the first token where it and the prompt differ, and
 * only the rest of the prompt is evaluated (evaluating the whole prompt
 * afresh would reuse nothing). A prompt the slot holds whole has its last
 * token evaluated again, for the logits of the first output token, as
 * vLLM and llama.cpp do: cached tokens are at most the prompt less one.
 * Sequences running at once are evaluated in the same batches (the
 * context batches them); all of it on the context's threads (--threads,
 * 1 by default here: one CPU per engine).
 */
import {commonPrefix, Slots} from "./slots.mjs";
import {ApiError, tooLong} from "./openai.mjs";

export class Engine {
	/**
	 * @param model a LlamaModel; context: a LlamaContext of opts.parallel sequences
	 * @param render (messages) => prompt text: the chat template applied
	 */
	constructor(model, context, render, opts) {
		this.model = model;
		this.render = render;
		this.slots = new Slots(opts.parallel, opts.similarity);
		this.seqs = this.slots.slots.map(() => context.getSequence());
		this.slotCtx = this.seqs[0].contextSize;
		this.vocab = opts.vocab;
		this.stats = {promptTokens: 0, cachedTokens: 0, generationTokens: 0, requests: 0,
		              ok: 0, cancelled: 0, failed: 0};
	}

	/** The prompt's tokens, checked against the context. */
	tokens(r) {
		let t;
		if (r.chat)
			t = this.model.tokenize(this.render(r.messages), true);
		else if (r.prompt !== undefined)
			t = this.model.tokenize(r.prompt, true);
		else {
			const badId = r.promptTokens.find((x) => x < 0 || x >= this.vocab);
			if (badId !== undefined)
				throw new ApiError(400, `prompt: token id ${badId} is outside the vocabulary ` +
				                   `(0-${this.vocab - 1})`, "prompt");
			t = r.promptTokens;
		}
		if (!t.length)
			throw new ApiError(400, "the prompt has no tokens", r.chat ? "messages" : "prompt");
		if (t.length + r.maxTokens > this.slotCtx)
			throw tooLong(this.slotCtx, t.length, r.maxTokens);
		return t;
	}

	/**
	 * Run request r (tokens: its prompt) on a slot, waiting for one.
	 * emit(text, first): each piece of output text as it is decided;
	 * ctl.cancelled: set once the client went away, when ctl.onCancel()
	 * is called too. Returns what it did: {text, finish, completion,
	 * cached, promptN, promptMs, predictedMs}, or null if cancelled while
	 * waiting.
	 */
	async run(r, tokens, emit, ctl) {
		this.stats.requests++;
		const wait = this.slots.acquire(tokens);
		ctl.onCancel = wait.cancel;
		const slot = await wait.promise;
		ctl.onCancel = null;
		if (!slot || ctl.cancelled) {
			if (slot)
				this.slots.release(slot, this.seqs[slot.id].contextTokens);
			this.stats.cancelled++;
			return null;
		}
		const seq = this.seqs[slot.id];
		try {
			const res = await this.generate(seq, r, tokens, emit, () => ctl.cancelled);
			this.stats[res.finish === "cancelled" ? "cancelled" : "ok"]++;
			return res;
		} catch (e) {
			this.stats.failed++;
			// what the sequence holds is unknown: keep nothing of it
			await seq.clearHistory().catch(() => {});
			throw e;
		} finally {
			this.slots.release(slot, seq.contextTokens);
		}
	}

	async generate(seq, r, tokens, emit, cancelled) {
		const t0 = performance.now();
		await seq.adaptStateToTokens(tokens, false);
		let cached = Math.min(seq.nextTokenIndex, commonPrefix(seq.contextTokens, tokens));
		if (cached >= tokens.length) {
			cached = tokens.length - 1;
			await seq.eraseContextTokenRanges([{start: cached, end: seq.nextTokenIndex}]);
		}
		this.stats.promptTokens += tokens.length;
		this.stats.cachedTokens += cached;
		const s = r.sampling;
		// EOG tokens come back too: whether they end the reply is the
		// request's (ignore_eos, min_tokens)
		const opts = {temperature: s.temperature, topP: s.topP, topK: s.topK > 0 ? s.topK : 0,
		              yieldEogToken: true};
		if (s.seed !== undefined)
			opts.seed = s.seed;
		const out = [];
		const stopMax = r.stop.reduce((m, x) => Math.max(m, x.length), 0);
		let text = "", sent = 0, finish = "length", t1 = 0;
		// what of the decoded text may go out: not a partial UTF-8
		// character at its end, nor what could start a stop string
		const flush = (all) => {
			let upto = text.length;
			if (!all) {
				if (text.endsWith("\uFFFD"))
					upto = text.length - 1;
				upto = Math.max(sent, upto - Math.max(0, stopMax - 1));
			}
			if (upto > sent) {
				emit(text.slice(sent, upto), sent === 0);
				sent = upto;
			}
		};
		for await (const tok of seq.evaluate(tokens.slice(cached), opts)) {
			if (!t1)
				t1 = performance.now();
			if (cancelled()) {
				finish = "cancelled";
				break;
			}
			if (!r.ignoreEos && out.length >= r.minTokens && this.model.isEogToken(tok)) {
				finish = "stop";
				break;
			}
			out.push(tok);
			text = this.model.detokenize(out);
			if (stopMax) {
				const from = Math.max(0, sent - stopMax);
				const hits = r.stop.map((x) => text.indexOf(x, from)).filter((i) => i >= 0);
				if (hits.length) {
					text = text.slice(0, Math.min(...hits));
					finish = "stop";
					break;
				}
			}
			if (out.length >= r.maxTokens)
				break;
			flush(false);
		}
		const t2 = performance.now();
		if (!t1)
			t1 = t2;
		this.stats.generationTokens += out.length;
		if (finish !== "cancelled")
			flush(true);
		if (sent === 0 && finish !== "cancelled")
			emit("", true); // an empty reply still has a first event
		return {text, finish, completion: out.length, cached, promptN: tokens.length - cached,
		        promptMs: t1 - t0, predictedMs: t2 - t1};
	}
}
