"""Errors that travel to clients. Each class carries its wire `code` (PROTOCOL.md, error codes)."""

from __future__ import annotations

from typing import ClassVar

from . import redact


class WebfetchError(Exception):
    """An error a client sees as an `error` frame with this class's code. The frame's optional fields
    (`status`, `content_type`, `retry_after`) are attributes here, set by the classes that carry them.
    The message keeps no secret a URL in it carried (`redact.text`): errors reach clients, a model's
    transcript and the log, whatever browse.redact_secrets says."""

    code: ClassVar[str] = "internal"

    def __init__(self, message: str) -> None:
        message = redact.text(message)
        super().__init__(message)
        self.message = message
        self.status: int | None = None
        self.content_type: str | None = None
        self.retry_after: str | None = None
        self.covered_by: str | None = None


class BadRequest(WebfetchError):
    code = "bad_request"

    def __init__(self, message: str, request_id: str | int | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id  # the id of the refused request, when it could be read


class Forbidden(WebfetchError):
    code = "forbidden"


class LineTooLong(WebfetchError):
    code = "line_too_long"


class InvalidUrl(WebfetchError):
    code = "invalid_url"


class BlockedUrl(WebfetchError):
    code = "blocked_url"


class RobotsDisallowed(WebfetchError):
    """A crawl's or map's start URL that the site's robots.txt closes to crawlers (a fetch never asks it)."""

    code = "robots_disallowed"


class Timeout(WebfetchError):
    code = "timeout"


class NetworkError(WebfetchError):
    code = "network_error"


class HttpError(WebfetchError):
    code = "http_error"

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class NoContent(WebfetchError):
    """A navigation answered without a body (204, 205, or an empty 200): not a network failure (Chrome
    aborts a navigation answered 204 or 205), and not a page."""

    code = "no_content"

    def __init__(self, url: str, status: int, after: str = "") -> None:
        said = {204: "HTTP 204 No Content", 205: "HTTP 205 Reset Content"}.get(status,
                                                                             f"HTTP {status} with an empty body")
        super().__init__(f"{url} answered {said}: there is nothing to read at this URL (the request succeeded, and "
                         f"the server sent no page){after}. If you expected one, this may be an API or a form's "
                         f"endpoint: the page that links to it is the one to read")
        self.status = status


class UnsupportedContentType(WebfetchError):
    code = "unsupported_content_type"

    def __init__(self, message: str, content_type: str) -> None:
        super().__init__(message)
        self.content_type = content_type


class ExtractionFailed(WebfetchError):
    code = "extraction_failed"


class SchemaMismatch(WebfetchError):
    """The sub-agent's reply to a `schema` fetch did not validate against it, after one retry."""

    code = "schema_mismatch"


class BrowserUnavailable(WebfetchError):
    code = "browser_unavailable"


class UserBrowserOff(WebfetchError):
    """`"browser": "user"` while [user_browser] lists no host (the feature is off)."""

    code = "user_browser_off"


class UserBrowserUnavailable(WebfetchError):
    """The person's browser cannot be found or is no DevTools endpoint (chrome/user_browser.py)."""

    code = "user_browser_unavailable"


class UserBrowserUnapproved(WebfetchError):
    """The person has not allowed the DevTools connection in their browser by the request's deadline."""

    code = "user_browser_unapproved"


class UserBrowserGone(WebfetchError):
    """The person's browser went away, and one reconnection did not bring it back."""

    code = "user_browser_gone"


class SearchUnconfigured(WebfetchError):
    code = "search_unconfigured"


class SearchFailed(WebfetchError):
    code = "search_failed"

    def __init__(self, message: str, status: int | None = None, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


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


class UnknownRequest(WebfetchError):
    """A browse request_id the session's network log does not hold."""

    code = "unknown_request"


class Covered(WebfetchError):
    code = "covered"

    def __init__(self, message: str, covered_by: str | None = None) -> None:
        super().__init__(message)
        self.covered_by = covered_by  # the element at the click point, with its ref when it has one


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


class UserHasControl(WebfetchError):
    """A person took the session's browser over in the view (browse/control.py): an agent's action waited for
    them to hand it back, past its deadline; or a second person asked while one holds it."""

    code = "user_has_control"


class BrowseDisabled(WebfetchError):
    code = "browse_disabled"


class UploadRefused(WebfetchError):
    """An upload path outside the allowed roots, a dotfile, or not a regular file (browse/uploads.py)."""

    code = "upload_refused"


class FileNotFound(WebfetchError):
    code = "file_not_found"


class FileExists(WebfetchError):
    """A file a browse action was told to write is there already, and the request did not say to replace it."""

    code = "file_exists"


class NotFileInput(WebfetchError):
    code = "not_file_input"


class BrowserCrashed(Exception):
    """The browser (or its websocket) went away under a request; the pipeline retries once."""


class ConfigError(WebfetchError):
    """The config file is unreadable, not TOML, or has an unknown key or a wrong type: the daemon refuses to
    start, and a reload keeps the config it runs."""

    code = "config_error"


class ViewUnavailable(WebfetchError):
    """The view's front door cannot listen (its port is taken): `webfetch view` says so and what to do."""

    code = "view_unavailable"
