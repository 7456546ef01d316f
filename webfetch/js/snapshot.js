/**
 * @typedef {{depth: number, parent: number, el: Control | null, role: string, name: string, value: string,
 *            attrs: string[], from?: number, more?: string}} Line
 * @typedef {{what: string, total: number, nodes: Node[], first: number, last: number,
 *            members: Map<Node, number> | null}} Run
 * @typedef {{lines: Line[], visited: number, budget: number, truncated: boolean, find: string,
 *            active: Element | null, hidden: Map<Node, Run[]> | null}} WalkState
 */
/**
 * The browse snapshot's library, installed once per document in the browse's isolated world of each frame
 * (the page's own scripts cannot see or change it) as `globalThis.__wf`, that world's own global: the walk
 * that turns the page into lines (snapshot.py says why in the page), the ref -> element map, and what the
 * actions ask of elements (describe, hitOk, quiet, waitText).
 * @param {number} collapseAt a run of this many similar siblings is collapsed...
 * @param {number} collapseKeep ...to its first few and one line that counts the rest
 * @param {string} askPending the event that asks pending.js, in the page's own world, what work is pending...
 * @param {string} pendingAnswer ...and the event of its answer
 */
function installSnapshot(collapseAt, collapseKeep, askPending, pendingAnswer) {
  if (globalThis.__wf) return;
  const ids = new WeakMap(), refs = new Map();
  // What changed since the last whole snapshot, for the rows a collapsed run hides (their lines are in no
  // snapshot, so a diff of lines cannot see them): every node a mutation touched or added, and every control
  // an input or change event came from (a value is a property, not a mutation); bounded. The observer also
  // dates the DOM's last change, which the settle asks for (quiet).
  const TOUCHED_MAX = 20000, INSIDE_SHOWN = 5;
  let touched = new Set(), overflow = false, lastMutation = performance.now();
  const touch = (/** @type {Node} */ n) => {
    if (touched.size < TOUCHED_MAX) touched.add(n); else overflow = true;
  };
  new MutationObserver((records) => {
    lastMutation = performance.now();
    for (const r of records) { touch(r.target); for (const n of r.addedNodes) touch(n); }
  }).observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  for (const type of ["input", "change"]) {
    document.addEventListener(type, (e) => touch(/** @type {Node} */ (e.composedPath()[0])), true);
  }
  const INTERACTIVE = new Set(["link", "button", "checkbox", "radio", "textbox", "searchbox", "combobox",
    "listbox", "option", "slider", "spinbutton", "switch", "tab", "menuitem", "menuitemcheckbox",
    "menuitemradio", "treeitem", "iframe", "clickable"]);
  const CONTEXT = new Set(["heading", "dialog", "alertdialog", "alert", "status"]);
  const HOLDERS = new Set(["row", "listitem"]);  // interactive mode: shown when they hold a control
  const FROM_CONTENT = new Set(["link", "button", "heading", "option", "tab", "menuitem", "menuitemcheckbox",
    "menuitemradio", "treeitem", "row", "cell", "columnheader", "listitem", "checkbox", "radio", "switch",
    "clickable", "alert", "status", "paragraph", "label"]);
  const SKIP = new Set(["script", "style", "noscript", "template", "head", "datalist", "svg"]);
  const clean = (/** @type {string | null | undefined} */ s, n = 100) => {
    // not always a string: a form's `title` or `name` is its control of that name when it has one
    s = (typeof s === "string" ? s : "").replace(/\s+/g, " ").trim();
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  };
  /** @param {Node} node @param {Node} [skip] */
  const textOf = (node, skip) => {
    let out = "";
    /** @param {Node} n */
    const visit = (n) => {
      if (n === skip) return;
      if (n.nodeType === 3) { out += /** @type {Text} */ (n).data; return; }
      if (n.nodeType !== 1 && n.nodeType !== 11) return;
      const e = /** @type {Element} */ (n);
      if (n.nodeType === 1) {
        const t = e.localName;
        if (t === "script" || t === "style" || t === "select" || t === "textarea" || t === "input") return;
        if (e.shadowRoot) { visit(e.shadowRoot); return; }
      }
      for (const c of n.childNodes) visit(c);
      if (n.nodeType === 1 && /^(p|div|li|tr|td|th|br|h[1-6])$/.test(e.localName)) out += " ";
    };
    visit(node);
    return out;
  };
  const inputType = (/** @type {Element} */ el) => (el.getAttribute("type") || "text").toLowerCase();
  /** @param {Control} el @returns {string | null} */
  function roleOf(el) {
    const explicit = (el.getAttribute("role") || "").trim().split(/\s+/)[0];
    if (explicit && explicit !== "presentation" && explicit !== "none" && explicit !== "generic") return explicit;
    switch (el.localName) {
      case "a": return el.hasAttribute("href") ? "link" : null;
      case "button": case "summary": return "button";
      case "input": {
        const t = inputType(el);
        if (t === "hidden") return null;
        if (t === "checkbox" || t === "radio") return t;
        if (["button", "submit", "reset", "image", "file"].includes(t)) return "button";
        if (t === "range") return "slider";
        if (t === "number") return "spinbutton";
        if (t === "search") return "searchbox";
        return "textbox";
      }
      case "select": return el.multiple || /** @type {HTMLSelectElement} */ (el).size > 1 ? "listbox" : "combobox";
      case "textarea": return "textbox";
      case "h1": case "h2": case "h3": case "h4": case "h5": case "h6": return "heading";
      case "iframe": case "frame": return "iframe";
      case "img": return el.getAttribute("alt") ? "img" : null;
      case "tr": return "row";
      case "td": return "cell";
      case "th": return "columnheader";
      case "li": return "listitem";
      case "ul": case "ol": return "list";
      case "table": return "table";
      case "dialog": return "dialog";
      case "p": return "paragraph";
      case "nav": return "navigation";
      case "main": return "main";
      case "form": return "form";
      case "label": {
        // the styled upload button: a label over a file input the page hides; the upload action takes its ref
        const c = /** @type {HTMLLabelElement} */ (el).control;
        return c instanceof HTMLInputElement && c.type === "file" && !c.getClientRects().length ? "button" : "label";
      }
    }
    if (el.isContentEditable && el.hasAttribute("contenteditable")) return "textbox";
    return null;
  }
  /** @param {Control} el */
  function clickable(el) {
    if (el.hasAttribute("onclick") || typeof el.onclick === "function") return true;
    if (el.hasAttribute("tabindex") && el.tabIndex >= 0) return true;
    const p = el.parentElement;
    return getComputedStyle(el).cursor === "pointer" && (!p || getComputedStyle(p).cursor !== "pointer");
  }
  /** @param {Control} el @param {string} role */
  function nameOf(el, role) {
    const root = /** @type {Document | ShadowRoot} */ (el.getRootNode());
    const by = el.getAttribute("aria-labelledby");
    if (by) {
      const s = clean(by.split(/\s+/).map((id) => (root.getElementById ? root.getElementById(id)
        : document.getElementById(id))).filter(Boolean).map((e) => textOf(/** @type {HTMLElement} */ (e))).join(" "));
      if (s) return s;
    }
    const label = clean(el.getAttribute("aria-label"));
    if (label) return label;
    const tag = el.localName;
    if (tag === "input" || tag === "select" || tag === "textarea") {
      const t = inputType(el);
      if (tag === "input" && ["button", "submit", "reset"].includes(t))
        return clean(el.value || (t === "submit" ? "Submit" : t === "reset" ? "Reset" : ""));
      if (tag === "input" && t === "image") return clean(el.alt || el.value || "Submit");
      if (el.labels && el.labels.length) {
        const s = clean([...el.labels].map((l) => textOf(l, el)).join(" "));
        if (s) return s;
      }
      const near = nearbyLabel(el);
      if (near) return near;
      return clean(el.getAttribute("placeholder") || el.title || "");
    }
    if (tag === "img") return clean(el.alt);
    if (tag === "iframe" || tag === "frame") return clean(el.title || el.name);
    if (FROM_CONTENT.has(role)) {
      const s = clean(textOf(el), role === "paragraph" ? 200 : 100);
      if (s) return s;
    }
    return clean(el.title || el.getAttribute("placeholder") || "");
  }
  // a label element or a short text just before the control that names no control itself ("Name: [   ]")
  /** @param {Element} el */
  function nearbyLabel(el) {
    for (let n = el.previousSibling, hops = 0; n && hops < 3; n = n.previousSibling, hops++) {
      if (n.nodeType === 3) { const t = clean(/** @type {Text} */ (n).data, 60); if (t) return t.replace(/:$/, ""); continue; }
      if (n.nodeType !== 1) continue;
      const e = /** @type {Control} */ (n);
      if (e.localName === "label" && !e.control) return clean(textOf(e), 60).replace(/:$/, "");
      if (e.localName === "span" && e.children.length === 0) return clean(e.textContent, 60).replace(/:$/, "");
      return "";
    }
    return "";
  }

  /** @param {Control} el @param {string} role */
  function valueOf(el, role) {
    const tag = el.localName;
    if (tag === "input") {
      const t = inputType(el);
      if (["checkbox", "radio", "button", "submit", "reset", "image", "file", "hidden"].includes(t)) return "";
      if (t === "password") return el.value ? "•••" : "";
      return clean(el.value, 200);
    }
    if (tag === "textarea") return clean(el.value, 200);
    if (tag === "select") {
      return clean([.../** @type {HTMLSelectElement} */ (el).selectedOptions].map((o) => o.label || o.text).join(", "));
    }
    if (role === "textbox" && el.isContentEditable) return clean(el.textContent, 200);
    if (role === "combobox" && !el.getAttribute("aria-label") && !el.getAttribute("aria-labelledby")) return "";
    if (role === "combobox") return clean(el.getAttribute("aria-valuetext") || textOf(el));
    if (role === "slider" || role === "spinbutton") return clean(el.getAttribute("aria-valuenow") || "");
    return "";
  }
  function deepActive() {
    let a = document.activeElement;
    while (a && a.shadowRoot && a.shadowRoot.activeElement) a = a.shadowRoot.activeElement;
    return a;
  }
  /** @param {Control} el @param {string} role @param {Element | null} active */
  function attrsOf(el, role, active) {
    const a = [];
    if (role === "heading") {
      const m = /^h([1-6])$/.exec(el.localName);
      a.push("level=" + (m ? m[1] : el.getAttribute("aria-level") || "2"));
    }
    const native = el.localName === "input" && (el.type === "checkbox" || el.type === "radio");
    if (native ? el.checked : el.getAttribute("aria-checked") === "true") a.push("checked");
    if (el.disabled || el.getAttribute("aria-disabled") === "true") a.push("disabled");
    if (el.required || el.getAttribute("aria-required") === "true") a.push("required");
    if ((el.localName === "input" || el.localName === "textarea") && el.readOnly) a.push("readonly");
    const exp = el.getAttribute("aria-expanded");
    if (exp) a.push(exp === "true" ? "expanded" : "collapsed");
    if (el.getAttribute("aria-selected") === "true") a.push("selected");
    if (el === active && INTERACTIVE.has(role)) a.push("focused");
    return a;
  }
  /** @param {Element} el @returns {Node[]} */
  function childNodes(el) {
    if (el.shadowRoot) return [...el.shadowRoot.childNodes];
    if (el.localName === "slot") {
      const assigned = /** @type {HTMLSlotElement} */ (el).assignedNodes({flatten: true});
      return assigned.length ? assigned : [...el.childNodes];
    }
    return [...el.childNodes];
  }
  const sig = (/** @type {Element} */ el) => {
    let s = el.localName + "|" + (el.getAttribute("role") || "") + "|" + (el.getAttribute("class") || "");
    for (const c of el.children) s += "," + c.localName;
    return s;
  };
  /** @param {Element} el */
  function hidden(el) {
    if (el.getAttribute("aria-hidden") === "true") return true;
    return el.checkVisibility ? !el.checkVisibility() : false;
  }

  // Containers whose content matters (a custom combobox's list, a tab list) are walked into; a control
  // whose text is its name is one line.
  const LEAVES = new Set(["link", "button", "checkbox", "radio", "textbox", "searchbox", "slider", "spinbutton",
    "switch", "option", "menuitem", "menuitemcheckbox", "menuitemradio", "tab", "treeitem"]);

  // Every line is collected (full mode); `parent` is the index of the nearest line above it in the tree,
  // from which the interactive view is derived without a second walk.
  /** @param {Control} el @param {number} depth @param {number} parent @param {WalkState} st */
  function walk(el, depth, parent, st) {
    if (++st.visited > st.budget) { st.truncated = true; return; }
    const tag = el.localName;
    if (SKIP.has(tag)) return;
    if (hidden(el)) return;
    let role = roleOf(el);
    if (!role && tag !== "body" && tag !== "html" && clickable(el)) role = "clickable";
    let line = null, index = parent;
    if (role && !(getComputedStyle(el).visibility === "hidden")) {
      line = {depth, parent, el, role, name: nameOf(el, role), value: valueOf(el, role),
              attrs: attrsOf(el, role, st.active)};
      index = st.lines.length;
      st.lines.push(line);
    }
    if (tag === "select" || tag === "iframe" || tag === "frame" || (line && LEAVES.has(line.role))) return;
    const childDepth = line ? depth + 1 : depth;
    const ownText = !(line && FROM_CONTENT.has(line.role));  // else the line's name holds the text already
    // children in document order, text between elements included, so "Enter the <b>username</b> …" reads
    // in order; runs of similar elements collapse
    const nodes = childNodes(el);
    for (let i = 0; i < nodes.length;) {
      const node = nodes[i];
      if (node.nodeType === 3) {
        const t = ownText ? clean(/** @type {Text} */ (node).data, 200) : "";
        if (t) st.lines.push({depth: childDepth, parent: index, el: null, role: "text", name: t, value: "", attrs: []});
        i++;
        continue;
      }
      if (node.nodeType !== 1) { i++; continue; }
      const element = /** @type {Control} */ (node);
      if (st.find && nodes.length >= collapseAt && cannotMatch(element, st.find)) { i++; continue; }
      if (!st.find) {
        const s = sig(element);
        let j = i + 1, count = 1, last = i;
        for (; j < nodes.length; j++) {
          const n = nodes[j];
          if (n.nodeType === 3 && !/** @type {Text} */ (n).data.trim()) continue;
          if (n.nodeType !== 1 || sig(/** @type {Element} */ (n)) !== s) break;
          count++;
          last = j;
        }
        if (count >= collapseAt) {
          const before = st.lines.length;
          let kept = 0;
          for (let k = i; k <= last && kept < collapseKeep; k++) {
            if (nodes[k].nodeType === 1) { walk(/** @type {Control} */ (nodes[k]), childDepth, index, st); kept++; }
          }
          const what = roleOf(element) || element.localName;
          if (st.hidden) {
            const parent = /** @type {Node} */ (nodes[i].parentNode);
            if (!st.hidden.has(parent)) st.hidden.set(parent, []);
            /** @type {Run[]} */ (st.hidden.get(parent)).push({what, total: count, nodes, first: i, last, members: null});
          }
          if (st.lines.length > before) {
            st.lines.push({depth: childDepth, parent: index, el: null, role: "…", name: "", value: "", attrs: [],
                           from: before, more: (count - collapseKeep) + " more " + what
                                               + " like these (snapshot with find: to reach them)"});
          }
          i = last + 1;
          continue;
        }
      }
      walk(element, childDepth, index, st);
      i++;
    }
  }

  // What can name a line other than the text inside its element: attributes, form controls and their
  // labels, text in shadow trees or slotted from elsewhere, a frame's own page.
  const NAMED_OTHERWISE = "[aria-label],[aria-labelledby],[title],[placeholder],[alt],[aria-valuetext]," +
    "[aria-valuenow],[contenteditable],input,select,textarea,label,slot,iframe,frame";
  // Letters compared as find compares them, spaces aside (a name's text gains spaces between blocks that
  // textContent lacks) and the final sigma as any other (lower-casing depends on the next letter).
  const squeezed = (/** @type {string} */ s) => s.toLowerCase().replace(/\s+/g, "").replace(/ς/g, "σ");
  // Whether no line of `el`'s subtree can match `find`: its text does not hold it and nothing in it takes a
  // name from elsewhere. A find over a long list (every row of a 3 000-row table) then walks only the members
  // that may match, not the whole list: what it returns is the same.
  /** @param {Element} el @param {string} find */
  function cannotMatch(el, find) {
    const key = squeezed(find);
    if (!key || squeezed(el.textContent || "").includes(key)) return false;
    if (el.shadowRoot || el.matches(NAMED_OTHERWISE) || el.querySelector(NAMED_OTHERWISE)) return false;
    for (const e of el.getElementsByTagName("*")) if (e.shadowRoot) return false;
    return true;
  }

  // The run a node is a hidden member of (past the first few, which the snapshot shows) and its place in
  // the run (1-based), or null. Runs are kept by their parent, cheap to note on every walk; a run's members
  // are counted only when a change reaches its parent.
  /** @param {Node} x @param {Map<Node, Run[]>} hidden @returns {{run: Run, at: number} | null} */
  function hiddenPlace(x, hidden) {
    for (const run of hidden.get(/** @type {Node} */ (x.parentNode)) || []) {
      if (!run.members) {
        run.members = new Map();
        let at = 0;
        for (let k = run.first; k <= run.last; k++) if (run.nodes[k].nodeType === 1) run.members.set(run.nodes[k], ++at);
      }
      const at = run.members.get(x);
      if (at !== undefined) return at > collapseKeep ? {run, at} : null;
    }
    return null;
  }

  // The members of collapsed runs that changed since the last whole snapshot, each run's told in a line
  // and the first few members' own lines (full view) under it: a click that changes row 1 500 of a table
  // is reported, with refs to act on, though the snapshot shows only the first rows.
  /** @param {Map<Node, Run[]>} hidden @param {Element | null} active @param {number} budget
   *  @param {string[]} created @returns {SnapshotRow[]} */
  function insideRuns(hidden, active, budget, created) {
    if (!hidden.size) return [];  // no collapsed run: nothing a diff of lines cannot see
    if (overflow) {
      return [[0, "- … (the page changed in more places than webfetch follows: rows inside collapsed runs were " +
                  "not compared; snapshot with find: to check them)", null]];
    }
    /** @type {Map<Run, Map<number, Element>>} */
    const runs = new Map();
    for (const n of touched) {
      for (let x = /** @type {Node | null} */ (n); x && x.parentNode; x = x.parentNode) {
        if (!hidden.has(x.parentNode)) continue;
        const h = hiddenPlace(x, hidden);
        if (!h) continue;
        if (!runs.has(h.run)) runs.set(h.run, new Map());
        /** @type {Map<number, Element>} */ (runs.get(h.run)).set(h.at, /** @type {Element} */ (x));
        break;
      }
    }
    /** @type {SnapshotRow[]} */
    const rows = [];
    for (const [run, members] of runs) {
      const changed = [...members].sort((a, b) => a[0] - b[0]);
      const shown = changed.slice(0, INSIDE_SHOWN);
      const places = shown.map((m) => m[0]).join(", ");
      const what = changed.length === 1 ? `${run.what} ${places}` : `${changed.length} ${run.what}s (${places}` +
        (changed.length > shown.length ? ", …" : "") + ")";
      rows.push([0, `- … ${what} of ${run.total} changed inside a collapsed run` +
                    (changed.length > shown.length ? "; the first " + shown.length + " below, snapshot with find: " +
                                                     "to reach the others" : "") + ":", null]);
      for (const [, el] of shown) {
        /** @type {WalkState} */
        const sub = {lines: [], visited: 0, budget, truncated: false, find: "", active, hidden: null};
        walk(/** @type {Control} */ (el), 1, -1, sub);
        for (const row of render(sub.lines, created)) rows.push([row[0], row[1], null]);
      }
    }
    return rows;
  }

  /** @param {Element} el */
  function refFor(el) {
    let r = ids.get(el);
    if (!r) {
      r = "e" + globalThis.__wfNext++;
      ids.set(el, r);
      refs.set(r, new WeakRef(el));
    }
    return r;
  }

  // interactive view: controls and the lines that give them context (headings, alerts, dialogs), plus the
  // rows and list items that hold a control; depth counts only the ancestors shown
  /** @param {Line[]} lines @returns {Line[]} */
  function interactiveView(lines) {
    const keep = lines.map((l) => INTERACTIVE.has(l.role) || CONTEXT.has(l.role));
    for (let i = lines.length - 1; i >= 0; i--) {
      if (!keep[i]) continue;
      for (let p = lines[i].parent; p >= 0; p = lines[p].parent) if (HOLDERS.has(lines[p].role)) keep[p] = true;
    }
    for (let i = 0; i < lines.length; i++) {
      if (lines[i].more) keep[i] = keep.slice(lines[i].from, i).some(Boolean);
    }
    const own = new Array(lines.length);
    for (let i = 0; i < lines.length; i++) {
      const p = lines[i].parent;
      own[i] = p < 0 ? 0 : keep[p] ? own[p] + 1 : own[p];
    }
    return /** @type {Line[]} */ (lines.map((l, i) => keep[i] ? Object.assign({}, l, {depth: own[i]}) : null)
      .filter(Boolean));
  }

  /** @param {Line[]} lines @param {string} find */
  function filtered(lines, find) {
    const keep = new Array(lines.length).fill(false);
    for (let i = 0; i < lines.length; i++) {
      const l = lines[i];
      if (!(l.name + " " + l.value).toLowerCase().includes(find)) continue;
      keep[i] = true;
      let d = l.depth;
      for (let k = i - 1; k >= 0 && d > 0; k--) if (lines[k].depth < d) { keep[k] = true; d = lines[k].depth; }
    }
    return lines.filter((_, i) => keep[i]);
  }

  /** @param {Line[]} lines @param {string[]} created @returns {SnapshotRow[]} */
  function render(lines, created) {
    return lines.map((l) => {
      if (l.more) return [l.depth, "- … " + l.more, null];
      let ref = null;
      if (l.el && INTERACTIVE.has(l.role)) {
        if (!ids.has(l.el)) { ref = refFor(l.el); created.push(ref); } else ref = ids.get(l.el);
      }
      let text = "- " + l.role;
      if (l.name) text += " " + JSON.stringify(l.name);
      const attrs = l.attrs.slice();
      if (ref) attrs.push("ref=" + ref);
      if (attrs.length) text += " [" + attrs.join(", ") + "]";
      if (l.value) text += ": " + l.value;
      return [l.depth, text, l.role === "iframe" ? ref : null];
    });
  }

  /** @param {SnapshotOptions} opts @returns {SnapshotResult} */
  function snapshot(opts) {
    globalThis.__wfNext = opts.next;
    // the snapshot the next action's diff is told from; its runs are noted when something changed since
    const whole = opts.both && !opts.find && !opts.ref && (touched.size > 0 || overflow);
    /** @type {WalkState} */
    const st = {lines: [], visited: 0, budget: opts.budget, truncated: false,
                find: (opts.find || "").toLowerCase(), active: deepActive(), hidden: whole ? new Map() : null};
    let root = document.documentElement;
    if (opts.ref) {
      root = get(opts.ref);
      if (!root) return {error: "stale"};
    }
    if (root) walk(root, 0, -1, st);
    /** @type {string[]} */
    const created = [];
    let lines = opts.mode === "full" ? st.lines : interactiveView(st.lines);
    if (st.find) lines = filtered(lines, st.find);
    const out = render(lines, created);
    const full = opts.both && !st.find ? render(st.lines, created) : null;
    let inside = null;
    if (st.hidden) inside = insideRuns(st.hidden, st.active, opts.budget, created);
    if (opts.both && !opts.find && !opts.ref) {
      touched = new Set();
      overflow = false;
    }
    return {lines: out, full, inside, created, next: globalThis.__wfNext, truncated: st.truncated,
            title: document.title, clock: clock()};
  }

  /** @param {string} ref */
  function get(ref) {
    const w = refs.get(ref);
    const el = w && w.deref();
    return el && el.isConnected ? el : null;
  }

  /** @param {Control} el */
  function describe(el) {
    const role = roleOf(el) || (clickable(el) ? "clickable" : el.localName);
    const name = nameOf(el, role) || clean(textOf(el), 60);
    let s = role + (name ? " " + JSON.stringify(name) : "");
    const r = ids.get(el);
    if (r) s += " [ref=" + r + "]";
    else if (el.id) s += " (#" + el.id + ")";
    return s;
  }

  // The point hit is the target, inside it, or a label that forwards the click to it.
  /** @param {Element} target @param {Element} hit */
  function hitOk(target, hit) {
    for (let n = /** @type {Node | null} */ (hit); n; n = n.parentNode || /** @type {ShadowRoot} */ (n).host) {
      if (n === target) return true;
    }
    const label = hit.closest ? hit.closest("label") : null;
    return !!(label && label.control === target);
  }

  // Settled is a turn of the page's event loop in which the DOM did not change, and none of the work the
  // action may have set off is pending: a task (what the action's events scheduled at once); the next
  // animation frame and a task after it when the page can act in one (a hidden tab has no frames: at most
  // FRAME_MS), that is when it asked for a frame or watches what a frame delivers (a resize, a scroll, an
  // observer), and the next frame when that frame asked for one (two frames in a row is a common way to act
  // after layout), up to FRAMES_MAX without a change (more is an animation, no reason to wait); and no fetch
  // or XHR begun since the action still waiting for its response (or a fetch's body being read). The page's
  // own world counts those (pending.js); a document without the counter (a page that stopped our events)
  // waits out one frame, as if it had asked. A page still changing keeps it waiting turn after turn, until
  // `capMs`. No fixed quiet time: a page done at once is settled within a task.
  const FRAME_MS = 50, FRAMES_MAX = 2, POLL_MS = 5;
  /**
   * @param {number} since requests begun at or after this time (performance.now()) count
   * @param {number} leftSince a navigation begun at or after this time is news
   * @returns {{requests: number, frames: number, watches: boolean, leaving: boolean} | null}
   */
  function pendingWork(since, leftSince) {
    /** @type {{requests: number, frames: number, watches: boolean, leaving: boolean} | null} */
    let answer = null;
    const hear = (/** @type {Event} */ e) => { answer = /** @type {CustomEvent} */ (e).detail; };
    document.addEventListener(pendingAnswer, hear);
    try {
      window.dispatchEvent(new CustomEvent(askPending, {detail: {since, leftSince}}));
    } finally {
      document.removeEventListener(pendingAnswer, hear);
    }
    return answer;
  }
  /**
   * "settled", "busy" (`capMs` ran out), or "leaving": the document began to navigate away since
   * `leftSince` (the rest is the navigation's, which the daemon follows). Times are the page's own
   * (performance.now()), which the daemon learns with each snapshot (`clock`).
   * @param {number} capMs
   * @param {number} since the action began then: what the page began since is the action's
   * @param {number} leftSince a navigation begun since then is news
   * @returns {Promise<string>}
   */
  function quiet(capMs, since, leftSince) {
    const start = performance.now();
    const frame = () => new Promise((resolve) => {
      const timer = setTimeout(resolve, FRAME_MS);
      requestAnimationFrame(() => { clearTimeout(timer); resolve(undefined); });
    });
    const pause = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));
    return (async () => {
      let quietFrames = 0;  // frames waited for in a row in which the DOM did not change
      while (performance.now() - start < capMs) {
        const before = lastMutation;
        await pause(0);
        let work = pendingWork(since, leftSince);
        if (work && work.leaving) return "leaving";
        const frameWork = !work || work.frames > 0 || (work.watches && quietFrames === 0);
        if (frameWork && quietFrames < FRAMES_MAX) {
          await frame();
          await pause(0);
          quietFrames++;
          work = pendingWork(since, leftSince);
          if (work && work.leaving) return "leaving";
          if (work && work.frames > 0 && quietFrames < FRAMES_MAX && lastMutation === before) continue;
        }
        if (lastMutation !== before) {
          quietFrames = 0;
          continue;
        }
        if (work && work.requests > 0) {
          quietFrames = 0;  // what the responses set off may ask for frames again
          await pause(POLL_MS);
          continue;
        }
        return "settled";
      }
      return "busy";
    })();
  }

  /** @param {string} text @param {boolean} gone @param {number} capMs @returns {Promise<boolean>} */
  function waitText(text, gone, capMs) {
    const needle = text.toLowerCase();
    const has = () => ((document.body && document.body.innerText) || "").toLowerCase().includes(needle);
    return new Promise((resolve) => {
      if (has() !== gone) return resolve(true);
      const mo = new MutationObserver(() => {
        if (has() !== gone) { mo.disconnect(); clearTimeout(timer); resolve(true); }
      });
      mo.observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
      const timer = setTimeout(() => { mo.disconnect(); resolve(false); }, capMs);
    });
  }

  /** @returns {[number, number]} the document's performance.now() and its origin (which tells documents apart) */
  const clock = () => [performance.now(), performance.timeOrigin];
  globalThis.__wf = {snapshot, get, describe, hitOk, quiet, waitText, roleOf, deepActive, textOf, clock};
}
