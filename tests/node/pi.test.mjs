// The real pi binary with the extension, its model a fake LLM server that scripts the tool calls.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, test } from "node:test";
import {
	ARTICLE,
	EXTENSION,
	PI,
	PYTHON,
	ROOT,
	connectable,
	messagesText,
	piAtLeast,
	runPi,
	startDaemon,
	startFakeLLM,
	startSite,
	tempDir,
	waitFor,
	writeConfig,
} from "./helpers.mjs";

let site;
let llm;
let agentDir;
let daemon;

before(async () => {
	site = await startSite();
	llm = await startFakeLLM(() => "nothing scripted");
	agentDir = llm.agentDir();
	daemon = await startDaemon({ search: site.url(""), subagent: PI, env: { PI_CODING_AGENT_DIR: agentDir, PI_OFFLINE: "1" } });
});

after(async () => {
	await daemon?.stop();
	await site?.stop();
	await llm?.stop();
	fs.rmSync(agentDir, { recursive: true, force: true });
});

const env = () => ({ PI_CODING_AGENT_DIR: agentDir, WEBFETCH_SOCKET: daemon.socket });
const toolNames = (body) => (body.tools ?? []).map((t) => t.function?.name ?? t.name);

test("pi calls web_fetch when its model asks, and the tool result it records holds the page's markdown", async () => {
	const url = site.url("/article");
	llm.requests.length = 0;
	llm.reply = (_body, n) => (n === 1 ? { tool: "web_fetch", args: { url } } : "The page is about structured concurrency.");
	const run = await runPi(["-e", EXTENSION, "--model", "fake/fake-1", `What is ${url} about?`], env());
	assert.equal(run.code, 0, run.stderr);

	assert.ok(toolNames(llm.requests[0]).includes("web_fetch"), "the model was offered web_fetch");
	// pi lists it in the system prompt's tools, by its snippet, and adds its guidelines
	const system = messagesText(llm.requests[0], "system");
	assert.match(system, /web_fetch: Read a web page; with a `prompt`, get a focused answer/);
	assert.match(system, /Call web_fetch with a `prompt` that says what you need from the page/);
	const results = run.events.filter((e) => e.type === "message_end" && e.message?.role === "toolResult");
	assert.equal(results.length, 1, run.stdout.slice(0, 2000));
	const result = results[0].message;
	assert.equal(result.toolName, "web_fetch");
	assert.equal(result.isError, false);
	const text = result.content.map((c) => c.text).join("");
	assert.ok(text.startsWith(`${url} · "Trio Notes" · `), text.slice(0, 200));
	for (const p of ARTICLE) assert.ok(text.includes(p), `missing: ${p}`);
	assert.equal(result.details.kind, "page");

	// The model's second turn got the same text as the tool's answer.
	assert.equal(llm.requests.length, 2);
	assert.ok(messagesText(llm.requests[1], "tool").includes(ARTICLE[2]));
	const final = run.events.filter((e) => e.type === "message_end" && e.message?.role === "assistant").at(-1);
	assert.equal(final.message.content.map((c) => c.text ?? "").join(""), "The page is about structured concurrency.");
});

test("a daemon error reaches pi's model as a failed tool call with the daemon's message", async () => {
	llm.requests.length = 0;
	llm.reply = (_body, n) => (n === 1 ? { tool: "web_fetch", args: { url: "ftp://example.com/x" } } : "ok");
	const run = await runPi(["-e", EXTENSION, "--model", "fake/fake-1", "fetch it"], env());
	assert.equal(run.code, 0, run.stderr);
	const result = run.events.find((e) => e.type === "message_end" && e.message?.role === "toolResult").message;
	assert.equal(result.isError, true);
	assert.match(result.content[0].text, /'ftp:\/\/example\.com\/x' is not an http\(s\) URL/);
});

test("pi calls web_search and its model gets the daemon's results", async () => {
	llm.requests.length = 0;
	llm.reply = (_body, n) => (n === 1 ? { tool: "web_search", args: { query: "trio", limit: 2 } } : "Found it.");
	const run = await runPi(["-e", EXTENSION, "--model", "fake/fake-1", "search for trio"], env());
	assert.equal(run.code, 0, run.stderr);
	const result = run.events.find((e) => e.type === "message_end" && e.message?.role === "toolResult").message;
	assert.equal(result.toolName, "web_search");
	assert.equal(result.isError, false);
	assert.ok(result.content[0].text.startsWith('SearXNG results for "trio" (2):\n1. Trio docs — https://trio.readthedocs.io/'));
	assert.ok(messagesText(llm.requests[1], "tool").includes("Related searches: trio nursery"));
});

test("next to another extension's web_search, pi starts and offers webfetch_search as well", async () => {
	const other = path.join(ROOT, "tests", "node", "fixtures", "other-web-search.ts");
	llm.requests.length = 0;
	llm.reply = () => "hello";
	const run = await runPi(["-e", EXTENSION, "-e", other, "--model", "fake/fake-1", "hi"], env());
	assert.equal(run.code, 0, run.stderr);
	const names = toolNames(llm.requests[0]);
	for (const name of ["web_fetch", "web_search", "webfetch_search"]) assert.ok(names.includes(name), JSON.stringify(names));
	const web_search = llm.requests[0].tools.find((t) => (t.function?.name ?? t.name) === "web_search");
	assert.match(JSON.stringify(web_search), /Someone else's web search/);
});

test("`webfetch pi install` puts the extension where pi loads it; `uninstall` takes it away", async () => {
	const dir = path.join(agentDir, "extensions", "webfetch");
	const cli = (action) =>
		execFileSync(PYTHON, ["-m", "webfetch", "pi", action], { env: { ...process.env, PI_CODING_AGENT_DIR: agentDir } }).toString();

	assert.match(cli("install"), new RegExp(`^installed the web_fetch extension for pi in ${dir}\n`));
	// every file of the extension (index.ts and the modules it imports, tools.json, package.json), and the record
	assert.deepEqual(fs.readdirSync(dir).sort(), [...fs.readdirSync(EXTENSION), "webfetch.json"].sort());
	const recorded = JSON.parse(fs.readFileSync(path.join(dir, "webfetch.json"), "utf8"));
	assert.ok(fs.existsSync(recorded.command[0]), `recorded command ${recorded.command}`);
	fs.writeFileSync(path.join(dir, "index.ts"), "export default function () { throw new Error('old copy'); }\n");
	assert.match(cli("install"), /^replaced the web_fetch extension/);
	assert.equal(
		fs.readFileSync(path.join(dir, "index.ts"), "utf8"),
		fs.readFileSync(path.join(EXTENSION, "index.ts"), "utf8"),
	);

	// pi (no -e) discovers it: it loads without error and offers web_fetch to the model.
	llm.requests.length = 0;
	llm.reply = () => "hello";
	let run = await runPi(["--model", "fake/fake-1", "hi"], env());
	assert.equal(run.code, 0, run.stderr);
	assert.doesNotMatch(run.stderr, /error/i);
	assert.ok(toolNames(llm.requests[0]).includes("web_fetch"), JSON.stringify(toolNames(llm.requests[0])));

	assert.match(cli("uninstall"), new RegExp(`^removed the web_fetch extension from ${dir}\n`));
	assert.equal(fs.existsSync(dir), false);
	llm.requests.length = 0;
	run = await runPi(["--model", "fake/fake-1", "hi"], env());
	assert.equal(run.code, 0, run.stderr);
	assert.ok(!toolNames(llm.requests[0]).includes("web_fetch"));
	assert.match(cli("uninstall"), /nothing to remove/);
});

const isSubagent = (body) => messagesText(body, "system").includes("You read one web page for a coding agent");

test("a prompted web_fetch's answer comes with the sub-agent's usage, which a pi that knows it records", async () => {
	const url = site.url("/article");
	llm.requests.length = 0;
	let turn = 0;
	llm.reply = (body) => {
		if (isSubagent(body)) return "The article is about structured concurrency.";
		turn += 1;
		return turn === 1 ? { tool: "web_fetch", args: { url, prompt: "What is it about?" } } : "Done.";
	};
	const run = await runPi(["-e", EXTENSION, "--model", "fake/fake-1", `What is ${url} about?`], env());
	assert.equal(run.code, 0, run.stderr);
	const result = run.events.find((e) => e.type === "message_end" && e.message?.role === "toolResult").message;
	assert.equal(result.isError, false, JSON.stringify(result).slice(0, 500));
	assert.equal(result.details.kind, "answer");
	assert.match(result.content[0].text, /The article is about structured concurrency\./);
	assert.equal(result.details.usage.total_tokens, 15);
	// pi 0.81 added usage to tool results; an older pi drops the field and works just the same
	if (piAtLeast("0.81.0")) assert.equal(result.usage?.totalTokens, 15, JSON.stringify(result.usage));
	else assert.equal(result.usage, undefined);
});

test("as a pi package: `pi install <path>` loads it in place, and it starts its own checkout's daemon", async () => {
	const dir = tempDir("wf-pkg");
	const socket = path.join(dir, "s.sock");
	const config = writeConfig(dir, { extra: "[server]\nidle_exit_s = 1\n" });
	const pi = (...args) => execFileSync(PI, args, { env: { ...process.env, PI_CODING_AGENT_DIR: agentDir } }).toString();
	try {
		pi("install", EXTENSION);
		const url = site.url("/article");
		llm.requests.length = 0;
		llm.reply = (_body, n) => (n === 1 ? { tool: "web_fetch", args: { url } } : "ok");
		assert.equal(await connectable(socket), false);
		// no WEBFETCH_BIN and no record from `webfetch pi install`: it finds bin/webfetch next to itself
		const run = await runPi(["--model", "fake/fake-1", "fetch it"], {
			PI_CODING_AGENT_DIR: agentDir,
			WEBFETCH_SOCKET: socket,
			WEBFETCH_CONFIG: config,
		});
		assert.equal(run.code, 0, run.stderr);
		const result = run.events.find((e) => e.type === "message_end" && e.message?.role === "toolResult").message;
		assert.equal(result.isError, false, result.content[0].text);
		assert.ok(result.content[0].text.includes(ARTICLE[0]));
		await waitFor("the daemon it started to exit when idle", () => !fs.existsSync(socket), 30_000);
	} finally {
		pi("remove", EXTENSION);
		fs.rmSync(dir, { recursive: true, force: true });
	}
	llm.requests.length = 0;
	llm.reply = () => "hello";
	const run = await runPi(["--model", "fake/fake-1", "hi"], env());
	assert.ok(!toolNames(llm.requests[0]).includes("web_fetch"), "removed");
});
