"""A page as text for an agent: one line per control, heading or text, with stable refs (`e12`) to act on.

The walk runs in the page, in an isolated JavaScript world of each frame (the page's own scripts cannot
see or change it), because Chrome's accessibility tree is too slow for big pages: `getFullAXTree` took
1.5-1.9 s for a 3 000-row table here (36 000 nodes), the walk a small fraction of that. Roles and names
follow the accessibility rules closely enough for an agent (explicit role, then the element's own role;
aria-labelledby, aria-label, label, placeholder, title, then text content). Refs live in the world as a
ref -> element map, so the same element keeps its ref; a new document starts an empty world, and the
daemon knows every ref's document (tab.py), so an old ref is `stale_ref`, never a guess.
Long runs of similar siblings are collapsed (`find` reaches them) and the walk has a node budget.
"""

from __future__ import annotations

from dataclasses import dataclass

WORLD_NAME = "webfetch-browse"
COLLAPSE_AT = 8       # a run of this many similar siblings is collapsed...
COLLAPSE_KEEP = 3     # ...to its first few and one line that counts the rest
NODE_BUDGET = 40_000  # elements visited per frame and snapshot

# Installed once per document in the isolated world; `globalThis.__wf` is the world's own global.
PAGE_JS = r"""
(() => {
  if (globalThis.__wf) return;
  const ids = new WeakMap(), refs = new Map();
  const INTERACTIVE = new Set(["link", "button", "checkbox", "radio", "textbox", "searchbox", "combobox",
    "listbox", "option", "slider", "spinbutton", "switch", "tab", "menuitem", "menuitemcheckbox",
    "menuitemradio", "treeitem", "iframe", "clickable"]);
  const CONTEXT = new Set(["heading", "dialog", "alertdialog", "alert", "status"]);
  const HOLDERS = new Set(["row", "listitem"]);  // interactive mode: shown when they hold a control
  const FROM_CONTENT = new Set(["link", "button", "heading", "option", "tab", "menuitem", "menuitemcheckbox",
    "menuitemradio", "treeitem", "row", "cell", "columnheader", "listitem", "checkbox", "radio", "switch",
    "clickable", "alert", "status", "paragraph", "label"]);
  const SKIP = new Set(["script", "style", "noscript", "template", "head", "datalist", "svg"]);
  const clean = (s, n = 100) => {
    s = (s || "").replace(/\s+/g, " ").trim();
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  };
  const textOf = (node, skip) => {
    let out = "";
    const visit = (n) => {
      if (n === skip) return;
      if (n.nodeType === 3) { out += n.data; return; }
      if (n.nodeType !== 1 && n.nodeType !== 11) return;
      if (n.nodeType === 1) {
        const t = n.localName;
        if (t === "script" || t === "style" || t === "select" || t === "textarea" || t === "input") return;
        if (n.shadowRoot) { visit(n.shadowRoot); return; }
      }
      for (const c of n.childNodes) visit(c);
      if (n.nodeType === 1 && /^(p|div|li|tr|td|th|br|h[1-6])$/.test(n.localName)) out += " ";
    };
    visit(node);
    return out;
  };
  const inputType = (el) => (el.getAttribute("type") || "text").toLowerCase();
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
      case "select": return el.multiple || el.size > 1 ? "listbox" : "combobox";
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
      case "label": return "label";
    }
    if (el.isContentEditable && el.hasAttribute("contenteditable")) return "textbox";
    return null;
  }
  function clickable(el) {
    if (el.hasAttribute("onclick") || typeof el.onclick === "function") return true;
    if (el.hasAttribute("tabindex") && el.tabIndex >= 0) return true;
    const p = el.parentElement;
    return getComputedStyle(el).cursor === "pointer" && (!p || getComputedStyle(p).cursor !== "pointer");
  }
  function nameOf(el, role) {
    const root = el.getRootNode();
    const by = el.getAttribute("aria-labelledby");
    if (by) {
      const s = clean(by.split(/\s+/).map((id) => (root.getElementById ? root.getElementById(id)
        : document.getElementById(id))).filter(Boolean).map((e) => textOf(e)).join(" "));
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
  function nearbyLabel(el) {
    for (let n = el.previousSibling, hops = 0; n && hops < 3; n = n.previousSibling, hops++) {
      if (n.nodeType === 3) { const t = clean(n.data, 60); if (t) return t.replace(/:$/, ""); continue; }
      if (n.nodeType !== 1) continue;
      if (n.localName === "label" && !n.control) return clean(textOf(n), 60).replace(/:$/, "");
      if (n.localName === "span" && n.children.length === 0) return clean(n.textContent, 60).replace(/:$/, "");
      return "";
    }
    return "";
  }

  function valueOf(el, role) {
    const tag = el.localName;
    if (tag === "input") {
      const t = inputType(el);
      if (["checkbox", "radio", "button", "submit", "reset", "image", "file", "hidden"].includes(t)) return "";
      if (t === "password") return el.value ? "•••" : "";
      return clean(el.value, 200);
    }
    if (tag === "textarea") return clean(el.value, 200);
    if (tag === "select") return clean([...el.selectedOptions].map((o) => o.label || o.text).join(", "));
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
  function childNodes(el) {
    if (el.shadowRoot) return [...el.shadowRoot.childNodes];
    if (el.localName === "slot") {
      const assigned = el.assignedNodes({flatten: true});
      return assigned.length ? assigned : [...el.childNodes];
    }
    return [...el.childNodes];
  }
  const sig = (el) => {
    let s = el.localName + "|" + (el.getAttribute("role") || "") + "|" + (el.getAttribute("class") || "");
    for (const c of el.children) s += "," + c.localName;
    return s;
  };
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
    if (tag === "select" || tag === "iframe" || tag === "frame" || (line && LEAVES.has(role))) return;
    const childDepth = line ? depth + 1 : depth;
    const ownText = !(line && FROM_CONTENT.has(role));  // else the line's name holds the text already
    // children in document order, text between elements included, so "Enter the <b>username</b> …" reads
    // in order; runs of similar elements collapse
    const nodes = childNodes(el);
    for (let i = 0; i < nodes.length;) {
      const node = nodes[i];
      if (node.nodeType === 3) {
        const t = ownText ? clean(node.data, 200) : "";
        if (t) st.lines.push({depth: childDepth, parent: index, el: null, role: "text", name: t, value: "", attrs: []});
        i++;
        continue;
      }
      if (node.nodeType !== 1) { i++; continue; }
      if (!st.find) {
        const s = sig(node);
        let j = i + 1, count = 1, last = i;
        for (; j < nodes.length; j++) {
          const n = nodes[j];
          if (n.nodeType === 3 && !n.data.trim()) continue;
          if (n.nodeType !== 1 || sig(n) !== s) break;
          count++;
          last = j;
        }
        if (count >= %(collapse_at)d) {
          const before = st.lines.length;
          let kept = 0;
          for (let k = i; k <= last && kept < %(keep)d; k++) {
            if (nodes[k].nodeType === 1) { walk(nodes[k], childDepth, index, st); kept++; }
          }
          if (st.lines.length > before) {
            const what = roleOf(node) || node.localName;
            st.lines.push({depth: childDepth, parent: index, el: null, role: "…", name: "", value: "", attrs: [],
                           from: before, more: (count - %(keep)d) + " more " + what
                                               + " like these (snapshot with find: to reach them)"});
          }
          i = last + 1;
          continue;
        }
      }
      walk(node, childDepth, index, st);
      i++;
    }
  }

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
    return lines.map((l, i) => keep[i] ? Object.assign({}, l, {depth: own[i]}) : null).filter(Boolean);
  }

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

  function snapshot(opts) {
    globalThis.__wfNext = opts.next;
    const st = {lines: [], visited: 0, budget: opts.budget, truncated: false,
                find: (opts.find || "").toLowerCase(), active: deepActive()};
    let root = document.documentElement;
    if (opts.ref) {
      root = get(opts.ref);
      if (!root) return {error: "stale"};
    }
    if (root) walk(root, 0, -1, st);
    const created = [];
    let lines = opts.mode === "full" ? st.lines : interactiveView(st.lines);
    if (st.find) lines = filtered(lines, st.find);
    const out = render(lines, created);
    const full = opts.both && !st.find ? render(st.lines, created) : null;
    return {lines: out, full, created, next: globalThis.__wfNext, truncated: st.truncated, title: document.title};
  }

  function get(ref) {
    const w = refs.get(ref);
    const el = w && w.deref();
    return el && el.isConnected ? el : null;
  }

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
  function hitOk(target, hit) {
    for (let n = hit; n; n = n.parentNode || n.host) if (n === target) return true;
    const label = hit.closest ? hit.closest("label") : null;
    return !!(label && label.control === target);
  }

  function quiet(quietMs, capMs) {
    return new Promise((resolve) => {
      const start = performance.now();
      let last = start;
      const mo = new MutationObserver(() => { last = performance.now(); });
      mo.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
      const tick = () => {
        const now = performance.now();
        if (now - last >= quietMs || now - start >= capMs) { mo.disconnect(); resolve(now - last >= quietMs); }
        else setTimeout(tick, Math.max(5, quietMs - (now - last)));
      };
      setTimeout(tick, quietMs);
    });
  }

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

  globalThis.__wf = {snapshot, get, describe, hitOk, quiet, waitText, roleOf, deepActive, textOf};
})();
""".replace("%(collapse_at)d", str(COLLAPSE_AT)).replace("%(keep)d", str(COLLAPSE_KEEP))


@dataclass
class Snapshot:
    lines: list[str]              # the requested view, indented, iframes' content inlined
    full: list[str] | None        # every line (full mode), when asked for beside an interactive view
    truncated: bool               # the node budget ran out
    title: str

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def diff(old: list[str], new: list[str]) -> tuple[list[str], list[str]]:
    """Lines of `new` that `old` did not have (in order), and the refs `old` showed that `new` does not.
    Focus moving is not a change worth a line (every click moves it)."""
    seen: dict[str, int] = {}
    for line in old:
        seen[_unfocused(line)] = seen.get(_unfocused(line), 0) + 1
    added = []
    for line in new:
        key = _unfocused(line)
        if seen.get(key, 0) > 0:
            seen[key] -= 1
        else:
            added.append(line)
    new_refs = {r for line in new for r in _refs(line)}
    removed = [r for line in old for r in _refs(line) if r not in new_refs]
    return added, removed


def _unfocused(line: str) -> str:
    return line.replace("focused, ", "").replace(" [focused]", "")


def _refs(line: str) -> list[str]:
    at = line.find("ref=e")
    if at < 0:
        return []
    end = at + 4
    while end < len(line) and line[end] not in ",]":
        end += 1
    return [line[at + 4:end]]
