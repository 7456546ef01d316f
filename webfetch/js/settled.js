/**
 * Whether the page settled (settle.js counts what it waits for): "settled", or when `capMs` ran out
 * "busy" (loads or short timers still pending) or "changing" (the DOM still changing). A document that
 * started without the settle script (Chrome's own pages) counts as settled.
 * @param {number} capMs
 * @param {number} quietMs no DOM change for this long, with nothing pending, is settled
 * @param {number} timersQuietMs ... and this long with only short timers pending
 * @returns {Promise<string> | string}
 */
function settled(capMs, quietMs, timersQuietMs) {
  return window.__webfetchSettle ? window.__webfetchSettle(capMs, quietMs, timersQuietMs) : "settled";
}
