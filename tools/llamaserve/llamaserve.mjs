#!/usr/bin/env node
// SPDX-License-Identifier: MIT
/*
 * llamaserve: a real inference engine, llama.cpp through node-llama-cpp
 * (its prebuilt CPU build), serving a GGUF model as vLLM would: the OpenAI
 * completions and chat completions APIs, streamed or not, with the prompt's
 * cached tokens in usage.prompt_tokens_details and llama.cpp's "timings";
 * GET /health, GET /v1/models, GET /metrics under vLLM's names. It answers
 * every response with X-Backend-Id, as mockllm does.
 *
 * Requests run on --parallel slots (sequences of one context, each of
 * --ctx-size / --parallel tokens), the slot chosen as llama.cpp's server
 * chooses it (slots.mjs); more wait. --threads (default 1) CPU threads
 * compute. Installed by make (tools/llamaserve/install.sh: npm packages
 * under build/llamaserve/, nothing downloaded or built at run time).
 */
import crypto from "node:crypto";
import http from "node:http";
import path from "node:path";
import {createRequire} from "node:module";
import {fileURLToPath, pathToFileURL} from "node:url";

import {Engine} from "./engine.mjs";
import * as api from "./openai.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const USAGE = `usage: llamaserve.mjs --model FILE [--listen ADDR:PORT] [--id NAME]
                      [--served-model-name NAME] [--parallel N] [--ctx-size N]
                      [--threads N] [--batch-size N] [--slot-prompt-similarity F]
                      [--default-max-tokens N] [--max-body-size BYTES]
                      [--npm-dir DIR] [--verbose]

  --model FILE            a GGUF model (tools/llamaserve/genmodel.py writes one)
  --listen ADDR:PORT      default 127.0.0.1:8000; port 0: any (printed)
  --id NAME               X-Backend-Id of every response (default: the port)
  --served-model-name N   the model's name in the API (default: the file's name
                          less .gguf); a request may also leave "model" out
  --parallel N            slots: requests computed at once (default 2)
  --ctx-size N            tokens of context in all (default 4096 x --parallel);
                          each slot has its share
  --threads N             CPU threads computing (default 1)
  --batch-size N          tokens evaluated per batch (default 512)
  --slot-prompt-similarity F
                          a slot whose cached prefix is more than F of the
                          prompt is chosen for it, else the least recently used
                          idle one (default 0.1, llama.cpp's)
  --default-max-tokens N  output tokens when a request gives no max_tokens
                          (default 256)
  --max-body-size BYTES   larger request bodies get 413 (default 33554432)
  --npm-dir DIR           where node-llama-cpp is installed (DIR/node_modules;
                          default $LLAMASERVE_NPM_DIR or build/llamaserve)
  --verbose               one line per request on stderr
`;

function parseArgs(argv) {
	const o = {listen: "127.0.0.1:8000", parallel: 2, threads: 1, batchSize: 512,
	           similarity: 0.1, defaultMaxTokens: 256, maxBody: 32 << 20, verbose: false,
	           npmDir: process.env.LLAMASERVE_NPM_DIR ||
	               path.join(HERE, "..", "..", "build", "llamaserve")};
	const num = (name, v, lo, hi, int = true) => {
		const x = Number(v);
		if (v === undefined || !Number.isFinite(x) || (int && !Number.isInteger(x)) ||
		    x < lo || x > hi)
			die(`${name}: expected ${int ? "an integer" : "a number"} from ${lo} to ${hi}`);
		return x;
	};
	for (let i = 0; i < argv.length; i++) {
		const a = argv[i], v = argv[i + 1];
		const take = () => {
			if (v === undefined)
				die(`${a}: needs a value`);
			i++;
			return v;
		};
		switch (a) {
		case "--model": o.model = take(); break;
		case "--listen": o.listen = take(); break;
		case "--id": o.id = take(); break;
		case "--served-model-name": o.name = take(); break;
		case "--parallel": o.parallel = num(a, take(), 1, 64); break;
		case "--ctx-size": o.ctx = num(a, take(), 256, 1 << 20); break;
		case "--threads": o.threads = num(a, take(), 1, 256); break;
		case "--batch-size": o.batchSize = num(a, take(), 16, 65536); break;
		case "--slot-prompt-similarity": o.similarity = num(a, take(), 0, 1, false); break;
		case "--default-max-tokens": o.defaultMaxTokens = num(a, take(), 1, 1 << 20); break;
		case "--max-body-size": o.maxBody = num(a, take(), 1024, 1 << 30); break;
		case "--npm-dir": o.npmDir = take(); break;
		case "--verbose": o.verbose = true; break;
		case "--help": process.stdout.write(USAGE); process.exit(0); break;
		default: die(`unknown argument ${a}`);
		}
	}
	if (!o.model)
		die("--model is required");
	const m = /^(.*):(\d+)$/.exec(o.listen);
	if (!m)
		die("--listen: expected ADDR:PORT");
	o.host = m[1].replace(/^\[(.*)\]$/, "$1");
	o.port = num("--listen's port", m[2], 0, 65535);
	o.ctx = o.ctx || 4096 * o.parallel;
	o.name = o.name || path.basename(o.model).replace(/\.gguf$/, "");
	return o;
}

function die(msg) {
	process.stderr.write(`llamaserve: ${msg}\n${USAGE}`);
	process.exit(2);
}

/** An npm package installed under dir/node_modules, imported. */
async function npmImport(dir, name) {
	const req = createRequire(path.join(path.resolve(dir), "package.json"));
	let file;
	try {
		file = req.resolve(name);
	} catch {
		die(`${name} is not installed under ${dir}/node_modules: run make ` +
		    "(tools/llamaserve/install.sh), or give --npm-dir");
	}
	return import(pathToFileURL(file).href);
}

async function load(o) {
	const {getLlama, LlamaLogLevel} = await npmImport(o.npmDir, "node-llama-cpp");
	const {Template} = await npmImport(o.npmDir, "@huggingface/jinja");
	// the prebuilt CPU binary only: nothing is built or downloaded; no GPU
	// probing (its absence would raise the default threads to 4)
	const llama = await getLlama({gpu: false, build: "never", skipDownload: true,
	                              maxThreads: o.threads, logLevel: LlamaLogLevel.error,
	                              progressLogs: false});
	const model = await llama.loadModel({modelPath: o.model, gpuLayers: 0});
	const context = await model.createContext({sequences: o.parallel,
	                                           contextSize: Math.floor(o.ctx / o.parallel),
	                                           threads: o.threads, batchSize: o.batchSize});
	const md = model.fileInfo.metadata;
	const tmpl = md?.tokenizer?.chat_template;
	const template = tmpl ? new Template(tmpl) : null;
	const render = (messages) => {
		if (!template)
			throw new api.ApiError(400, "this model has no chat template: use /v1/completions");
		return template.render({messages, add_generation_prompt: true, bos_token: "",
		                        eos_token: ""});
	};
	const vocab = md?.tokenizer?.ggml?.tokens?.length || 0;
	return new Engine(model, context, render, {...o, vocab});
}

function send(res, status, obj, headers = {}) {
	const body = Buffer.from(typeof obj === "string" ? obj : JSON.stringify(obj));
	res.writeHead(status, {"Content-Type": typeof obj === "string"
	                           ? "text/plain; version=0.0.4; charset=utf-8" : "application/json",
	                       "Content-Length": body.length, ...headers});
	res.end(body);
}

function metrics(o, eng) {
	const l = `{model_name="${o.name}"}`;
	const st = eng.stats;
	const held = eng.slots.slots.reduce((n, s) => n + s.tokens.length, 0);
	const lines = [
		["vllm:num_requests_running", "gauge", "Requests computed now (slots busy).",
		 eng.slots.running],
		["vllm:num_requests_waiting", "gauge", "Requests waiting for a slot.",
		 eng.slots.waiting.length],
		["vllm:kv_cache_usage_perc", "gauge", "KV cache usage, 1 is full.",
		 held / (eng.slotCtx * eng.seqs.length)],
		["vllm:prefix_cache_queries_total", "counter",
		 "Prefix cache queries, in prompt tokens.", st.promptTokens],
		["vllm:prefix_cache_hits_total", "counter",
		 "Prefix cache hits, in cached prompt tokens.", st.cachedTokens],
		["vllm:prompt_tokens_total", "counter", "Prompt tokens.", st.promptTokens],
		["vllm:generation_tokens_total", "counter", "Generated tokens.", st.generationTokens],
	];
	let out = "";
	for (const [name, type, help, v] of lines)
		out += `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name}${l} ${v}\n`;
	// the cache's capacity, as a router sizes its view of it: llama.cpp's KV
	// is per token (block 1), --ctx-size of it in all
	out += "# HELP vllm:cache_config_info Information of the cache.\n" +
	       "# TYPE vllm:cache_config_info gauge\n" +
	       `vllm:cache_config_info{block_size="1",enable_prefix_caching="True",` +
	       `num_gpu_blocks="${eng.slotCtx * eng.seqs.length}"} 1.0\n`;
	out += "# HELP llamaserve_requests_total Completion requests, by how they ended.\n" +
	       "# TYPE llamaserve_requests_total counter\n";
	for (const k of ["ok", "cancelled", "failed"])
		out += `llamaserve_requests_total{result="${k}"} ${st[k]}\n`;
	out += "# HELP llamaserve_slot_tokens Tokens each slot holds.\n" +
	       "# TYPE llamaserve_slot_tokens gauge\n";
	for (const s of eng.slots.slots)
		out += `llamaserve_slot_tokens{slot="${s.id}"} ${s.tokens.length}\n`;
	return out;
}

async function complete(o, eng, path_, body, res) {
	const r = api.parseRequest(path_, body, [o.name], o.defaultMaxTokens);
	const tokens = eng.tokens(r);
	const h = api.head(r, crypto.randomBytes(12).toString("hex"), Math.floor(Date.now() / 1000));
	const ctl = {cancelled: false, onCancel: null};
	res.on("close", () => {
		if (!res.writableFinished) {
			ctl.cancelled = true;
			ctl.onCancel?.();
		}
	});
	const event = (obj) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
	const emit = !r.stream ? () => {} : (text, first) => {
		if (first) // the head goes out with the first token, as vLLM's does
			res.writeHead(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
			                    "X-Backend-Id": o.id});
		event(api.chunk(r, h, {text, first}));
	};
	let done;
	try {
		done = await eng.run(r, tokens, emit, ctl);
	} catch (e) {
		if (!res.headersSent)
			throw e;
		event(new api.ApiError(500, String(e.message || e)).body());
		res.end("data: [DONE]\n\n");
		return;
	}
	if (!done || done.finish === "cancelled")
		return res.destroy();
	const u = api.usage(tokens.length, done.completion, done.cached);
	const t = api.timings({cached: done.cached, promptN: done.promptN, promptMs: done.promptMs,
	                       predictedN: done.completion, predictedMs: done.predictedMs});
	if (o.verbose)
		process.stderr.write(`llamaserve ${o.id}: ${path_} prompt ${tokens.length} cached ` +
		                     `${done.cached} out ${done.completion} prefill ` +
		                     `${done.promptMs.toFixed(1)} ms\n`);
	if (!r.stream)
		return send(res, 200, api.whole(r, h, done.text, done.finish, u, t),
		            {"X-Backend-Id": o.id});
	event(api.chunk(r, h, {finish: done.finish, t: r.includeUsage ? undefined : t}));
	if (r.includeUsage)
		event(api.chunk(r, h, {u, t}));
	res.end("data: [DONE]\n\n");
}

function serve(o, eng) {
	const routes = {"/health": "GET", "/v1/models": "GET", "/metrics": "GET",
	                "/v1/completions": "POST", "/v1/chat/completions": "POST"};
	const server = http.createServer((req, res) => {
		const p = req.url.split("?")[0];
		const hdr = {"X-Backend-Id": o.id};
		if (!routes[p])
			return send(res, 404, {detail: "Not Found"}, hdr);
		if (routes[p] !== req.method)
			return send(res, 405, {detail: "Method Not Allowed"}, hdr);
		if (p === "/health")
			return send(res, 200, {}, hdr);
		if (p === "/metrics")
			return send(res, 200, metrics(o, eng), hdr);
		if (p === "/v1/models")
			return send(res, 200, {object: "list", data: [{
				id: o.name, object: "model", created: 0, owned_by: "llamaserve",
				max_model_len: eng.slotCtx}]}, hdr);
		const parts = [];
		let size = 0, over = false;
		req.on("data", (d) => {
			size += d.length;
			if (size > o.maxBody)
				over = true;
			else
				parts.push(d);
		});
		req.on("end", () => {
			if (over)
				return send(res, 413, new api.ApiError(413, "request body larger than " +
				                                       `${o.maxBody} bytes`).body(), hdr);
			let body;
			try {
				body = JSON.parse(Buffer.concat(parts).toString("utf8"));
			} catch (e) {
				return send(res, 400, new api.ApiError(400, `invalid JSON: ${e.message}`).body(),
				            hdr);
			}
			complete(o, eng, p, body, res).catch((e) => {
				const err = e instanceof api.ApiError ? e : new api.ApiError(500, String(e.message || e));
				if (err.status === 500)
					process.stderr.write(`llamaserve: ${e.stack || e}\n`);
				if (!res.headersSent)
					send(res, err.status, err.body(), hdr);
				else
					res.destroy();
			});
		});
	});
	// an idle keep-alive connection is closed after this; a router's idle
	// pool must cope with that (uvicorn, under vLLM, closes after 5 s)
	server.keepAliveTimeout = 30000;
	server.headersTimeout = 35000;
	server.listen(o.port, o.host, () => {
		const port = server.address().port;
		o.id = o.id || String(port);
		process.stdout.write(`llamaserve: ${o.name} on ${eng.seqs.length} slots of ` +
		                     `${eng.slotCtx} tokens, ${o.threads} thread(s); listening on ` +
		                     `${o.host} port ${port}\n`);
	});
	for (const sig of ["SIGTERM", "SIGINT"])
		process.on(sig, () => process.exit(0));
}

const opts = parseArgs(process.argv.slice(2));
serve(opts, await load(opts));
