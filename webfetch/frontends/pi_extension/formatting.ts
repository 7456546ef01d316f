/**
 * What the model and the user read: the text of each tool's result within pi's limits for one result
 * (tool_text.py is the Python twin; tests/golden holds the two to one text), and the minimal components
 * pi's TUI renders it with (no pi-tui import).
 */
import type {
	BatchResult,
	BrowseResult,
	ConsoleEntry,
	ConsoleNav,
	Download,
	FetchResult,
	PageFailed,
	PageFrame,
} from "./protocol.ts";
import type { Component, Content, RenderContext, RenderOptions, TextContent, Theme } from "./pi.ts";

// pi's limits for one tool result (DEFAULT_MAX_BYTES / DEFAULT_MAX_LINES in pi-coding-agent).
export const MAX_BYTES = 50 * 1024;
export const MAX_LINES = 2000;

// ---- the text the model sees --------------------------------------------------------------------

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
function factsLine(r: FetchResult, shownEnd: number | null, prompted = false): string {
	const parts = [r.final_url || r.url];
	if (r.title) parts.push(JSON.stringify(r.title));
	parts.push(r.cached ? `cached (${age(r.age_s ?? 0)} old)` : "fetched now");
	if (r.kind === "answer") parts.push(`answer by ${r.model ?? "the sub-agent"} from ${n(r.total_chars)} characters`);
	else if (r.kind === "data") parts.push(`data by ${r.model ?? "the sub-agent"} from ${n(r.total_chars)} characters, valid against the schema`);
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
function findExtent(r: FetchResult): string {
	const m = r.matches ?? 0;
	const what = m === 0 ? "no match" : m === 1 ? "1 match" : `${n(m)} matches`;
	const outline = m === 0 ? " (the page's outline instead)" : "";
	return `${what} for ${JSON.stringify(r.find ?? "")} in ${n(r.total_chars)} characters${outline}`;
}

/** Cut `text` to fit `maxBytes` and `maxLines`, at a line boundary when there is one. */
export function cutToFit(text: string, maxBytes: number, maxLines: number): string {
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
	r: FetchResult,
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
	pages: (PageFrame | PageFailed)[],
	r: BatchResult,
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
		if (page === undefined || "error" in page) {
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

// ---- the browser tool's text --------------------------------------------------------------------

/** tool_text.py's CHANGE_WORDS: what the page line says of the change (that old refs are stale after a new
 * page, the tool's description says once). */
const CHANGE_WORDS: Record<BrowseResult["change"], string> = {
	navigation: " · new page",
	same_document: " · new URL, same document",
	dom: " · changed",
	none: " · no change",
};

/** tool_text.py's _blocking: the reply's dialog holds the tab until the `dialog` action answers it. */
const blocking = (r: BrowseResult) =>
	(r.dialog?.type === "confirm" || r.dialog?.type === "prompt") && r.snapshot_kind === "none";

/** tool_text.py's _page_line_shown: not when the page stayed the document and URL the model read with its last
 * snapshot and the reply has its own news (changed lines, a changed title among them; the value of the field it
 * filled; a dialog holding the tab). */
const pageLineShown = (r: BrowseResult) =>
	!(r.change === "dom" && r.snapshot_kind !== "full") && !(blocking(r) && r.change === "none");

/** The text the model reads for one browse result: what happened, then the snapshot or content. */
export function browseText(r: BrowseResult): string {
	const lines: string[] = [];
	const p = r.page;
	if (r.action === "close") return `closed the browser session ${r.session}`;
	const forced = r.forced ? ` · forced: ${r.forced}` : "";
	if (p && pageLineShown(r)) lines.push(`[${p.tab}] ${p.title || "(no title)"} — ${p.url}${CHANGE_WORDS[r.change]}${forced}`);
	else if (r.forced) lines.push(`forced: ${r.forced}`);
	if (r.status && r.status >= 400) lines.push(`HTTP ${r.status}`);
	if (r.value != null) lines.push(`value now: ${r.value}`);
	if (r.waited_for) lines.push(`waited for ${r.waited_for}`);
	const v = r.viewport;
	if (v) lines.push(`viewport: ${v.width}×${v.height} CSS px at ${v.scale}× device pixels, ${v.mobile ? "mobile (touch, a phone's user agent)" : "desktop"}`);
	if (r.path != null) lines.push(`saved ${r.path} (${r.size} bytes)`);
	if (r.dialog) lines.push(`dialog (${r.dialog.type}) ${blocking(r) ? "waits for action dialog" : "accepted"}: ${JSON.stringify(r.dialog.message)}`);
	for (const t of r.new_tabs ?? []) lines.push(`new tab ${t.tab}: ${t.url} (now active)`);
	for (const d of r.downloads ?? []) lines.push(downloadLine(d));
	if (r.files != null) lines.push(`the file input holds: ${r.files.join(", ") || "no file"}`);
	for (const t of r.tabs ?? []) lines.push(`${t.active ? "*" : " "} ${t.tab} ${t.title} — ${t.url}`);
	const errors = r.console_errors ?? 0;
	if (errors) lines.push(`${errors} new console error${errors !== 1 ? "s" : ""} since the last action (action console shows them)`);
	for (const n of r.notes ?? []) lines.push(`note: ${n}`);
	if (r.console != null) lines.push(...consoleLines(r.console, r.console_dropped ?? 0, r.console_navs ?? []));
	else if (r.content) lines.push("", r.content);
	else if (r.snapshot) {
		// the snapshot's own header line says what the page line says; changed lines say they are
		const body = r.snapshot.split("\n").slice(1).join("\n");
		lines.push(...(r.snapshot_kind === "diff" ? ["changed:", body] : [body]));
	}
	if (r.next_offset != null) lines.push(`(more: call again with offset ${r.next_offset})`);
	return cutToFit(lines.join("\n"), MAX_BYTES, MAX_LINES);
}

/** One download of a browse result, as the model reads it (tool_text.py's download_line is the twin). */
function downloadLine(d: Download): string {
	if (d.state === "saved") return `downloaded ${d.filename} (${d.size} bytes, ${d.mime}) to ${d.path}`;
	if (d.state === "in_progress") {
		return `downloading ${d.url} as ${d.filename}: not finished when this answer was sent (it is saved in the session's download directory when done)`;
	}
	return `download ${d.state === "too_large" ? "stopped" : "failed"}: ${d.url}: ${d.message}`;
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

// ---- rendering in pi's TUI (minimal components: no pi-tui import) -------------------------------

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

export function textComponent(plainLines: string[], style: (s: string) => string, firstOnly = false): Component {
	return {
		render(width: number): string[] {
			const w = Math.max(1, width);
			const lines = plainLines.flatMap((l) => wrap(l, w));
			return (firstOnly ? lines.slice(0, 1) : lines).map(style);
		},
		invalidate() {},
	};
}

export function textOf(result: { content?: Content[] } | undefined): string {
	return result?.content?.find((c): c is TextContent => c.type === "text")?.text ?? "";
}

/** The progress line while working, the message after a failure; null once there is a result to show. */
export function workingOrFailed(result: { content?: Content[] } | undefined, options: RenderOptions, theme: Theme,
	context: RenderContext | undefined, settled: boolean, working: string): Component | null {
	const text = textOf(result);
	if (options.isPartial) return textComponent([text || working], (l) => theme.fg("muted", l), true);
	if (context?.isError || !settled) return textComponent(text.split("\n"), (l) => theme.fg("error", l), !options.expanded);
	return null;
}
