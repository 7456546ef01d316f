/**
 * The file input a ref stands for: the element itself, or the input a label names (a styled upload
 * button is often a label over a hidden input); null when neither is an `<input type=file>`.
 * @this {Element}
 * @returns {HTMLInputElement | null}
 */
function fileInput() {
  const own = this instanceof HTMLLabelElement ? this.control : this;
  return own instanceof HTMLInputElement && own.type === "file" ? own : null;
}
