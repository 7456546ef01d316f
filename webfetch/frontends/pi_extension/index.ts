/**
 * webfetch for pi: the `web_fetch`, `web_search` and browser tools, talking to the webfetch daemon over its
 * Unix socket. Each tool's name, wording, parameters and annotations come from tools.json beside this file,
 * the contract `webfetch mcp` and the CLI read too.
 *
 * No imports from pi or npm: the parameters are plain JSON Schema (pi validates those as it does TypeBox
 * schemas) and the renderers return minimal components, so the file loads in any pi that loads
 * extensions; fields a newer pi reads (promptSnippet, promptGuidelines, annotations, a result's usage) are
 * ignored by an older one. The types below describe just what this file uses of pi and of the daemon's
 * wire contract (docs/PROTOCOL.md in the webfetch repository); `tsc --noEmit --strict` checks them
 * (tests/node/tsconfig.json).
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

// pi's limits for one tool result (DEFAULT_MAX_BYTES / DEFAULT_MAX_LINES in pi-coding-agent).
export const MAX_BYTES = 50 * 1024;
export const MAX_LINES = 2000;
const START_TIMEOUT_MS = 30_000;
const STATUS_TIMEOUT_MS = 15_000;
// Set by the daemon for its sub-agent `pi`: that pi must not get web_fetch again.
const SUBAGENT_ENV = "WEBFETCH_SUBAGENT";
const HERE = path.dirname(fileURLToPath(import.meta.url));

// ---- the tool contract (tools.json) -------------------------------------------------------------

/** What a tool's annotations may say (MCP's hints); pi reads none of them, permission extensions may. */
interface Annotations {
	readOnlyHint?: boolean;
	destructiveHint?: boolean;
	idempotentHint?: boolean;
	openWorldHint?: boolean;
}

/**
 * One tool as tools.json, beside this file, gives it: the file `webfetch mcp` and the CLI read too, so a model
 * reads one wording in every client (`webfetch pi install` copies it here with this file). MCP's field names;
 * a description is its lines joined by one space; `pi` holds what only pi reads ({name}: the name registered).
 */
interface ContractTool {
	name: string;
	title: string;
	description: string[];
	inputSchema: JsonSchema;
	annotations: Annotations;
	pi?: { promptSnippet?: string; promptGuidelines?: string[] };
}

/** The contract's tools by name. A missing or broken file is a broken install: said when pi loads the extension. */
export function readContract(here: string = HERE): Map<string, ContractTool> {
	const file = path.join(here, "tools.json");
	let tools: ContractTool[];
	try {
		tools = (JSON.parse(fs.readFileSync(file, "utf8")) as { tools: ContractTool[] }).tools;
	} catch (e) {
		throw new Error(`webfetch cannot read its tool contract ${file} (${e instanceof Error ? e.message : String(e)}); ` +
			"run `webfetch pi install` again");
	}
	return new Map(tools.map((t) => [t.name, t]));
}

const CONTRACT = readContract();

/** A contract tool's wording, schema and annotations as pi takes them, registered as `name`. */
function fromContract(contractName: string, name: string = contractName) {
	const t = CONTRACT.get(contractName);
	if (!t) throw new Error(`webfetch's tool contract (tools.json) has no tool ${contractName}`);
	return {
		name,
		label: t.title,
		description: t.description.join(" "),
		...(t.pi?.promptSnippet ? { promptSnippet: t.pi.promptSnippet } : {}),
		...(t.pi?.promptGuidelines ? { promptGuidelines: t.pi.promptGuidelines.map((g) => g.replaceAll("{name}", name)) } : {}),
		annotations: t.annotations,
		parameters: t.inputSchema,
	};
}

// ---- the daemon's frames (docs/PROTOCOL.md) ------------------------------------------------------

type RequestId = string | number | null;

interface ProgressFrame {
	type: "progress";
	id: RequestId;
	stage: string;
	message: string;
	elapsed_ms: number;
}

interface UsageCost {
	input: number;
	output: number;
	cache_read: number;
	cache_write: number;
	total: number;
}

/** The sub-agent's tokens and cost, on an answer or a summary. */
interface WireUsage {
	input: number;
	output: number;
	cache_read: number;
	cache_write: number;
	total_tokens: number;
	cost: UsageCost;
}

interface FetchResultFrame {
	type: "result";
	id: RequestId;
	op: "fetch";
	kind: "page" | "summary" | "answer" | "redirect" | "find";
	url: string;
	final_url: string;
	status: number | null;
	content_type: string | null;
	title: string | null;
	content: string;
	offset: number;
	next_offset: number | null;
	total_chars: number;
	cached: boolean;
	age_s: number;
	extractor: string | null;
	truncated: boolean;
	redirect_url: string | null;
	model: string | null;
	usage?: WireUsage | null;
	notes: string[];
	/** Why the content may not be the page the caller wanted (PROTOCOL.md, flags); [] when it is. */
	flags: string[];
	/** With `find`: the pattern, how many places matched, the passages shown (kind "find"). */
	find?: string | null;
	matches?: number | null;
	passages?: { offset: number; headings: string[]; text: string }[] | null;
}

/** A batch's page (`urls`), sent as soon as it is ready: a fetch result's fields and the URL's index. */
interface PageFrame extends Omit<FetchResultFrame, "type"> {
	type: "page";
	index: number;
	error?: undefined;
}

/** A batch's URL that failed: why, as an error frame would say it. */
interface PageFailedFrame {
	type: "page";
	id: RequestId;
	index: number;
	url: string;
	error: { code: string; message: string; status?: number | null };
}

/** One URL of a batch in its final result (PROTOCOL.md, batch). */
interface BatchEntry {
	index: number;
	url: string;
	kind?: string;
	final_url?: string;
	title?: string | null;
	total_chars?: number;
	next_offset?: number | null;
	flags?: string[];
	error?: string;
	message?: string;
}

/** The end of a batch fetch, after its page frames: one entry per URL, in the order given. */
interface BatchResultFrame {
	type: "result";
	id: RequestId;
	op: "fetch";
	kind: "batch";
	pages: BatchEntry[];
	fetched: number;
	failed: number;
	content: string;
}

interface SearchHit {
	title: string;
	url: string;
	snippet: string;
	published: string | null;
}

interface SearchResultFrame {
	type: "result";
	id: RequestId;
	op: "search";
	backend: string;
	query: string;
	content: string;
	results: SearchHit[];
	related: string[];
	cached: boolean;
}

interface StatusResultFrame {
	type: "result";
	id: RequestId;
	op: "status";
	problems?: string[];
	subagent?: { command: string; available: boolean; version: string | null };
	/** false when `browse.enabled` is off: every browse action would fail with browse_disabled */
	browse_enabled?: boolean;
	version?: string;
	requests?: { in_flight: number; served: number };
	browse?: unknown[];
	/** which daemon answered (PROTOCOL.md); absent from daemons before webfetch 0.1.0's operable work */
	daemon?: {
		pid: number;
		exit_when_idle: boolean;
		socket_activated: boolean;
		config: string | null;
		config_digest: string | null;
	};
}

interface StopResultFrame {
	type: "result";
	id: RequestId;
	op: "stop";
	pid: number;
}

interface PageInfo {
	tab: string;
	url: string;
	title: string;
}

interface TabInfo extends PageInfo {
	active: boolean;
}

interface BrowseDialog {
	type: "alert" | "confirm" | "prompt" | "beforeunload";
	message: string;
	default_prompt?: string;
}

/** One of the browser tool's actions: tools.json's enum lists them (and the daemon checks them). */
type BrowseAction = string;

interface ConsoleEntry {
	kind: string;
	level: "error" | "warning" | "info" | "log" | "debug";
	text: string;
	url?: string | null;
	line?: number | null;
	stack?: string | null;
	nav?: number; // the tab's navigation it came from (ConsoleNav); left out: 0
}

/** A navigation of a browsed tab that console entries came from (protocol.py's ConsoleNav). */
interface ConsoleNav {
	nav: number;
	url: string;
	restored?: boolean;
}

/** A file a browsed page downloaded (protocol.py's Download). */
interface BrowseDownload {
	url: string;
	filename: string;
	state: "saved" | "too_large" | "failed" | "in_progress";
	path?: string | null;
	size?: number | null;
	mime?: string | null;
	message?: string | null;
}

/** One download of a browse result, as the model reads it (tool_text.py's download_line is the twin). */
function downloadLine(d: BrowseDownload): string {
	if (d.state === "saved") return `downloaded ${d.filename} (${d.size} bytes, ${d.mime}) to ${d.path}`;
	if (d.state === "in_progress") {
		return `downloading ${d.url} as ${d.filename}: not finished when this answer was sent (it is saved in the session's download directory when done)`;
	}
	return `download ${d.state === "too_large" ? "stopped" : "failed"}: ${d.url}: ${d.message}`;
}

/** A browse action's result (protocol.py's BrowseResult): the common fields always, the others when they apply. */
interface BrowseResultFrame {
	type: "result";
	id: RequestId;
	op: "browse";
	action: BrowseAction;
	session: string;
	page: PageInfo | null;
	change: "navigation" | "same_document" | "dom" | "none";
	refs_reset: boolean;
	snapshot: string;
	snapshot_kind: "full" | "diff" | "none";
	elapsed_ms: number;
	ref_count?: number | null;
	next_offset?: number | null;
	status?: number | null;
	value?: string | null;
	new_tabs?: { tab: string; url: string }[] | null;
	dialog?: BrowseDialog | null;
	downloads?: BrowseDownload[] | null;
	files?: string[] | null;
	waited_for?: string | null;
	tabs?: TabInfo[] | null;
	content?: string | null;
	image?: string | null;
	width?: number | null;
	height?: number | null;
	console?: ConsoleEntry[] | null;
	console_dropped?: number | null;
	console_navs?: ConsoleNav[] | null;
	console_errors?: number | null;
	viewport?: { width: number; height: number; scale: number; mobile: boolean } | null;
	path?: string | null;
	size?: number | null;
	notes?: string[] | null;
}

interface ErrorFrame {
	type: "error";
	id: RequestId;
	code: string;
	message: string;
}

type ResultFrame =
	| FetchResultFrame
	| BatchResultFrame
	| SearchResultFrame
	| StatusResultFrame
	| BrowseResultFrame
	| StopResultFrame;
type Frame = ProgressFrame | PageFrame | PageFailedFrame | ResultFrame | ErrorFrame;

interface FetchBody {
	op: "fetch";
	url?: string;
	urls?: string[];
	prompt?: string;
	offset?: number;
	raw?: boolean;
	fresh?: boolean;
	find?: string;
	profile?: string;
	model?: string;
	thinking?: string;
}

interface SearchBody {
	op: "search";
	query: string;
	limit?: number;
}

interface StatusBody {
	op: "status";
}

interface StopBody {
	op: "stop";
}

/** One browse action (protocol.py's BrowseRequest): which fields apply depends on `action`. */
interface BrowseBody extends BrowseParams {
	op: "browse";
	session: string;
	cwd?: string;
}

type RequestBody = FetchBody | SearchBody | StatusBody | BrowseBody | StopBody;
/** The result frame that answers each kind of request. */
type ResultOf<B extends RequestBody> = B extends FetchBody
	? FetchResultFrame | BatchResultFrame
	: B extends SearchBody
		? SearchResultFrame
		: B extends BrowseBody
			? BrowseResultFrame
			: B extends StopBody
				? StopResultFrame
				: StatusResultFrame;

// ---- what this file uses of pi (@earendil-works/pi-coding-agent's extension API) ---------------------

interface TextContent {
	type: "text";
	text: string;
}

interface ImageContent {
	type: "image";
	data: string;
	mimeType: string;
}

type Content = TextContent | ImageContent;

/** pi's Usage: a nested model's tokens, added to pi's footer and session totals (pi 0.81+). */
interface PiUsage {
	input: number;
	output: number;
	cacheRead: number;
	cacheWrite: number;
	totalTokens: number;
	cost: { input: number; output: number; cacheRead: number; cacheWrite: number; total: number };
}

interface ToolResult<D> {
	content: Content[];
	details: D;
	usage?: PiUsage;
}

type OnUpdate = ((update: { content: TextContent[]; details: { stage: string; elapsed_ms: number } }) => void) | undefined;

interface Theme {
	fg(color: string, text: string): string;
}

interface Component {
	render(width: number): string[];
	invalidate(): void;
}

interface RenderOptions {
	expanded: boolean;
	isPartial: boolean;
}

interface RenderContext {
	isError?: boolean;
}

interface ToolContext {
	model?: { provider?: string; id?: string };
	hasUI?: boolean;
	ui?: { notify(message: string, type?: "info" | "warning" | "error"): void };
	sessionManager?: { getSessionId?(): string | undefined };
	cwd?: string;
}

interface JsonSchema {
	type: string;
	items?: JsonSchema;
	enum?: string[];
	properties?: Record<string, JsonSchema & { description?: string }>;
	required?: string[];
	additionalProperties?: boolean;
	minimum?: number;
	maximum?: number;
}

interface ToolDefinition<P, D> {
	name: string;
	label: string;
	description: string;
	promptSnippet?: string;
	promptGuidelines?: string[];
	annotations?: Annotations;
	parameters: JsonSchema;
	execute(toolCallId: string, params: P, signal: AbortSignal | undefined, onUpdate: OnUpdate, ctx?: ToolContext): Promise<ToolResult<D>>;
	renderCall?(args: P, theme: Theme): Component;
	renderResult?(result: ToolResult<D | undefined>, options: RenderOptions, theme: Theme, context?: RenderContext): Component;
}

interface ExtensionAPI {
	registerTool<P, D>(tool: ToolDefinition<P, D>): void;
	on(event: "session_start" | "session_shutdown", handler: (event: unknown, ctx: ToolContext) => Promise<void> | void): void;
	getAllTools?(): { name: string }[];
	getThinkingLevel?(): string;
}

type Settings = { command: string[]; socket: string; log: string; version: string | null };

/**
 * A command line that is safe to paste (webfetch/shell.py's twin): each argument single-quoted for a POSIX
 * shell unless it is made only of characters no shell treats specially, a quote inside as '"'"'.
 */
export function shellCommand(argv: string[]): string {
	return argv.map((a) => (/^[A-Za-z0-9@%+=:,./_-]+$/.test(a) ? a : `'${a.replaceAll("'", `'"'"'`)}'`)).join(" ");
}

/**
 * Where the daemon is and how to start it: WEBFETCH_SOCKET / WEBFETCH_BIN, then what `webfetch pi install`
 * recorded, then the webfetch this file belongs to, then `webfetch` on PATH.
 */
export function settings(env: NodeJS.ProcessEnv = process.env, here: string = HERE): Settings {
	let recorded: { command?: string[]; socket?: string | null; version?: string } = {};
	try {
		recorded = JSON.parse(fs.readFileSync(path.join(here, "webfetch.json"), "utf8"));
	} catch {
		// loaded in place (`pi install <path>`, `pi -e <path>`): no record
	}
	const command = env.WEBFETCH_BIN
		? [env.WEBFETCH_BIN]
		: recorded.command?.length
			? recorded.command
			: ownWebfetch(here) ?? ["webfetch"];
	const socket = env.WEBFETCH_SOCKET || recorded.socket || defaultSocket(env);
	return { command, socket, log: logPathFor(socket, env), version: recorded.version ?? null };
}

/**
 * What differs between the daemon that answered `status` and the one this extension would start
 * (frontends/skew.py's twin): its webfetch version (known when `webfetch pi install` recorded it), the
 * config file it read, or that file changed since. null when nothing does.
 */
export function daemonDifference(status: StatusResultFrame, s: Settings, env: NodeJS.ProcessEnv = process.env): string | null {
	const diffs: string[] = [];
	if (s.version && status.version && status.version !== s.version) {
		diffs.push(`runs webfetch ${status.version}, and this extension's is ${s.version}`);
	}
	const info = status.daemon;
	if (info) {
		const mine = ownConfig(env);
		const name = (p: string | null) => p ?? "no config file (all defaults)";
		if (info.config !== mine.path) diffs.push(`read ${name(info.config)}, and this extension's daemon reads ${name(mine.path)}`);
		else if (info.config_digest !== mine.digest) diffs.push(`read ${mine.path} before it last changed`);
	}
	return diffs.length ? diffs.join("; ") : null;
}

/** The config file a daemon this extension starts reads (config.load_config_and_source), and its digest. */
function ownConfig(env: NodeJS.ProcessEnv): { path: string | null; digest: string | null } {
	const explicit = env.WEBFETCH_CONFIG || null;
	const file = explicit ?? path.join(env.XDG_CONFIG_HOME || path.join(os.homedir(), ".config"), "webfetch", "config.toml");
	try {
		const data = fs.readFileSync(file);
		return { path: path.resolve(file), digest: createHash("sha256").update(data).digest("hex").slice(0, 16) };
	} catch {
		return { path: explicit ? path.resolve(file) : null, digest: null };
	}
}

/** Where a daemon started in the background logs: config.py's log_path_for, the same file for every client. */
export function logPathFor(socket: string, env: NodeJS.ProcessEnv = process.env): string {
	const state = env.XDG_STATE_HOME || path.join(os.homedir(), ".local", "state");
	const name = socket === defaultSocket(env)
		? "webfetch.log"
		: `webfetch-${createHash("sha256").update(socket).digest("hex").slice(0, 8)}.log`;
	return path.join(state, "webfetch", name);
}

/**
 * The webfetch this extension came with, when pi loads it in place: a checkout's bin/webfetch (three levels
 * up: webfetch/frontends/pi_extension), or the `webfetch` script of the Python environment it is installed in
 * (<env>/lib/pythonX.Y/site-packages/webfetch/frontends/pi_extension → <env>/bin/webfetch, six levels up;
 * /usr's is one level less).
 */
export function ownWebfetch(here: string): string[] | undefined {
	let dir = here;
	for (let up = 0; up < 6; up++) {
		dir = path.dirname(dir);
		const candidate = path.join(dir, "bin", "webfetch");
		try {
			fs.accessSync(candidate, fs.constants.X_OK);
			return [candidate];
		} catch {
			// not here: one level up
		}
	}
	return undefined;
}

/** config.py's default_socket_path: every client must agree on it, or one starts a second daemon. */
export function defaultSocket(env: NodeJS.ProcessEnv = process.env, runUser = "/run/user"): string {
	if (env.XDG_RUNTIME_DIR) return path.join(env.XDG_RUNTIME_DIR, "webfetch", "webfetch.sock");
	const own = path.join(runUser, String(os.userInfo().uid));
	try {
		if (fs.statSync(own).isDirectory()) return path.join(own, "webfetch", "webfetch.sock");
	} catch {
		// no such directory: the /tmp rule
	}
	return path.join("/tmp", `webfetch-${os.userInfo().uid}`, "webfetch.sock");
}

/** A request that ended without a result: the daemon's error frame, or the caller's abort (`cancelled`, or
 * `timeout` when the signal was a deadline), with the code that tells them apart. */
export class RequestFailed extends Error {
	constructor(
		message: string,
		readonly code: string,
		readonly fromDaemon: boolean,
	) {
		super(message);
	}
}

function abortError(signal: AbortSignal): RequestFailed {
	const reason: unknown = signal.reason;
	const timedOut = reason instanceof Error && reason.name === "TimeoutError";
	return timedOut
		? new RequestFailed("the webfetch daemon did not answer in time", "timeout", false)
		: new RequestFailed("web_fetch was cancelled", "cancelled", false);
}

function errnoOf(e: unknown): NodeJS.ErrnoException {
	return e instanceof Error ? e : new Error(String(e));
}

/**
 * Clients talk only to their own user's daemon (socket_trust.py's rule, HONESTY.md): without XDG_RUNTIME_DIR
 * the socket falls back to /tmp/webfetch-<uid>/, a name another user can take first and answer every
 * request from. A socket that fails this is an UntrustedSocket error naming the path, its owner and what to
 * do, thrown before a byte is sent.
 */
export class UntrustedSocket extends Error {}

const OTHERS_WRITE = 0o022; // group and others write: either could put a socket of theirs there
const ADVICE =
	"or point webfetch at a directory of your own: set XDG_RUNTIME_DIR, or WEBFETCH_SOCKET (`webfetch pi install --socket`) to a path in one";
const euid = () => process.geteuid?.() ?? os.userInfo().uid;

/** `name, uid N` from /etc/passwd, or `uid N` (Node names only the current user). */
function user(uid: number): string {
	try {
		for (const line of fs.readFileSync("/etc/passwd", "utf8").split("\n")) {
			const [name, , id] = line.split(":");
			if (id === String(uid)) return `${name}, uid ${uid}`;
		}
	} catch {
		// no passwd file to read: the number alone
	}
	return `uid ${uid}`;
}

const mode = (info: fs.Stats) => (info.mode & 0o7777).toString(8);

/**
 * socket_trust.check_directory: the socket's directory must be ours (its own entry: another user's symbolic
 * link is refused even when it leads to a directory of ours; a link of ours must lead to one that passes)
 * and writable by no one else. Then the socket file must be ours too: Node cannot read the listener's uid
 * (SO_PEERCRED, which the Python clients check), and in such a directory only we (and root) can put one.
 * ENOENT (nothing listens there) is thrown as fs throws it.
 */
export function checkSocket(socket: string, me: number = euid()): void {
	const directory = path.dirname(socket);
	const entry = fs.lstatSync(directory);
	if (entry.uid !== me) {
		const kind = entry.isSymbolicLink() ? " is a symbolic link that" : "";
		throw untrusted(
			`the socket directory ${directory}${kind} belongs to another user (${user(entry.uid)}), not to you (${user(me)}); its mode is ${mode(entry)}`,
			`Have it removed (its owner or root can: \`rm -r ${directory}\`), ${ADVICE}`,
		);
	}
	const info = entry.isSymbolicLink() ? fs.statSync(directory) : entry;
	if (info.uid !== me) {
		throw untrusted(
			`the socket directory ${directory} is a link to ${fs.realpathSync(directory)}, which belongs to another user (${user(info.uid)}), not to you (${user(me)}); its mode is ${mode(info)}`,
			`Remove the link (\`rm ${directory}\`), ${ADVICE}`,
		);
	}
	if (!info.isDirectory()) throw new Error(`${directory} is not a directory; remove it or choose another WEBFETCH_SOCKET`);
	if (info.mode & OTHERS_WRITE) {
		throw untrusted(
			`the socket directory ${directory}, yours (${user(me)}), can be written by other users (mode ${mode(info)}), so a socket in it may be theirs`,
			`Make it private (\`chmod 700 ${directory}\`) or remove it, ${ADVICE}`,
		);
	}
	const file = fs.lstatSync(socket);
	if (file.uid !== me) {
		throw untrusted(
			`the socket ${socket} belongs to another user (${user(file.uid)}), not to you (${user(me)}); its mode is ${mode(file)}`,
			`Stop whatever listens there or remove the socket (its owner or root can), ${ADVICE}`,
		);
	}
}

function untrusted(problem: string, remedy: string): UntrustedSocket {
	return new UntrustedSocket(`${problem}: it may not be your webfetch daemon, so nothing was sent to it. ${remedy}`);
}

/** socket_trust.make_directory: the socket's directory, made 0700 when missing; an existing one (someone
 * else's made first, too) must pass checkSocket's directory rule. */
function makeSocketDirectory(socket: string): void {
	const directory = path.dirname(socket);
	fs.mkdirSync(path.dirname(directory), { recursive: true });
	try {
		fs.mkdirSync(directory, { mode: 0o700 });
		fs.chmodSync(directory, 0o700); // mkdir's mode is filtered by the umask
	} catch (e) {
		if (errnoOf(e).code !== "EEXIST") throw e;
	}
	try {
		checkSocket(socket);
	} catch (e) {
		if (errnoOf(e).code !== "ENOENT") throw e; // no socket yet: the directory passed
	}
}

/** Connect to our own daemon (checkSocket first: an UntrustedSocket is thrown before anything is sent). */
function connectOnce(socket: string): Promise<net.Socket> {
	return new Promise((resolve, reject) => {
		checkSocket(socket);
		const conn = net.createConnection(socket);
		conn.once("connect", () => {
			conn.removeAllListeners("error");
			resolve(conn);
		});
		conn.once("error", reject);
	});
}

const NOT_LISTENING = new Set(["ENOENT", "ECONNREFUSED"]);

/** Start `webfetch serve` in the background the way the CLI does (it exits by itself when idle). */
function startDaemon(s: Settings): Promise<ReturnType<typeof spawn>> {
	makeSocketDirectory(s.socket);
	fs.mkdirSync(path.dirname(s.log), { recursive: true, mode: 0o700 });
	const log = fs.openSync(s.log, "a", 0o600);
	const [exe, ...args] = s.command;
	return new Promise((resolve, reject) => {
		const child = spawn(exe, [...args, "serve", "--socket", s.socket, "--exit-when-idle", "--log-file", s.log], {
			detached: true,
			stdio: ["ignore", log, log],
		});
		child.once("error", (e: NodeJS.ErrnoException) => {
			fs.closeSync(log);
			reject(
				new Error(
					`the webfetch daemon is not running and \`${shellCommand(s.command)}\` could not be started (${e.code}). ` +
						"Install webfetch and run `webfetch pi install`, or set WEBFETCH_BIN to the webfetch executable.",
				),
			);
		});
		child.once("spawn", () => {
			fs.closeSync(log);
			child.unref();
			resolve(child);
		});
	});
}

async function connect(s: Settings, signal?: AbortSignal, start = true): Promise<net.Socket> {
	try {
		return await connectOnce(s.socket);
	} catch (caught) {
		if (caught instanceof UntrustedSocket) throw caught;
		const e = errnoOf(caught);
		if (!NOT_LISTENING.has(e.code ?? "")) throw new Error(`cannot reach the webfetch daemon at ${s.socket}: ${e.message}`);
		if (!start) throw new Error(`no webfetch daemon listens on ${s.socket}`);
	}
	const child = await startDaemon(s);
	const deadline = Date.now() + START_TIMEOUT_MS;
	for (;;) {
		if (signal?.aborted) throw abortError(signal);
		const exited = child.exitCode !== null || child.signalCode !== null; // before the try: no race
		try {
			return await connectOnce(s.socket);
		} catch (caught) {
			if (caught instanceof UntrustedSocket) throw caught;
			if (exited) {
				// (another client's daemon winning the race for the socket would have let us connect)
				throw new Error(
					`the webfetch daemon exited at start (${child.exitCode ?? child.signalCode}): ${logTail(s.log)} ` +
						`— see ${s.log}, or run \`${shellCommand([...s.command, "serve"])}\` in a terminal to see why`,
				);
			}
			if (Date.now() > deadline) {
				throw new Error(
					`the webfetch daemon did not start listening on ${s.socket} within ${START_TIMEOUT_MS / 1000} s; ` +
						`see ${s.log}, or run \`${shellCommand([...s.command, "serve"])}\` in a terminal to see why`,
				);
			}
		}
		await new Promise((r) => setTimeout(r, 100));
	}
}

function logTail(file: string): string {
	try {
		return fs.readFileSync(file, "utf8").trim().split("\n").slice(-3).join(" | ");
	} catch {
		return "";
	}
}

/**
 * Send one request and wait for its terminal frame. `progress` frames go to onProgress; an `error` frame
 * rejects with the daemon's message. Aborting sends `cancel` and closes the connection, so the daemon
 * closes the request's tab and kills its sub-agent; the promise rejects at once. `start: false`: no daemon
 * is started for it (it rejects when none listens; a socket-activated one listens).
 */
export async function request<B extends RequestBody>(
	body: B,
	opts: {
		signal?: AbortSignal;
		onProgress?: (f: ProgressFrame) => void;
		onPage?: (f: PageFrame | PageFailedFrame) => void;
		settings?: Settings;
		start?: boolean;
	} = {},
): Promise<ResultOf<B>> {
	const s = opts.settings ?? settings();
	const { signal, onProgress, onPage } = opts;
	if (signal?.aborted) throw abortError(signal);
	const conn = await connect(s, signal, opts.start ?? true);
	const id = "1";
	return new Promise((resolve, reject) => {
		let buffer = "";
		let done = false;
		const finish = (err: Error | null, frame?: ResultFrame) => {
			if (done) return;
			done = true;
			signal?.removeEventListener("abort", onAbort);
			conn.destroy();
			if (err || !frame) reject(err);
			else resolve(frame as ResultOf<B>); // the daemon answers an op with that op's result
		};
		const onAbort = () => {
			if (done || !signal) return;
			// Best effort: the cancel tells the daemon why; closing the socket alone also stops the work.
			conn.end(`${JSON.stringify({ id: "cancel", op: "cancel", target: id })}\n`);
			finish(abortError(signal));
		};
		signal?.addEventListener("abort", onAbort, { once: true });
		conn.setEncoding("utf8");
		conn.on("data", (chunk: string) => {
			buffer += chunk;
			let nl: number;
			while (!done && (nl = buffer.indexOf("\n")) >= 0) {
				const line = buffer.slice(0, nl);
				buffer = buffer.slice(nl + 1);
				let frame: Frame;
				try {
					frame = JSON.parse(line) as Frame;
				} catch {
					return finish(new Error(`the webfetch daemon sent a line that is not JSON: ${line.slice(0, 200)}`));
				}
				if (frame.id !== id) continue;
				if (frame.type === "progress") onProgress?.(frame);
				else if (frame.type === "page") onPage?.(frame);
				else if (frame.type === "result") finish(null, frame);
				else if (frame.type === "error") finish(new RequestFailed(frame.message, frame.code, true));
			}
		});
		conn.on("error", (e) => finish(new Error(`lost the connection to the webfetch daemon: ${e.message}`)));
		conn.on("close", () =>
			finish(new Error(`the webfetch daemon closed the connection before answering; its log may say why (${s.log})`)),
		);
		conn.write(`${JSON.stringify({ id, ...body })}\n`);
	});
}

// ---- the text the model sees -------------------------------------------------------------------

const codePoints = (s: string) => {
	let n = 0;
	for (const _ of s) n++;
	return n;
};
const bytes = (s: string) => Buffer.byteLength(s, "utf8");
const n = (x: number) => x.toLocaleString("en-US");

function age(seconds: number): string {
	if (seconds < 60) return `${Math.round(seconds)} s`;
	if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
	return `${(seconds / 3600).toFixed(1)} h`;
}

/** tool_text.py's UNANSWERED: a page where the call asked for an answer, said on the first line. */
const UNANSWERED = "NOT AN ANSWER: the prompt could not be answered, this is the page itself (the notes say why)";

/** The one line of facts that starts every result; `prompted`: the call passed a prompt. */
function factsLine(r: FetchResultFrame, shownEnd: number | null, prompted = false): string {
	const parts = [r.final_url || r.url];
	if (r.title) parts.push(JSON.stringify(r.title));
	parts.push(r.cached ? `cached (${age(r.age_s ?? 0)} old)` : "fetched now");
	if (r.kind === "answer") parts.push(`answer by ${r.model ?? "the sub-agent"} from ${n(r.total_chars)} characters`);
	else if (r.kind === "summary") parts.push(`summary of ${n(r.total_chars)} characters`);
	else if (r.kind === "find") parts.push(findExtent(r));
	else if (r.total_chars === 0) parts.push("no text");
	else if (shownEnd !== null && (r.offset > 0 || shownEnd < r.total_chars))
		parts.push(`characters ${n(r.offset)}–${n(shownEnd)} of ${n(r.total_chars)}`);
	else parts.push(`all ${n(r.total_chars)} characters`);
	if (prompted && r.kind === "page") parts.push(UNANSWERED);
	// No silent success: the model must see at once when the content is a wall, not the page (notes say what to do).
	if (r.flags?.length) parts.push(`FLAGS: ${r.flags.join(", ")} (read the notes before using this content)`);
	return parts.join(" · ");
}

/** tool_text.py's _find_extent: how many places matched the pattern, in how much text. */
function findExtent(r: FetchResultFrame): string {
	const m = r.matches ?? 0;
	const what = m === 0 ? "no match" : m === 1 ? "1 match" : `${n(m)} matches`;
	const outline = m === 0 ? " (the page's outline instead)" : "";
	return `${what} for ${JSON.stringify(r.find ?? "")} in ${n(r.total_chars)} characters${outline}`;
}

/** Cut `text` to fit `maxBytes` and `maxLines`, at a line boundary when there is one. */
function cutToFit(text: string, maxBytes: number, maxLines: number): string {
	if (bytes(text) <= maxBytes && text.split("\n").length <= maxLines) return text;
	let cut = Buffer.from(text, "utf8").subarray(0, Math.max(0, maxBytes)).toString("utf8");
	if (cut.endsWith("\uFFFD")) cut = cut.slice(0, -1); // a character cut in half
	const lines = cut.split("\n");
	if (lines.length > maxLines) cut = lines.slice(0, maxLines).join("\n") + "\n";
	const nl = cut.lastIndexOf("\n");
	return nl > cut.length / 2 ? cut.slice(0, nl + 1) : cut;
}

/** Turn a fetch result into the tool's text, within pi's 50 KB / 2 000 lines. */
export function formatResult(
	r: FetchResultFrame,
	limits = { bytes: MAX_BYTES, lines: MAX_LINES },
	prompted = false,
): { text: string; cutAt: number | null } {
	if (r.kind === "redirect") {
		return {
			text:
				`${r.url} redirects to ${r.redirect_url} on a different host; call web_fetch with that URL to follow it.` +
				(r.status ? ` (HTTP ${r.status})` : ""),
			cutAt: null,
		};
	}
	const content: string = r.content ?? "";
	const notes: string[] = r.notes ?? [];
	const tail = notes.length ? `\n\nNotes:\n${notes.map((x) => `- ${x}`).join("\n")}` : "";
	const whole = (header: string, body: string, extra = "") => `${header}\n\n${body}${extra}${tail}`;
	const end = r.kind === "page" ? r.offset + codePoints(content) : null;
	let text = whole(factsLine(r, end, prompted), content);
	if (bytes(text) <= limits.bytes && text.split("\n").length <= limits.lines) return { text, cutAt: null };

	// Too big for pi: keep what fits and say exactly how to read on.
	const reserve = 600; // the facts line and the continuation sentence
	const kept = cutToFit(content, limits.bytes - reserve - bytes(tail), limits.lines - 8 - notes.length);
	if (r.kind === "page") {
		const cutAt = r.offset + codePoints(kept);
		const more = `\n\n[Cut at pi's 50 KB limit. Call web_fetch with url ${JSON.stringify(r.url)} and offset ${cutAt} to read on.]`;
		text = whole(factsLine(r, cutAt, prompted), kept, more);
		return { text, cutAt };
	}
	const narrower = r.kind === "find" ? "Narrow the find pattern" : "Ask a narrower prompt";
	const more = `\n\n[Cut at pi's 50 KB limit. ${narrower}, or read the raw page with offset.]`;
	return { text: whole(factsLine(r, null, prompted), kept, more), cutAt: null };
}

/** tool_text.py's _shares: `room` shared out among blocks of these sizes, the smallest whole, the rest equally. */
function shares(sizes: number[], room: number): number[] {
	const out = sizes.map(() => 0);
	let left = room;
	const order = sizes.map((_, i) => i).sort((a, b) => sizes[a] - sizes[b] || a - b);
	order.forEach((i, k) => {
		out[i] = Math.min(sizes[i], Math.floor(left / (order.length - k)));
		left -= out[i];
	});
	return out;
}

/** tool_text.py's batch_text: the count line, then each URL in the order given under a `── [i/n] URL` line,
 * its page as formatResult makes it (or why it failed), the room shared out when they do not all fit. */
export function formatBatch(
	pages: (PageFrame | PageFailedFrame)[],
	r: BatchResultFrame,
	limits = { bytes: MAX_BYTES, lines: MAX_LINES },
	prompted = false,
): string {
	const entries = r.pages ?? [];
	const byIndex = new Map(pages.map((p) => [p.index, p]));
	const head = (r.content ?? "").split("\n", 1)[0];
	const headings = entries.map((e, i) => `── [${i + 1}/${entries.length}] ${e.url}`);
	const lineCount = (t: string) => t.split("\n").length;
	const block = (i: number, room: { bytes: number; lines: number }): string => {
		const page = byIndex.get(i);
		if (page === undefined || page.error !== undefined) {
			const error = page?.error ?? { code: entries[i].error, message: entries[i].message };
			return `${headings[i]}\nFAILED (${error.code}): ${error.message}`;
		}
		const shown = formatResult({ ...page, type: "result" }, room, prompted);
		let more = "";
		if (shown.cutAt === null && page.kind === "page" && page.next_offset != null)
			more = `\n\n[More: call web_fetch with url ${JSON.stringify(page.url)} and offset ${page.next_offset} to read on.]`;
		return `${headings[i]}\n${shown.text}${more}`;
	};
	const whole = entries.map((_, i) => block(i, { bytes: Number.MAX_SAFE_INTEGER, lines: Number.MAX_SAFE_INTEGER }));
	const roomBytes = limits.bytes - bytes(head) - 2 * entries.length;
	const roomLines = limits.lines - 1 - 2 * entries.length;
	const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
	const join = (blocks: string[]) => head + blocks.map((b) => `\n\n${b}`).join("");
	if (sum(whole.map(bytes)) <= roomBytes && sum(whole.map(lineCount)) <= roomLines) return join(whole);
	const byteShares = shares(whole.map(bytes), roomBytes);
	const lineShares = shares(whole.map(lineCount), roomLines);
	const kept = whole.map((b, i) =>
		byteShares[i] >= bytes(b) && lineShares[i] > lineCount(b) - 1
			? b
			: block(i, { bytes: byteShares[i] - bytes(headings[i]) - 1, lines: lineShares[i] - 1 }),
	);
	// formatResult keeps a page's facts line and notes whole: a share smaller than those can still overrun
	return cutToFit(join(kept), limits.bytes, limits.lines);
}

// ---- rendering in pi's TUI (minimal components: no pi-tui import) ------------------------------

function charWidth(cp: number): number {
	if (cp < 32 || (cp >= 0x7f && cp < 0xa0)) return 0;
	if ((cp >= 0x300 && cp <= 0x36f) || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0xfe00 && cp <= 0xfe0f)) return 0;
	if (
		(cp >= 0x1100 && cp <= 0x115f) ||
		(cp >= 0x2e80 && cp <= 0xa4cf) ||
		(cp >= 0xac00 && cp <= 0xd7a3) ||
		(cp >= 0xf900 && cp <= 0xfaff) ||
		(cp >= 0xfe30 && cp <= 0xfe4f) ||
		(cp >= 0xff00 && cp <= 0xff60) ||
		(cp >= 0xffe0 && cp <= 0xffe6) ||
		(cp >= 0x1f300 && cp <= 0x1faff) ||
		(cp >= 0x20000 && cp <= 0x3fffd)
	)
		return 2;
	return 1;
}

/** Split plain text into lines no wider than `width` terminal cells. */
export function wrap(text: string, width: number): string[] {
	const out: string[] = [];
	for (const raw of text.replace(/\t/g, "    ").split("\n")) {
		let line = "";
		let w = 0;
		for (const ch of raw) {
			const cw = charWidth(ch.codePointAt(0) as number);
			if (cw === 0 && ch.codePointAt(0)! < 0xa0) continue; // control characters
			if (w + cw > width) {
				out.push(line);
				line = "";
				w = 0;
			}
			line += ch;
			w += cw;
		}
		out.push(line);
	}
	return out;
}

function textComponent(plainLines: string[], style: (s: string) => string, firstOnly = false): Component {
	return {
		render(width: number): string[] {
			const w = Math.max(1, width);
			const lines = plainLines.flatMap((l) => wrap(l, w));
			return (firstOnly ? lines.slice(0, 1) : lines).map(style);
		},
		invalidate() {},
	};
}

function shortUrl(url: string | undefined): string {
	return String(url ?? "").replace(/^https?:\/\//, "").replace(/\/$/, "");
}

function size(chars: number): string {
	return chars >= 1000 ? `${(chars / 1000).toFixed(1)}k chars` : `${chars} chars`;
}

interface FetchParams {
	url?: string;
	urls?: string[];
	prompt?: string;
	offset?: number;
	raw?: boolean;
	fresh?: boolean;
	find?: string;
	profile?: string;
}

interface SearchParams {
	query: string;
	limit?: number;
}

/** What the model passes to the browser tool (its inputSchema in tools.json); which fields apply depends on `action`. */
interface BrowseParams {
	action: BrowseAction;
	url?: string;
	ref?: string;
	text?: string;
	submit?: boolean;
	key?: string;
	values?: string[];
	checked?: boolean;
	accept?: boolean;
	prompt_text?: string;
	to?: "back" | "forward" | "reload";
	mode?: "interactive" | "full";
	find?: string;
	offset?: number;
	text_gone?: string;
	ms?: number;
	timeout_s?: number;
	direction?: "up" | "down";
	new_tab?: boolean;
	tab?: string;
	do?: "list" | "select" | "close";
	full_page?: boolean;
	width?: number;
	height?: number;
	mobile?: boolean;
	scale?: number;
	path?: string;
	profile?: string;
	create?: boolean;
	files?: string[];
}

/** web_fetch's details: the result frame without its text, and where the text was cut for pi. */
type FetchDetails =
	| (Omit<FetchResultFrame, "type" | "id" | "content"> & { cut_at: number | null })
	| Omit<BatchResultFrame, "type" | "id" | "content">;
type SearchDetails = Omit<SearchResultFrame, "type" | "id" | "content"> & { cut: boolean };
/** The browser tool's details: the result frame without its text and image, and which document it was on. */
type BrowseDetails = Omit<BrowseResultFrame, "type" | "id" | "snapshot" | "content" | "image"> & {
	category: "result";
	document: string | null;
};

export function callLine(args: FetchParams): string {
	const urls = args.urls ?? [];
	let line = `web_fetch ${urls.length ? `${urls.length} URLs: ${urls.slice(0, 3).map(shortUrl).join(", ")}${urls.length > 3 ? ", …" : ""}` : shortUrl(args.url)}`;
	if (args.prompt) line += ` ${JSON.stringify(args.prompt.length > 80 ? `${args.prompt.slice(0, 79)}…` : args.prompt)}`;
	if (args.find) line += ` find ${JSON.stringify(args.find.length > 60 ? `${args.find.slice(0, 59)}…` : args.find)}`;
	if (args.offset) line += ` @${args.offset}`;
	if (args.raw) line += " raw";
	return line;
}

export function summaryLine(d: FetchDetails): string {
	if (d.kind === "batch") return `batch · ${d.fetched} of ${d.pages.length} fetched` + (d.failed ? ` · ${d.failed} failed` : "");
	if (d.kind === "redirect") return `redirect → ${d.redirect_url}`;
	const parts: string[] = [d.kind === "answer" && d.model ? `answer (${d.model})` : d.kind];
	if (d.title) parts.push(d.title);
	parts.push(size(d.total_chars ?? 0));
	parts.push(d.cached ? "cached" : "fresh");
	if (d.cut_at != null) parts.push(`cut at ${d.cut_at}`);
	return parts.join(" · ");
}

// ---- what both tools share -----------------------------------------------------------------------

/** Progress frames as pi's partial results, so the user sees what the daemon is doing. */
function progressTo(onUpdate: OnUpdate) {
	return (f: ProgressFrame) =>
		onUpdate?.({ content: [{ type: "text", text: f.message }], details: { stage: f.stage, elapsed_ms: f.elapsed_ms } });
}

/** A result frame's fields for `details`: all but the text, which is the tool's content. */
function detailsOf<F extends ResultFrame & { content: string }>(frame: F): Omit<F, "type" | "id" | "content"> {
	const { type: _t, id: _i, content: _c, ...details } = frame;
	return details;
}

/** The daemon's usage record in pi's shape, for pi's footer and session totals (older pi ignores it). */
export function piUsage(u: WireUsage | null | undefined): PiUsage | undefined {
	if (!u) return undefined;
	return {
		input: u.input,
		output: u.output,
		cacheRead: u.cache_read,
		cacheWrite: u.cache_write,
		totalTokens: u.total_tokens,
		cost: {
			input: u.cost.input,
			output: u.cost.output,
			cacheRead: u.cost.cache_read,
			cacheWrite: u.cost.cache_write,
			total: u.cost.total,
		},
	};
}

function textOf(result: { content?: Content[] } | undefined): string {
	return result?.content?.find((c): c is TextContent => c.type === "text")?.text ?? "";
}

/** The progress line while working, the message after a failure; null once there is a result to show. */
function workingOrFailed(result: { content?: Content[] } | undefined, options: RenderOptions, theme: Theme,
	context: RenderContext | undefined, settled: boolean, working: string): Component | null {
	const text = textOf(result);
	if (options.isPartial) return textComponent([text || working], (l) => theme.fg("muted", l), true);
	if (context?.isError || !settled) return textComponent(text.split("\n"), (l) => theme.fg("error", l), !options.expanded);
	return null;
}

// ---- web search ----------------------------------------------------------------------------------

export function searchTool(name: string): ToolDefinition<SearchParams, SearchDetails> {
	return {
		...fromContract("web_search", name),
		async execute(_toolCallId, params, signal, onUpdate) {
			const body: SearchBody = { op: "search", query: params.query };
			if (params.limit != null) body.limit = params.limit;
			const r = await request(body, { signal, onProgress: progressTo(onUpdate) });
			const content = r.content ?? "";
			const text = cutToFit(content, MAX_BYTES, MAX_LINES);
			return { content: [{ type: "text", text }], details: { ...detailsOf(r), cut: text.length < content.length } };
		},
		renderCall(args, theme) {
			return textComponent([`${name} ${JSON.stringify(args.query ?? "")}${args.limit ? ` (${args.limit})` : ""}`], (l) =>
				theme.fg("toolTitle", l), true);
		},
		renderResult(result, options, theme, context) {
			const d = result?.details;
			const early = workingOrFailed(result, options, theme, context, !!d?.backend, "searching…");
			if (early || !d) return early ?? textComponent([], (l) => l);
			const text = textOf(result);
			const line = `${d.results?.length ?? 0} results from ${d.backend}${d.cached ? " · cached" : ""}`;
			return textComponent(options.expanded ? [line, ...text.split("\n")] : [line], (l) => theme.fg("muted", l));
		},
	};
}

// ---- browser automation (the browse op) ------------------------------------------------------------
// A self-contained block: its own tool, bound to the pi session (one daemon browse session per pi
// session, closed on session_shutdown), registered once the other extensions are loaded, under another
// name when pi-agent-browser-native already owns `agent_browser`, and only when the daemon can browse.

/** The text the model reads for one browse result: what happened, then the snapshot or content. */
export function browseText(r: BrowseResultFrame): string {
	const lines: string[] = [];
	const p = r.page;
	if (r.action === "close") return `closed the browser session ${r.session}`;
	if (p) lines.push(`[${p.tab}] ${p.title || "(no title)"} — ${p.url} · change: ${r.change}${r.refs_reset ? " (new document: old refs are stale)" : ""}`);
	if (r.status && r.status >= 400) lines.push(`HTTP ${r.status}`);
	if (r.value != null) lines.push(`value now: ${r.value}`);
	if (r.waited_for) lines.push(`waited for ${r.waited_for}`);
	const v = r.viewport;
	if (v) lines.push(`viewport: ${v.width}×${v.height} CSS px at ${v.scale}× device pixels, ${v.mobile ? "mobile (touch, a phone's user agent)" : "desktop"}`);
	if (r.path != null) lines.push(`saved ${r.path} (${r.size} bytes)`);
	if (r.dialog) {
		const d = r.dialog;
		const blocking = (d.type === "confirm" || d.type === "prompt") && r.snapshot_kind === "none";
		lines.push(`dialog (${d.type}): ${JSON.stringify(d.message)}${blocking ? " — open: answer it with action dialog" : " — accepted"}`);
	}
	for (const t of r.new_tabs ?? []) lines.push(`new tab ${t.tab}: ${t.url} (now active)`);
	for (const d of r.downloads ?? []) lines.push(downloadLine(d));
	if (r.files != null) lines.push(`the file input holds: ${r.files.join(", ") || "no file"}`);
	for (const t of r.tabs ?? []) lines.push(`${t.active ? "*" : " "} ${t.tab} ${t.title} — ${t.url}`);
	const errors = r.console_errors ?? 0;
	if (errors) lines.push(`${errors} new console error${errors !== 1 ? "s" : ""} since the last action (action console shows them)`);
	for (const n of r.notes ?? []) lines.push(`note: ${n}`);
	if (r.console != null) lines.push(...consoleLines(r.console, r.console_dropped ?? 0, r.console_navs ?? []));
	else if (r.content) lines.push("", r.content);
	else if (r.snapshot) lines.push(r.snapshot_kind === "diff" ? "changed lines:" : "snapshot:", r.snapshot.split("\n").slice(1).join("\n"));
	if (r.next_offset != null) lines.push(`(more: call again with offset ${r.next_offset})`);
	return cutToFit(lines.join("\n"), MAX_BYTES, MAX_LINES);
}

/** The console action's entries, one line each (and their stacks under them), newest last, under a line naming
 * the navigation they came from each time it changes. */
function consoleLines(entries: ConsoleEntry[], dropped: number, navs: ConsoleNav[]): string[] {
	const older = dropped ? ` (${dropped} older not shown)` : "";
	if (!entries.length) return [`console: no new messages${older}`];
	const lines = [`console: ${entries.length} message${entries.length !== 1 ? "s" : ""} since the last console action, newest last${older}`];
	const byNav = new Map(navs.map((n) => [n.nav, n]));
	let at: number | undefined;
	for (const e of entries) {
		if ((e.nav ?? 0) !== at) {
			at = e.nav ?? 0;
			const nav = byNav.get(at);
			if (nav) lines.push(`navigation ${at}: ${nav.url}${nav.restored ? " (restored from the back/forward cache)" : ""}`);
		}
		// an exception's text already says what it is ("Uncaught …"); the browser's own messages name their source
		const kind = ["console", "exception", "rejection"].includes(e.kind) ? "" : `(${e.kind}) `;
		const where = e.url ? ` — ${e.url}${e.line ? `:${e.line}` : ""}` : "";
		lines.push(`[${e.level}] ${kind}${e.text}${where}`);
		if (e.stack) lines.push(e.stack);
	}
	return lines;
}

function browseSession(ctx: ToolContext | undefined): string {
	try {
		const id = ctx?.sessionManager?.getSessionId?.();
		if (id) return `pi-${id}`;
	} catch {
		// no session manager behind this context: one session for the process
	}
	return `pi-${process.pid}`;
}

/** The params without the nulls a model may send for "not given", so the daemon's defaults apply. */
function given<T extends object>(params: T): Partial<T> {
	return Object.fromEntries(Object.entries(params).filter(([, v]) => v != null)) as Partial<T>;
}

export function browserTool(name: string, used: Set<string>): ToolDefinition<BrowseParams, BrowseDetails> {
	return {
		...fromContract("agent_browser", name),
		async execute(_toolCallId, params, signal, onUpdate, ctx) {
			const session = browseSession(ctx);
			const body: BrowseBody = { op: "browse", session, ...given(params), action: params.action };
			// pi's working directory: an upload's relative paths start there, and uploads may read only under it
			// (and the user's browse.upload_roots)
			if (ctx?.cwd) body.cwd = ctx.cwd;
			used.add(session);
			let r: BrowseResultFrame;
			try {
				r = await request(body, { signal, onProgress: progressTo(onUpdate) });
			} catch (e) {
				// the code first, so the model (and an agent's own code) can branch on it; the message says what to do
				if (e instanceof RequestFailed && e.fromDaemon) throw new Error(`${e.code}: ${e.message}`);
				throw e;
			}
			if (params.action === "close") used.delete(session);
			const { image, snapshot: _s, content: _c, type: _t, id: _i, ...rest } = r;
			const details: BrowseDetails = { category: "result", ...rest, document: r.page ? `${r.page.tab}@${r.page.url}` : null };
			const content: Content[] = [{ type: "text", text: browseText(r) }];
			if (image) content.push({ type: "image", data: image, mimeType: "image/png" });
			return { content, details };
		},
		renderCall(args, theme) {
			const what = args.url ?? args.ref ?? args.key ?? args.text ?? args.to ?? "";
			return textComponent([`${name} ${args.action} ${what}`.trimEnd()], (l) => theme.fg("toolTitle", l), true);
		},
		renderResult(result, options, theme, context) {
			const d = result?.details;
			const early = workingOrFailed(result, options, theme, context, !!d?.category, "working…");
			if (early) return early;
			const text = textOf(result);
			const lines = text.split("\n");
			return textComponent(options.expanded ? lines : lines.slice(0, 1), (l) => theme.fg("muted", l));
		},
	};
}

/** The browser tool, offered at each session start until it is registered (pi cannot take a tool back). */
export interface BrowserOffer {
	readonly registered: boolean;
	/** Register the tool unless the daemon's status says it cannot browse; null (it could not be asked): register. */
	offer(ctx: ToolContext | undefined, status: StatusResultFrame | null): void;
}

export function registerBrowser(pi: ExtensionAPI): BrowserOffer {
	const used = new Set<string>();
	let registered = false;
	pi.on("session_shutdown", async () => {
		// the daemon would close them after browse.idle_s anyway; closing now frees the browser at once
		const sessions = [...used];
		used.clear();
		await Promise.all(sessions.map((session) =>
			request({ op: "browse", session, action: "close" }, { signal: AbortSignal.timeout(5000) }).catch(() => undefined)));
	});
	return {
		get registered() {
			return registered;
		},
		offer(ctx, status) {
			// A tool that can only fail (browse_disabled) would cost the model a turn; as `webfetch mcp` does
			if (registered || status?.browse_enabled === false) return;
			registered = true;
			const taken = toolNames(pi).includes("agent_browser");
			pi.registerTool(browserTool(taken ? "webfetch_browser" : "agent_browser", used));
			if (taken && ctx?.hasUI) {
				ctx.ui?.notify("webfetch: another extension already provides agent_browser; webfetch's browser is webfetch_browser", "info");
			}
		},
	};
}

// ---- the extension -------------------------------------------------------------------------------

function statusProblems(s: StatusResultFrame): string[] {
	const problems = [...(s.problems ?? [])];
	if (s.subagent && s.subagent.available === false) {
		problems.push(
			`the sub-agent CLI \`${shellCommand([s.subagent.command])}\` was not found, so web_fetch prompts return raw pages; ` +
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
async function askStatus(start: boolean): Promise<{ status: StatusResultFrame | null; problems: string[] }> {
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

function toolNames(pi: ExtensionAPI): string[] {
	try {
		return (pi.getAllTools?.() ?? []).map((t) => t.name);
	} catch {
		return []; // no session behind the runtime: nothing else can own a name yet
	}
}

function thinkingLevel(pi: ExtensionAPI): string | undefined {
	try {
		return pi.getThinkingLevel?.();
	} catch {
		return undefined; // no session behind the runtime (the tool called outside a running agent)
	}
}

export function fetchTool(pi: ExtensionAPI): ToolDefinition<FetchParams, FetchDetails> {
	return {
		...fromContract("web_fetch"),
		async execute(_toolCallId, params, signal, onUpdate, ctx) {
			// the schema cannot say "one of the two" to every provider; mcp_server.py's NEEDS_URL says the same
			if (params.url == null && params.urls == null)
				throw new Error("web_fetch needs `url` (one page) or `urls` (several, up to 50): absolute http(s) URLs");
			const body: FetchBody = { op: "fetch" };
			if (params.url != null) body.url = params.url;
			if (params.urls != null) body.urls = params.urls;
			if (params.prompt) body.prompt = params.prompt;
			if (params.offset != null) body.offset = params.offset;
			if (params.raw) body.raw = true;
			if (params.fresh) body.fresh = true;
			if (params.find != null) body.find = params.find;
			if (params.profile) body.profile = params.profile;
			// The model also writes the summary of a large page, so it goes with every request.
			if (ctx?.model?.provider && ctx?.model?.id) body.model = `${ctx.model.provider}/${ctx.model.id}`;
			const thinking = thinkingLevel(pi);
			if (thinking) body.thinking = thinking;
			const pages: (PageFrame | PageFailedFrame)[] = [];
			const result = await request(body, { signal, onProgress: progressTo(onUpdate), onPage: (p) => pages.push(p) });
			if (result.kind === "batch") {
				const text = formatBatch(pages, result, undefined, Boolean(params.prompt));
				return { content: [{ type: "text", text }], details: detailsOf(result) };
			}
			const { text, cutAt } = formatResult(result, undefined, Boolean(params.prompt));
			const usage = piUsage(result.usage);
			return {
				content: [{ type: "text", text }],
				details: { ...detailsOf(result), cut_at: cutAt },
				...(usage ? { usage } : {}),
			};
		},
		renderCall(args, theme) {
			return textComponent([callLine(args)], (l) => theme.fg("toolTitle", l), true);
		},
		renderResult(result, options, theme, context) {
			const d = result?.details;
			const early = workingOrFailed(result, options, theme, context, !!d?.kind, "working…");
			if (early || !d) return early ?? textComponent([], (l) => l);
			const text = textOf(result);
			const head = textComponent([summaryLine(d)], (l) => theme.fg("muted", l), true);
			if (!options.expanded) return head;
			const body = textComponent(text.split("\n"), (l) => theme.fg("toolOutput", l));
			return {
				render: (width: number) => [...head.render(width), ...body.render(width)],
				invalidate() {},
			};
		},
	};
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
