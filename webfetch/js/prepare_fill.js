/**
 * A text field about to be filled: focused, its old text selected (the text inserted next replaces it, as
 * typing would); or why it cannot be filled. The page is marked as the fill begins (__wf.mark).
 * @this {Control}
 */
function prepareFill() {
  const t = this.localName, type = (this.getAttribute("type") || "text").toLowerCase();
  const textual = (t === "input" && !["checkbox", "radio", "button", "submit", "reset", "image", "file", "hidden",
                                      "range", "color"].includes(type)) || t === "textarea" || this.isContentEditable;
  if (!textual) return {error: "not_editable", what: __wf.describe(this)};
  if (this.disabled) return {error: "disabled", what: __wf.describe(this)};
  if (this.readOnly) return {error: "readonly", what: __wf.describe(this)};
  __wf.mark(true);  // where the settle's quiet turn starts from (snapshot.js); forgotten if this scrolls
  const before = this.getBoundingClientRect();
  this.scrollIntoView({block: "center", inline: "center"});
  const after = this.getBoundingClientRect();
  if (after.top !== before.top || after.left !== before.left) __wf.mark(false);
  this.focus();
  if (this.isContentEditable) {
    const range = document.createRange();
    range.selectNodeContents(this);
    const sel = /** @type {Selection} */ (getSelection());
    sel.removeAllRanges();
    sel.addRange(range);
  } else {
    /** @type {HTMLInputElement} */ (this).select();
  }
  return {focused: __wf.deepActive() === this};
}
