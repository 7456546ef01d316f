/**
 * What the extension uses of pi's extension API (@earendil-works/pi-coding-agent, and @mariozechner's before
 * it): types only, written here so that nothing is imported from pi or npm and the extension loads in any pi
 * that loads extensions. Fields a newer pi reads (promptSnippet, promptGuidelines, annotations, a result's
 * usage) are ignored by an older one.
 */

/** What a tool's annotations may say (MCP's hints); pi reads none of them, permission extensions may. */
export interface Annotations {
	readOnlyHint?: boolean;
	destructiveHint?: boolean;
	idempotentHint?: boolean;
	openWorldHint?: boolean;
}

export interface TextContent {
	type: "text";
	text: string;
}

export interface ImageContent {
	type: "image";
	data: string;
	mimeType: string;
}

export type Content = TextContent | ImageContent;

/** pi's Usage: a nested model's tokens, added to pi's footer and session totals (pi 0.81+). */
export interface PiUsage {
	input: number;
	output: number;
	cacheRead: number;
	cacheWrite: number;
	totalTokens: number;
	cost: { input: number; output: number; cacheRead: number; cacheWrite: number; total: number };
}

export interface ToolResult<D> {
	content: Content[];
	details: D;
	usage?: PiUsage;
}

export type OnUpdate = ((update: { content: TextContent[]; details: { stage: string; elapsed_ms: number } }) => void) | undefined;

export interface Theme {
	fg(color: string, text: string): string;
}

export interface Component {
	render(width: number): string[];
	invalidate(): void;
}

export interface RenderOptions {
	expanded: boolean;
	isPartial: boolean;
}

export interface RenderContext {
	isError?: boolean;
}

export interface ToolContext {
	model?: { provider?: string; id?: string };
	hasUI?: boolean;
	ui?: { notify(message: string, type?: "info" | "warning" | "error"): void };
	sessionManager?: { getSessionId?(): string | undefined };
	cwd?: string;
}

export interface JsonSchema {
	type: string;
	items?: JsonSchema;
	enum?: string[];
	properties?: Record<string, JsonSchema & { description?: string }>;
	required?: string[];
	additionalProperties?: boolean;
	minimum?: number;
	maximum?: number;
}

export interface ToolDefinition<P, D> {
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

export interface ExtensionAPI {
	registerTool<P, D>(tool: ToolDefinition<P, D>): void;
	on(event: "session_start" | "session_shutdown", handler: (event: unknown, ctx: ToolContext) => Promise<void> | void): void;
	getAllTools?(): { name: string }[];
	getThinkingLevel?(): string;
}
