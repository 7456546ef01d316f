/**
 * A control's value as the result reports it after an action (a password as dots).
 * @this {Control}
 * @returns {string | null}
 */
function readValue() {
  if (this.isContentEditable) return this.textContent;
  if (this.localName === "select") {
    return [.../** @type {HTMLSelectElement} */ (this).selectedOptions].map((o) => o.label || o.text).join(", ");
  }
  if (this.type === "checkbox" || this.type === "radio") return this.checked ? "checked" : "unchecked";
  if (this.getAttribute("aria-checked")) return this.getAttribute("aria-checked") === "true" ? "checked" : "unchecked";
  if (this.type === "password") return this.value ? "•••" : "";
  return this.value === undefined ? "" : String(this.value);
}
