/**
 * Runs in every document of a browse tab, in the page's own world (before the page's scripts, but for the
 * document a pop-up had before its tab was set up): counts the work the page started that an action's
 * settle must wait for and that the browse's isolated world cannot see (it has its own `fetch` and
 * `requestAnimationFrame`): fetch() requests until their response's headers, then each read of a body (a
 * body the page never reads is not waited for: it may never finish loading), XMLHttpRequests until they
 * end, the animation-frame callbacks the page asked for, whether the page watches what only the next frame
 * delivers (resize and scroll events, media-query changes, resize and intersection observers: an action's
 * scroll or a new size reaches the page then, not at once), and when the document last began to navigate
 * away (the Navigation API's navigate event, at once, where Chrome's own report of the navigation may reach
 * the daemon after the settle's turn).
 *
 * The isolated world asks by an `askName` event on window whose detail is {since, leftSince}, two times
 * (performance.now()), and the answer comes back, within that dispatch, as an `answerName` event on
 * document whose detail is {requests, frames, watches, leaving}: the requests begun since `since` still
 * pending, the frame callbacks waiting, whether the page watches frames, and whether it began a navigation
 * to another document since `leftSince` that it did not cancel, intercept or make a download, told once (a
 * navigation Chrome then drops, a 204, is not news again). A CustomEvent's detail crosses worlds (as a
 * copy), and dispatchEvent is synchronous: one call in the page asks and hears. Why not the Network events the daemon already gets:
 * they are not ordered with the answers to its calls, so a request a click started can reach the daemon
 * after the settle's turn came back quiet.
 *
 * What it uses of the page's globals is taken as it installs, so a page that replaces them later (fake
 * timers, a polyfill) neither breaks the answer nor sees an error of ours.
 * @param {string} askName
 * @param {string} answerName
 */
function pending(askName, answerName) {
  const installed = Symbol.for("webfetch.pending");
  if (/** @type {any} */ (window)[installed]) return;
  Object.defineProperty(window, installed, {value: true});
  const now = performance.now.bind(performance);
  const dispatch = EventTarget.prototype.dispatchEvent, Custom = CustomEvent;
  /** @type {Map<number, number>} */
  const requests = new Map();  // id -> when it began
  /** @type {Set<number>} */
  const frames = new Set();
  let lastId = 0;
  /** @returns {() => void} the request's end */
  const begin = () => {
    const id = ++lastId;
    requests.set(id, now());
    return () => { requests.delete(id); };
  };
  /**
   * `fn` made to count each call until the promise it returns settles. The caller gets a promise that
   * follows that one, not the one itself: a handler on it would make a rejection the page never handles
   * (a fetch that failed) a handled one, and its "Uncaught (in promise)" would never reach the console.
   * @template {(...args: any[]) => Promise<unknown>} F
   * @param {F} fn
   * @returns {F}
   */
  const counted = (fn) => /** @type {F} */ (
    /** @this {unknown} @param {...unknown} args */
    function (...args) {
      const end = begin();
      try {
        // the count drops before the caller's own continuation runs, in the same task
        return fn.apply(this, args).then((value) => { end(); return value; }, (error) => { end(); throw error; });
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
    if (typeof callback !== "function") return request.call(window, callback);  // Chrome's own TypeError
    const id = request.call(window, (time) => { frames.delete(id); callback(time); });
    frames.add(id);
    return id;
  };
  window.cancelAnimationFrame = function (id) {
    frames.delete(id);
    cancel.call(window, id);
  };
  // The last navigation to another document the page began, judged when asked: by then every listener of
  // the page has had its say (one that cancelled it, or intercepted it as a same-document route, or a link
  // that downloads, leaves nothing to wait for).
  /** @type {{at: number, event: any} | null} */
  let left = null;
  const intercepted = new WeakSet();
  const navigation = /** @type {any} */ (window).navigation, NavigateEvent = /** @type {any} */ (window).NavigateEvent;
  if (navigation && NavigateEvent) {
    navigation.addEventListener("navigate", (/** @type {any} */ event) => {
      if (!event.destination.sameDocument) left = {at: now(), event};
    });
    const proto = /** @type {Record<string, any>} */ (NavigateEvent.prototype);
    for (const name of ["intercept", "transitionWhile"]) {
      const original = proto[name];
      if (typeof original !== "function") continue;
      proto[name] = /** @this {object} @param {...unknown} args */ function (...args) {
        intercepted.add(this);
        return original.apply(this, args);
      };
    }
  }
  /** @param {number} since @returns {boolean} */
  const leaving = (since) => {
    if (!left || left.at < since) return false;
    const e = left.event;
    left = null;  // told once
    return !(e.defaultPrevented || e.downloadRequest != null || intercepted.has(e));
  };
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
  listen.call(window, askName, (/** @type {Event} */ event) => {
    const asked = /** @type {CustomEvent} */ (event).detail || {};
    const since = Number(asked.since), leftSince = Number(asked.leftSince);
    let begun = 0;
    for (const at of requests.values()) if (at >= since) begun++;
    const detail = {requests: begun, frames: frames.size, watches: watches(), leaving: leaving(leftSince)};
    dispatch.call(document, new Custom(answerName, {detail}));
  }, true);
}
