// The web_fetch extension loaded by pi's own loader, its tool called against a real daemon (real Chrome,
// the sub-agent being the real pi against a fake LLM), pages served from 127.0.0.1.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import {
	ARTICLE,
	EXTENSION,
	PI,
	WEBFETCH,
	bigParagraph,
	connectable,
	logsMentioning,
	messagesText,
	piModule,
	rawRequest,
	startDaemon,
	startFakeLLM,
	startSite,
	tempDir,
	waitFor,
	writeConfig,
} from "./helpers.mjs";

const { discoverAndLoadExtensions } = await piModule();
const PI_LIMIT_BYTES = 50 * 1024;
const CTX = { model: { provider: "fake", id: "fake-1" }, hasUI: false, ui: { notify() {} } };
const THEME = { fg: (_c, s) => s, bold: (s) => s };

async function loadExtension() {
	const agentDir = tempDir("wf-agent");
	try {
		const loaded = await discoverAndLoadExtensions([EXTENSION], process.cwd(), agentDir);
		assert.deepEqual(loaded.errors, []);
		return loaded.extensions[0];
	} finally {
		fs.rmSync(agentDir, { recursive: true, force: true });
	}
}

/** Run `fn` with some environment variables set, restoring them afterwards. */
async function withEnv(vars, fn) {
	const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
	Object.assign(process.env, vars);
	try {
		return await fn();
	} finally {
		for (const [k, v] of Object.entries(saved)) {
			if (v === undefined) delete process.env[k];
			else process.env[k] = v;
		}
	}
}

let site;
let llm;
let agentDir;
let daemon;
let tool;
let extension;

before(async () => {
	site = await startSite();
	llm = await startFakeLLM(() => "The article says nurseries wait for their children.");
	agentDir = llm.agentDir();
	daemon = await startDaemon({
		subagent: PI,
		search: site.url(""),
		env: { PI_CODING_AGENT_DIR: agentDir, PI_OFFLINE: "1" },
		devtoolsPort: true, // a test lists Chrome's tabs
	});
	process.env.WEBFETCH_SOCKET = daemon.socket;
	process.env.WEBFETCH_CONFIG = daemon.config; // the config a daemon the extension starts would read
	extension = await loadExtension();
	tool = extension.tools.get("web_fetch").definition;
});

after(async () => {
	delete process.env.WEBFETCH_SOCKET;
	delete process.env.WEBFETCH_CONFIG;
	const end = await daemon?.stop();
	assert.deepEqual(end, { code: 0, signal: null }, "the daemon exits 0 on SIGTERM");
	await site?.stop();
	await llm?.stop();
	fs.rmSync(agentDir, { recursive: true, force: true });
});

function call(params, { signal, updates } = {}) {
	return tool.execute("call-1", params, signal, (u) => updates?.push(u), CTX);
}

describe("the web_fetch tool", () => {
	test("is registered once, with url, prompt, offset, raw and fresh", () => {
		assert.deepEqual([...extension.tools.keys()], ["web_fetch"]);
		assert.deepEqual(Object.keys(tool.parameters.properties), ["url", "urls", "prompt", "schema", "offset", "raw", "fresh", "find", "profile", "browser", "hidden"]);
		assert.equal(tool.parameters.required, undefined); // `url` or `urls`: the daemon says when neither is given
		assert.equal(tool.parameters.properties.offset.type, "integer");
		assert.match(tool.description, /prompt/);
		assert.match(tool.description, /most effective/);
		assert.match(tool.description, /15 minutes/);
		assert.match(tool.description, /another host/);
		assert.match(tool.description, /offset/);
		// for pi's system prompt (a custom tool without a snippet is left out of its tool list)
		assert.match(tool.promptSnippet, /`prompt`/);
		assert.ok(tool.promptGuidelines.some((g) => g.includes("web_fetch with a `prompt`")));
		assert.deepEqual(tool.annotations, { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true });
	});

	test("a plain fetch gives one line of facts, then the page's markdown; details hold the result", async () => {
		const url = site.url("/article");
		const updates = [];
		const r = await call({ url }, { updates });
		const text = r.content[0].text;
		const [facts, blank, ...rest] = text.split("\n");
		assert.equal(facts, `${url} · "Trio Notes" · fetched now · all ${r.details.total_chars} characters`);
		assert.equal(blank, "");
		const body = rest.join("\n");
		assert.match(body, /^# Trio Notes/);
		for (const p of ARTICLE) assert.ok(body.includes(p), `missing: ${p}`);
		assert.ok(!body.includes("Copyright the test site"), "the footer is not main content");
		assert.equal(r.details.kind, "page");
		assert.equal(r.details.final_url, url);
		assert.equal(r.details.cached, false);
		assert.equal(r.details.status, 200);
		assert.equal(r.details.title, "Trio Notes");
		assert.ok(updates.length >= 1 && updates.every((u) => typeof u.content[0].text === "string"));

		const again = await call({ url });
		assert.match(again.content[0].text.split("\n")[0], / · cached \(\d+ s old\) · /);
		assert.equal(again.details.cached, true);
	});

	test("a prompt is answered by the sub-agent with the session's model", async () => {
		const before = llm.requests.length;
		const r = await call({ url: site.url("/article"), prompt: "What does a nursery wait for?" });
		assert.equal(r.details.kind, "answer");
		assert.equal(r.details.model, "fake/fake-1");
		const [facts, , answer] = r.content[0].text.split("\n");
		assert.match(facts, / · answer by fake\/fake-1 from \d+ characters$/);
		assert.equal(answer, "The article says nurseries wait for their children.");
		assert.equal(llm.requests.length, before + 1);
		const asked = messagesText(llm.requests.at(-1), "user");
		assert.ok(asked.includes("What does a nursery wait for?"));
		assert.ok(asked.includes(ARTICLE[1]), "the model got the page");
		// the sub-agent's tokens, in pi's shape, for pi's footer and session totals
		assert.deepEqual(r.usage, {
			input: 10,
			output: 5,
			cacheRead: 0,
			cacheWrite: 0,
			totalTokens: 15,
			cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
		});
		const page = await call({ url: site.url("/article") });
		assert.equal(page.usage, undefined, "no model, no usage");
	});

	test("a large page without a prompt is summarized by the session's model", async () => {
		const r = await call({ url: site.url("/big") });
		assert.equal(r.details.kind, "summary");
		assert.equal(r.details.model, "fake/fake-1");
		assert.match(r.content[0].text.split("\n")[0], / · summary of \d[\d,]* characters$/);
	});

	test("urls: the pages in the order given, each under its heading, a failed one saying why; the rest succeed", async () => {
		const closed = await new Promise((resolve) => {
			const probe = net.createServer().listen(0, "127.0.0.1", () => {
				const { port } = probe.address();
				probe.close(() => resolve(`http://127.0.0.1:${port}/`));
			});
		});
		const urls = [site.url("/lines"), site.url("/missing"), closed, site.url("/article")];
		const r = await call({ urls, fresh: true });
		const text = r.content[0].text;
		const [head, ...blocks] = text.split("\n\n── ");
		assert.equal(head, "2 of 4 URLs fetched, 2 failed");
		assert.deepEqual(blocks.map((b) => b.split("\n", 1)[0]), urls.map((u, i) => `[${i + 1}/4] ${u}`));
		assert.match(blocks[0], /^\[1\/4\] \S+\n\S+ · fetched now · characters 0–[\d,]+ of [\d,]+\n\nline 0\nline 1\n/);
		assert.match(blocks[0], /\[More: call web_fetch with url "[^"]+\/lines" and offset \d+ to read on\.\]$/);
		assert.match(blocks[1], /^\[2\/4\] \S+\nFAILED \(http_error\): .*404/);
		assert.match(blocks[2], /^\[3\/4\] \S+\nFAILED \(network_error\): net::ERR_\w+ /); // refused, as the policy proxy reports it
		for (const p of ARTICLE) assert.ok(blocks[3].includes(p), `missing: ${p}`);
		assert.ok(Buffer.byteLength(text) <= PI_LIMIT_BYTES);
		assert.equal(r.details.kind, "batch");
		assert.deepEqual([r.details.fetched, r.details.failed], [2, 2]);
		assert.deepEqual(r.details.pages.map((e) => e.error ?? e.kind), ["page", "http_error", "network_error", "page"]);
		await assert.rejects(call({}), { message: "web_fetch needs `url` (one page) or `urls` (several, up to 50): absolute http(s) URLs" });
		const tooMany = await rawRequest(daemon.socket, { op: "fetch", urls: Array.from({ length: 51 }, (_, i) => site.url(`/p${i}`)) });
		await assert.rejects(call({ urls: Array.from({ length: 51 }, (_, i) => site.url(`/p${i}`)) }), { message: tooMany.message });
		assert.match(tooMany.message, /^`urls` holds 51 URLs; a batch fetches at most 50/);
	});

	test("an error frame becomes a thrown Error with the daemon's message", async () => {
		for (const url of ["ftp://example.com/file", site.url("/missing")]) {
			const frame = await rawRequest(daemon.socket, { op: "fetch", url });
			assert.equal(frame.type, "error");
			await assert.rejects(call({ url }), (e) => {
				assert.equal(e.message, frame.message);
				return true;
			});
		}
	});

	test("a cross-host redirect reads as an instruction to follow it", async () => {
		const url = site.url("/elsewhere");
		const r = await call({ url });
		assert.equal(
			r.content[0].text,
			`${url} redirects to http://localhost:${site.port}/article on a different host; ` +
				"call web_fetch with that URL to follow it. (HTTP 302)",
		);
		assert.equal(r.details.kind, "redirect");
		assert.equal(r.details.redirect_url, `http://localhost:${site.port}/article`);
	});

	test("a page over pi's 50 KB is cut at a line and the offset given continues exactly there", async () => {
		const url = site.url("/big");
		const r = await call({ url, raw: true });
		const text = r.content[0].text;
		assert.ok(Buffer.byteLength(text) <= PI_LIMIT_BYTES, `${Buffer.byteLength(text)} bytes`);
		assert.ok(text.split("\n").length <= 2000);
		const cutAt = r.details.cut_at;
		assert.ok(Number.isInteger(cutAt) && cutAt > 0);
		assert.ok(text.endsWith(`offset ${cutAt} to read on.]`), text.slice(-200));
		assert.match(text.split("\n")[0], new RegExp(` · characters 0–${cutAt.toLocaleString("en-US")} of `));
		const shown = [...text.matchAll(/Paragraph (\d{4}):/g)].map((m) => Number(m[1]));
		const last = shown.at(-1);
		assert.ok(text.includes(bigParagraph(last)), "the last paragraph shown is whole");

		const next = await call({ url, raw: true, offset: cutAt });
		const body = next.content[0].text.split("\n").slice(2).join("\n");
		assert.ok(body.startsWith(bigParagraph(last + 1)), body.slice(0, 120));
	});

	test("a page of more than 2 000 lines is cut to pi's line limit, and the offset continues it", async () => {
		const url = site.url("/lines");
		const r = await call({ url, raw: true });
		const lines = r.content[0].text.split("\n");
		assert.ok(lines.length <= 2000, `${lines.length} lines`);
		const shown = lines.filter((l) => /^line \d+$/.test(l));
		assert.equal(shown[0], "line 0");
		const last = Number(shown.at(-1).split(" ")[1]);
		const next = await call({ url, raw: true, offset: r.details.cut_at });
		assert.equal(next.content[0].text.split("\n")[2], `line ${last + 1}`);
	});

	test("abort sends cancel, returns within a second, and the daemon stops loading the page", async () => {
		const controller = new AbortController();
		const pending = call({ url: site.url("/stall") }, { signal: controller.signal });
		await waitFor("the page request", () => site.hits.get("/stall"));
		const t0 = Date.now();
		controller.abort();
		await assert.rejects(pending, /cancelled/);
		assert.ok(Date.now() - t0 < 1000, `took ${Date.now() - t0} ms`);
		// Chrome dropped the half-sent page (its tab was closed) and no tab shows it any more.
		await waitFor("the page's connection to close", () => site.closed.get("/stall"), 3000);
		await waitFor(
			"no tab on the stalled page",
			async () => !(await daemon.pageTargets()).some((t) => t.url.includes("/stall")),
			3000,
		);
		const status = await rawRequest(daemon.socket, { op: "status" });
		assert.equal(status.requests.in_flight, 0);
	});

	test("a deadline and a cancel are told apart by the error's code, not its words", async () => {
		// a daemon that takes the request and never answers
		const dir = tempDir("wf-silent");
		const socket = path.join(dir, "s.sock");
		const silent = net.createServer(() => {});
		await new Promise((r) => silent.listen(socket, r));
		try {
			await withEnv({ WEBFETCH_SOCKET: socket }, async () => {
				await assert.rejects(call({ url: site.url("/article") }, { signal: AbortSignal.timeout(200) }), (e) => {
					assert.equal(e.code, "timeout");
					assert.equal(e.fromDaemon, false);
					return true;
				});
				const controller = new AbortController();
				const pending = call({ url: site.url("/article") }, { signal: controller.signal });
				setTimeout(() => controller.abort(), 100);
				await assert.rejects(pending, (e) => {
					assert.equal(e.code, "cancelled");
					assert.equal(e.message, "web_fetch was cancelled");
					return true;
				});
			});
		} finally {
			silent.close();
			fs.rmSync(dir, { recursive: true, force: true });
		}
	});

	test("a daemon's error keeps its wire code", async () => {
		await assert.rejects(call({ url: "ftp://example.com/file" }), (e) => {
			assert.equal(e.code, "invalid_url");
			assert.equal(e.fromDaemon, true);
			return true;
		});
	});

	test("renderCall is one line; renderResult a summary, the full text when expanded", async () => {
		const call = tool.renderCall({ url: "https://example.com/docs", prompt: "what auth?" }, THEME);
		assert.deepEqual(call.render(80), ['web_fetch example.com/docs "what auth?"']);
		const r = await tool.execute("c", { url: site.url("/article") }, undefined, undefined, CTX);
		const collapsed = tool.renderResult(r, { expanded: false, isPartial: false }, THEME, {});
		assert.ok(r.details.total_chars < 1000);
		assert.deepEqual(collapsed.render(120), [`page · Trio Notes · ${r.details.total_chars} chars · cached`]);
		const big = { ...r, details: { ...r.details, kind: "answer", model: "fake/fake-1", total_chars: 123456, cached: false } };
		const answer = tool.renderResult(big, { expanded: false, isPartial: false }, THEME, {}).render(120);
		assert.deepEqual(answer, ["answer (fake/fake-1) · Trio Notes · 123.5k chars · fresh"]);
		const expanded = tool.renderResult(r, { expanded: true, isPartial: false }, THEME, {}).render(60);
		assert.ok(expanded.length > 5 && expanded.every((l) => l.length <= 60));
		assert.ok(expanded.join(" ").includes("Trio Notes"));
	});
});

describe("session_start", () => {
	async function notifications(env) {
		const got = [];
		const ctx = { hasUI: true, ui: { notify: (msg, type) => got.push([msg, type]) } };
		await withEnv(env, async () => {
			for (const handler of extension.handlers.get("session_start")) await handler({ type: "session_start" }, ctx);
		});
		return got;
	}

	test("is silent when all is well", async () => {
		assert.deepEqual(await notifications({}), []);
	});

	test("names what the daemon lacks (Chrome, the sub-agent CLI) in one notification, with the fix", async () => {
		// neither its Chrome nor its sub-agent command exists
		const other = await startDaemon({ extra: '[browser]\nexecutable = "/nonexistent/chrome"\n' });
		try {
			const got = await notifications({ WEBFETCH_SOCKET: other.socket, WEBFETCH_CONFIG: other.config });
			assert.equal(got.length, 1);
			assert.equal(got[0][1], "error");
			assert.match(got[0][0], /^webfetch: no Chrome found: .*apt-get install chromium/);
			assert.match(got[0][0], /sub-agent CLI `\/nonexistent\/pi-for-tests` was not found/);
			assert.match(got[0][0], /subagent\.command/);
		} finally {
			await other.stop();
		}
	});

	test("offers the browser tool only when the daemon can browse; every tool when the daemon cannot be asked", async () => {
		const off = await startDaemon({ extra: "[browse]\nenabled = false\n" });
		const dir = tempDir("wf-none");
		const tools = async (env, hasUI) => {
			const ext = await loadExtension();
			const ctx = { hasUI, ui: { notify() {} } };
			await withEnv(env, async () => {
				for (const handler of ext.handlers.get("session_start")) await handler({ type: "session_start" }, ctx);
			});
			return [...ext.tools.keys()];
		};
		try {
			for (const hasUI of [true, false]) {
				assert.deepEqual(await tools({ WEBFETCH_SOCKET: off.socket }, hasUI), ["web_fetch", "web_search"], `hasUI ${hasUI}`);
				assert.deepEqual(await tools({}, hasUI), ["web_fetch", "web_search", "agent_browser"], `hasUI ${hasUI}`);
			}
			// no daemon listens: without a UI none is started (no log mentions its socket), with one it cannot start
			const none = { WEBFETCH_SOCKET: path.join(dir, "s.sock"), WEBFETCH_BIN: "/nonexistent/webfetch" };
			assert.deepEqual(await tools(none, false), ["web_fetch", "web_search", "agent_browser"]);
			assert.deepEqual(logsMentioning(none.WEBFETCH_SOCKET), [], "no daemon started without a UI");
			assert.deepEqual(await tools(none, true), ["web_fetch", "web_search", "agent_browser"]);
		} finally {
			await off.stop();
			fs.rmSync(dir, { recursive: true, force: true });
		}
	});

	test("restarts an idle background daemon that read another config, and only names one it must not restart", async () => {
		// a daemon a client started in the background, with the config of that moment
		const old = await startDaemon({ args: ["--exit-when-idle"] });
		const dir = tempDir("wf-skew");
		const mine = writeConfig(dir, { subagent: PI, extra: "[cache]\nttl_s = 60\n" });
		const env = { WEBFETCH_SOCKET: old.socket, WEBFETCH_CONFIG: mine, WEBFETCH_BIN: WEBFETCH };
		try {
			const pid = old.proc.pid;
			const got = await notifications(env);
			assert.deepEqual(got, [
				[`webfetch: restarted the daemon (pid ${pid}), which read ${old.config}, and this extension's daemon reads ${mine}`, "info"],
			]);
			assert.deepEqual(await old.exited, { code: 0, signal: null }, "the old daemon stopped cleanly");
			const now = await rawRequest(old.socket, { op: "status" });
			assert.equal(now.daemon.config, mine, "the new daemon reads the extension's config");
			// a daemon that was not started in the background (a terminal's, systemd's) is only named
			const kept = await notifications({ ...env, WEBFETCH_SOCKET: daemon.socket });
			assert.deepEqual(kept, [
				[`webfetch: the running daemon (pid ${daemon.proc.pid}) read ${daemon.config}, and this extension's daemon reads ${mine}; \`webfetch restart\` gives you one that runs this extension's`, "warning"],
			]);
			assert.equal((await rawRequest(daemon.socket, { op: "status" })).daemon.pid, daemon.proc.pid);
		} finally {
			await rawRequest(old.socket, { op: "stop" }).catch(() => {});
			await old.stop();
			fs.rmSync(dir, { recursive: true, force: true });
		}
	});

	test("says what to run when the daemon cannot be started", async () => {
		const dir = tempDir("wf-none");
		try {
			const got = await notifications({ WEBFETCH_SOCKET: path.join(dir, "s.sock"), WEBFETCH_BIN: "/nonexistent/webfetch" });
			assert.equal(got.length, 1);
			assert.match(got[0][0], /`\/nonexistent\/webfetch` could not be started \(ENOENT\)/);
			assert.match(got[0][0], /webfetch pi install/);
		} finally {
			fs.rmSync(dir, { recursive: true, force: true });
		}
	});
});

test("with no daemon running, the tool starts one and gets its answer", async () => {
	const dir = tempDir("wf-auto");
	const socket = path.join(dir, "s.sock");
	const config = writeConfig(dir, { extra: "[server]\nidle_exit_s = 1\n" });
	try {
		assert.equal(await connectable(socket), false);
		const r = await withEnv(
			{ WEBFETCH_SOCKET: socket, WEBFETCH_BIN: WEBFETCH, WEBFETCH_CONFIG: config },
			() => call({ url: site.url("/article") }),
		);
		assert.equal(r.details.kind, "page");
		assert.ok(r.content[0].text.includes(ARTICLE[0]));
		const logs = logsMentioning(socket);
		assert.equal(logs.length, 1, "the daemon logs to one file under $XDG_STATE_HOME/webfetch");
		assert.equal(fs.statSync(logs[0]).mode & 0o777, 0o600);
		// It was started with --exit-when-idle, as the CLI does: it goes away by itself.
		await waitFor("the started daemon to exit when idle", () => !fs.existsSync(socket), 20_000);
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test("loaded in place from an installed webfetch, it starts the daemon with that environment's webfetch", async () => {
	// the layout pip gives: <env>/lib/pythonX.Y/site-packages/webfetch/frontends/pi_extension and <env>/bin/webfetch
	const env = tempDir("wf-env");
	const here = path.join(env, "lib", "python3.11", "site-packages", "webfetch", "frontends", "pi_extension");
	fs.mkdirSync(here, { recursive: true });
	for (const name of fs.readdirSync(EXTENSION)) fs.copyFileSync(path.join(EXTENSION, name), path.join(here, name));
	fs.mkdirSync(path.join(env, "bin"));
	const marker = path.join(env, "started-by-env");
	fs.writeFileSync(path.join(env, "bin", "webfetch"), `#!/bin/sh\necho "$@" > ${JSON.stringify(marker)}\nexec ${JSON.stringify(WEBFETCH)} "$@"\n`);
	fs.chmodSync(path.join(env, "bin", "webfetch"), 0o755);
	const socket = path.join(env, "s.sock");
	const config = writeConfig(env, { extra: "[server]\nidle_exit_s = 1\n" });
	const agentDir = tempDir("wf-agent");
	try {
		const loaded = await discoverAndLoadExtensions([here], process.cwd(), agentDir);
		assert.deepEqual(loaded.errors, []);
		const installed = loaded.extensions[0].tools.get("web_fetch").definition;
		const r = await withEnv({ WEBFETCH_SOCKET: socket, WEBFETCH_CONFIG: config, WEBFETCH_BIN: "" }, () =>
			installed.execute("c", { url: site.url("/article") }, undefined, undefined, CTX),
		);
		assert.equal(r.details.kind, "page");
		assert.match(fs.readFileSync(marker, "utf8"), /^serve --socket .* --exit-when-idle --log-file .*\/webfetch\/webfetch-[0-9a-f]{8}\.log\n$/);
		await waitFor("the started daemon to exit when idle", () => !fs.existsSync(socket), 20_000);
	} finally {
		fs.rmSync(env, { recursive: true, force: true });
		fs.rmSync(agentDir, { recursive: true, force: true });
	}
});

test("a daemon that cannot start is reported at once with its own words", async () => {
	const dir = tempDir("wf-bad");
	const config = path.join(dir, "config.toml");
	fs.writeFileSync(config, "[browser]\ncolour = 1\n");
	try {
		const t0 = Date.now();
		await assert.rejects(
			withEnv({ WEBFETCH_SOCKET: path.join(dir, "s.sock"), WEBFETCH_BIN: WEBFETCH, WEBFETCH_CONFIG: config }, () =>
				call({ url: site.url("/article") }),
			),
			(e) => {
				assert.match(e.message, /^the webfetch daemon exited at start \(2\): .*unknown key `browser\.colour`/);
				assert.match(e.message, /serve` in a terminal to see why$/);
				return true;
			},
		);
		assert.ok(Date.now() - t0 < 15_000, "no waiting out the start timeout");
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

describe("web_search", () => {
	async function started(allTools) {
		const agentDir = tempDir("wf-agent");
		try {
			const loaded = await discoverAndLoadExtensions([EXTENSION], process.cwd(), agentDir);
			if (allTools) loaded.runtime.getAllTools = () => allTools.map((name) => ({ name }));
			const ext = loaded.extensions[0];
			const notes = [];
			const ctx = { hasUI: true, ui: { notify: (m, t) => notes.push([m, t]) } };
			for (let i = 0; i < 2; i++) for (const h of ext.handlers.get("session_start")) await h({}, ctx);
			return { ext, notes };
		} finally {
			fs.rmSync(agentDir, { recursive: true, force: true });
		}
	}

	test("is registered at session start as web_search when the name is free", async () => {
		const { ext, notes } = await started(["read", "bash", "web_fetch"]);
		assert.deepEqual([...ext.tools.keys()], ["web_fetch", "web_search", "agent_browser"]);
		assert.deepEqual(notes, []);
	});

	test("the browser becomes webfetch_browser when another extension owns agent_browser, and says so once", async () => {
		const { ext, notes } = await started(["read", "web_fetch", "agent_browser"]);
		assert.deepEqual([...ext.tools.keys()], ["web_fetch", "web_search", "webfetch_browser"]);
		assert.deepEqual(notes, [["webfetch: another extension already provides agent_browser; webfetch's browser is webfetch_browser", "info"]]);
	});

	test("becomes webfetch_search when another extension owns web_search, and says so once", async () => {
		const { ext, notes } = await started(["read", "web_fetch", "web_search"]);
		assert.deepEqual([...ext.tools.keys()], ["web_fetch", "webfetch_search", "agent_browser"]);
		assert.deepEqual(notes, [["webfetch: another extension already provides web_search; webfetch's search is webfetch_search", "info"]]);
	});

	test("returns the daemon's formatted results, with the results in details", async () => {
		const { ext } = await started([]);
		const search = ext.tools.get("web_search").definition;
		assert.deepEqual(search.parameters.required, ["query"]);
		const r = await search.execute("s1", { query: "trio", limit: 2 }, undefined, undefined, CTX);
		assert.equal(
			r.content[0].text,
			'SearXNG results for "trio" (2):\n' +
				"1. Trio docs — https://trio.readthedocs.io/\n   Structured concurrency & more.\n" +
				"2. Notes — https://vorpus.org/blog/ (2018-04-25)\n\nRelated searches: trio nursery",
		);
		assert.equal(r.details.backend, "searxng");
		assert.equal(r.details.results.length, 2);
		assert.deepEqual(search.renderCall({ query: "trio", limit: 2 }, THEME).render(80), ['web_search "trio" (2)']);
		assert.deepEqual(search.renderResult(r, { expanded: false, isPartial: false }, THEME, {}).render(80), [
			"2 results from searxng",
		]);
		await assert.rejects(
			search.execute("s2", { query: "trio", limit: 50 }, undefined, undefined, CTX),
			/limit/,
		);
	});
});

test("inside the daemon's sub-agent the extension registers nothing", async () => {
	const ext = await withEnv({ WEBFETCH_SUBAGENT: "1" }, loadExtension);
	assert.equal(ext.tools.size, 0);
	assert.equal(ext.handlers.size, 0);
});
