/**
 * webfetch for pi: the `web_fetch`, `web_search` and browser tools, talking to the webfetch daemon over its
 * Unix socket. pi loads this file (package.json names it) with the modules beside it:
 * - tools.ts: the tools, each from tools.json (the contract `webfetch mcp` and the CLI read too);
 * - client.ts: the daemon's socket, starting the daemon, one request and its frames;
 * - formatting.ts: the text the model reads of each result, and its rendering in pi's TUI;
 * - pi.ts: the types of pi's extension API used here; protocol.ts: the daemon's frames and requests
 *   (docs/PROTOCOL.md), generated from webfetch/protocol.py by `python -m webfetch.frontends.gen_types`.
 *
 * No imports from pi or npm: the parameters are plain JSON Schema (pi validates those as it does TypeBox
 * schemas) and the renderers return minimal components, so the extension loads in any pi that loads
 * extensions. `tsc --noEmit --strict` checks every file (tests/node/tsconfig.json).
 */
import * as fs from "node:fs";
import { RequestFailed, daemonDifference, request, settings, shellCommand } from "./client.ts";
import type { ExtensionAPI } from "./pi.ts";
import type { StatusResult } from "./protocol.ts";
import { fetchTool, registerBrowser, searchTool, toolNames } from "./tools.ts";

// The modules' API from the one entry, as it was before they were split out of this file (the node
// suites and tests/test_socket_trust.py import it from here).
export {
	checkSocket,
	daemonDifference,
	defaultSocket,
	logPathFor,
	ownWebfetch,
	RequestFailed,
	request,
	settings,
	shellCommand,
	UntrustedSocket,
} from "./client.ts";
export { browseText, formatBatch, formatResult, MAX_BYTES, MAX_LINES, wrap } from "./formatting.ts";
export {
	type BrowserOffer,
	browserTool,
	callLine,
	fetchTool,
	piUsage,
	readContract,
	registerBrowser,
	searchTool,
	summaryLine,
} from "./tools.ts";

const STATUS_TIMEOUT_MS = 15_000;

// Set by the daemon for its sub-agent `pi`: that pi must not get web_fetch again.
const SUBAGENT_ENV = "WEBFETCH_SUBAGENT";

function statusProblems(s: StatusResult): string[] {
	const problems = [...(s.problems ?? [])];
	if (s.subagent && s.subagent.available === false) {
		// protocol.py allows no command; the daemon always names one (its config's, `pi` by default)
		problems.push(
			`the sub-agent CLI \`${shellCommand([s.subagent.command ?? "pi"])}\` was not found, so web_fetch prompts return raw pages; ` +
				"install pi (npm install -g @earendil-works/pi-coding-agent, Node.js 22.19 or newer) " +
				"or set subagent.command in ~/.config/webfetch/config.toml",
		);
	}
	return problems;
}

/**
 * The daemon's status and what it lacks. `start`: start a daemon when none listens (there is a user to
 * tell what is missing, and its Chrome is then warm for the first fetch); else only a listening one is
 * asked. A daemon that cannot be asked gives null and the reason as the problem.
 */
async function askStatus(start: boolean): Promise<{ status: StatusResult | null; problems: string[] }> {
	try {
		const status = await request({ op: "status" }, { signal: AbortSignal.timeout(STATUS_TIMEOUT_MS), start });
		return { status, problems: statusProblems(status) };
	} catch (e) {
		const problem = e instanceof RequestFailed && e.code === "timeout" && !e.fromDaemon
			? `the webfetch daemon did not answer within ${STATUS_TIMEOUT_MS / 1000} s; see ${settings().log}`
			: e instanceof Error
				? e.message
				: String(e);
		return { status: null, problems: [problem] };
	}
}

/** Stop the listening daemon (the `stop` op) and wait until its socket is gone; false when it would not. */
async function stopDaemon(): Promise<boolean> {
	const s = settings();
	try {
		await request({ op: "stop" }, { signal: AbortSignal.timeout(STATUS_TIMEOUT_MS), start: false });
	} catch {
		return false;
	}
	for (const until = Date.now() + 20_000; Date.now() < until; ) {
		if (!fs.existsSync(s.socket)) return true;
		await new Promise((r) => setTimeout(r, 50));
	}
	return false;
}

export default function webfetch(pi: ExtensionAPI): void {
	if (process.env[SUBAGENT_ENV]) return; // we are the daemon's sub-agent: no web access from here

	pi.registerTool(fetchTool(pi));
	const browser = registerBrowser(pi);

	// web_search may belong to another extension already (pi-web-access has one), and two tools of one name
	// make pi exit: register it once the other extensions are loaded, under another name if need be.
	let searchName: string | null = null;
	pi.on("session_start", async (_event, ctx) => {
		if (searchName === null) {
			const taken = toolNames(pi).includes("web_search");
			searchName = taken ? "webfetch_search" : "web_search";
			pi.registerTool(searchTool(searchName));
			if (taken && ctx?.hasUI) {
				ctx.ui?.notify("webfetch: another extension already provides web_search; webfetch's search is webfetch_search", "info");
			}
		}
		// Without a UI (print/json mode) there is nobody to tell: a daemon is not started for nothing, and one
		// that listens (a socket-activated one too) is asked only whether the browser tool can serve.
		const ui = !!ctx?.hasUI;
		if (!ui && browser.registered) return;
		let { status, problems } = await askStatus(ui);
		const differs = ui && status ? daemonDifference(status, settings()) : null;
		if (differs && status) {
			const info = status.daemon;
			const idle = !status.requests?.in_flight && !status.browse?.length;
			if (info?.exit_when_idle && idle && (await stopDaemon())) {
				({ status, problems } = await askStatus(true));
				ctx.ui?.notify(`webfetch: restarted the daemon (pid ${info.pid}), which ${differs}`, "info");
			} else {
				ctx.ui?.notify(
					`webfetch: the running daemon (pid ${info?.pid ?? "?"}) ${differs}; \`webfetch restart\` gives you one that runs this extension's`,
					"warning",
				);
			}
		}
		if (ui && problems.length) ctx.ui?.notify(`webfetch: ${problems.join("; ")}`, "error");
		browser.offer(ctx, status);
	});
}
