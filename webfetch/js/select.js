/**
 * Selects the options of a native select named by value or label (exact, then ignoring case), as a
 * person's pick would (input and change events); its selection after, or why not.
 * @this {Control}
 * @param {string[]} wanted
 */
function select(wanted) {
  if (this.localName !== "select") return {error: "not_native", what: __wf.describe(this)};
  if (this.disabled) return {error: "disabled", what: __wf.describe(this)};
  const self = /** @type {HTMLSelectElement} */ (this);
  const opts = [...self.options], picked = /** @type {HTMLOptionElement[]} */ ([]);
  const label = (/** @type {HTMLOptionElement} */ o) => (o.label || o.text).trim();
  for (const w of wanted) {
    const o = opts.find((o) => o.value === w) || opts.find((o) => label(o) === w)
      || opts.find((o) => label(o).toLowerCase() === w.toLowerCase());
    if (!o) return {error: "no_option", value: w, options: opts.map(label).slice(0, 40)};
    picked.push(o);
  }
  if (!self.multiple && picked.length > 1) return {error: "one"};
  for (const o of opts) o.selected = picked.includes(o);
  this.dispatchEvent(new Event("input", {bubbles: true}));
  this.dispatchEvent(new Event("change", {bubbles: true}));
  return {value: [...self.selectedOptions].map(label).join(", ")};
}
