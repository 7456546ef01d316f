/**
 * A text field about to be filled: focused, its old text selected (the text inserted next replaces it, as
 * typing would); or why it cannot be filled.
 * @this {Control}
 */
function prepareFill() {
  const t = this.localName, type = (this.getAttribute("type") || "text").toLowerCase();
  const textual = (t === "input" && !["checkbox", "radio", "button", "submit", "reset", "image", "file", "hidden",
                                      "range", "color"].includes(type)) || t === "textarea" || this.isContentEditable;
  if (!textual) return {error: "not_editable", what: __wf.describe(this)};
  if (this.disabled) return {error: "disabled", what: __wf.describe(this)};
  if (this.readOnly) return {error: "readonly", what: __wf.describe(this)};
  this.scrollIntoView({block: "center", inline: "center"});
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
