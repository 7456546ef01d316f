/**
 * An element about to be clicked in an iframe (actions.py finds its point with the browser's geometry):
 * whether it is disabled and visible, and what it is.
 * @this {Control}
 */
function prepareClick() {
  const r = this.getBoundingClientRect();
  const style = getComputedStyle(this);
  return {disabled: !!(this.disabled || this.getAttribute("aria-disabled") === "true"),
          visible: r.width > 0 && r.height > 0 && style.visibility !== "hidden" &&
                   (this.checkVisibility ? this.checkVisibility() : true),
          what: __wf.describe(this)};
}
