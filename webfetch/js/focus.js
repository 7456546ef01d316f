/**
 * Scrolls the element into view and focuses it.
 * @this {HTMLElement}
 */
function focus() {
  this.scrollIntoView({block: "center"}); this.focus();
}
