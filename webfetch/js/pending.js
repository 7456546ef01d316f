/**
 * Runs in every document of a browse tab, in the page's own world and before its scripts: counts the work
 * the page started that an action's settle must wait for and that the browse's isolated world cannot see
 * (it has its own `fetch` and `requestAnimationFrame`): fetch() requests until their response's headers,
 * then each read of a body (a body the page never reads is not waited for: it may never finish loading),
 * XMLHttpRequests until they end, the animation-frame callbacks the page asked for, and whether the page
 * watches what only the next frame delivers (resize and scroll events, media-query changes, resize and
 * intersection observers: an action's scroll or a new size reaches the page then, not at once), and when
 * the document last began to navigate away (the Navigation API's navigate event, at once, where Chrome's
 * own report of the navigation may reach the daemon after the settle's turn).
 *
 * The isolated world asks by an `askName` event on window whose detail is a time (performance.now()), and
 * the answer comes back, within that dispatch, as an `answerName` event on document whose detail is
 * {requests, frames, watches, leftAt}: the requests begun since that time still pending, the frame
 * callbacks waiting, whether the page watches frames, and when it began a navigation to another document.
 * A CustomEvent's detail crosses worlds (as a copy), and dispatchEvent is synchronous: one call in the page
 * asks and hears. Why not the Network events the daemon already gets: they are not ordered with the answers
 * to its calls, so a request a click started can reach the daemon after the settle's turn came back quiet.
 * @param {string} askName
 * @param {string} answerName
 */
function pending(askName, answerName) {
  /** @type {Map<number, number>} */
  const requests = new Map();  // id -> when it began
  /** @type {Set<number>} */
  const frames = new Set();
  let lastId = 0;
  /** @returns {() => void} the request's end */
  const begin = () => {
    const id = ++lastId;
    requests.set(id, performance.now());
    return () => { requests.delete(id); };
  };
  /**
   * `fn` made to count each call until the promise it returns settles.
   * @template {(...args: any[]) => Promise<unknown>} F
   * @param {F} fn
   * @returns {F}
   */
  const counted = (fn) => /** @type {F} */ (
    /** @this {unknown} @param {...unknown} args */
    function (...args) {
      const end = begin();
      try {
        const p = fn.apply(this, args);
        p.then(end, end);  // before the caller's own continuation: the count drops in the same task
        return p;
      } catch (e) {
        end();
        throw e;
      }
    });
  if (window.fetch) window.fetch = counted(window.fetch);
  for (const name of /** @type {const} */ (["arrayBuffer", "blob", "bytes", "formData", "json", "text"])) {
    const proto = /** @type {Record<string, any>} */ (Response.prototype);
    if (typeof proto[name] === "function") proto[name] = counted(proto[name]);
  }
  const send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.send = /** @this {XMLHttpRequest} @param {...unknown} args */ function (...args) {
    const end = begin();
    this.addEventListener("loadend", end, {once: true});
    try {
      return send.apply(this, /** @type {any} */ (args));
    } catch (e) {
      end();
      throw e;
    }
  };
  const request = window.requestAnimationFrame, cancel = window.cancelAnimationFrame;
  window.requestAnimationFrame = function (callback) {
    const id = request.call(window, (time) => { frames.delete(id); callback(time); });
    frames.add(id);
    return id;
  };
  window.cancelAnimationFrame = function (id) {
    frames.delete(id);
    cancel.call(window, id);
  };
  let leftAt = -Infinity;
  const navigation = /** @type {EventTarget | undefined} */ (/** @type {any} */ (window).navigation);
  if (navigation) {
    navigation.addEventListener("navigate", (event) => {
      if (!(/** @type {any} */ (event)).destination.sameDocument) leftAt = performance.now();
    });
  }
  // Once watched, always: a listener taken off again is rare, and the cost of the mistake is one frame.
  let watched = false;
  const FRAME_EVENTS = new Set(["resize", "scroll", "scrollend"]);
  const listen = EventTarget.prototype.addEventListener;
  EventTarget.prototype.addEventListener = /** @this {EventTarget} @param {...any} args */ function (...args) {
    if (FRAME_EVENTS.has(args[0]) || (args[0] === "change" && this instanceof MediaQueryList)) watched = true;
    return listen.apply(this, /** @type {any} */ (args));
  };
  const mediaListener = MediaQueryList.prototype.addListener;
  MediaQueryList.prototype.addListener = /** @this {MediaQueryList} @param {...any} args */ function (...args) {
    watched = true;
    return mediaListener.apply(this, /** @type {any} */ (args));
  };
  for (const Observer of [window.ResizeObserver, window.IntersectionObserver]) {
    if (!Observer) continue;
    const proto = /** @type {Record<string, any>} */ (Observer.prototype), observe = proto.observe;
    proto.observe = /** @this {unknown} @param {...unknown} args */ function (...args) {
      watched = true;
      return observe.apply(this, args);
    };
  }
  const watches = () => watched || !!(window.onresize || window.onscroll || document.onscroll);
  window.addEventListener(askName, (event) => {
    const since = Number(/** @type {CustomEvent} */ (event).detail);
    let begun = 0;
    for (const at of requests.values()) if (at >= since) begun++;
    const detail = {requests: begun, frames: frames.size, watches: watches(), leftAt};
    document.dispatchEvent(new CustomEvent(answerName, {detail}));
  }, true);
}
