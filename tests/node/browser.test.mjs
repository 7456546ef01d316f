// The agent_browser tool end to end: the real pi, a fake LLM that reads each snapshot and scripts the next
// call by ref, a real daemon and Chrome, and a login form whose server records what was posted.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as http from "node:http";
import { after, before, test } from "node:test";
import { discoverAndLoadExtensions } from "@mariozechner/pi-coding-agent";
import { EXTENSION, messagesText, rawRequest, runPi, startDaemon, startFakeLLM, tempDir } from "./helpers.mjs";

const LOGIN = `<!doctype html><html><head><title>Sign in</title></head><body><h1>Sign in</h1>
<form method="post" action="/login"><label for="u">Username</label> <input id="u" name="user">
<input type="password" name="password" placeholder="Password"><button>Sign in</button></form></body></html>`;

const UPLOAD = `<!doctype html><html><head><title>Upload</title></head><body><form method="post" action="/upload"
enctype="multipart/form-data"><label for="f">Resume</label> <input id="f" type="file" name="resume"><button>Send</button></form></body></html>`;

let app;
let posted = [];
let uploads = [];
let llm;
let agentDir;
let daemon;

before(async () => {
	app = http.createServer(async (req, res) => {
		let raw = "";
		for await (const chunk of req) raw += chunk;
		if (req.method === "POST" && req.url === "/upload") {
			uploads.push(raw);
			res.writeHead(200, { "Content-Type": "text/html" });
			return res.end("<html><head><title>Sent</title></head><body><h1>Sent</h1></body></html>");
		}
		if (req.url === "/upload") {
			res.writeHead(200, { "Content-Type": "text/html" });
			return res.end(UPLOAD);
		}
		if (req.method === "POST") {
			posted.push(Object.fromEntries(new URLSearchParams(raw)));
			res.writeHead(303, { Location: "/home" });
			return res.end();
		}
		const body = req.url === "/home" ? "<html><head><title>Home</title></head><body><h1>Welcome back</h1></body></html>" : LOGIN;
		res.writeHead(200, { "Content-Type": "text/html" });
		res.end(body);
	});
	await new Promise((r) => app.listen(0, "127.0.0.1", r));
	llm = await startFakeLLM(() => "nothing scripted");
	agentDir = llm.agentDir();
	daemon = await startDaemon();
});

after(async () => {
	await daemon?.stop();
	app?.closeAllConnections();
	await new Promise((r) => app?.close(r));
	await llm?.stop();
	fs.rmSync(agentDir, { recursive: true, force: true });
});

const env = () => ({ PI_CODING_AGENT_DIR: agentDir, WEBFETCH_SOCKET: daemon.socket });
const url = (p) => `http://127.0.0.1:${app.address().port}${p}`;
const lastTool = (body) => messagesText(body, "tool").split("\n");
const refOf = (body, start) => {
	const line = lastTool(body).reverse().find((l) => l.trimStart().startsWith(start));
	return line?.match(/ref=(e\d+)/)?.[1];
};
const toolResults = (run) => run.events.filter((e) => e.type === "message_end" && e.message?.role === "toolResult").map((e) => e.message);

test("pi's model logs in through agent_browser by refs; the server gets the form; the session closes with pi", async () => {
	posted = [];
	llm.requests.length = 0;
	llm.reply = (body, n) => {
		if (n === 1) return { tool: "agent_browser", args: { action: "open", url: url("/login") } };
		if (n === 2) return { tool: "agent_browser", args: { action: "fill", ref: refOf(body, '- textbox "Username"'), text: "ann" } };
		if (n === 3) return { tool: "agent_browser", args: { action: "click", ref: "e1" } };  // a textbox: focus it
		if (n === 4) return { tool: "agent_browser", args: { action: "fill", ref: "e2", text: "hunter2", submit: true } };
		if (n === 5) return { tool: "agent_browser", args: { action: "click", ref: "e3" } };  // the old page's button
		if (n === 6) return { tool: "agent_browser", args: { action: "screenshot" } };
		return "Logged in.";
	};
	const run = await runPi(["-e", EXTENSION, "--model", "fake/fake-1", "log in as ann"], env());
	assert.equal(run.code, 0, run.stderr);
	const names = (llm.requests[0].tools ?? []).map((t) => t.function?.name ?? t.name);
	assert.ok(names.includes("agent_browser"), JSON.stringify(names));
	assert.match(JSON.stringify(llm.requests[0].tools), /The loop: `open` a URL -> read the snapshot/);

	const results = toolResults(run);
	assert.equal(results.length, 6, run.stdout.slice(0, 3000));
	const [opened, filled, clicked, submitted, stale, shot] = results;
	const openText = opened.content[0].text;
	assert.ok(openText.startsWith(`[t1] Sign in — ${url("/login")} · new page\n`), openText);
	assert.match(openText, /- textbox "Password" \[ref=e2\]/);
	assert.equal(opened.details.category, "result");
	assert.equal(opened.details.snapshot_kind, "full");
	assert.equal(opened.details.document, `t1@${url("/login")}`);
	assert.match(filled.content[0].text, /value now: ann/);
	assert.equal(clicked.isError, false);
	assert.equal(submitted.details.change, "navigation");
	assert.match(submitted.content[0].text, /Welcome back/);
	assert.deepEqual(posted, [{ user: "ann", password: "hunter2" }]);
	// a ref of the old document: an error that starts with its code and says what to do
	assert.equal(stale.isError, true);
	assert.match(stale.content[0].text, /^stale_ref: e3 belongs to a document that is gone .* take a new snapshot/);
	// the screenshot is an image the model sees
	const image = shot.content.find((c) => c.type === "image");
	assert.equal(image.mimeType, "image/png");
	assert.ok(Buffer.from(image.data, "base64").subarray(1, 4).toString() === "PNG");
	assert.equal(shot.details.width, 1280);

	// pi has exited: its browse session is gone from the daemon
	const status = await rawRequest(daemon.socket, { id: 1, op: "status" });
	assert.deepEqual(status.browse, []);
});

test("a daemon with browse.enabled = false: pi's model is not offered a browser tool that could only fail", async () => {
	const off = await startDaemon({ extra: "[browse]\nenabled = false\n" });
	try {
		llm.requests.length = 0;
		llm.reply = () => "No browser, then.";
		const run = await runPi(["-e", EXTENSION, "--model", "fake/fake-1", "log in as ann"], { ...env(), WEBFETCH_SOCKET: off.socket });
		assert.equal(run.code, 0, run.stderr);
		const names = (llm.requests[0].tools ?? []).map((t) => t.function?.name ?? t.name);
		assert.ok(names.includes("web_fetch"), JSON.stringify(names));
		assert.ok(!names.some((n) => /browser/.test(n)), JSON.stringify(names));
	} finally {
		await off.stop();
	}
});

test("Escape (the abort signal) ends a browser action at once; the session answers the next one", async () => {
	const agentDir2 = tempDir("wf-agent");
	const saved = process.env.WEBFETCH_SOCKET;
	process.env.WEBFETCH_SOCKET = daemon.socket;
	try {
		const loaded = await discoverAndLoadExtensions([EXTENSION], process.cwd(), agentDir2);
		const ext = loaded.extensions[0];
		for (const h of ext.handlers.get("session_start")) await h({}, { hasUI: false });
		const tool = ext.tools.get("agent_browser").definition;
		const ctx = { sessionManager: { getSessionId: () => "escape-test" } };
		const updates = [];
		const opened = await tool.execute("c1", { action: "open", url: url("/login") }, undefined, (u) => updates.push(u), ctx);
		assert.match(opened.content[0].text, /- button "Sign in" \[ref=e3\]/);
		assert.ok(updates.some((u) => u.details.stage === "browse"), JSON.stringify(updates));
		const abort = new AbortController();
		const started = Date.now();
		const waiting = tool.execute("c2", { action: "wait", text: "never there", timeout_s: 30 }, abort.signal, undefined, ctx);
		setTimeout(() => abort.abort(), 300);
		await assert.rejects(waiting);
		assert.ok(Date.now() - started < 5000, "aborted at once, not after the 30 s wait");
		const failed = tool.execute("c3", { action: "click", ref: "e99" }, undefined, undefined, ctx);
		await assert.rejects(failed, /^Error: unknown_ref: e99 was never given out/);
		const snap = await tool.execute("c4", { action: "snapshot" }, undefined, undefined, ctx);
		assert.equal(snap.details.snapshot_kind, "full");
		for (const h of ext.handlers.get("session_shutdown")) await h({ type: "session_shutdown", reason: "quit" }, ctx);
		const status = await rawRequest(daemon.socket, { id: 1, op: "status" });
		assert.deepEqual(status.browse, []);
	} finally {
		if (saved === undefined) delete process.env.WEBFETCH_SOCKET;
		else process.env.WEBFETCH_SOCKET = saved;
		fs.rmSync(agentDir2, { recursive: true, force: true });
	}
});

test("upload reads from pi's working directory, which the extension sends; a dotfile there is refused", async () => {
	const agentDir2 = tempDir("wf-agent");
	const project = tempDir("wf-project");
	fs.writeFileSync(`${project}/resume.txt`, "Ann, engineer\n");
	fs.writeFileSync(`${project}/.npmrc`, "//registry/:_authToken=secret\n");
	const saved = process.env.WEBFETCH_SOCKET;
	process.env.WEBFETCH_SOCKET = daemon.socket;
	try {
		const loaded = await discoverAndLoadExtensions([EXTENSION], process.cwd(), agentDir2);
		const ext = loaded.extensions[0];
		for (const h of ext.handlers.get("session_start")) await h({}, { hasUI: false });
		const tool = ext.tools.get("agent_browser").definition;
		const ctx = { cwd: project, sessionManager: { getSessionId: () => "upload-test" } };
		const opened = await tool.execute("u1", { action: "open", url: url("/upload") }, undefined, undefined, ctx);
		const input = /- button "Resume" \[ref=(e\d+)\]/.exec(opened.content[0].text)[1];
		const send = /- button "Send" \[ref=(e\d+)\]/.exec(opened.content[0].text)[1];
		const put = await tool.execute("u2", { action: "upload", ref: input, files: ["resume.txt"] }, undefined, undefined, ctx);
		assert.match(put.content[0].text, /the file input holds: resume\.txt/);
		const dot = tool.execute("u3", { action: "upload", ref: input, files: [".npmrc"] }, undefined, undefined, ctx);
		await assert.rejects(dot, /^Error: upload_refused: \.npmrc is a dotfile/);
		await tool.execute("u4", { action: "click", ref: send }, undefined, undefined, ctx);
		assert.equal(uploads.length, 1);
		assert.match(uploads[0], /filename="resume\.txt"\r\nContent-Type: text\/plain\r\n\r\nAnn, engineer\n\r\n/);
		for (const h of ext.handlers.get("session_shutdown")) await h({ type: "session_shutdown", reason: "quit" }, ctx);
	} finally {
		if (saved === undefined) delete process.env.WEBFETCH_SOCKET;
		else process.env.WEBFETCH_SOCKET = saved;
		fs.rmSync(agentDir2, { recursive: true, force: true });
		fs.rmSync(project, { recursive: true, force: true });
	}
});
