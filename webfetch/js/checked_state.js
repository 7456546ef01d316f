/**
 * Whether a checkbox, radio button or ARIA switch is checked, and which kind it is (`kind` null: none).
 * @this {Control}
 */
function checkedState() {
  if (this.localName === "input" && (this.type === "checkbox" || this.type === "radio"))
    return {kind: this.type, checked: this.checked};
  const c = this.getAttribute("aria-checked");
  if (c !== null) return {kind: "aria", checked: c === "true"};
  return {kind: null, what: __wf.describe(this)};
}
