/**
 * Whether the page settled (settle.js counts what it waits for): "settled", or when `capMs` ran out
 * "busy" (loads or short timers still pending), "changing" (the DOM still changing) or "unchanged" (no DOM
 * change after the `changedAfter`th mutation, when that is not -1: a capture's count). A document that
 * started without the settle script (Chrome's own pages) counts as settled.
 * @param {number} capMs
 * @param {number} quietMs no DOM change for this long, with nothing pending, is settled
 * @param {number} timersQuietMs ... and this long with only short timers pending
 * @param {number} changedAfter -1, or the mutation count the DOM must pass before it can be settled
 * @returns {Promise<string> | string}
 */
function settled(capMs, quietMs, timersQuietMs, changedAfter) {
  return window.__webfetchSettle ? window.__webfetchSettle(capMs, quietMs, timersQuietMs, changedAfter) : "settled";
}
