"""What a response is, from its Content-Type (and URL): the vocabulary the fetch path's two transports and the
browse tab share. `classify` sorts a response into what webfetch reads (HTML, text, PDF) and what it does
not; `media_type` and `charset` read the header; `first_lines` quotes an error page in a message;
`NO_CONTENT` is the statuses a navigation brings no document with.

Imports no wing: browse and fetch both use it, and neither may import the other."""

from __future__ import annotations

import lxml.html

NO_CONTENT = (204, 205)       # a navigation answered so brings no document: the browser stays where it was

HTML_TYPES = ("text/html", "application/xhtml+xml")
PDF_TYPES = ("application/pdf", "application/x-pdf")
# Servers that do not know what they serve: a body of these types is read when the URL names a .pdf,
# and taken as one when it starts like a PDF.
UNTYPED = ("application/octet-stream", "binary/octet-stream", "application/download", "application/force-download",
           "application/x-download")
TEXT_TYPES = ("text/plain", "text/markdown", "text/x-markdown", "application/json", "text/json",
              "application/xml", "text/xml", "text/csv")


def classify(content_type: str | None, url: str = "") -> str:
    """'html', 'text', 'pdf' or 'other' for a Content-Type header value (and the URL, for untyped bodies)."""
    mime = media_type(content_type)
    if not mime or mime in HTML_TYPES:
        return "html"
    if mime in PDF_TYPES or (mime in UNTYPED and url.split("?", 1)[0].split("#", 1)[0].lower().endswith(".pdf")):
        return "pdf"
    if mime in TEXT_TYPES or mime.startswith("text/") or mime.endswith("+json") or mime.endswith("+xml"):
        return "text"
    return "other"


def media_type(content_type: str | None) -> str:
    """The MIME type of a Content-Type header value, lower case, parameters dropped ('' for none)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def charset(content_type: str | None) -> str | None:
    """The charset parameter of a Content-Type header value, None when it names none."""
    for part in (content_type or "").split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip('"\'')
    return None


def first_lines(body: bytes, content_type: str | None, limit: int = 300) -> str:
    """An error page's first lines of text, joined, for a message (': Not Found / …'); '' when it has none."""
    text = body.decode(charset(content_type) or "utf-8", errors="replace")
    if classify(content_type) == "html":
        try:
            doc = lxml.html.fromstring(text or "<html></html>")
            for bad in doc.xpath("//script|//style|//noscript|//head"):
                bad.drop_tree()
            text = doc.text_content()
        except Exception:  # an error page we cannot parse still gets a status in the message
            return ""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    snippet = " / ".join(line for line in lines if line)[:limit]
    return f": {snippet}" if snippet else ""
