// What every page of the view shares, loaded before its own script (a classic script: these are globals).
// Everything shown is put in the page as text, never as HTML; a link's address is built by the page.
"use strict";

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function time(t) { return new Date(t * 1000).toLocaleTimeString(); }

// A link to `href` (a path of ours) reading `text`.
function link(text, href) {
  const a = el("a", text);
  a.href = href;
  return a;
}

// A table row of cells [text, class, href]: a cell with an href is a link.
function row(cells, cls) {
  const tr = el("tr", undefined, cls);
  for (const [text, c, href] of cells) {
    const td = el("td", href ? undefined : text, c);
    if (href) td.appendChild(link(text, href));
    tr.appendChild(td);
  }
  return tr;
}
