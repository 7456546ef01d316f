/**
 * Give this document's origin the localStorage items a profile keeps for it, run before the page's own
 * scripts in every document of a profiled tab. An item the origin already holds is left alone: the page
 * may have changed it since the first document, and the page's value is the newer one.
 * @param {{origin: string, localStorage: {name: string, value: string}[]}[]} origins
 */
function seedStorage(origins) {
  const mine = origins.find((o) => o.origin === location.origin);
  if (!mine) return;
  try {
    for (const item of mine.localStorage) {
      if (localStorage.getItem(item.name) === null) localStorage.setItem(item.name, item.value);
    }
  } catch (e) {
    // storage refused (an opaque origin, a sandboxed frame): the page runs without it
  }
}
