/**
 * Runs in every document before the page's own scripts (the fetch tab's document-start script): counts
 * what may still change the DOM (short timers, fetch/XHR in flight) and when the DOM last changed, so the
 * renderer can tell a settled page from one whose JavaScript is still working without a fixed sleep on
 * every fetch. Installs `window.__webfetchSettle`, which settled.js asks.
 */
function settle() {
  if (window.__webfetchSettle) return;
  /** @type {{timers: Map<number, number>, inflight: number, lastMutation: number, mutations: number}} */
  const st = {timers: new Map(), inflight: 0, lastMutation: performance.now(), mutations: 0};  // timer id -> when due
  const oSet = window.setTimeout, oClear = window.clearTimeout;
  window.setTimeout = /** @type {typeof window.setTimeout} */ (
    /**
     * @this {unknown}
     * @param {TimerHandler} fn
     * @param {number} [ms]
     * @param {...unknown} args
     */
    function (fn, ms, ...args) {
      const delay = Number(ms) || 0;
      if (delay > 3000) return oSet.call(this, fn, ms, ...args);
      /** @type {number} */
      let id;
      /** @this {unknown} */
      const wrapped = function () {
        st.timers.delete(id);
        return typeof fn === "function" ? fn.apply(this, arguments) : (0, eval)(String(fn));
      };
      id = oSet.call(this, wrapped, ms, ...args);
      st.timers.set(id, performance.now() + delay);
      return id;
    });
  window.clearTimeout = /** @this {unknown} @param {number | undefined} id */ function (id) {
    st.timers.delete(/** @type {number} */ (id)); return oClear.call(this, id);
  };
  const oFetch = window.fetch;
  if (oFetch) window.fetch = /** @type {typeof window.fetch} */ (
    /** @this {unknown} */
    function () {
      st.inflight++;
      const done = () => { st.inflight--; };
      try { const p = oFetch.apply(this, /** @type {any} */ (arguments)); p.then(done, done); return p; }
      catch (e) { done(); throw e; }
    });
  const oSend = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.send = /** @this {XMLHttpRequest} */ function () {
    st.inflight++;
    this.addEventListener("loadend", () => { st.inflight--; }, {once: true});
    return oSend.apply(this, /** @type {any} */ (arguments));
  };
  // WebSocket handshakes never reach the Fetch domain, and reading a page needs none. (The address
  // policy still holds for a worker's own WebSocket: its connection goes through the proxy.)
  const NoSocket = function WebSocket() {
    throw new DOMException("WebSocket connections are disabled while webfetch reads the page", "SecurityError");
  };
  try { Object.defineProperty(window, "WebSocket", {value: NoSocket, writable: false, configurable: false}); }
  catch (e) {}
  // A service worker's requests are not the page's: the Fetch domain never sees them either.
  if (window.ServiceWorkerContainer) {
    try {
      Object.defineProperty(ServiceWorkerContainer.prototype, "register", {writable: false, configurable: false,
        value: () => Promise.reject(new DOMException("service workers are disabled while webfetch reads the page",
                                                     "SecurityError"))});
    } catch (e) {}
  }
  const watch = () => new MutationObserver(() => { st.lastMutation = performance.now(); st.mutations++; })
      .observe(document, {subtree: true, childList: true, characterData: true});
  watch();
  // capture.js reads the count, so that a later settle can wait for the DOM to change after that capture
  Object.defineProperty(window, "__webfetchMutations", {enumerable: false, value: () => st.mutations});
  Object.defineProperty(window, "__webfetchSettle", {enumerable: false,
    value: /** @type {NonNullable<Window["__webfetchSettle"]>} */ (capMs, quietMs, timersQuietMs, changedAfter) =>
    new Promise((resolve) => {
      const start = performance.now();
      const check = () => {
        const now = performance.now();
        // A loading shell that was captured: nothing counts as settled before its DOM changes again.
        if (st.mutations <= changedAfter) {
          if (now - start >= capMs) return resolve("unchanged");
          return void oSet(check, 25);
        }
        const loading = st.inflight > 0 || document.readyState === "loading";
        const quiet = now - st.lastMutation;
        // A short timer may be about to show the content, but one still pending after the DOM has been
        // quiet this long (nothing loading either) is a page polling, animating or counting down; unless
        // a timer is overdue: then the page's scripts are behind (a busy machine), not idle.
        let overdue = false;
        for (const due of st.timers.values()) if (due < now - quietMs) { overdue = true; break; }
        const waitTimers = st.timers.size > 0 && (quiet < timersQuietMs || overdue);
        if (!loading && !waitTimers && quiet >= quietMs) return resolve("settled");
        if (now - start >= capMs) return resolve(loading || st.timers.size > 0 ? "busy" : "changing");
        oSet(check, 25);
      };
      check();
    })});
}
