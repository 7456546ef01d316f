/**
 * This document's origin and its localStorage items, for the profile a browse session writes back; null
 * where the page has no storage to read (an opaque origin, storage refused).
 * @returns {{origin: string, localStorage: {name: string, value: string}[]} | null}
 */
function readStorage() {
  try {
    const items = [];
    for (let i = 0; i < localStorage.length; i++) {
      const name = localStorage.key(i);
      if (name !== null) items.push({name, value: localStorage.getItem(name) ?? ""});
    }
    return {origin: location.origin, localStorage: items};
  } catch (e) {
    return null;
  }
}
