// What the page scripts share: the globals one script installs and others call, and the element type
// the browse scripts read controls through. Types only: tsc reads this file, nothing ships it.

/** An element as the browse scripts read it: a control's properties where its kind has them. */
interface Control extends HTMLElement {
  disabled?: boolean; readOnly?: boolean; required?: boolean; checked?: boolean; multiple?: boolean;
  type?: string; value?: string; size?: number; alt?: string; name?: string;
  labels?: NodeListOf<HTMLLabelElement> | null; control?: HTMLElement | null;
}

interface SnapshotOptions {
  mode: string; ref: string | null; find: string | null; next: number; budget: number; both: boolean;
}
/** A line: [depth, text, the ref of an iframe whose content goes under it]. */
type SnapshotRow = [number, string, string | null];
type SnapshotResult = {error: "stale"} | {
  lines: SnapshotRow[]; full: SnapshotRow[] | null; inside: SnapshotRow[] | null; created: string[]; next: number; truncated: boolean;
  title: string; clock: [number, number];
};

/** snapshot.js's library, in the browse's isolated world. */
interface BrowseLibrary {
  snapshot(opts: SnapshotOptions): SnapshotResult;
  get(ref: string): Element | null;
  describe(el: Element): string;
  hitOk(target: Element, hit: Element): boolean;
  quiet(capMs: number, since: number, leftSince: number): Promise<string>;
  waitText(text: string, gone: boolean, capMs: number): Promise<boolean>;
  roleOf(el: Element): string | null;
  deepActive(): Element | null;
  textOf(node: Node, skip?: Node): string;
  clock(): [number, number];
}

declare var __wf: BrowseLibrary;
declare var __wfNext: number;

interface Window {
  /** settle.js's, in every document a fetch renders */
  __webfetchSettle?: (capMs: number, quietMs: number, timersQuietMs: number, changedAfter: number) => Promise<string>;
  /** settle.js's: how many DOM mutations it has seen */
  __webfetchMutations?: () => number;
}
