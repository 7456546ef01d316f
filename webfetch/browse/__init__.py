"""The browse op: browser sessions an agent drives by refs (open, click, fill, read, tabs, dialogs).

The daemon's one door into this package is `Browse`, the sessions actor; everything else here is its
inside: `sessions` (the actor: sessions, their browser contexts and tabs, the reaper, dispatch), `verbs`
(every verb: the `VERBS` table the actor dispatches on, and each verb's handler), `reply` (the result: page
line, what changed, the snapshot cut to size), `tab` (one page, its event pump and its state), `worlds`
(a tab's isolated worlds, refs and snapshots), `settle` (the wait after an action, the page's clock),
`actions` (what a step does in the page), `snapshot` (the page as text), `console` (the page's console
messages, kept per tab), `uploads` (the one rule for which files an upload may read), `downloads` (a
session's saved downloads)."""

from .sessions import Browse

__all__ = ["Browse"]
