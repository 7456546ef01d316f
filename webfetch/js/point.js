/**
 * One round trip for an element of the main frame: into view, the checks, the hit test at its centre
 * (`ok`, else `by` says what covers it).
 * @this {Control}
 */
function point() {
  let r = this.getBoundingClientRect();
  if (r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth) {
    this.scrollIntoView({block: "center", inline: "center"});
    r = this.getBoundingClientRect();
  }
  const style = getComputedStyle(this), what = __wf.describe(this);
  const visible = r.width > 0 && r.height > 0 && style.visibility !== "hidden" &&
                  (this.checkVisibility ? this.checkVisibility() : true);
  const disabled = !!(this.disabled || this.getAttribute("aria-disabled") === "true");
  if (!visible) return {visible, disabled, what};
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  let hit = document.elementFromPoint(x, y);
  while (hit && hit.shadowRoot) {
    const inner = hit.shadowRoot.elementFromPoint(x, y);
    if (!inner || inner === hit) break;
    hit = inner;
  }
  const ok = !hit || __wf.hitOk(this, hit);
  return {visible, disabled, what, x, y, box: [r.left, r.top, r.width, r.height], ok,
          by: ok ? null : __wf.describe(/** @type {Element} */ (hit))};
}
