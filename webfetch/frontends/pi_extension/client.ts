/**
 * The daemon's client: where its socket is and how to start it (the CLI's rules, client.py's twin), the
 * check that the socket is our own user's before a byte is sent, and `request`, one request and its frames
 * over the Unix socket (docs/PROTOCOL.md; the frames' types are protocol.ts, generated from protocol.py).
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import type {
	BatchResult,
	BrowseRequest,
	BrowseResult,
	FetchRequest,
	FetchResult,
	Frame,
	PageFailed,
	PageFrame,
	ProgressFrame,
	Request as RequestBody,
	SearchRequest,
	SearchResult,
	StatusResult,
	StopRequest,
	StopResult,
} from "./protocol.ts";

const START_TIMEOUT_MS = 30_000;
const HERE = path.dirname(fileURLToPath(import.meta.url));

export type ResultFrame = Extract<Frame, { type: "result" }>;

/** The result frame that answers each kind of request. */
type ResultOf<B extends RequestBody> = B extends FetchRequest
	? FetchResult | BatchResult
	: B extends SearchRequest
		? SearchResult
		: B extends BrowseRequest
			? BrowseResult
			: B extends StopRequest
				? StopResult
				: StatusResult;

export type Settings = { command: string[]; socket: string; log: string; version: string | null };

/**
 * A command line that is safe to paste (webfetch/trust/shell.py's twin): each argument single-quoted for a POSIX
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
export function daemonDifference(status: StatusResult, s: Settings, env: NodeJS.ProcessEnv = process.env): string | null {
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
 * Clients talk only to their own user's daemon (trust/socket_trust.py's rule, HONESTY.md): without XDG_RUNTIME_DIR
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
		onPage?: (f: PageFrame | PageFailed) => void;
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
				// a crawl's streamed pages (op "crawl") are the CLI's: the tools ask for none
				else if (frame.type === "page" && !("index" in frame && "depth" in frame)) onPage?.(frame);
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
