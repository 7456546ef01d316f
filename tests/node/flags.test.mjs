// No silent success in pi: a fetch that returned an anti-bot check page, not the page, says so in the
// first line the model reads, and the note says what to do. The extension loaded by pi's own loader, its
// tool run against a real daemon (real Chrome), the page served from 127.0.0.1.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as http from "node:http";
import { after, before, test } from "node:test";
import { discoverAndLoadExtensions } from "@mariozechner/pi-coding-agent";
import { EXTENSION, startDaemon, tempDir } from "./helpers.mjs";

const CHALLENGE = `<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title></head><body>
<div class="main-wrapper" role="main"><h2 id="challenge-running">Verifying you are human. This may take a few seconds.</h2>
<div id="challenge-body-text">www.example.org needs to review the security of your connection before proceeding.</div></div>
<script>window._cf_chl_opt={cvId:'3',cType:'managed'};</script></body></html>`;
const CTX = { model: { provider: "fake", id: "fake-1" }, hasUI: false, ui: { notify() {} } };

let server;
let port;
let daemon;
let tool;

before(async () => {
	server = http.createServer((req, res) => {
		res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
		res.end(CHALLENGE);
	});
	await new Promise((r) => server.listen(0, "127.0.0.1", r));
	port = server.address().port;
	daemon = await startDaemon();
	process.env.WEBFETCH_SOCKET = daemon.socket;
	const agentDir = tempDir("wf-agent");
	try {
		const loaded = await discoverAndLoadExtensions([EXTENSION], process.cwd(), agentDir);
		assert.deepEqual(loaded.errors, []);
		tool = loaded.extensions[0].tools.get("web_fetch").definition;
	} finally {
		fs.rmSync(agentDir, { recursive: true, force: true });
	}
});

after(async () => {
	delete process.env.WEBFETCH_SOCKET;
	await daemon?.stop();
	await new Promise((r) => server?.close(r));
});

test("a challenge page is flagged in the facts line and explained in the notes", async () => {
	const r = await tool.execute("c", { url: `http://127.0.0.1:${port}/story` }, undefined, undefined, CTX);
	const text = r.content[0].text;
	const facts = text.split("\n")[0];
	assert.match(facts, / · FLAGS: challenge \(read the notes before using this content\)$/);
	assert.match(text, /\n- challenge: this is an anti-bot check page \(.*\), not the content; webfetch does not solve challenges/);
});
