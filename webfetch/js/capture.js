/**
 * The rendered page as the renderer takes it once it settled: its HTML, title, URL, meta refresh, the DOM
 * mutations settle.js counted so far, and the body's text characters (white space, scripts and styles not
 * counted), counted only up to `textCap`: a page with that much text is no loading shell, and the count
 * stops there so that a long page costs nothing more.
 * @param {number} textCap
 * @returns {{html: string, title: string | null, url: string, refresh: string | null, mutations: number | null,
 *   text: number}}
 */
function capture(textCap) {
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
  return {html: document.documentElement ? document.documentElement.outerHTML : "",
          title: document.title || null, url: location.href, refresh: m ? m.getAttribute("content") : null,
          mutations: window.__webfetchMutations ? window.__webfetchMutations() : null, text};
}
