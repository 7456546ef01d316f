/**
 * The rendered page as the renderer takes it once it settled: its HTML, title, URL, meta refresh, the DOM
 * mutations settle.js counted so far, and the body's text characters (white space, scripts and styles not
 * counted), counted only up to `textCap`: a page with that much text is no loading shell, and the count
 * stops there so that a long page costs nothing more.
 *
 * In the HTML, the outermost elements the page's own styles keep from people (computed display:none, or
 * visibility:hidden with nothing shown inside) carry the attribute data-webfetch-hidden, for the
 * extraction to leave them out as it does inline-hidden markup (webfetch/parse/hidden.py, which keeps what a
 * person can open). Only in the copy taken: the marks come off the page at once. At most `markCap` elements
 * are looked at, in one walk that does not enter a hidden element.
 * @param {number} textCap
 * @param {number} markCap
 * @returns {{html: string, title: string | null, url: string, refresh: string | null, mutations: number | null,
 *   text: number}}
 */
function capture(textCap, markCap) {
  const m = document.querySelector('meta[http-equiv="refresh" i]');
  let text = 0;
  if (document.body) {
    const skip = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE"]);
    const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n && text < textCap; n = walk.nextNode()) {
      if (n.parentElement && skip.has(n.parentElement.tagName)) continue;
      text += (n.nodeValue || "").replace(/\s+/g, "").length;
    }
  }
  const marked = markHidden(markCap);
  const html = document.documentElement ? document.documentElement.outerHTML : "";
  for (const el of marked) el.removeAttribute("data-webfetch-hidden");
  return {html, title: document.title || null, url: location.href, refresh: m ? m.getAttribute("content") : null,
          mutations: window.__webfetchMutations ? window.__webfetchMutations() : null, text};

  /**
   * Marks the outermost elements of the body whose computed style hides them; returns them.
   * @param {number} cap
   * @returns {Element[]}
   */
  function markHidden(cap) {
    /** @type {Element[]} */
    const marked = [];
    if (!document.body) return marked;
    // what holds no text a person reads, or is left out anyway: not looked into
    const skip = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "LINK", "META", "svg", "IFRAME"]);
    const budget = {left: cap};
    const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_ELEMENT);
    let el = /** @type {Element | null} */ (walk.nextNode());
    while (el && budget.left-- > 0) {
      if (skip.has(el.tagName)) {
        el = past(walk);
        continue;
      }
      const style = getComputedStyle(el);
      const invisible = style.visibility === "hidden" || style.visibility === "collapse";
      if (style.display === "none" || (invisible && !shownInside(el, budget))) {
        el.setAttribute("data-webfetch-hidden", "");
        marked.push(el);
        el = past(walk);
      } else {
        el = /** @type {Element | null} */ (walk.nextNode());
      }
    }
    return marked;
  }

  /**
   * The walk's next element after the current one's inside.
   * @param {TreeWalker} walk
   * @returns {Element | null}
   */
  function past(walk) {
    for (;;) {
      const next = walk.nextSibling();
      if (next) return /** @type {Element} */ (next);
      if (!walk.parentNode()) return null;
    }
  }

  /**
   * Whether an element hidden by visibility holds one a child's style shows again (visibility:visible
   * overrides its parent's), from the shared budget; when the budget runs out, it is taken as shown.
   * @param {Element} el
   * @param {{left: number}} budget
   * @returns {boolean}
   */
  function shownInside(el, budget) {
    const walk = document.createTreeWalker(el, NodeFilter.SHOW_ELEMENT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      if (budget.left-- <= 0) return true;
      if (getComputedStyle(/** @type {Element} */ (n)).visibility === "visible") return true;
    }
    return false;
  }
}
