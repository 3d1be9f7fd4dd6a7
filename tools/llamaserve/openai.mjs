// SPDX-License-Identifier: MIT
/*
 * The OpenAI API as vLLM serves it, pure: a request body checked and read
 * into what the engine needs, the answers' shapes (whole, and as
 * server-sent events), and the errors. No I/O.
 *
 * Errors are vLLM's: {"error": {"message", "type", "param", "code"}}, 400
 * BadRequestError for a body that is not a valid request, 404
 * NotFoundError for a model not served; unknown paths and methods get
 * FastAPI's {"detail": ...}.
 */

export class ApiError extends Error {
	constructor(status, message, param = null) {
		super(message);
		this.status = status;
		this.param = param;
	}

	body() {
		const type = {400: "BadRequestError", 404: "NotFoundError", 413: "BadRequestError",
		              500: "InternalServerError", 503: "ServiceUnavailableError"}[this.status] ||
		             "BadRequestError";
		return {error: {message: this.message, type, param: this.param, code: this.status}};
	}
}

const bad = (message, param = null) => new ApiError(400, message, param);

function number(body, name, lo, hi, dflt, integer = false) {
	const v = body[name];
	if (v === undefined || v === null)
		return dflt;
	if (typeof v !== "number" || !Number.isFinite(v) || (integer && !Number.isInteger(v)))
		throw bad(`${name}: expected ${integer ? "an integer" : "a number"}`, name);
	if (v < lo || v > hi)
		throw bad(`${name}: must be between ${lo} and ${hi}, got ${v}`, name);
	return v;
}

function flag(body, name) {
	const v = body[name];
	if (v === undefined || v === null)
		return false;
	if (typeof v !== "boolean")
		throw bad(`${name}: expected a boolean`, name);
	return v;
}

/** A message's content as text: a string, or the text of its parts. */
function contentText(content, i) {
	if (typeof content === "string")
		return content;
	if (content === null || content === undefined)
		return "";
	if (!Array.isArray(content))
		throw bad(`messages[${i}].content: expected a string or an array of parts`, "messages");
	return content.map((p, k) => {
		if (!p || typeof p !== "object" || p.type !== "text" || typeof p.text !== "string")
			throw bad(`messages[${i}].content[${k}]: only text parts are supported`, "messages");
		return p.text;
	}).join("");
}

/**
 * The request of body (parsed JSON) on path, checked:
 * {chat, messages | prompt (text) | promptTokens, maxTokens, stream,
 *  includeUsage, sampling: {temperature, topP, topK, seed}, stop, ignoreEos,
 *  model}. served: the model names this server answers to.
 */
export function parseRequest(path, body, served, defaultMaxTokens) {
	if (!body || typeof body !== "object" || Array.isArray(body))
		throw bad("the request body must be a JSON object");
	const chat = path === "/v1/chat/completions";
	const model = body.model;
	if (model !== undefined && model !== null) {
		if (typeof model !== "string")
			throw bad("model: expected a string", "model");
		if (!served.includes(model))
			throw new ApiError(404, `The model \`${model}\` does not exist.`, "model");
	}
	const r = {chat, model: model || served[0]};
	if (chat) {
		if (!Array.isArray(body.messages) || body.messages.length === 0)
			throw bad("messages: expected a non-empty array", "messages");
		r.messages = body.messages.map((m, i) => {
			if (!m || typeof m !== "object" || typeof m.role !== "string")
				throw bad(`messages[${i}]: expected an object with a string role`, "messages");
			return {role: m.role, content: contentText(m.content, i)};
		});
	} else {
		const p = body.prompt;
		if (typeof p === "string") {
			r.prompt = p;
		} else if (Array.isArray(p) && p.length === 1 && typeof p[0] === "string") {
			r.prompt = p[0];
		} else if (Array.isArray(p) && p.length && p.every((t) => Number.isInteger(t))) {
			r.promptTokens = p;
		} else if (Array.isArray(p) && p.length === 1 && Array.isArray(p[0]) && p[0].length &&
		           p[0].every((t) => Number.isInteger(t))) {
			r.promptTokens = p[0];
		} else if (Array.isArray(p) && p.length > 1) {
			throw bad("prompt: batched prompts are not supported (one prompt per request)",
			          "prompt");
		} else {
			throw bad("prompt: expected a string or an array of token ids", "prompt");
		}
		if (r.prompt === "")
			throw bad("prompt: empty", "prompt");
		if (body.echo)
			throw bad("echo is not supported", "echo");
		if (body.suffix)
			throw bad("suffix is not supported", "suffix");
	}
	if (number(body, "n", 1, 1 << 20, 1, true) !== 1)
		throw bad("n: only 1 is supported", "n");
	if (body.logprobs !== undefined && body.logprobs !== null && body.logprobs !== false)
		throw bad("logprobs are not supported", "logprobs");
	const mt = chat && body.max_completion_tokens !== undefined ? "max_completion_tokens"
	                                                              : "max_tokens";
	r.maxTokens = number(body, mt, 1, 1 << 20, defaultMaxTokens, true);
	r.minTokens = number(body, "min_tokens", 0, 1 << 20, 0, true);
	r.stream = flag(body, "stream");
	const so = body.stream_options;
	if (so !== undefined && so !== null && (typeof so !== "object" || Array.isArray(so)))
		throw bad("stream_options: expected an object", "stream_options");
	r.includeUsage = !!(so && so.include_usage === true);
	r.ignoreEos = flag(body, "ignore_eos");
	r.sampling = {
		temperature: number(body, "temperature", 0, 2, 1),
		topP: number(body, "top_p", 0, 1, 1),
		topK: number(body, "top_k", -1, 1 << 20, -1, true),
		seed: number(body, "seed", -(2 ** 53), 2 ** 53, undefined, true),
	};
	let stop = body.stop;
	if (stop === undefined || stop === null)
		stop = [];
	else if (typeof stop === "string")
		stop = [stop];
	if (!Array.isArray(stop) || !stop.every((s) => typeof s === "string" && s.length))
		throw bad("stop: expected a string or an array of non-empty strings", "stop");
	r.stop = stop;
	return r;
}

/** vLLM's answer to a prompt past the context. */
export function tooLong(ctx, prompt, maxTokens) {
	return bad(`This model's maximum context length is ${ctx} tokens. However, you requested ` +
	           `${prompt + maxTokens} tokens (${prompt} in the messages, ${maxTokens} in the ` +
	           `completion). Please reduce the length of the messages or completion.`);
}

/** usage, with what the engine found cached. */
export function usage(promptTokens, completionTokens, cachedTokens) {
	return {
		prompt_tokens: promptTokens,
		total_tokens: promptTokens + completionTokens,
		completion_tokens: completionTokens,
		prompt_tokens_details: {cached_tokens: cachedTokens},
	};
}

/** llama.cpp's server's "timings" of one request. */
export function timings(t) {
	const per = (ms, n) => (n ? ms / n : 0);
	const rate = (ms, n) => (ms > 0 ? (1000 * n) / ms : 0);
	return {
		cache_n: t.cached,
		prompt_n: t.promptN,
		prompt_ms: t.promptMs,
		prompt_per_token_ms: per(t.promptMs, t.promptN),
		prompt_per_second: rate(t.promptMs, t.promptN),
		predicted_n: t.predictedN,
		predicted_ms: t.predictedMs,
		predicted_per_token_ms: per(t.predictedMs, t.predictedN),
		predicted_per_second: rate(t.predictedMs, t.predictedN),
	};
}

/** The head every answer of one request shares. */
export function head(r, id, created) {
	return {id: (r.chat ? "chatcmpl-" : "cmpl-") + id,
	        object: r.chat ? "chat.completion" : "text_completion", created, model: r.model};
}

/** A whole (non-streamed) answer. */
export function whole(r, h, text, finish, u, t) {
	const choice = r.chat
	    ? {index: 0, message: {role: "assistant", content: text}, logprobs: null,
	       finish_reason: finish}
	    : {index: 0, text, logprobs: null, finish_reason: finish};
	return {...h, choices: [choice], usage: u, timings: t};
}

/** One streamed event's object: text (and, with first, the role), or the
 * finish reason, or (choices empty) the usage. */
export function chunk(r, h, {text, first, finish, u, t}) {
	const c = {...h, object: r.chat ? "chat.completion.chunk" : "text_completion"};
	if (u) {
		c.choices = [];
		c.usage = u;
	} else if (r.chat) {
		const delta = finish ? {} : first ? {role: "assistant", content: text} : {content: text};
		c.choices = [{index: 0, delta, logprobs: null, finish_reason: finish || null}];
	} else {
		c.choices = [{index: 0, text: finish ? "" : text, logprobs: null,
		              finish_reason: finish || null}];
	}
	if (t)
		c.timings = t;
	return c;
}
