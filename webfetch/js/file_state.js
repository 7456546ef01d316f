/**
 * A file input's state: whether it takes several files, whether it is disabled, and the names of the
 * files it holds (what the upload's result reports).
 * @this {HTMLInputElement}
 * @returns {{multiple: boolean, disabled: boolean, names: string[], what: string}}
 */
function fileState() {
  return {multiple: this.multiple, disabled: this.disabled, names: [...(this.files || [])].map((f) => f.name),
          what: __wf.describe(this)};
}
