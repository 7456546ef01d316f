/**
 * Whether a click at the point where `hit` is found reaches this element.
 * @this {Element}
 * @param {Element} hit
 */
function hitOk(hit) {
  return __wf.hitOk(this, hit);
}
