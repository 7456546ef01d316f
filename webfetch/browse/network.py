"""A session's network log: every request its tabs made (method, URL, type, status, size, timing, why it
failed or why the address policy refused it), with their headers, for the network, request and har actions.

The tabs' pumps feed it the CDP Network events they already receive (Network is on for the settle's request
count), so recording is a few dictionary updates per event; bodies are not copied: Chrome keeps them in the
tab's Network buffer (`Network.getResponseBody`, asked only when a request or a HAR wants one). The log keeps
the newest `RING` requests of the session, newest last, each hop of a redirect as a request of its own.

What the log shows (network's lines, request, the HAR) goes through `redact.py`'s one rule unless the config's
`browse.redact_secrets` is false: credential headers masked, and secret parameters of URLs and fields of
request bodies; the log itself keeps what Chrome sent, for the user who turns redaction off. Headers and
bodies are the page's traffic: they go to the client, never to the daemon's log."""

from __future__ import annotations

import base64
import itertools
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .. import redact
from ..chrome.cdp import CDPClosed, CDPError
from ..protocol import BodyInfo, HeaderLine, NetworkEntry, RequestDetail
from ..proxy import Failure

RING = 1000               # requests kept per session; older ones are dropped
POST_CHARS = 8_000        # a request body kept from requestWillBeSent, cut beyond this (1 000 of them: 8 MB)
_PENDING_MAX = 2000       # headers that came before their request (ExtraInfo events), at most this many waiting

STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx", "failed")
_TEXT_TYPES = ("text/", "application/json", "application/javascript", "application/xml", "application/xhtml",
               "application/x-www-form-urlencoded", "application/ecmascript", "image/svg")

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def headers(raw: dict[str, str], redacting: bool) -> list[HeaderLine]:
    """A CDP header map as lines, in order, each value through `redact.header` unless the user said not
    to; Chrome joins repeated headers (Set-Cookie) with newlines: one line each."""
    return [HeaderLine(name, redact.header(name, part) if redacting else part)
            for name, value in raw.items() for part in str(value).split("\n")]


def shown_url(address: str, redacting: bool) -> str:
    return redact.url(address) if redacting else address


@dataclass
class Recorded:
    """One request (one hop of a redirect chain) as the log keeps it."""

    id: str
    tab: str
    cdp_id: str                      # Network.requestId, unique in its tab's CDP session
    method: str
    url: str
    type: str
    started: float                   # CDP's monotonic timestamp, seconds
    wall: float                      # the start as seconds since the epoch
    request_headers: dict[str, str] = field(default_factory=dict)
    post_data: str | None = None
    has_post: bool = False
    post_size: int = 0               # the request body's characters, before the log cut it
    status: int | None = None
    status_text: str = ""
    response_headers: dict[str, str] = field(default_factory=dict)
    mime_type: str = ""
    protocol: str = ""
    timing: dict[str, float] | None = None
    size: int = 0                    # decoded body bytes received
    encoded: int | None = None       # bytes over the wire (headers included), when it finished
    ended: float | None = None
    failure: str | None = None
    blocked: str | None = None
    routed: str | None = None        # a route of the session answered it, not the server: which, and how
    redirected: bool = False         # a hop a redirect ended: its body is not kept (the next hop shares its id)

    def entry(self, redacting: bool) -> NetworkEntry:
        return NetworkEntry(id=self.id, tab=self.tab, method=self.method, url=shown_url(self.url, redacting),
                            type=self.type,
                            status=self.status, size=self.size if self.status is not None else None,
                            time_ms=self.time_ms(), failure=None if self.blocked else self.failure,
                            blocked=self.blocked, routed=self.routed)

    def time_ms(self) -> int | None:
        return None if self.ended is None else max(0, round((self.ended - self.started) * 1000))

    def status_class(self) -> str | None:
        if self.failure is not None or self.blocked is not None:
            return "failed"
        return f"{self.status // 100}xx" if self.status is not None else None


class NetworkLog:
    """A session's requests, newest last, at most `RING`; fed by its tabs' pumps (`on_*`)."""

    def __init__(self, enabled: bool = True, ring: int = RING) -> None:
        self.enabled = enabled
        self._ring = ring
        self._entries: deque[Recorded] = deque()
        self._by_id: dict[str, Recorded] = {}
        self._live: dict[tuple[str, str], Recorded] = {}     # (tab, requestId) -> its current hop
        self._extra_request: dict[tuple[str, str], dict[str, str]] = {}   # headers that came first
        self._extra_response: dict[tuple[str, str], dict[str, str]] = {}
        self._blocked: dict[tuple[str, str], str] = {}
        self._routed: dict[tuple[str, str], str] = {}
        self._numbers = itertools.count(1)
        self.dropped = 0
        self.version = 0    # changes so far (a request, a response, an end): a watcher's cursor (watch.py)

    # --- what the tabs' pumps feed in ---------------------------------------------------------------

    def on_request(self, tab: str, p: dict[str, Any]) -> None:
        """Network.requestWillBeSent: a new request, or the next hop of a redirect (its `redirectResponse`
        ends the hop before)."""
        if not self.enabled:
            return
        key = (tab, p["requestId"])
        before = self._live.get(key)
        if before is not None and p.get("redirectResponse"):
            self._respond(before, key, p["redirectResponse"])
            before.ended = p.get("timestamp", before.started)
            before.redirected = True
        req = p.get("request") or {}
        rec = Recorded(id=f"r{next(self._numbers)}", tab=tab, cdp_id=p["requestId"], method=req.get("method", "GET"),
                       url=req.get("url", "") + req.get("urlFragment", ""), type=str(p.get("type") or "other").lower(),
                       started=float(p.get("timestamp") or 0.0), wall=float(p.get("wallTime") or 0.0),
                       request_headers=dict(req.get("headers") or {}), has_post=bool(req.get("hasPostData")))
        post = req.get("postData")
        if isinstance(post, str):
            rec.post_data, rec.post_size = post[:POST_CHARS], len(post)
        extra = self._extra_request.pop(key, None)
        if extra is not None:
            rec.request_headers = extra
        rec.blocked = self._blocked.pop(key, None)
        rec.routed = self._routed.pop(key, None)
        self._live[key] = rec
        self._append(rec)

    def on_request_extra(self, tab: str, p: dict[str, Any]) -> None:
        """Network.requestWillBeSentExtraInfo: the headers as sent, cookies included (the event before leaves
        them out); it may come before or after its request."""
        if not self.enabled:
            return
        key = (tab, p["requestId"])
        raw = dict(p.get("headers") or {})
        rec = self._live.get(key)
        if rec is not None and rec.status is None:
            rec.request_headers = raw
        else:
            self._stash(self._extra_request, key, raw)

    def on_response(self, tab: str, p: dict[str, Any]) -> None:
        rec = self._live.get((tab, p["requestId"])) if self.enabled else None
        if rec is not None:
            self._respond(rec, (tab, p["requestId"]), p.get("response") or {})

    def on_response_extra(self, tab: str, p: dict[str, Any]) -> None:
        """Network.responseReceivedExtraInfo: the headers as received, Set-Cookie included."""
        if not self.enabled:
            return
        key = (tab, p["requestId"])
        rec = self._live.get(key)
        raw = dict(p.get("headers") or {})
        if rec is not None and rec.status is not None:
            rec.response_headers = raw
        else:
            self._stash(self._extra_response, key, raw)

    def on_data(self, tab: str, p: dict[str, Any]) -> None:
        rec = self._live.get((tab, p["requestId"])) if self.enabled else None
        if rec is not None:
            rec.size += int(p.get("dataLength") or 0)

    def on_finished(self, tab: str, p: dict[str, Any]) -> None:
        rec = self._live.pop((tab, p["requestId"]), None) if self.enabled else None
        if rec is not None:
            self.version += 1
            rec.ended = p.get("timestamp", rec.started)
            rec.encoded = p.get("encodedDataLength")

    def on_failed(self, tab: str, p: dict[str, Any], proxy_failure: Callable[[str], Failure | None]) -> None:
        """Network.loadingFailed; `proxy_failure` says why the address-policy proxy failed a host's connection
        (Chrome only says its SOCKS connection failed: the proxy knows a refusal, a name that now resolves
        to a refused address, or the connect's own error)."""
        key = (tab, p["requestId"])
        rec = self._live.pop(key, None) if self.enabled else None
        if rec is None:
            return
        self.version += 1
        rec.ended = p.get("timestamp", rec.started)
        rec.failure = "canceled" if p.get("canceled") else str(p.get("errorText") or "failed")
        rec.blocked = rec.blocked or self._blocked.pop(key, None)
        if rec.blocked is None and ("SOCKS" in rec.failure or "PROXY" in rec.failure):
            why = proxy_failure(rec.url)
            if why is not None and why.blocked:
                rec.blocked = why.message
            elif why is not None:
                rec.failure = why.message

    def on_blocked(self, tab: str, request_id: str | None, why: str) -> None:
        """The session's host gate refused the request (before Chrome reports its failure)."""
        if not self.enabled or not request_id:
            return
        rec = self._live.get((tab, request_id))
        if rec is not None:
            rec.blocked = why
        else:
            self._stash(self._blocked, (tab, request_id), why)

    def on_routed(self, tab: str, request_id: str | None, how: str) -> None:
        """A route of the session answered the request (before Chrome reports its response or failure)."""
        if not self.enabled or not request_id:
            return
        rec = self._live.get((tab, request_id))
        if rec is not None and rec.status is None:
            rec.routed = how
        else:
            self._stash(self._routed, (tab, request_id), how)

    def tab_gone(self, tab: str) -> None:
        """A closed tab's requests in flight will never end: forget them (their entries stay)."""
        for key in [k for k in self._live if k[0] == tab]:
            del self._live[key]

    # --- what the actions read -----------------------------------------------------------------------

    def entries(self, tab: str | None = None) -> list[Recorded]:
        return [r for r in self._entries if tab is None or r.tab == tab]

    def get(self, request_id: str) -> Recorded | None:
        return self._by_id.get(request_id)

    def newest(self, n: int) -> list[Recorded]:
        return list(self._entries)[-n:]

    def _append(self, rec: Recorded) -> None:
        self.version += 1
        if len(self._entries) >= self._ring:
            old = self._entries.popleft()
            del self._by_id[old.id]
            self.dropped += 1
        self._entries.append(rec)
        self._by_id[rec.id] = rec

    def _respond(self, rec: Recorded, key: tuple[str, str], r: dict[str, Any]) -> None:
        self.version += 1
        rec.status = int(r.get("status") or 0)
        rec.status_text = str(r.get("statusText") or "")
        rec.response_headers = self._extra_response.pop(key, {}) or dict(r.get("headers") or {})
        rec.mime_type = str(r.get("mimeType") or "")
        rec.protocol = str(r.get("protocol") or "")
        rec.timing = r.get("timing")

    @staticmethod
    def _stash(where: dict[tuple[str, str], Any], key: tuple[str, str], value: Any) -> None:
        if len(where) >= _PENDING_MAX:  # events for requests never seen (a tab closed meanwhile): bounded
            where.clear()
        where[key] = value


def matching(records: list[Recorded], find: str | None, status_class: str | None,
             resource_type: str | None, redacting: bool) -> list[Recorded]:
    """The records whose URL as shown contains `find` (any case), in the status class and of the resource
    type (as shown: a search for `token=ab` must not tell what a masked token starts with)."""
    needle = find.casefold() if find else None
    kind = resource_type.lower() if resource_type else None
    return [r for r in records
            if (needle is None or needle in shown_url(r.url, redacting).casefold())
            and (status_class is None or r.status_class() == status_class)
            and (kind is None or r.type == kind)]


def line(r: Recorded, redacting: bool) -> str:
    """One request as the network action lists it: `r3 GET 500 fetch URL — 52 B, 12 ms`."""
    if r.blocked is not None:
        outcome, tail = "blocked", f"blocked by the address policy: {r.blocked}"
    elif r.failure is not None:
        outcome, tail = "failed", r.failure
    elif r.status is None:
        outcome, tail = "…", "pending"
    else:
        ms = r.time_ms()
        outcome, tail = str(r.status), _size(r.size) + (f", {ms} ms" if ms is not None else ", loading")
    routed = f" (routed: {r.routed})" if r.routed else ""
    return f"{r.id} {r.method} {outcome} {r.type} {shown_url(r.url, redacting)} — {tail}{routed}"


def listing(records: list[Recorded], offset: int, max_chars: int,
            redacting: bool) -> tuple[list[Recorded], str, int | None]:
    """From the `offset`th record on, as many as fit `max_chars` as lines (at least one): those records,
    their text, and the offset of the next page (None when they are the last)."""
    lines: list[str] = []
    size = 0
    end = offset
    for r in records[offset:]:
        text = line(r, redacting)
        if lines and size + len(text) + 1 > max_chars:
            break
        lines.append(text)
        size += len(text) + 1
        end += 1
    return records[offset:end], "\n".join(lines), end if end < len(records) else None


async def detail(r: Recorded, call: Call | None, redacting: bool, max_chars: int) -> RequestDetail:
    """The request with its headers and bodies; `call` reaches its tab (None: the tab is closed)."""
    request_body = None
    if r.has_post or r.post_data:
        text = r.post_data
        if (text is None or r.post_size > len(text)) and call is not None:
            text = await _post_data(r, call) or text  # the whole of it, while Chrome holds it
        mime = _header(r.request_headers, "content-type")
        if text is None:
            request_body = BodyInfo(size=0, mime_type=mime, note="not available any more")
        else:
            # cut first, then masked: a body cut mid-way is masked by its look (redact.body), and the work
            # stays bounded by the cut
            request_body = _text_body(text, mime, max_chars // 4)
            request_body.truncated = request_body.truncated or r.post_size > len(text)  # the log's cut too
            if redacting and request_body.text is not None:
                request_body.text = redact.body(request_body.text, mime)
    response_body = None
    if r.status is not None and r.blocked is None:
        response_body = await _response_body(r, call, max_chars)
    return RequestDetail(entry=r.entry(redacting), status_text=r.status_text,
                         request_headers=headers(r.request_headers, redacting),
                         response_headers=headers(r.response_headers, redacting),
                         request_body=request_body, response_body=response_body)


async def body_bytes(r: Recorded, call: Call | None) -> tuple[bytes | None, str | None]:
    """The response body Chrome still holds, or None and why not."""
    if call is None:
        return None, "not available: its tab is closed"
    if r.redirected:
        return None, "a redirect: no body kept"
    if r.failure is not None or r.ended is None:
        return None, "not available: the body did not finish loading"
    try:
        got = await call("Network.getResponseBody", {"requestId": r.cdp_id})
    except CDPClosed:
        return None, "not available: its tab is closed"
    except CDPError:
        # a redirect's hop, a body evicted from the tab's buffer, or the tab's document replaced it
        return None, "not available any more (Chrome keeps bodies while their page is shown, in a bounded buffer)"
    body = got.get("body") or ""
    return (base64.b64decode(body) if got.get("base64Encoded") else body.encode()), None


def is_text(mime: str) -> bool:
    mime = mime.lower()
    return mime.startswith(_TEXT_TYPES) or mime.endswith(("+json", "+xml"))


async def _response_body(r: Recorded, call: Call | None, max_chars: int) -> BodyInfo:
    data, why = await body_bytes(r, call)
    if data is None:
        return BodyInfo(size=r.size, mime_type=r.mime_type, note=why)
    if not is_text(r.mime_type):
        return BodyInfo(size=len(data), mime_type=r.mime_type, note="binary: not shown")
    return _text_body(data.decode("utf-8", "replace"), r.mime_type, max_chars, size=len(data))


async def _post_data(r: Recorded, call: Call) -> str | None:
    try:
        got = await call("Network.getRequestPostData", {"requestId": r.cdp_id})
    except (CDPError, CDPClosed):
        return None
    return str(got.get("postData") or "")


def _text_body(text: str, mime: str, max_chars: int, size: int | None = None) -> BodyInfo:
    cut = len(text) > max_chars
    return BodyInfo(size=len(text.encode()) if size is None else size, mime_type=mime,
                    text=text[:max_chars] if cut else text, truncated=cut)


def _header(raw: dict[str, str], name: str) -> str:
    return next((v for k, v in raw.items() if k.lower() == name), "")


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MB"


def detail_text(d: RequestDetail) -> str:
    """The request action's text: the request line, then each side's headers and body."""
    e = d.entry
    outcome = (f"blocked by the address policy: {e.blocked}" if e.blocked else e.failure if e.failure
               else f"{e.status} {d.status_text}".strip() if e.status is not None else "pending")
    facts = ", ".join([e.type] + ([_size(e.size)] if e.size is not None else [])
                      + ([f"{e.time_ms} ms"] if e.time_ms is not None else []))
    routed = f"; routed: {e.routed}, not from the server" if e.routed else ""
    out = [f"{e.id} {e.method} {e.url} → {outcome} ({facts}, tab {e.tab}{routed})", "request headers:"]
    out += [f"  {h.name}: {h.value}" for h in d.request_headers] or ["  (none recorded)"]
    out += _body_lines("request body", d.request_body)
    if e.status is not None:
        out.append("response headers:")
        out += [f"  {h.name}: {h.value}" for h in d.response_headers] or ["  (none recorded)"]
        out += _body_lines("response body", d.response_body)
    return "\n".join(out)


def _body_lines(what: str, b: BodyInfo | None) -> list[str]:
    if b is None:
        return []
    head = f"{what} ({b.mime_type or 'no type'}, {_size(b.size)})"
    if b.text is None:
        return [f"{head}: {b.note}"]
    tail = [f"(cut: the first {len(b.text):,} characters shown)"] if b.truncated else []
    return [f"{head}:", b.text, *tail]
