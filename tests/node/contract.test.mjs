// The tool contract and the golden results, as pi sees them: the extension loaded with pi's own loader
// registers each tool as tools.json says, and each golden daemon frame (tests/golden, the files
// tests/test_tool_contract.py runs through the MCP server's text) reads as its golden text. The daemon is a
// replay on a Unix socket: it answers status (so every tool is registered), then each request with the frame.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { after, before, test } from "node:test";
import { spawnSync } from "node:child_process";
import * as os from "node:os";
import { createJiti } from "jiti";
import { EXTENSION, PYTHON, ROOT, piModule, tempDir } from "./helpers.mjs";

const { discoverAndLoadExtensions } = await piModule();
const CONTRACT = JSON.parse(fs.readFileSync(path.join(EXTENSION, "tools.json"), "utf8")).tools;
const GOLDEN_DIR = path.join(ROOT, "tests", "golden");
const GOLDEN = fs.readdirSync(GOLDEN_DIR).filter((f) => f.endsWith(".json")).sort();

/** A daemon that answers every request with `answer(request)`, keeping the requests it got. */
function startReplay(answer) {
	const dir = tempDir("wf-replay");
	const socket = path.join(dir, "s.sock");
	const requests = [];
	const server = net.createServer((conn) => {
		let buf = "";
		conn.setEncoding("utf8");
		conn.on("error", () => {});
		conn.on("data", (chunk) => {
			buf += chunk;
			let nl;
			while ((nl = buf.indexOf("\n")) >= 0) {
				const req = JSON.parse(buf.slice(0, nl));
				buf = buf.slice(nl + 1);
				if (req.op === "cancel") continue;
				requests.push(req);
				for (const page of req.op === "status" ? [] : pages) conn.write(`${JSON.stringify({ ...page, id: req.id })}\n`);
				conn.write(`${JSON.stringify({ ...answer(req), id: req.id })}\n`);
			}
		});
	});
	return new Promise((resolve) =>
		server.listen(socket, () =>
			resolve({
				socket,
				requests,
				stop: () => new Promise((r) => server.close(() => (fs.rmSync(dir, { recursive: true, force: true }), r()))),
			}),
		),
	);
}

let replay;
let frame = null;
let pages = []; // a batch's page frames, sent before `frame`
let ext;

const TIMEOUT = { timeout: 30_000 };

before(async () => {
	replay = await startReplay((req) =>
		req.op === "status" ? { type: "result", op: "status", problems: [], browse_enabled: true } : frame);
	process.env.WEBFETCH_SOCKET = replay.socket;
	const agentDir = tempDir("wf-agent");
	try {
		const loaded = await discoverAndLoadExtensions([EXTENSION], process.cwd(), agentDir);
		assert.deepEqual(loaded.errors, []);
		ext = loaded.extensions[0];
	} finally {
		fs.rmSync(agentDir, { recursive: true, force: true });
	}
	for (const handler of ext.handlers.get("session_start")) await handler({ type: "session_start" }, { hasUI: false });
}, TIMEOUT);

after(async () => {
	delete process.env.WEBFETCH_SOCKET;
	await replay?.stop();
});

test("every tool is registered as tools.json has it: name, label, description, parameters, annotations", TIMEOUT, () => {
	assert.deepEqual([...ext.tools.keys()], CONTRACT.map((t) => t.name));
	for (const t of CONTRACT) {
		const d = ext.tools.get(t.name).definition;
		assert.equal(d.label, t.title);
		assert.equal(d.description, t.description.join(" "));
		assert.deepEqual(d.parameters, t.inputSchema);
		assert.deepEqual(d.annotations, t.annotations);
		assert.equal(d.promptSnippet, t.pi?.promptSnippet);
		assert.deepEqual(d.promptGuidelines, t.pi?.promptGuidelines?.map((g) => g.replaceAll("{name}", t.name)));
	}
});

for (const file of GOLDEN) {
	test(`golden ${file}: the daemon's frame reads as its text`, TIMEOUT, async () => {
		const golden = JSON.parse(fs.readFileSync(path.join(GOLDEN_DIR, file), "utf8"));
		frame = golden.frame;
		pages = golden.pages ?? [];
		const tool = ext.tools.get(golden.tool).definition;
		replay.requests.length = 0;
		const r = await tool.execute("golden", golden.args, AbortSignal.timeout(10_000), undefined, { hasUI: false });
		const text = typeof golden.text === "string" ? golden.text : golden.text.pi;
		assert.equal(r.content[0].type, "text");
		assert.equal(r.content[0].text, text);
		if (frame.image) assert.deepEqual(r.content[1], { type: "image", data: frame.image, mimeType: "image/png" });
		else assert.equal(r.content.length, 1);
		// the model's arguments went to the daemon as they were
		const [req] = replay.requests;
		for (const [k, v] of Object.entries(golden.args)) assert.deepEqual(req[k], v, k);
	});
}

test("an extension copied without its tools.json fails to load, saying what is missing and what to run", TIMEOUT, async () => {
	const here = tempDir("wf-broken");
	const agentDir = tempDir("wf-agent");
	try {
		for (const name of fs.readdirSync(EXTENSION).filter((n) => n.endsWith(".ts"))) {
			fs.copyFileSync(path.join(EXTENSION, name), path.join(here, name));
		}
		const loaded = await discoverAndLoadExtensions([here], process.cwd(), agentDir);
		assert.equal(loaded.extensions.length, 0);
		assert.match(JSON.stringify(loaded.errors), /cannot read its tool contract .*tools\.json.*webfetch pi install/);
	} finally {
		fs.rmSync(here, { recursive: true, force: true });
		fs.rmSync(agentDir, { recursive: true, force: true });
	}
});

test("the extension's default socket is config.py's, with and without XDG_RUNTIME_DIR", TIMEOUT, async () => {
	// MCP clients start `webfetch mcp` without XDG_RUNTIME_DIR: a client that disagreed would start a second daemon
	const { defaultSocket, logPathFor } = await createJiti(import.meta.url).import(path.join(EXTENSION, "index.ts"));
	const runUser = tempDir("wf-run");
	const python = (env) => {
		const code = "import json, sys\nfrom pathlib import Path\nfrom webfetch.config import default_socket_path\n" +
			"print(default_socket_path(json.loads(sys.argv[1]), Path(sys.argv[2])))";
		const out = spawnSync(PYTHON, ["-c", code, JSON.stringify(env), runUser], { encoding: "utf8", cwd: ROOT });
		assert.equal(out.status, 0, out.stderr);
		return out.stdout.trim();
	};
	try {
		const uid = String(os.userInfo().uid);
		for (const [env, made] of [[{ XDG_RUNTIME_DIR: "/run/user/1000" }, false], [{}, false], [{}, true]]) {
			if (made) fs.mkdirSync(path.join(runUser, uid));
			assert.equal(defaultSocket(env, runUser), python(env), JSON.stringify({ env, made }));
		}
		assert.equal(defaultSocket({}, runUser), path.join(runUser, uid, "webfetch", "webfetch.sock"));
		assert.match(logPathFor(defaultSocket({}), { XDG_STATE_HOME: "/s" }), /^\/s\/webfetch\/webfetch\.log$/);
	} finally {
		fs.rmSync(runUser, { recursive: true, force: true });
	}
});

test("a command the extension shows is quoted as webfetch/trust/shell.py quotes it: bash reads back each argument and runs nothing", TIMEOUT, async () => {
	const { shellCommand } = await createJiti(import.meta.url).import(path.join(EXTENSION, "index.ts"));
	const argv = ["/opt/my apps/webfetch", "-m", "it's", "$(touch pwned)", "`touch pwned2`", "a;touch pwned3", "", "two\nlines",
		"plain-1.2/x:y@z%+=,"];
	const code = "import json, sys\nfrom webfetch.trust.shell import command\nsys.stdout.write(command(*json.loads(sys.argv[1])))";
	const py = spawnSync(PYTHON, ["-c", code, JSON.stringify(argv)], { encoding: "utf8", cwd: ROOT });
	assert.equal(py.status, 0, py.stderr);
	assert.equal(shellCommand(argv), py.stdout);
	const dir = tempDir("wf-quote");
	try {
		const back = spawnSync("bash", ["-c", `printf '%s\\0' ${shellCommand(argv)}`], { cwd: dir, encoding: "utf8" });
		assert.equal(back.status, 0, back.stderr);
		assert.deepEqual(back.stdout.split("\0").slice(0, -1), argv);
		assert.deepEqual(fs.readdirSync(dir), [], "nothing ran");
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});
