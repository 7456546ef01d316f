/**
 * The element as an error message names it: role, name, and its ref or id.
 * @this {Element}
 */
function describe() {
  return __wf.describe(this);
}
