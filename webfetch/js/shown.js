/**
 * What the page shows, as HTML for the extractor: hidden elements (a closed menu, a collapsed list) left
 * out, open shadow roots' content put in their hosts. Of the document when called as a plain function;
 * of the element when called on one (`this`), as the body of a page of its own.
 * @this {Element | Window}
 * @returns {string}
 */
function shown() {
  const element = this instanceof Element;
  const root = /** @type {Element} */ (element ? this : document.documentElement);
  const clone = /** @type {Element} */ (root.cloneNode(true));
  /** @param {Element} a @param {Element} b */
  const walk = (a, b) => {
    for (let i = a.children.length - 1; i >= 0; i--) {
      const el = a.children[i], copy = b.children[i];
      if (!copy || el.localName === "head") continue;
      if (el.checkVisibility && !el.checkVisibility() && el.localName !== "script") copy.remove();
      else {
        walk(el, copy);
        if (el.shadowRoot) copy.insertAdjacentHTML("beforeend", el.shadowRoot.innerHTML);
      }
    }
  };
  walk(root, clone);
  return element ? "<html><body>" + clone.outerHTML + "</body></html>" : clone.outerHTML;
}
