"""The browse op: browser sessions an agent drives by refs (open, click, fill, read, tabs, dialogs).

The daemon's one door into this package is `Browse`, the sessions actor; everything else here is its
inside: `tab` (one page and its event pump), `actions` (what each verb does), `snapshot` (the page as
text)."""

from .sessions import Browse

__all__ = ["Browse"]
