/**
 * The function `Runtime.callFunctionOn` calls for an action on a ref, in the ref's frame's isolated world:
 * `action` applied to the ref's element, in one round trip; `{__stale: true}` when it left the page.
 * @param {(this: Element, ...args: any[]) => unknown} action
 * @returns {(ref: string, ...args: any[]) => unknown}
 */
function onRef(action) {
  return function (ref, ...args) {
    const el = __wf.get(ref);
    if (!el) return {__stale: true};
    return action.apply(el, args);
  };
}
