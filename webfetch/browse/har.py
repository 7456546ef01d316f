"""A browse session's traffic as a HAR 1.2 file (http://www.softwareishard.com/blog/har-12-spec/), the format
Chrome DevTools, Firefox and HAR viewers open: one page per tab, one entry per request (each redirect hop
its own), text bodies Chrome still holds; unless `browse.redact_secrets` is false, its headers, cookies, URLs
and request bodies through `redact.py`, the rule the network log's other views follow.

The file is written whole or not at all, 0600 (`private_files.write_file`): it holds headers and bodies."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import trio

from .. import __version__, redact
from ..errors import BadRequest
from ..trust.private_files import write_file
from . import saving
from .network import Call, Recorded, body_bytes, headers, is_text, shown_url

BODY_BYTES = 1 << 20     # a text body included up to this size; larger ones are left out (size and type kept)
TOTAL_BYTES = 32 << 20   # bodies in one file, at most


async def build(records: list[Recorded], calls: Mapping[str, Call], titles: Mapping[str, str],
                redacting: bool) -> dict[str, Any]:
    """The HAR document of `records`; `calls` reaches each open tab (for bodies), `titles` names its page."""
    pages: dict[str, dict[str, Any]] = {}
    entries = []
    budget = TOTAL_BYTES
    for r in records:
        if r.tab not in pages:
            pages[r.tab] = {"startedDateTime": _iso(r.wall), "id": f"page_{r.tab}", "title": titles.get(r.tab, r.tab),
                            "pageTimings": {"onContentLoad": -1, "onLoad": -1}}
        text = None
        if r.status is not None and r.blocked is None and is_text(r.mime_type) and r.size <= BODY_BYTES <= budget:
            data, _ = await body_bytes(r, calls.get(r.tab))
            if data is not None and len(data) <= budget:
                text = data.decode("utf-8", "replace")
                budget -= len(data)
        entries.append(_entry(r, text, redacting))
    return {"log": {"version": "1.2", "creator": {"name": "webfetch", "version": __version__},
                    "pages": list(pages.values()), "entries": entries}}


def _entry(r: Recorded, body: str | None, redacting: bool) -> dict[str, Any]:
    time_ms = float(r.time_ms() or 0)
    send, wait, receive = _timings(r, time_ms)
    url = shown_url(r.url, redacting)
    request: dict[str, Any] = {
        "method": r.method, "url": url, "httpVersion": _version(r.protocol),
        "headers": _headers(r.request_headers, redacting),
        "queryString": [{"name": k, "value": v} for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)],
        "cookies": _cookies(r.request_headers, "cookie", redacting), "headersSize": -1,
        "bodySize": r.post_size}
    if r.post_data is not None:
        mime = _get(r.request_headers, "content-type")
        request["postData"] = {"mimeType": mime, "text": redact.body(r.post_data, mime) if redacting else r.post_data}
    content: dict[str, Any] = {"size": r.size, "mimeType": r.mime_type or "x-unknown"}
    if body is not None:
        content["text"] = body
    response = {
        "status": r.status or 0, "statusText": r.status_text, "httpVersion": _version(r.protocol),
        "headers": _headers(r.response_headers, redacting),
        "cookies": _cookies(r.response_headers, "set-cookie", redacting), "content": content,
        "redirectURL": shown_url(_get(r.response_headers, "location"), redacting), "headersSize": -1,
        "bodySize": r.size if r.status is not None else -1}
    entry: dict[str, Any] = {
        "pageref": f"page_{r.tab}", "startedDateTime": _iso(r.wall), "time": time_ms, "request": request,
        "response": response, "cache": {}, "timings": {"blocked": -1, "dns": -1, "connect": -1, "ssl": -1,
                                                        "send": send, "wait": wait, "receive": receive}}
    failure = r.blocked and f"blocked by the address policy: {r.blocked}" or r.failure
    if r.routed:
        entry["_routed"] = r.routed  # a route of the session answered it, not the server (a custom field)
    if failure:
        entry["_error"] = failure  # custom fields start with an underscore (HAR 1.2); DevTools writes the same name
    return entry


def _timings(r: Recorded, total: float) -> tuple[float, float, float]:
    """HAR's send, wait and receive (ms) from CDP's ResourceTiming: the request's last byte, the response's
    first, the body's last."""
    t = r.timing
    if not t or t.get("sendEnd", -1) < 0:
        return 0.0, total, 0.0
    send = max(0.0, t["sendEnd"] - max(t.get("sendStart", 0.0), 0.0))
    wait = max(0.0, t.get("receiveHeadersEnd", t["sendEnd"]) - t["sendEnd"])
    headers_end = t["requestTime"] + t.get("receiveHeadersEnd", 0.0) / 1000 if "requestTime" in t else None
    receive = max(0.0, (r.ended - headers_end) * 1000) if r.ended is not None and headers_end is not None else 0.0
    return round(send, 3), round(wait, 3), round(receive, 3)


def _headers(raw: dict[str, str], redacting: bool) -> list[dict[str, str]]:
    return [{"name": h.name, "value": h.value} for h in headers(raw, redacting)]


def _cookies(raw: dict[str, str], name: str, redacting: bool) -> list[dict[str, str]]:
    """The cookies a Cookie or Set-Cookie header carries, their values masked as the header's (a credential
    header) is."""
    value = _get(raw, name)
    pairs = value.split(";") if name == "cookie" else [line.split(";", 1)[0] for line in value.split("\n")]
    cookies = []
    for pair in pairs:
        key, eq, val = pair.strip().partition("=")
        if key and eq:
            cookies.append({"name": key, "value": redact.MASK if redacting else val})
    return cookies


def _get(raw: dict[str, str], name: str) -> str:
    return next((str(v) for k, v in raw.items() if k.lower() == name), "")


def _version(protocol: str) -> str:
    return {"http/1.1": "HTTP/1.1", "http/1.0": "HTTP/1.0", "h2": "HTTP/2", "h3": "HTTP/3"}.get(protocol.lower(),
                                                                                             protocol or "")


def _iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def write(session: str, path: Path, har: dict[str, Any], overwrite: bool = False) -> int:
    """Write the document to `path` whole or not at all, 0600, never over a file that is there unless
    `overwrite` (private_files.write_file); its size in bytes. A path that cannot be written is bad_request naming
    why (file_exists when a file is there), and leaves no file behind."""
    def encode_and_write() -> int:  # in a thread: tens of MB of bodies would hold the event loop
        data = json.dumps(har, ensure_ascii=False, indent=1).encode()
        write_file(path, data, overwrite)
        return len(data)

    try:
        return await trio.to_thread.run_sync(encode_and_write)
    except FileExistsError:
        raise saving.exists(path, f"leave `path` out to save it in {saving.session_dir(session)}") from None
    except OSError as e:
        raise BadRequest(f"cannot write the HAR file {str(path)!r}: {e.strerror or e}; give a path in an existing "
                         f"directory you can write to") from None
