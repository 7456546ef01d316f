/**
 * The tools: web_fetch, web_search and the browser tool, each its wording, parameters and annotations from
 * tools.json beside this file (the contract `webfetch mcp` and the CLI read too), its call to the daemon
 * (client.ts) and its rendering (formatting.ts).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { RequestFailed, type ResultFrame, request } from "./client.ts";
import {
	browseText,
	cutToFit,
	formatBatch,
	formatResult,
	MAX_BYTES,
	MAX_LINES,
	textComponent,
	textOf,
	workingOrFailed,
} from "./formatting.ts";
import type {
	Annotations,
	Content,
	ExtensionAPI,
	JsonSchema,
	OnUpdate,
	PiUsage,
	ToolContext,
	ToolDefinition,
} from "./pi.ts";
import type {
	BatchResult,
	BrowseRequest,
	BrowseResult,
	FetchRequest,
	FetchResult,
	PageFailed,
	PageFrame,
	ProgressFrame,
	SearchRequest,
	SearchResult,
	StatusResult,
	Usage,
} from "./protocol.ts";

const HERE = path.dirname(fileURLToPath(import.meta.url));

// ---- the tool contract (tools.json) -------------------------------------------------------------

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

// ---- what the model passes, and what a result keeps for the renderer ----------------------------

interface FetchParams {
	url?: string;
	urls?: string[];
	prompt?: string;
	schema?: { [key: string]: unknown };
	offset?: number;
	raw?: boolean;
	fresh?: boolean;
	find?: string;
	profile?: string;
	browser?: "user";
	hidden?: "drop" | "keep";
}

interface SearchParams {
	query: string;
	limit?: number;
}

/** What the model passes to the browser tool (its inputSchema in tools.json); which fields apply depends on `action`. */
interface BrowseParams {
	/** tools.json's enum lists them, equal to the daemon's (tests/test_tool_contract.py) */
	action: BrowseRequest["action"];
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
	browser?: "user";
}

/** web_fetch's details: the result frame without its text, and where the text was cut for pi. */
type FetchDetails =
	| (Omit<FetchResult, "type" | "id" | "content"> & { cut_at: number | null })
	| Omit<BatchResult, "type" | "id" | "content">;

type SearchDetails = Omit<SearchResult, "type" | "id" | "content"> & { cut: boolean };

/** The browser tool's details: the result frame without its text and image, and which document it was on. */
type BrowseDetails = Omit<BrowseResult, "type" | "id" | "snapshot" | "content" | "image"> & {
	category: "result";
	document: string | null;
};

// ---- what the tools share -----------------------------------------------------------------------

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
export function piUsage(u: Usage | null | undefined): PiUsage | undefined {
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

export function toolNames(pi: ExtensionAPI): string[] {
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

// ---- web fetch ----------------------------------------------------------------------------------

function shortUrl(url: string | undefined): string {
	return String(url ?? "").replace(/^https?:\/\//, "").replace(/\/$/, "");
}

function size(chars: number): string {
	return chars >= 1000 ? `${(chars / 1000).toFixed(1)}k chars` : `${chars} chars`;
}

export function callLine(args: FetchParams): string {
	const urls = args.urls ?? [];
	let line = `web_fetch ${urls.length ? `${urls.length} URLs: ${urls.slice(0, 3).map(shortUrl).join(", ")}${urls.length > 3 ? ", …" : ""}` : shortUrl(args.url)}`;
	if (args.prompt) line += ` ${JSON.stringify(args.prompt.length > 80 ? `${args.prompt.slice(0, 79)}…` : args.prompt)}`;
	if (args.schema) line += " schema";
	if (args.find) line += ` find ${JSON.stringify(args.find.length > 60 ? `${args.find.slice(0, 59)}…` : args.find)}`;
	if (args.offset) line += ` @${args.offset}`;
	if (args.raw) line += " raw";
	return line;
}

export function summaryLine(d: FetchDetails): string {
	if (d.kind === "batch") return `batch · ${d.fetched} of ${d.pages.length} fetched` + (d.failed ? ` · ${d.failed} failed` : "");
	if (d.kind === "redirect") return `redirect → ${d.redirect_url}`;
	const parts: string[] = [(d.kind === "answer" || d.kind === "data") && d.model ? `${d.kind} (${d.model})` : d.kind];
	if (d.title) parts.push(d.title);
	parts.push(size(d.total_chars ?? 0));
	parts.push(d.cached ? "cached" : "fresh");
	if (d.cut_at != null) parts.push(`cut at ${d.cut_at}`);
	return parts.join(" · ");
}

export function fetchTool(pi: ExtensionAPI): ToolDefinition<FetchParams, FetchDetails> {
	return {
		...fromContract("web_fetch"),
		async execute(_toolCallId, params, signal, onUpdate, ctx) {
			// the schema cannot say "one of the two" to every provider; mcp_server.py's NEEDS_URL says the same
			if (params.url == null && params.urls == null)
				throw new Error("web_fetch needs `url` (one page) or `urls` (several, up to 50): absolute http(s) URLs");
			const body: FetchRequest = { op: "fetch" };
			if (params.url != null) body.url = params.url;
			if (params.urls != null) body.urls = params.urls;
			if (params.prompt) body.prompt = params.prompt;
			if (params.schema != null) body.schema = params.schema;
			if (params.offset != null) body.offset = params.offset;
			if (params.raw) body.raw = true;
			if (params.fresh) body.fresh = true;
			if (params.find != null) body.find = params.find;
			if (params.profile) body.profile = params.profile;
			if (params.browser === "user") body.browser = "user";
			if (params.hidden) body.hidden = params.hidden;
			// The model also writes the summary of a large page, so it goes with every request.
			if (ctx?.model?.provider && ctx?.model?.id) body.model = `${ctx.model.provider}/${ctx.model.id}`;
			const thinking = thinkingLevel(pi);
			if (thinking) body.thinking = thinking;
			const pages: (PageFrame | PageFailed)[] = [];
			const result = await request(body, { signal, onProgress: progressTo(onUpdate), onPage: (p) => pages.push(p) });
			if (result.kind === "batch") {
				const text = formatBatch(pages, result, undefined, Boolean(params.prompt || params.schema));
				return { content: [{ type: "text", text }], details: detailsOf(result) };
			}
			const { text, cutAt } = formatResult(result, undefined, Boolean(params.prompt || params.schema));
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

// ---- web search ---------------------------------------------------------------------------------

export function searchTool(name: string): ToolDefinition<SearchParams, SearchDetails> {
	return {
		...fromContract("web_search", name),
		async execute(_toolCallId, params, signal, onUpdate) {
			const body: SearchRequest = { op: "search", query: params.query };
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

// ---- browser automation (the browse op) ---------------------------------------------------------
// A self-contained block: its own tool, bound to the pi session (one daemon browse session per pi
// session, closed on session_shutdown), registered once the other extensions are loaded, under another
// name when pi-agent-browser-native already owns `agent_browser`, and only when the daemon can browse.

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
			// the session last: it is the pi session's, never a name the model's arguments carry
			const body: BrowseRequest = { op: "browse", ...given(params), action: params.action, session };
			// pi's working directory: an upload's relative paths start there, and uploads may read only under it
			// (and the user's browse.upload_roots)
			if (ctx?.cwd) body.cwd = ctx.cwd;
			used.add(session);
			let r: BrowseResult;
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
	offer(ctx: ToolContext | undefined, status: StatusResult | null): void;
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
