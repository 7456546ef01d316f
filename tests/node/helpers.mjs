// Shared pieces of the extension tests: a local site, a fake LLM, a real webfetch daemon, a real pi.
// Nothing here leaves 127.0.0.1; every process started is stopped by its owner's `stop()`.
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
// Daemons started in the background log under $XDG_STATE_HOME/webfetch: the tests' own, never the user's.
process.env.XDG_STATE_HOME = fs.mkdtempSync(path.join(os.tmpdir(), "wf-state-"));
process.on("exit", () => fs.rmSync(process.env.XDG_STATE_HOME, { recursive: true, force: true }));
// ... and keep pages on disk under $XDG_CACHE_HOME/webfetch: this test file's own, never the user's (nor
// another file's: a page one file's daemon kept would be served to the next file's daemon)
process.env.XDG_CACHE_HOME = fs.mkdtempSync(path.join(os.tmpdir(), "wf-cache-"));
process.on("exit", () => fs.rmSync(process.env.XDG_CACHE_HOME, { recursive: true, force: true }));

/** The background daemons' log files (under the tests' state directory) that mention `socket`. */
export function logsMentioning(socket) {
	const dir = path.join(process.env.XDG_STATE_HOME, "webfetch");
	if (!fs.existsSync(dir)) return [];
	return fs.readdirSync(dir).map((f) => path.join(dir, f)).filter((f) => fs.readFileSync(f, "utf8").includes(socket));
}
export const PYTHON = process.env.WEBFETCH_PYTHON || path.join(ROOT, ".venv", "bin", "python");
export const WEBFETCH = path.join(path.dirname(PYTHON), "webfetch");
// The pi under test: the pinned old one installed here, or (WEBFETCH_TEST_PI, set by bin/test's second pass)
// the newest one in pi-current/, run by the Node that comes with it.
export const PI = process.env.WEBFETCH_TEST_PI || path.join(ROOT, "tests", "node", "node_modules", ".bin", "pi");

/** The root of the pi package under test (its bin is a link into it). */
export function piPackageDir() {
	let dir = path.dirname(fs.realpathSync(PI));
	for (;;) {
		const file = path.join(dir, "package.json");
		if (fs.existsSync(file) && JSON.parse(fs.readFileSync(file, "utf8")).name?.endsWith("/pi-coding-agent")) return dir;
		if (path.dirname(dir) === dir) throw new Error(`no pi-coding-agent package above ${PI}`);
		dir = path.dirname(dir);
	}
}

/** The version of the pi under test, from its package.json. */
export function piVersion() {
	return JSON.parse(fs.readFileSync(path.join(piPackageDir(), "package.json"), "utf8")).version;
}

/** True when the pi under test is at least `wanted` ("major.minor.patch"): for what only newer pi does. */
export function piAtLeast(wanted) {
	const a = piVersion().split(".").map(Number);
	const b = wanted.split(".").map(Number);
	for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] > b[i];
	return true;
}

/** The pi package's own module (old name or new), for its extension loader. */
export async function piModule() {
	const dir = piPackageDir();
	const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
	const entry = pkg.exports?.["."]?.import ?? pkg.main;
	return import(pathToFileURL(path.join(dir, entry)).href);
}
export const EXTENSION = path.join(ROOT, "webfetch", "frontends", "pi_extension");

/** A short temporary directory (Unix socket paths are limited to ~100 bytes). */
export function tempDir(tag = "wf") {
	return fs.mkdtempSync(path.join(os.tmpdir(), `${tag}-`));
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(what, predicate, timeoutMs = 10_000) {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const value = await predicate();
		if (value) return value;
		if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
		await sleep(25);
	}
}

// ---- the site ----------------------------------------------------------------------------------

export const ARTICLE = [
	"Structured concurrency means every task has a parent that waits for it, so no work outlives the scope that started it.",
	"A nursery is that scope in trio: leaving the block waits for the children, and an exception in one child cancels its siblings.",
	"Cancel scopes carry deadlines; when a deadline passes, the blocked call raises Cancelled and the scope catches it on the way out.",
	"Memory channels give backpressure for free, because a full buffer makes the sender wait until the receiver catches up.",
	"This is why a daemon built this way closes its browser tabs when a client goes away: the request's scope is cancelled.",
	"Nothing is left running in the background, and nothing has to remember to clean up after a failure.",
];

function page(title, paragraphs) {
	return `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title></head><body>
<nav><a href="/">Home</a> <a href="/about">About</a></nav>
<article><h1>${title}</h1>${paragraphs.map((p) => `<p>${p}</p>`).join("\n")}</article>
<footer>Copyright the test site</footer></body></html>`;
}

/** Paragraphs of multi-byte text: 60 000+ characters that are 3 bytes each in UTF-8. */
export function bigParagraph(i) {
	return `Paragraph ${String(i).padStart(4, "0")}: ${"€ünïcødé ".repeat(20)}end.`;
}

export async function startSite() {
	const hits = new Map();
	const closed = new Map(); // path → number of responses the client closed before they were complete
	let port;
	const server = http.createServer((req, res) => {
		const url = new URL(req.url, "http://x");
		hits.set(url.pathname, (hits.get(url.pathname) ?? 0) + 1);
		const html = (status, body, headers = {}) => {
			res.writeHead(status, { "Content-Type": "text/html; charset=utf-8", ...headers });
			res.end(body);
		};
		switch (url.pathname) {
			case "/article":
				return html(200, page("Trio Notes", ARTICLE));
			case "/big":
				return html(200, page("Big Page", Array.from({ length: 400 }, (_, i) => bigParagraph(i))));
			case "/missing":
				return html(404, page("Not here", ["There is no such page on this site."]));
			case "/lines":
				res.writeHead(200, { "Content-Type": "text/plain; charset=utf-8" });
				return res.end(Array.from({ length: 3000 }, (_, i) => `line ${i}`).join("\n"));
			case "/search": // a SearXNG instance's JSON output
				res.writeHead(200, { "Content-Type": "application/json" });
				return res.end(
					JSON.stringify({
						query: url.searchParams.get("q"),
						results: [
							{ url: "https://trio.readthedocs.io/", title: "Trio <b>docs</b>", content: "Structured concurrency &amp; more." },
							{ url: "https://vorpus.org/blog/", title: "Notes", content: "", publishedDate: "2018-04-25T00:00:00" },
						],
						suggestions: ["trio nursery"],
					}),
				);
			case "/elsewhere":
				return html(302, "", { Location: `http://localhost:${port}/article` });
			case "/stall":
				// headers, then a body that never comes: a load certainly in flight until someone gives up
				res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Content-Length": "100000" });
				res.write("<!doctype html><html><head><title>Stalled</title></head><body><p>Waiting");
				res.on("close", () => closed.set(url.pathname, (closed.get(url.pathname) ?? 0) + 1));
				return;
			default:
				return html(404, page("Not found", ["No route."]));
		}
	});
	await new Promise((r) => server.listen(0, "127.0.0.1", r));
	port = server.address().port;
	return {
		port,
		url: (p) => `http://127.0.0.1:${port}${p}`,
		hits,
		closed,
		stop: () => {
			server.closeAllConnections();
			return new Promise((r) => server.close(r));
		},
	};
}

// ---- the fake LLM (an OpenAI-compatible server, as PI.md describes) -----------------------------

/**
 * `reply(body, n)` decides each answer: a string (streamed as text), or {tool: name, args: {...}}
 * (a tool call), or {error: status, message}.
 */
export async function startFakeLLM(reply) {
	const requests = [];
	const server = http.createServer(async (req, res) => {
		let raw = "";
		for await (const chunk of req) raw += chunk;
		const body = JSON.parse(raw || "{}");
		requests.push(body);
		const answer = await llm.reply(body, requests.length);
		if (answer && answer.error) {
			res.writeHead(answer.error, { "Content-Type": "application/json" });
			return res.end(JSON.stringify({ error: { message: answer.message, type: "server_error" } }));
		}
		res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "close" });
		const chunk = (delta, finish = null, usage = false) => {
			const event = {
				id: "chatcmpl-fake",
				object: "chat.completion.chunk",
				created: Math.floor(Date.now() / 1000),
				model: body.model ?? "fake-1",
				choices: [{ index: 0, delta, finish_reason: finish }],
			};
			if (usage) event.usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
			res.write(`data: ${JSON.stringify(event)}\n\n`);
		};
		chunk({ role: "assistant", content: "" });
		if (answer && answer.tool) {
			const call = { index: 0, id: `call_${requests.length}`, type: "function" };
			chunk({ tool_calls: [{ ...call, function: { name: answer.tool, arguments: JSON.stringify(answer.args) } }] });
			chunk({}, "tool_calls", true);
		} else {
			const text = String(answer);
			for (let i = 0; i < text.length; i += 40) chunk({ content: text.slice(i, i + 40) });
			chunk({}, "stop", true);
		}
		res.end("data: [DONE]\n\n");
	});
	await new Promise((r) => server.listen(0, "127.0.0.1", r));
	const port = server.address().port;
	const llm = {
		port,
		requests,
		reply,
		/** pi's models.json for a provider `fake` with model `fake-1` served by this server. */
		modelsJson: () => ({
			providers: {
				fake: {
					baseUrl: `http://127.0.0.1:${port}/v1`,
					api: "openai-completions",
					apiKey: "x",
					compat: { supportsDeveloperRole: false },
					models: [{ id: "fake-1", reasoning: false, contextWindow: 128000, maxTokens: 4096 }],
				},
			},
		}),
		/** A PI_CODING_AGENT_DIR with that models.json and nothing else. */
		agentDir: () => {
			const dir = tempDir("wf-pi");
			fs.writeFileSync(path.join(dir, "models.json"), JSON.stringify(llm.modelsJson()));
			return dir;
		},
		stop: () => {
			server.closeAllConnections();
			return new Promise((r) => server.close(r));
		},
	};
	return llm;
}

/** The text of every message of one role in one chat-completions request. */
export function messagesText(body, role) {
	return (body.messages ?? [])
		.filter((m) => m.role === role)
		.map((m) => (typeof m.content === "string" ? m.content : (m.content ?? []).map((p) => p.text ?? "").join("")))
		.join("\n");
}

// ---- the daemon ---------------------------------------------------------------------------------

export function connectable(socket) {
	return new Promise((resolve) => {
		const c = net.createConnection(socket);
		c.once("connect", () => {
			c.destroy();
			resolve(true);
		});
		c.once("error", () => resolve(false));
	});
}

/** One raw protocol exchange: send `body`, return its terminal frame. */
export function rawRequest(socket, body) {
	return new Promise((resolve, reject) => {
		const c = net.createConnection(socket);
		let buf = "";
		c.setEncoding("utf8");
		c.on("data", (d) => {
			buf += d;
			for (const line of buf.split("\n").slice(0, -1)) {
				const f = JSON.parse(line);
				if (f.type === "result" || f.type === "error") {
					c.destroy();
					resolve(f);
				}
			}
			buf = buf.slice(buf.lastIndexOf("\n") + 1);
		});
		c.on("error", reject);
		c.write(`${JSON.stringify({ id: 1, ...body })}\n`);
	});
}

/** A config file for a test daemon: private addresses allowed (the site is on 127.0.0.1). */
export function writeConfig(dir, { subagent = "/nonexistent/pi-for-tests", extra = "" } = {}) {
	const file = path.join(dir, "config.toml");
	fs.writeFileSync(file, `[fetch]\nallow_private = true\n\n[subagent]\ncommand = ${JSON.stringify(subagent)}\n${extra}\n`);
	return file;
}

/**
 * A real `webfetch serve` with its own Chrome. webfetch drives that Chrome over its DevTools pipe, with no
 * port; with `devtoolsPort` its config gives Chrome a port as well, and TMPDIR is the daemon's own
 * directory, so the test can find that port (Chrome writes DevToolsActivePort into its profile) and list
 * its tabs (`pageTargets`).
 */
export async function startDaemon({ subagent, extra = "", search, env = {}, args = [], devtoolsPort = false } = {}) {
	const dir = tempDir("wf-d");
	const socket = path.join(dir, "s.sock");
	if (search) extra += `\n[search]\nsearxng_url = ${JSON.stringify(search)}\n`;
	if (devtoolsPort) extra += '\n[browser]\nargs = ["--remote-debugging-port=0"]\n';
	const config = writeConfig(dir, { subagent, extra });
	const log = fs.openSync(path.join(dir, "daemon.log"), "a");
	const proc = spawn(PYTHON, ["-m", "webfetch", "serve", "--socket", socket, "--config", config, ...args], {
		env: { ...process.env, TMPDIR: dir, KAGI_API_KEY: "", BRAVE_API_KEY: "", ...env },
		stdio: ["ignore", log, log],
	});
	fs.closeSync(log);
	const exited = new Promise((r) => proc.once("exit", (code, signal) => r({ code, signal })));
	await waitFor("the daemon to listen", () => connectable(socket), 30_000);
	return {
		dir,
		socket,
		config,
		proc,
		exited,
		log: () => fs.readFileSync(path.join(dir, "daemon.log"), "utf8"),
		/** The page targets of the daemon's Chrome, as Chrome itself lists them. */
		async pageTargets() {
			const profile = fs
				.readdirSync(dir)
				.filter((n) => n.startsWith("webfetch-chrome-"))
				.map((n) => path.join(dir, n, "profile", "DevToolsActivePort"))
				.find((p) => fs.existsSync(p));
			if (!profile) throw new Error("the daemon's Chrome has no DevToolsActivePort (yet? startDaemon({ devtoolsPort: true }))");
			const port = fs.readFileSync(profile, "utf8").split("\n")[0].trim();
			const list = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
			return list.filter((t) => t.type === "page");
		},
		async stop() {
			if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
			const end = await exited;
			fs.rmSync(dir, { recursive: true, force: true });
			return end;
		},
	};
}

// ---- pi -----------------------------------------------------------------------------------------

/** Run the real pi in json mode; resolve with its exit code and parsed events. */
export function runPi(args, env) {
	return new Promise((resolve, reject) => {
		const child = spawn(PI, ["--mode", "json", "-p", "--no-session", ...args], {
			env: { ...process.env, PI_OFFLINE: "1", ...env },
			stdio: ["ignore", "pipe", "pipe"],
		});
		let out = "";
		let err = "";
		child.stdout.on("data", (d) => (out += d));
		child.stderr.on("data", (d) => (err += d));
		const timer = setTimeout(() => child.kill("SIGKILL"), 90_000);
		child.on("error", reject);
		child.on("exit", (code) => {
			clearTimeout(timer);
			const events = out
				.split("\n")
				.filter((l) => l.trim().startsWith("{"))
				.map((l) => JSON.parse(l));
			resolve({ code, events, stdout: out, stderr: err });
		});
	});
}
