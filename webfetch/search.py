"""The search actor: one small client per backend (Kagi, Brave, SearXNG), results cached for minutes.

HTTP goes through httpx, whose async client runs on trio (through anyio): a cancelled request or a
passed deadline ends the HTTP call at once, like everything else in the daemon. A backend's answer is read
raw and inflated within MAX_ANSWER_BYTES (webfetch/http_body.py): a SearXNG instance is any URL the user
names, and httpx alone would inflate whatever it sends. API keys live only in request headers; every message
that leaves this module is scrubbed of them all the same.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from . import __version__
from .cache import Cache
from .config import SearchConfig, default_config_path
from .errors import BadRequest, SearchFailed, SearchUnconfigured, Timeout
from .http_body import ACCEPT_ENCODING, BodyRefused, read_body
from .protocol import ReportProgress, SearchHit, SearchRequest, SearchResult

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("webfetch.search")
logging.getLogger("httpx").setLevel(logging.WARNING)  # it logs every request URL at INFO

BACKENDS = ("kagi", "brave", "searxng")
NAMES = {"kagi": "Kagi", "brave": "Brave", "searxng": "SearXNG"}


def how_to_configure(backend: str, config_file: str) -> str:
    """How to give the daemon a backend, naming the config file it reads (its --config, not always ours)."""
    return {"kagi": f"set KAGI_API_KEY (or search.kagi_api_key in {config_file})",
            "brave": f"set BRAVE_API_KEY (or search.brave_api_key in {config_file})",
            "searxng": f"set search.searxng_url in {config_file} to an instance with JSON output"}[backend]
SNIPPET_CHARS = 300
MAX_RELATED = 8
MAX_ANSWER_BYTES = 4 * 1024 * 1024   # a backend's JSON, inflated: twenty results are tens of KB


class Results(msgspec.Struct):
    hits: list[SearchHit]
    related: list[str]


# ---- text clean-up ---------------------------------------------------------------------------------

_TAG = re.compile(r"<[^>]*>")


def clean(text: Any) -> str:
    """Plain text from a snippet that may carry HTML (`<b>`) and entities."""
    if not isinstance(text, str):
        return ""
    return " ".join(html.unescape(_TAG.sub("", text)).split())


def trim(text: str, limit: int = SNIPPET_CHARS) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,.;:") + "…"


def day(value: Any) -> str | None:
    """YYYY-MM-DD from an ISO timestamp or a date like 'January 5, 2024'; None when it is not a date."""
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    m = re.match(r"(\d{4})-(\d{2})-(\d{2})", value)
    if m:
        return m.group(0)
    for fmt in ("%B %d, %Y", "%b %d, %Y", "%d %B %Y"):
        try:
            return dt.datetime.strptime(value, fmt).date().isoformat()
        except ValueError:
            pass
    return None


def format_results(backend: str, query: str, hits: list[SearchHit], related: list[str]) -> str:
    """The results as an LLM reads them best: numbered, one line of title/URL/date, the snippet below."""
    lines = [f'{NAMES[backend]} results for "{query}" ({len(hits)}):']
    for i, h in enumerate(hits, 1):
        date = f" ({h.published})" if h.published else ""
        lines.append(f"{i}. {h.title or h.url} — {h.url}{date}")
        if h.snippet:
            lines.append(f"   {trim(h.snippet)}")
    if not hits:
        lines.append("No results.")
    if related:
        lines += ["", "Related searches: " + "; ".join(related[:MAX_RELATED])]
    return "\n".join(lines)


# ---- the backends ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Answer:
    """A backend's response, its body read whole within MAX_ANSWER_BYTES."""

    status_code: int
    headers: httpx.Headers
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


async def _get(client: httpx.AsyncClient, url: str, **fields: Any) -> Answer:
    """GET `url`; the body read raw and inflated within MAX_ANSWER_BYTES (BodyRefused past it)."""
    async with client.stream("GET", url, **fields) as response:
        body = bytearray()
        await read_body(response, MAX_ANSWER_BYTES, body.extend, cut_ok=False)
    return Answer(response.status_code, response.headers, bytes(body))


def _json(response: Answer, name: str) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        head = " ".join(response.text[:120].split())
        raise SearchFailed(
            f"{name} answered HTTP {response.status_code} with something that is not JSON: {head!r}") from None


def _rate_limited(response: Answer, name: str) -> SearchFailed:
    after = response.headers.get("retry-after")
    when = f"retry after {after} s" if after and after.strip().isdigit() else (
        f"retry after {after}" if after else "retry later")
    return SearchFailed(f"{name} is limiting the request rate (HTTP 429): {when}", retry_after=after)


def _refused(name: str, status: int, detail: str, backend: str) -> SearchFailed:
    hint = (f"; check the API key: {how_to_configure(backend, 'the config file')}" if status in (401, 403)
            else "")
    return SearchFailed(f"{name} refused the search (HTTP {status}): {detail or 'no reason given'}{hint}",
                        status=status)


def _hit(title: Any, url: Any, snippet: Any, published: Any) -> SearchHit | None:
    if not isinstance(url, str) or not url:
        return None
    return SearchHit(title=clean(title), url=url, snippet=clean(snippet), published=day(published))


async def kagi(client: httpx.AsyncClient, base: str, key: str, query: str, limit: int) -> Results:
    """Kagi Search API v0: {meta, data: [{t: 0, url, title, snippet, published}, {t: 1, list}], error?}."""
    response = await _get(client, f"{base.rstrip('/')}/api/v0/search", params={"q": query, "limit": limit},
                                headers={"Authorization": f"Bot {key}"})
    if response.status_code == 429:
        raise _rate_limited(response, "Kagi")
    body = _json(response, "Kagi")  # Kagi explains its errors in the body, whatever the status
    errors = body.get("error") if isinstance(body, dict) else None
    if errors or response.status_code != 200:
        detail = "; ".join(f"{e.get('msg')} (error {e.get('code')})" for e in errors or [] if isinstance(e, dict))
        raise _refused("Kagi", response.status_code, detail, "kagi")
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise SearchFailed("Kagi answered without results (`data` is null)")
    return _kagi_results(data, limit)


def _kagi_results(data: list[Any], limit: int) -> Results:
    """Kagi's `data` items: t=0 a search result, t=1 related searches."""
    items = [item for item in data if isinstance(item, dict)]
    hits = [h for item in items if item.get("t") == 0
            if (h := _hit(item.get("title"), item.get("url"), item.get("snippet"), item.get("published")))]
    related = [clean(r) for item in items if item.get("t") == 1 for r in item.get("list") or [] if clean(r)]
    return Results(hits[:limit], related)


async def brave(client: httpx.AsyncClient, base: str, key: str, query: str, limit: int) -> Results:
    """Brave Search API: {web: {results: [{title, url, description, age, page_age}]}, query: {…}}."""
    response = await _get(client, f"{base.rstrip('/')}/res/v1/web/search", params={"q": query, "count": limit},
                                headers={"X-Subscription-Token": key, "Accept": "application/json"})
    if response.status_code == 429:
        raise _rate_limited(response, "Brave")
    body = _json(response, "Brave")
    if response.status_code != 200:
        error = body.get("error") if isinstance(body, dict) else None
        detail = str(error.get("detail") or error.get("code") or "") if isinstance(error, dict) else ""
        raise _refused("Brave", response.status_code, detail, "brave")
    web = body.get("web") if isinstance(body, dict) else None
    items = web.get("results") if isinstance(web, dict) else []
    hits = [h for item in items or [] if isinstance(item, dict)
            if (h := _hit(item.get("title"), item.get("url"), item.get("description"),
                          item.get("page_age") or item.get("age")))]
    return Results(hits[:limit], [])


async def searxng(client: httpx.AsyncClient, base: str, key: str, query: str, limit: int) -> Results:
    """SearXNG's JSON output: {results: [{title, url, content, publishedDate}], suggestions: [...]}."""
    response = await _get(client, f"{base.rstrip('/')}/search", params={"q": query, "format": "json"})
    if response.status_code == 403:
        raise SearchFailed(
            f"the SearXNG instance at {base} does not allow JSON output (HTTP 403): add `json` to "
            f"`search.formats` in its settings.yml (formats: [html, json]) and restart it", status=403)
    if response.status_code == 429:
        raise _rate_limited(response, "SearXNG")
    if response.status_code != 200:
        raise _refused("SearXNG", response.status_code, " ".join(response.text[:120].split()), "searxng")
    body = _json(response, "SearXNG")
    items = body.get("results") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise SearchFailed("SearXNG answered without a `results` list")
    hits = [h for item in items if isinstance(item, dict)
            if (h := _hit(item.get("title"), item.get("url"), item.get("content"), item.get("publishedDate")))]
    related = [clean(s) for s in body.get("suggestions") or [] if clean(s)]
    return Results(hits[:limit], related)


CLIENTS: dict[str, Callable[..., Any]] = {"kagi": kagi, "brave": brave, "searxng": searxng}


# ---- the actor -------------------------------------------------------------------------------------

class Search:
    def __init__(self, config: SearchConfig, env: Mapping[str, str] = os.environ, *,
                 config_file: str | None = None) -> None:
        """`config_file`: the file the daemon read its config from (None: none, the default path's)."""
        self._env = env
        self.config_file = config_file or str(default_config_path())
        self.cache: Cache[Results] = Cache(config.cache_s, max(config.cache_s, 60.0), 16 * 1024 * 1024,
                                           lambda r: len(msgspec.json.encode(r)))
        self._client: httpx.AsyncClient | None = None
        self._configure(config)

    def _configure(self, config: SearchConfig) -> None:
        self.config = config
        # An empty variable counts as unset; the environment (the daemon's, from its start) beats the file.
        self._keys = {"kagi": self._env.get("KAGI_API_KEY") or config.kagi_api_key or "",
                      "brave": self._env.get("BRAVE_API_KEY") or config.brave_api_key or ""}
        self._bases = {"kagi": config.kagi_url, "brave": config.brave_url, "searxng": config.searxng_url or ""}
        self.configured = [b for b in BACKENDS if (self._keys[b] if b in self._keys else self._bases[b])]

    def reconfigure(self, config: SearchConfig, config_file: str | None = None) -> None:
        """A reloaded search section (from `config_file`, when it is another file now): keys, backends,
        URLs, limit and timeout apply from the next search (one under way finishes with what it had).
        Cached results are dropped, since they may come from a backend or instance no longer configured."""
        if config_file is not None:
            self.config_file = config_file
        self._configure(config)
        self.cache.reconfigure(config.cache_s, max(config.cache_s, 60.0), self.cache.max_bytes)
        self.cache.clear()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.cache.run)
                task_status.started()
                await trio.sleep_forever()
        finally:
            if self._client is not None:
                with trio.CancelScope(shield=True):
                    await self._client.aclose()

    def _http(self) -> httpx.AsyncClient:
        """The HTTP client, made at the first search: importing httpx and making its TLS context were
        ~0.1 s of the daemon's start, and most daemons never search."""
        if self._client is None:
            import httpx
            self._client = httpx.AsyncClient(headers={"User-Agent": f"webfetch/{__version__}",
                                                      "Accept-Encoding": ACCEPT_ENCODING},
                                             follow_redirects=True)
        return self._client

    def choose(self, requested: str | None) -> str:
        """The request's backend, else search.backend, else the first configured of Kagi, Brave, SearXNG."""
        wanted = requested or self.config.backend
        if wanted:
            if wanted not in self.configured:
                raise SearchUnconfigured(f"the {NAMES[wanted]} search backend is not configured: "
                                         f"{how_to_configure(wanted, self.config_file)}")
            return wanted
        if not self.configured:
            raise SearchUnconfigured("no web search backend is configured. Either "
                                     + "; or ".join(how_to_configure(b, self.config_file) for b in BACKENDS)
                                     + ", then restart the daemon")
        return self.configured[0]

    def scrub(self, text: str) -> str:
        for key in self._keys.values():
            if key:
                text = text.replace(key, "***")
        return text

    async def search(self, req: SearchRequest, progress: ReportProgress) -> SearchResult:
        backend = self.choose(req.backend)
        query = " ".join(req.query.split())
        if not query:
            raise BadRequest("the query is empty; pass the words to search for in `query` - at `$.query`")
        limit = req.limit or self.config.limit
        key = f"{backend}\n{limit}\n{query}"

        async def load() -> Results:
            progress("search", f"asking {NAMES[backend]}")
            return await self._ask(backend, query, limit)

        results, age, cached = await self.cache.get_or_load(key, load)
        return SearchResult(query=query, backend=backend, results=results.hits, related=results.related,
                            content=format_results(backend, query, results.hits, results.related),
                            cached=cached, age_s=round(age, 3))

    async def _ask(self, backend: str, query: str, limit: int) -> Results:
        import httpx
        name = NAMES[backend]
        try:
            with trio.fail_after(self.config.timeout_s):
                results: Results = await CLIENTS[backend](self._http(), self._bases[backend],
                                                          self._keys.get(backend, ""), query, limit)
                return results
        except trio.TooSlowError:
            raise Timeout(f"{name} did not answer within {self.config.timeout_s:g} s; try again, or raise "
                          f"search.timeout_s") from None
        except SearchFailed as e:  # a backend may echo the request, key included, in its complaint
            raise SearchFailed(self.scrub(e.message), status=e.status,
                               retry_after=self.scrub(e.retry_after) if e.retry_after else None) from None
        except SearchUnconfigured as e:
            raise SearchUnconfigured(self.scrub(e.message)) from None
        except BodyRefused as e:
            raise SearchFailed(f"{name}'s answer {e}") from None
        except httpx.HTTPError as e:
            raise SearchFailed(self.scrub(f"cannot reach {name} at {self._bases[backend]}: "
                                          f"{type(e).__name__}: {e}")) from None
