"""The main document of a fetch requested in our own process, presenting Chrome's fingerprint: libcurl with
browser impersonation (curl_cffi: Chrome's TLS ClientHello, HTTP/2 settings and pseudo-header order) and the
request headers the daemon's own Chromium sends for a navigation. Most pages' content is in the server's
HTML; reading it here costs no renderer, no CDP round trips and no second network stack.

Every connection goes through the address-policy proxy (proxy.py) as SOCKS5 with the proxy resolving names
(socks5h), so loopback, private, metadata and DNS-rebinding rules hold exactly as they do for Chrome.
Redirects are followed here, hop by hop, under the rules fetch/in_chrome.py applies: same-host hops followed (each one
admitted by the policy first), a cross-host one is the `Redirect` outcome, at most MAX_NAVIGATIONS hops.

curl_cffi's API is synchronous: each exchange runs in a trio worker thread. A request's deadline still ends
the call at once (the thread is abandoned), and the thread ends soon after on its own: libcurl's timeout is
the request's remaining time, and when the caller is gone the policy proxy closes the exchange's connections
under it (`PolicyProxy.close_labelled`; the body's sink refuses more data too). Sessions (one
libcurl handle each, with its connection cache) are pooled per host so that a second page of a site reuses
the connection; a session is used by one thread at a time (libcurl handles are not thread-safe). A fetch has
one cookie jar of its own for all its hops (a site that sets a cookie on a redirect and wants it back on the
next hop works, as in Chrome); a session is given the fetch's jar for one exchange and a fresh one when it goes
back to the pool, so one fetch's cookies never reach another's requests. The cookies a fetch's hops set go to
Chrome with a page it then renders (`Prefetched.cookies`)."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from http.cookiejar import CookieJar
from typing import Any
from urllib.parse import urljoin, urlsplit

import trio

from ..errors import BlockedUrl, HttpError, NetworkError, NoContent, UnsupportedContentType, WebfetchError
from ..mime import NO_CONTENT, UNTYPED, charset, classify, first_lines, media_type
from ..parse.flags import explain_error_page
from ..parse.pdf import is_pdf
from ..proxy import PolicyProxy
from ..urls import admit_host, parse_url, same_host
from .load import (
    ERROR_BODY_BYTES,
    MAIN_ACCEPT,
    MAX_NAVIGATIONS,
    HtmlBody,
    Load,
    MainResponse,
    NotModified,
    Outcome,
    PdfBody,
    Redirect,
    TextBody,
)

log = logging.getLogger("webfetch.http_fetch")

# The newest Chrome whose TLS ClientHello and HTTP/2 settings curl_cffi 0.17 knows. The request headers are
# the running Chromium's own (its version in sec-ch-ua and the User-Agent): a site checks the headers against
# each other far more often than against the TLS fingerprint's version, which moves slowly between versions.
IMPERSONATE = "chrome152"
IDLE_PER_HOST = 4        # idle sessions kept per host: as many pages of one site as load at once, roughly
POOLED_HOSTS = 64        # hosts whose sessions are kept; the least recently used host's go first
IDLE_SESSION_S = 60.0    # a session unused this long is closed (the server dropped its connection by then)
CURL_SLACK_S = 1.0       # libcurl's own timeout is the request's remaining time and this: the deadline ends it


@dataclass(frozen=True)
class Identity:
    """What the daemon's Chromium says about itself in a navigation's request headers."""

    major: int

    @classmethod
    def of(cls, browser_version: str) -> Identity:
        """From Browser.getVersion's product, "Chrome/156.0.8078.108" or "HeadlessChrome/156.0…"."""
        version = browser_version.rpartition("/")[2]
        try:
            return cls(int(version.split(".", 1)[0]))
        except ValueError:
            return cls(0)

    @property
    def user_agent(self) -> str:
        # "HeadlessChrome", as the daemon's Chromium says in every request it makes: the page Chrome renders
        # after this GET asks for its scripts and images with it, and a server that saw "Chrome" on the
        # document and "HeadlessChrome" on its resources would see one client lie. (The reduced UA: minor
        # versions are zeros in Chrome's own.)
        return (f"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
                f"HeadlessChrome/{self.major}.0.0.0 Safari/537.36")

    @property
    def sec_ch_ua(self) -> str:
        """Chromium's brand list: its own brand and a GREASE brand, both derived from the major version as
        Chromium derives them (components/embedder_support/user_agent_utils.cc), in its order."""
        chars = (" ", "(", ":", "-", ".", "/", ")", ";", "=", "?", "_")
        seed = self.major
        grease = (f"Not{chars[seed % len(chars)]}A{chars[(seed + 1) % len(chars)]}Brand",
                  ("8", "99", "24")[seed % 3])
        brands = [grease, ("Chromium", str(self.major))]
        if seed % 2:
            brands.reverse()
        return ", ".join(f'"{name}";v="{version}"' for name, version in brands)

    def headers(self, url: str, conditional: list[dict[str, str]]) -> list[str]:
        """A top-level navigation's headers, in the order Chromium sends them (libcurl's impersonation puts
        them in Chrome's HTTP/2 order): keep-alive asked for in the clear (always HTTP/1.1, as Chrome), the
        Priority of a navigation over TLS (HTTP/2 where the server offers it)."""
        sent = [("Connection", "keep-alive")] if url.startswith("http://") else []
        sent += [("Upgrade-Insecure-Requests", "1"), ("User-Agent", self.user_agent),
                ("sec-ch-ua", self.sec_ch_ua), ("sec-ch-ua-mobile", "?0"), ("sec-ch-ua-platform", '"Linux"'),
                ("Accept", MAIN_ACCEPT), ("Sec-Fetch-Site", "none"), ("Sec-Fetch-Mode", "navigate"),
                ("Sec-Fetch-User", "?1"), ("Sec-Fetch-Dest", "document"),
                ("Accept-Encoding", "gzip, deflate, br, zstd"), ("Accept-Language", "en-US,en;q=0.9")]
        if url.startswith("https://"):
            sent.append(("Priority", "u=0, i"))
        sent += [(h["name"], h["value"]) for h in conditional]
        return [f"{name}: {value}" for name, value in sent]


@dataclass
class _Answer:
    """One exchange's response: status, headers as received, body (cut at the cap), or the failure."""

    status: int = 0
    headers: list[tuple[str, str]] | None = None
    body: bytes = b""
    truncated: bool = False
    error: Exception | None = None
    error_code: int = 0

    def header(self, name: str) -> str | None:
        for key, value in self.headers or ():
            if key.lower() == name:
                return value
        return None


@dataclass(frozen=True)
class _Session:
    """A pooled curl session, and the label its connections give the policy proxy (as the SOCKS user name):
    a cancelled exchange's connections are closed there (PolicyProxy.close_labelled), since a thread inside
    libcurl cannot be interrupted. One label a session, so its connections are reused (libcurl reuses a
    connection only for the same proxy credentials)."""

    curl: Any
    label: str

    def close(self) -> None:
        self.curl.close()


class _Pool:
    """Idle curl sessions by host. Taken and given back from worker threads, hence the lock."""

    def __init__(self, verify: bool | str) -> None:
        self.verify = verify
        self._lock = threading.Lock()
        self._idle: OrderedDict[str, list[tuple[_Session, float]]] = OrderedDict()
        self.epoch = 0  # `close` moves it on: a session taken before is closed when given back
        self._made = itertools.count(1)

    def take(self, host: str) -> _Session:
        from curl_cffi.requests import Session  # here: the daemon's start does not pay for libcurl

        now = time.monotonic()
        with self._lock:
            idle = self._idle.get(host) or []
            while idle:
                session, since = idle.pop()
                if now - since < IDLE_SESSION_S:
                    return session
                session.close()
            label = f"s{next(self._made)}"
        return _Session(Session(use_thread_local_curl=False, impersonate=IMPERSONATE, default_headers=False,
                                trust_env=False, allow_redirects=False,
                                verify=self.verify),  # type: ignore[arg-type]  # a CA file's path works too
                        label)

    def give_back(self, host: str, session: _Session, epoch: int) -> None:
        with self._lock:
            if epoch != self.epoch:  # taken before a `close`: its connection belongs to what was closed
                session.close()
                return
            idle = self._idle.setdefault(host, [])
            self._idle.move_to_end(host)
            idle.append((session, time.monotonic()))
            extra = idle[:-IDLE_PER_HOST] if len(idle) > IDLE_PER_HOST else []
            del idle[:len(extra)]
            while len(self._idle) > POOLED_HOSTS:
                extra += self._idle.popitem(last=False)[1]
        for old, _ in extra:
            old.close()

    def close(self) -> None:
        """Close every idle session, and those in use as they come back."""
        with self._lock:
            sessions = [s for idle in self._idle.values() for s, _ in idle]
            self._idle.clear()
            self.epoch += 1
        for session in sessions:
            session.close()


class HttpFetcher:
    """Main documents through libcurl with Chrome's fingerprint, via the address-policy proxy."""

    def __init__(self, proxy: PolicyProxy, verify: bool | str = True) -> None:
        """`verify`: certificates are checked against curl_cffi's CA bundle (Mozilla's, as certifi); a
        test names a CA file of its own instead."""
        self.proxy = proxy
        self.pool = _Pool(verify)
        self.requests = 0          # exchanges made (tests count these)

    def close(self) -> None:
        """Close the pooled connections, idle ones now and those in use when their exchange ends: no request
        after this goes over a connection opened before (the address policy may have changed since)."""
        self.pool.close()

    async def load(self, load: Load, identity: Identity) -> Outcome:
        """The main document of `load.url`, hop by hop, its request headers those of `identity`'s Chromium: a
        Redirect, TextBody, PdfBody, NotModified, or HtmlBody, the server's HTML for the pipeline to read.
        Raises the WebfetchErrors fetch/in_chrome.py raises."""
        url, policy, progress, check_host, validators = (load.url, load.policy, load.progress, load.check_host,
                                                         load.validators)
        await self.proxy.listening.wait()
        current, status = url, None
        jar = CookieJar()  # this fetch's, for every hop; no other fetch sees it
        for hop in range(1, MAX_NAVIGATIONS + 1):
            if hop > 1:
                progress("render", f"following redirect to {current}")
            else:
                progress("render", f"loading {url}")
            if check_host is not None:
                check_host(parse_url(current)[1])
            conditional = validators.headers() if validators and validators.url == current else []
            answer = await self._exchange(current, identity.headers(current, conditional), load.max_bytes, jar)
            status = answer.status
            location = answer.header("location")
            if 300 <= status < 400 and status != 304 and location:
                target = urljoin(current, location)
                if target.startswith(("http://", "https://")):
                    await admit_host(parse_url(target)[1], policy)
                else:
                    raise BlockedUrl(f"the page navigated to {target.split(':', 1)[0]}: URL, which webfetch "
                                     f"does not follow")
                if not same_host(url, target):
                    # final_url stays the URL asked for, as fetch/in_chrome.py reports a cross-host redirect
                    return Redirect(MainResponse(url, url, status, None, None, False, ()), target)
                current = target
                continue
            return self._document(url, current, answer, bool(conditional), jar)
        raise NetworkError(f"net::ERR_TOO_MANY_REDIRECTS: {url} redirects in a loop "
                           f"(more than {MAX_NAVIGATIONS} navigations)")

    def _document(self, url: str, final: str, answer: _Answer, revalidating: bool, jar: CookieJar) -> Outcome:
        status = answer.status
        ctype = answer.header("content-type")
        response = MainResponse(url, final, status, media_type(ctype) or None, charset(ctype), answer.truncated, (),
                                answer.header("etag"), answer.header("last-modified"))
        if status == 304 and revalidating:
            return NotModified(response)
        kind = _check_document(final, answer, ctype)
        body = answer.body
        if kind == "text":
            return TextBody(response, body)
        if kind == "pdf":
            return PdfBody(response, body)
        headers = [{"name": k, "value": v} for k, v in answer.headers or ()]
        return HtmlBody(response, status, headers, body, _cdp_cookies(jar, final))

    async def _exchange(self, url: str, headers: list[str], max_bytes: int, jar: CookieJar) -> _Answer:
        """One GET in a worker thread; raises NetworkError/BlockedUrl for a failed one."""
        self.requests += 1
        caller = _Caller()
        remaining = trio.current_effective_deadline() - trio.current_time()
        timeout = min(remaining, 3600.0) + CURL_SLACK_S
        answer = None
        try:
            answer = await trio.to_thread.run_sync(
                _get, self.pool, url, headers, max_bytes, timeout, self.proxy.port, caller, jar,
                abandon_on_cancel=True)
        finally:
            label = caller.leave()
            if answer is None and label is not None:
                # cancelled (the client, the deadline): the server sees the connection close now, and the
                # thread's libcurl call fails at once instead of waiting out its timeout
                self.proxy.close_labelled(label)
        if answer.error is not None:
            raise self._failure(url, answer)
        return answer

    def _failure(self, url: str, answer: _Answer) -> WebfetchError:
        """The error for a failed exchange, in the words fetch/in_chrome.py uses for Chrome's."""
        failure = self.proxy.failure(url)
        if answer.error_code == 97 and failure is not None:  # CURLE_PROXY: the policy proxy said no
            if failure.blocked:
                # the name passed the check before the request, then answered with a blocked address
                return BlockedUrl(f"{failure.message} (it resolved to an allowed address a moment before: the "
                                  f"name changes its answer, as in DNS rebinding)")
            return NetworkError(f"{failure.message} while loading {url}")
        reason = _NET_ERRORS.get(answer.error_code, "net::ERR_FAILED")
        log.info("GET %s failed: %s (%s)", url, reason, answer.error)
        return NetworkError(f"{reason} while loading {url}")


def _cdp_cookies(jar: CookieJar, final: str) -> tuple[dict[str, Any], ...]:
    """The cookies a fetch's hops set, as CDP's Storage.setCookies takes them: a host-only cookie is named by
    a URL of its host (so it stays host-only in Chrome), a domain cookie by its domain."""
    scheme = urlsplit(final).scheme
    cookies = []
    for c in jar:
        param: dict[str, Any] = {"name": c.name, "value": c.value or "", "path": c.path or "/",
                                 "secure": c.secure, "httpOnly": c.get_nonstandard_attr("http_only") == "True"}
        if c.domain_specified:
            param["domain"] = "." + c.domain.lstrip(".")
        else:
            param["url"] = f"{scheme}://{c.domain.lstrip('.')}{c.path or '/'}"
        if c.expires:
            param["expires"] = c.expires
        cookies.append(param)
    return tuple(cookies)


def _check_document(final: str, answer: _Answer, ctype: str | None) -> str:
    """The document's kind ('html', 'text', 'pdf'), or the error fetch/in_chrome.py raises for the same response:
    no content, an HTTP error, a type webfetch cannot read."""
    status, body, mime = answer.status, answer.body, media_type(ctype)
    if status in NO_CONTENT:
        raise NoContent(final, status)
    if status >= 400:
        head = body[:ERROR_BODY_BYTES]
        error = HttpError(f"{final} answered HTTP {status}" + first_lines(head, ctype)
                          + explain_error_page(status, head, final), status=status)
        error.retry_after = answer.header("retry-after")  # a crawl waits it out (429, 503)
        raise error
    kind = classify(ctype, final)
    if kind == "other":
        raise UnsupportedContentType(
            f"{final} is {mime}, which webfetch cannot turn into text; it fetches HTML, XHTML, "
            f"plain text, markdown, JSON, XML and PDF", content_type=mime)
    if not body:
        raise NoContent(final, status)
    if kind == "pdf" and mime in UNTYPED and not is_pdf(body):
        raise UnsupportedContentType(f"{final} is {mime} and not a PDF, which webfetch cannot turn "
                                     f"into text", content_type=mime)
    return kind


# libcurl's error codes as the names Chrome gives the same failures
_NET_ERRORS = {6: "net::ERR_NAME_NOT_RESOLVED", 7: "net::ERR_CONNECTION_REFUSED", 28: "net::ERR_TIMED_OUT",
               35: "net::ERR_SSL_PROTOCOL_ERROR", 52: "net::ERR_EMPTY_RESPONSE", 55: "net::ERR_CONNECTION_RESET",
               56: "net::ERR_CONNECTION_RESET", 60: "net::ERR_CERT_AUTHORITY_INVALID",
               16: "net::ERR_HTTP2_PROTOCOL_ERROR", 92: "net::ERR_HTTP2_PROTOCOL_ERROR",
               61: "net::ERR_CONTENT_DECODING_FAILED", 97: "net::ERR_PROXY_CONNECTION_FAILED"}


def _proxy_url(port: int | None, label: str) -> str:
    """The proxy as libcurl must name it to leave every name to the proxy: socks5h (plain socks5 makes
    libcurl resolve the name itself and hand the proxy an address, past the policy's own lookup). The user
    name is the session's label (no secret: the proxy asks for none)."""
    return f"socks5h://{label}:-@127.0.0.1:{port}"


class _Caller:
    """What an exchange's thread and the task waiting for it tell each other: the task that stops waiting
    (`leave`) learns the label of the session the thread took, if it took one yet, and a thread that takes
    one after that learns the caller is gone (`stay`). Under one lock, so that one of the two always knows:
    a cancelled exchange's connections are closed, or never opened."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.gone = False       # the caller stopped waiting: the thread's sink refuses the rest
        self._label: str | None = None

    def leave(self) -> str | None:
        with self._lock:
            self.gone = True
            return self._label

    def stay(self, label: str) -> bool:
        """False when the caller is gone already: nothing is to be sent."""
        with self._lock:
            self._label = label
            return not self.gone


def _get(pool: _Pool, url: str, headers: list[str], max_bytes: int, timeout: float, proxy_port: int | None,
         caller: _Caller, jar: CookieJar) -> _Answer:
    """The exchange itself, in a worker thread: the body streamed into a buffer, cut at `max_bytes`; the
    cookies sent come from `jar`, and those set go into it."""
    from curl_cffi.const import CurlHttpVersion
    from curl_cffi.curl import CURL_WRITEFUNC_ERROR, CurlError

    host = (urlsplit(url).hostname or "").lower()
    epoch = pool.epoch
    session = pool.take(host)
    answer = _Answer()
    if not caller.stay(session.label):
        session.close()
        answer.error, answer.error_code = CurlError("the request was cancelled before it was sent"), 0
        return answer
    session.curl.cookies = jar  # shared, not copied: curl_cffi keeps a CookieJar it is given as it is
    chunks: list[bytes] = []
    size = 0

    def sink(chunk: bytes) -> int:
        nonlocal size
        if caller.gone:
            return int(CURL_WRITEFUNC_ERROR)
        room = max_bytes - size
        chunks.append(chunk[:room])
        size += min(len(chunk), room)
        if len(chunk) > room:
            answer.truncated = True
            return int(CURL_WRITEFUNC_ERROR)  # the rest is not read: the connection is closed
        return len(chunk)

    reusable = False
    try:
        response = session.curl.get(url, headers=headers, timeout=timeout, content_callback=sink,
                                    proxy=_proxy_url(proxy_port, session.label),
                                    accept_encoding="gzip, deflate, br, zstd", allow_redirects=False,
                                    # as Chrome: HTTP/2 when TLS offers it, HTTP/1.1 in the clear (no h2c)
                                    http_version=CurlHttpVersion.V2TLS)
        reusable = True
    except CurlError as e:
        response = getattr(e, "response", None)
        if not answer.truncated:
            answer.error, answer.error_code = e, int(getattr(e, "code", 0) or 0)
    finally:
        if reusable and not caller.gone:
            session.curl.cookies = None  # a jar of its own again: this fetch's cookies stay with this fetch
            pool.give_back(host, session, epoch)
        else:
            session.close()
    if response is not None and answer.error is None:
        answer.status = int(response.status_code)
        answer.headers = list(response.headers.multi_items())
    answer.body = b"".join(chunks)
    return answer

