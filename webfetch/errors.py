"""Errors that travel to clients. Each class carries its wire `code` (PROTOCOL.md, error codes)."""

from __future__ import annotations


class WebfetchError(Exception):
    """An error a client sees as an `error` frame with this class's code."""

    code = "internal"

    def __init__(self, message: str, **extra: object) -> None:
        super().__init__(message)
        self.message = message
        # Extra frame fields, e.g. `status` for http_error, `content_type` for unsupported_content_type.
        self.extra = extra


class BadRequest(WebfetchError):
    code = "bad_request"


class LineTooLong(WebfetchError):
    code = "line_too_long"


class InvalidUrl(WebfetchError):
    code = "invalid_url"


class BlockedUrl(WebfetchError):
    code = "blocked_url"


class Timeout(WebfetchError):
    code = "timeout"


class NetworkError(WebfetchError):
    code = "network_error"


class HttpError(WebfetchError):
    code = "http_error"


class UnsupportedContentType(WebfetchError):
    code = "unsupported_content_type"


class ExtractionFailed(WebfetchError):
    code = "extraction_failed"


class BrowserUnavailable(WebfetchError):
    code = "browser_unavailable"


class SearchUnconfigured(WebfetchError):
    code = "search_unconfigured"


class SearchFailed(WebfetchError):
    code = "search_failed"


class Cancelled(WebfetchError):
    code = "cancelled"


class ShuttingDown(WebfetchError):
    code = "shutting_down"


class Internal(WebfetchError):
    code = "internal"


# --- the browse op (PROTOCOL.md, browse) ---

class StaleRef(WebfetchError):
    code = "stale_ref"


class UnknownRef(WebfetchError):
    code = "unknown_ref"


class Covered(WebfetchError):
    code = "covered"


class NotVisible(WebfetchError):
    code = "not_visible"


class Disabled(WebfetchError):
    code = "disabled"


class NotEditable(WebfetchError):
    code = "not_editable"


class NotNativeSelect(WebfetchError):
    code = "not_native_select"


class DialogOpen(WebfetchError):
    code = "dialog_open"


class NoSuchTab(WebfetchError):
    code = "no_such_tab"


class BrowseDisabled(WebfetchError):
    code = "browse_disabled"


class BrowserCrashed(Exception):
    """The browser (or its websocket) went away under a request; the pipeline retries once."""


class ConfigError(Exception):
    """The config file is unreadable or has an unknown key or a wrong type; the daemon refuses to start."""
