"""The fetch path: address policy → cache → render → extract → shape the result (page / redirect; the
sub-agent's summary and answer plug in at `shape`). Runs in the request's own task, so the client's
cancellation and the request's deadline reach every step."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

import msgspec
import trio
from msgspec.structs import replace

from ..cache import PROFILE_MARK, Cache
from ..chrome.browser import BrowserContext, Chrome
from ..chrome.launch import installed_version
from ..chrome.user_browser import UserBrowser
from ..config import CacheConfig, Config, default_max_renders
from ..disk_cache import DiskCache
from ..errors import (
    BadRequest,
    BlockedUrl,
    BrowserCrashed,
    BrowserUnavailable,
    ExtractionFailed,
    SchemaMismatch,
    Timeout,
)
from ..paging import paginate
from ..parse import find
from ..parse.extractor import Extracted, Extractor, decode_text
from ..parse.flags import LOGIN_PATH, Flag
from ..profiles.store import Cookie, Profile, ProfileError, StorageState, headless_login
from ..profiles.use import ProfileUse
from ..protocol import FetchRequest, FetchResult, Passage, ReportProgress, Usage, UsageCost
from ..subagent.agent import SUMMARY_TASK, Subagent, SubagentFailed
from ..subagent.data_task import data_task, retry_task
from ..trust import shell
from ..urls import (
    AddressPolicy,
    PolicyHolder,
    effective_port,
    likely_key,
    parse_url,
    parse_user_host,
    prepare_url,
    user_host_listed,
)
from .in_chrome import FETCH_TAB, Rendering
from .in_chrome import load as load_in_chrome
from .load import (
    HtmlBody,
    Load,
    Loaded,
    NotModified,
    Outcome,
    PdfBody,
    Prefetched,
    ReadServerHtml,
    Redirect,
    RenderedDom,
    ServerHtml,
    ServerRead,
    TextBody,
    Validators,
)
from .over_http import IMPERSONATE, HttpFetcher, Identity

log = logging.getLogger("webfetch.pipeline")
T = TypeVar("T")


# The longest markdown searched for words in the daemon's own process (~10 ms here); longer pages and every
# regular expression are searched in the extractor's worker processes.
IN_PROCESS_FIND_MAX_CHARS = 200_000
# With both extractions at hand, the rendered one wins unless it lost more than this share of the text.
RENDERED_MIN_SHARE = 0.9


def _rendered_lost_text(rendered: Extracted, server: Extracted) -> bool:
    """Whether the rendering lost more than RENDERED_MIN_SHARE of the server's text. Text the rendered page's
    own styles hide, which the server's HTML does not say (webfetch/parse/hidden.py: left out of both as far
    as each can tell), is not lost: the page holds it, and people do not see it."""
    hidden_by_styles = max(0, rendered.hidden_text_removed - server.hidden_text_removed)
    return rendered.text_len + hidden_by_styles < RENDERED_MIN_SHARE * server.text_len


class Page(msgspec.Struct, frozen=True):
    """What the cache holds for a URL: the whole extraction, before paging and shaping."""

    url: str
    final_url: str
    status: int | None
    content_type: str | None
    title: str | None
    markdown: str
    extractor: str | None
    truncated: bool
    redirect_url: str | None
    notes: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    # What the server sent to revalidate the page with once its ttl is over (If-None-Match,
    # If-Modified-Since); None for a page Chrome rendered, whose content the document's validators do not
    # cover (its scripts fetched it).
    etag: str | None = None
    last_modified: str | None = None
    hidden_text_removed: int = 0  # see FetchResult.hidden_text_removed

    def validators(self) -> Validators | None:
        if self.etag is None and self.last_modified is None:
            return None
        return Validators(self.final_url, self.etag, self.last_modified)


# The cache holds pages packed (msgpack, UTF-8 strings), not as Page objects: a str of markdown with one
# character beyond Latin-1 (a curly quote) takes 2 bytes a character, 4 with an emoji, and keeps a UTF-8
# copy of itself once pickled for the flags' worker or encoded for the client. Measured on bin/bench_memory's
# soak: Python objects of 805 cached pages took ~22 KB each where their UTF-8 was ~8 KB; packed, an entry
# takes what `page_size` counts. Packing and unpacking a page costs tens of microseconds.
pack_page = msgspec.msgpack.Encoder().encode
unpack_page = msgspec.msgpack.Decoder(Page).decode
ENTRY_OVERHEAD = 256  # the bytes object, the cache's entry and its key, roughly


def page_size(packed: bytes) -> int:
    """What one cached page costs the daemon's memory."""
    return len(packed) + ENTRY_OVERHEAD


# With a disk cache, a page larger than this share of the memory cache (8 MiB of the default 256) is kept on
# disk only: one 10 MB page must not push dozens of others out of memory, nor a crawl of such pages fill the
# daemon's memory with them. A `fetch` of it, at any offset, reads its file again (tens of milliseconds).
MEMORY_ENTRY_SHARE = 32
# The profile a fetch with `"browser": "user"` reads with: the person's own browser's cookies for one URL, for
# that request alone. No stored profile has this name (profiles/store.check_name refuses it), so its pages
# are cached apart from every profile's, and it is never written back nor kept on disk.
YOUR_BROWSER = "(your browser)"


def memory_entry_bytes(cache: CacheConfig) -> int:
    """The largest page the memory cache keeps: all it can hold when nothing is kept on disk."""
    return cache.max_bytes // MEMORY_ENTRY_SHARE if cache.disk_max_bytes else cache.max_bytes


class Pipeline:
    def __init__(self, config: Config, policy: AddressPolicy | PolicyHolder, chrome: Chrome, cache: Cache[bytes],
                 extractor: Extractor, subagent: Subagent, profiles: ProfileUse | None = None,
                 disk: DiskCache | None = None, user_browser: UserBrowser | None = None) -> None:
        self.config = config  # read at use: `reconfigure` changes what the next request gets
        self.user_browser = user_browser or UserBrowser(config.user_browser)
        self.subagent = subagent
        self.chrome = chrome
        self.cache = cache
        self.disk = disk or DiskCache(None, 0)
        self.extractor = extractor
        self.policy = PolicyHolder.of(policy)
        self.profiles = profiles or ProfileUse()
        self.renders = 0  # how many times Chrome was asked to load or render a page (tests count these)
        self.loads = 0    # how many times a page was loaded, by either transport (tests count these)
        # the main document's own HTTP client (fetch/over_http.py), through the address-policy proxy; None when
        # there is no proxy (browser.endpoint, an outbound proxy: see chrome.proxy_off_reason)
        self.http = HttpFetcher(chrome.proxy) if chrome.proxy is not None else None
        self._identity_of: tuple[str, Identity] = ("", Identity(0))
        self._installed: str | None = None  # the executable's --version, asked once (see _identity)
        self._version_lock = trio.Lock()
        self.render_slots = trio.CapacityLimiter(config.browser.max_renders or default_max_renders())

    def close(self) -> None:
        """Close the idle connections the main documents' HTTP client keeps (a request under way finishes)."""
        if self.http is not None:
            self.http.close()

    def reconfigure(self, config: Config) -> None:
        """A reloaded config: fetch.* and browser.settle_s/block_resources apply from the next request (a
        request under way keeps the values it read). browser.max_renders needs a restart (the tab pool).
        A changed address policy closes the http client's connections: one the old policy let open must not
        carry a request the new one judges (the proxy checks a host when a connection opens, not after)."""
        old, self.config = self.config, config
        if self.http is not None and _address_policy(old) != _address_policy(config):
            self.http.close()

    async def checked(self, req: FetchRequest) -> None:
        """The request's `find` and `schema` checked before anything loads (BadRequest naming what is wrong):
        the text rules here, a regular expression compiled in a parser worker within the request's time (a
        model's pattern can take seconds to compile, which the event loop must not)."""
        pattern = checked(req)
        find = pattern.source if pattern is not None and pattern.expression is not None else None
        if find is None and req.schema is None:
            return
        timeout = req.timeout_s or self.config.fetch.timeout_s
        with trio.move_on_after(timeout) as compiling:
            trouble = await self.extractor.request_problem(find, req.schema)
        if compiling.cancelled_caught:
            raise Timeout(f"checking the `find` regular expression or the `schema`'s patterns took more than "
                          f"{timeout:g} s: write simpler regular expressions")
        if trouble is not None:
            raise BadRequest(trouble)

    async def fetch(self, req: FetchRequest, progress: ReportProgress, *, checked: bool = False) -> FetchResult:
        """One page as `req` asks; `checked`: its find and schema were checked already (a batch checks them once
        for all its pages, and compiling a model's patterns is a worker's job, not one a page)."""
        if not checked:
            await self.checked(req)  # a bad pattern or schema costs no load
        # The profile is read now (an import needs no restart) and checked before the cache: a page cached
        # for it is not served once the profile is gone or no longer lists the host.
        if req.browser == "user":
            profile: Profile | None = await self._your_browser(req, progress)
        else:
            profile = None if req.profile is None else await self.profiles.load(req.profile, parse_url(req.url)[1])
        keep_hidden = req.hidden == "keep"
        policy = self._policy_for(profile)
        guess = None if req.fresh else cache_key(likely_key(req.url, policy), profile, keep_hidden)
        if guess is not None:
            # Entries exist only for URLs that passed the address policy, and a hit loads nothing.
            hit = self.cache.lookup(guess)
            if hit is not None:
                return await self.shape(req, unpack_page(hit[0]), hit[1], True, progress)
        key = await prepare_url(req.url, policy)
        ck = cache_key(key, profile, keep_hidden)
        if guess is not None and ck != guess:
            # A name that resolves to this machine or its network keeps http in its key, which the guess
            # above cannot know without the policy's verdict: with it, a hit is served as quickly (no
            # progress frame for the client to wake up for, no deadline to arm).
            hit = self.cache.lookup(ck)
            if hit is not None:
                return await self.shape(req, unpack_page(hit[0]), hit[1], True, progress)
        timeout = req.timeout_s or self.config.fetch.timeout_s
        progress("cache", f"looking up {key}" + (f" (profile {profile.name})" if profile else ""))
        try:
            with trio.fail_after(timeout):
                packed, age, cached = await self.cache.get_or_load_aged(
                    ck, lambda: self._from_disk_or_load(key, ck, progress, profile, req.fresh, keep_hidden=keep_hidden),
                    fresh=req.fresh)
        except trio.TooSlowError:
            raise Timeout(f"{key} did not finish loading within {timeout:g} s; try again, or pass a larger "
                          f"`timeout_s` if the site is slow") from None
        return await self.shape(req, unpack_page(packed), age, cached, progress)

    def _policy_for(self, profile: Profile | None) -> AddressPolicy:
        """The address policy a request's pages are held to (read at each use: a reload applies): with your
        own browser, a host the person listed passes whatever its address (their intranet, a dev server), as
        the gate in their browser lets it (UserBrowser.gate; the port was checked against the list)."""
        policy = self.policy.current
        if profile is None or profile.name != YOUR_BROWSER:
            return policy
        return dataclasses.replace(policy, allow_hosts=policy.allow_hosts | frozenset(profile.hosts))

    async def _your_browser(self, req: FetchRequest, progress: ReportProgress) -> Profile:
        """The person's own browser, as the profile the request reads with (connected now: a browser that
        asks the person to allow webfetch asks before anything is loaded). It holds no cookie: the page
        loads in a tab of that browser (`_in_your_browser`), where the person's logins apply in whatever form
        the site keeps them, and webfetch never reads them. Only for the hosts user_browser.hosts lists."""
        if req.profile is not None:
            raise BadRequest("a fetch with your own browser reads with its logins: give `profile` or "
                             "`browser: \"user\"`, not both")
        hosts = self.user_browser.config.hosts
        scheme, host, port = parse_url(req.url)[:3]
        if hosts and not user_host_listed(host, effective_port(scheme, port), hosts):
            named = host if port is None else f"{host}:{port}"   # the port too: entries may name one
            raise BlockedUrl(f"{named} is not in user_browser.hosts ({', '.join(hosts)}): the agent uses your "
                             f"browser's logins only for the sites you listed there")
        await self.user_browser.browser(lambda message: progress("person", message),
                                        req.timeout_s or self.config.fetch.timeout_s)
        # the profile's hosts are names: a redirect is held to the listed names (the tab's gate holds every
        # request, the port included, to user_browser.hosts)
        return Profile(name=YOUR_BROWSER, hosts=list(dict.fromkeys(parse_user_host(h)[0] for h in hosts)),
                       state=StorageState(cookies=[]))

    async def _from_disk_or_load(self, key: str, ck: str, progress: ReportProgress, profile: Profile | None,
                                 fresh: bool, seen: list[SourceHtml] | None = None, keep_hidden: bool = False
                                 ) -> tuple[bytes, float | None]:
        """A page the memory cache does not hold: from the disk cache while it is fresh there (its age);
        past its ttl, revalidated with the server when it kept validators (a 304 serves it, 0 s old); else
        loaded (age None; `seen` gets the HTML it came from). Whatever is loaded or revalidated is kept on
        disk for the next daemon."""
        stored = None if fresh else await self.disk.get(ck)
        validators = None
        if stored is not None:
            age = time.time() - stored.stored_at
            if 0 <= age < self.config.cache.ttl_s:
                progress("cache", f"found on disk ({age:.0f} s old)")
                return stored.page, age
            validators = unpack_page(stored.page).validators()
        page = await self._load(key, progress, profile, validators, seen, keep_hidden)
        if page is None:
            assert stored is not None
            log.info("revalidated %s: not modified", key)
            await self.disk.put(ck, stored.page)
            return stored.page, 0.0
        packed = pack_page(page)
        if profile is None or (profile.name != YOUR_BROWSER
                               and await trio.to_thread.run_sync(self.profiles.store.exists, profile.name)):
            await self.disk.put(ck, packed)  # not for a profile deleted meanwhile: its pages went with it
        return packed, None

    async def load_page(self, url: str, progress: ReportProgress, *, fresh: bool = False) -> LoadedPage:
        """A page as the cache holds it (loaded and cached when missing), for a crawl: with the HTML it was
        extracted from when this call loaded it, whose links the crawl follows (the cache keeps no HTML;
        nor does the disk cache, so a crawl resumed reads a kept page's links from its markdown).
        Raises as `fetch` does; the caller bounds the time."""
        if not fresh:
            hit = self.cache.lookup(likely_key(url, self.policy.current))
            if hit is not None:
                return LoadedPage(unpack_page(hit[0]), True, None)
        key = await prepare_url(url, self.policy.current)
        seen: list[SourceHtml] = []
        packed, _age, cached = await self.cache.get_or_load_aged(
            key, lambda: self._from_disk_or_load(key, key, progress, None, fresh, seen), fresh=fresh)
        return LoadedPage(unpack_page(packed), cached, seen[0] if seen else None)

    async def shape(self, req: FetchRequest, page: Page, age: float, cached: bool,
                    progress: ReportProgress) -> FetchResult:
        """The result the request asked for: an answer to its prompt, a summary of a page too large for
        one reply, a slice of the raw markdown, or a redirect. When the sub-agent fails, the first page
        of raw content with a note saying why."""
        base = FetchResult(url=page.url, final_url=page.final_url, status=page.status,
                           content_type=page.content_type, title=page.title, cached=cached, age_s=round(age, 3),
                           extractor=page.extractor, truncated=page.truncated, notes=list(page.notes),
                           flags=list(page.flags), hidden_text_removed=page.hidden_text_removed)
        hint = login_hint(page, req.profile, req.browser == "user")
        if hint is not None:
            base.notes.append(hint)
        if page.redirect_url is not None:
            return replace(base, kind="redirect", redirect_url=page.redirect_url, content=(
                f"{page.url} redirects to {page.redirect_url}, on a different host. webfetch does not follow "
                f"cross-host redirects; fetch {page.redirect_url} if you want its content."))
        total = len(page.markdown)
        pattern = find.checked(req)
        if pattern is not None:
            return await self._find(base, page, pattern, req)
        if req.schema is not None:
            return await self._data(base, page, req, progress)
        task = self._subagent_task(req, page)
        if task is not None:
            try:
                answer = await self.subagent.ask(page.markdown, page.final_url, task, model=req.model,
                                                 thinking=req.thinking, progress=progress)
            except SubagentFailed as e:
                base.notes.append(f"{e}; here is the page's raw content instead")
            else:
                if req.prompt is not None:
                    return replace(base, kind="answer", content=answer.text, model=answer.model, usage=answer.usage,
                                   total_chars=total)
                return replace(base, kind="summary", model=answer.model, usage=answer.usage, total_chars=total,
                               content=answer.text.rstrip() + "\n\n" + self._paging_facts(total))
        return self._raw_page(base, page, req)

    def _raw_page(self, base: FetchResult, page: Page, req: FetchRequest) -> FetchResult:
        """A slice of the page's markdown, from the request's offset."""
        fc = self.config.fetch
        total = len(page.markdown)
        offset = req.offset or 0
        if offset > total:
            base.notes.append(f"offset {offset} is past the end of the content ({total} characters)")
        content, next_offset = paginate(page.markdown, offset, req.max_chars or fc.page_chars, fc.page_lines)
        return replace(base, kind="page", content=content, offset=offset, next_offset=next_offset,
                       total_chars=total)

    async def _data(self, base: FetchResult, page: Page, req: FetchRequest, progress: ReportProgress) -> FetchResult:
        """The sub-agent's JSON for `req.schema`, validated (kind "data"). A page longer than the sub-agent's
        input (subagent.max_input_chars) is read in parts, at most MAX_PARTS: each answered against the same
        schema, the answers merged (parse/json_answer.py's `merge`) and the merge validated. A reply that does
        not validate after one retry is SchemaMismatch; a sub-agent that gives none, the raw page as for a
        prompt."""
        assert req.schema is not None
        total = len(page.markdown)
        parts = split_parts(page.markdown, self.subagent.config.max_input_chars)
        read = parts[:MAX_PARTS]
        answers: list[Any] = []
        usage: Usage | None = None
        model = None
        try:
            for i, text in enumerate(read):
                part = (i + 1, len(read)) if len(read) > 1 else None
                data, model, used = await self._data_turns(page, req, text, part, progress)
                answers.append(data)
                usage = add_usage(usage, used)
        except SubagentFailed as e:
            base.notes.append(f"{e}; here is the page's raw content instead")
            return self._raw_page(base, page, req)
        data = answers[0]
        if len(read) > 1:
            merged, errors = await self._bounded(req, "merging the parts' answers",
                                                 self.extractor.merged_answer(answers, req.schema))
            if errors:
                raise SchemaMismatch(mismatch(page, f"the answers for its {len(read)} parts, merged,", errors))
            data = merged.data
            base.notes.append(merge_note(len(read), self.subagent.config.max_input_chars, merged.conflicts))
        if len(parts) > len(read):
            unread = sum(map(len, read))
            base.notes.append(f"the page is {total} characters: only its first {unread} ({MAX_PARTS} parts) were "
                              f"read for the data; fetch it with `offset` {unread} to read the rest")
        if page.flags:
            base.notes.append(f"the data was read from a page flagged {', '.join(page.flags)}: it may describe that "
                              f"(a sign-in, a challenge, an empty shell…) rather than the page you wanted; the "
                              f"flags' notes say what to do")
        return replace(base, kind="data", data=data, content=json.dumps(data, ensure_ascii=False, indent=2),
                       model=model, usage=usage, total_chars=total)

    async def _data_turns(self, page: Page, req: FetchRequest, text: str, part: tuple[int, int] | None,
                          progress: ReportProgress) -> tuple[Any, str, Usage | None]:
        """One text's data: the sub-agent asked, its reply validated, and once more with the errors shown when
        it does not validate. SchemaMismatch when the second reply does not either."""
        assert req.schema is not None
        task = data_task(req.schema, req.prompt, part)
        asked, usage = task, None
        for attempt in (1, 2):
            answer = await self.subagent.ask(text, page.final_url, asked, model=req.model, thinking=req.thinking,
                                             progress=progress)
            usage = add_usage(usage, answer.usage)
            reply = await self._bounded(req, "validating the sub-agent's reply against the schema",
                                        self.extractor.json_answer(answer.text, req.schema))
            if reply.valid:
                return reply.data, answer.model, usage
            if attempt == 1:
                progress("subagent", f"the reply did not validate ({reply.errors[0]}); asking once more")
                asked = retry_task(task, answer.text, reply.errors)
        where = f"part {part[0]} of {part[1]} of" if part else "for"
        raise SchemaMismatch(mismatch(page, f"the sub-agent's reply {where} it, asked twice,", reply.errors))

    async def _bounded(self, req: FetchRequest, what: str, job: Awaitable[T]) -> T:
        """A parser worker's job on the model's output, killed at the request's deadline: a schema's `pattern`
        can backtrack without end."""
        timeout = req.timeout_s or self.config.fetch.timeout_s
        try:
            with trio.fail_after(timeout):
                return await job
        except trio.TooSlowError:
            raise Timeout(f"{what} ran for {timeout:g} s without finishing: a `pattern` in the schema that "
                          f"backtracks (nested repeats such as (a+)+)? Simplify it") from None

    async def _find(self, base: FetchResult, page: Page, pattern: find.Pattern, req: FetchRequest) -> FetchResult:
        """The passages of the page that match `find`, or its outline. Words on a page of ordinary size are
        searched here (linear time, a few ms); a regular expression can backtrack for minutes and `re` holds
        the GIL, and a huge page takes tenths of a second, so those run in a worker process, killed at the
        request's deadline."""
        if pattern.expression is None and len(page.markdown) <= IN_PROCESS_FIND_MAX_CHARS:
            found = find.search(page.markdown, pattern)
        else:
            timeout = req.timeout_s or self.config.fetch.timeout_s
            try:
                with trio.fail_after(timeout):
                    found = await self.extractor.find(page.markdown, pattern)
            except trio.TooSlowError:
                why = ("; it backtracks (nested repeats such as (a+)+ or (.*)*): simplify it, or search for words"
                       if pattern.expression is not None else "; pass a larger `timeout_s`")
                raise Timeout(f"the search for {pattern.described} ran for {timeout:g} s on the page's "
                              f"{len(page.markdown)} characters without finishing{why}") from None
        total = len(page.markdown)
        content, shown, notes = find.content(found, pattern, total, req.max_chars or self.config.fetch.page_chars)
        passages = [Passage(offset=p.offset, headings=list(p.headings), text=p.text) for p in found.passages[:shown]]
        return replace(base, kind="find", content=content, total_chars=total, find=pattern.source,
                       matches=found.matches, passages=passages, notes=base.notes + notes)

    def _subagent_task(self, req: FetchRequest, page: Page) -> str | None:
        """What to ask the sub-agent: the request's prompt, or a summary of a page too large for one reply
        (unless the caller asked for raw pages). Without a sub-agent CLI no summary is tried: the caller
        asked for the page, not for one, and gets its first page with no note about installing pi."""
        if req.prompt is not None:
            return f"Question about this page: {req.prompt}"
        fc = self.config.fetch
        if self.subagent.available and req.offset is None and not req.raw and paginate(page.markdown, 0, fc.page_chars,
                                                            fc.page_lines)[1] is not None:
            return SUMMARY_TASK
        return None

    def _paging_facts(self, total: int) -> str:
        fc = self.config.fetch
        pages = -(-total // fc.page_chars)
        return (f"---\nThe page holds {total} characters of markdown, about {pages} pages of {fc.page_chars} "
                f"characters (at most {fc.page_lines} lines each), too much for one reply. For specific "
                f"information, fetch the same URL again with a `prompt` saying what you need: the page is "
                f"cached, so that is fast. To read the raw markdown, fetch it with `offset` 0, then with each "
                f"reply's `next_offset`.")

    async def _load(self, key: str, progress: ReportProgress, profile: Profile | None = None,
                    validators: Validators | None = None, seen: list[SourceHtml] | None = None,
                    keep_hidden: bool = False) -> Page | None:
        """The page loaded and extracted (`seen` gets the HTML it came from), the text it hides from people
        left out unless `keep_hidden`; None when `validators` were sent and the server answered that the
        page they came with has not changed (304)."""
        started = time.monotonic()
        how: list[str] = []  # why Chrome loaded or rendered the page, for its notes
        outcome = await self._render(key, progress, profile, validators, how, keep_hidden)
        render_ms = (time.monotonic() - started) * 1000
        if isinstance(outcome, NotModified):
            progress("cache", "the server says the page kept on disk has not changed")
            return None
        response = outcome.response
        notes = how + list(response.notes)
        if response.truncated:
            notes.append(f"the response was larger than {self.config.fetch.max_bytes} bytes and was cut there "
                         f"before extraction")
        if isinstance(outcome, Redirect):
            return Page(url=key, final_url=response.final_url, status=response.status,
                        content_type=response.content_type, title=None, markdown="", extractor=None,
                        truncated=response.truncated, redirect_url=outcome.target, notes=tuple(notes))
        read = await self._extract(outcome, progress, keep_hidden)
        if seen is not None and read.judged_html is not None:
            seen.append(SourceHtml(read.judged_html, response.final_url, response.charset))
        notes += read.notes
        title = read.title or read.extracted.title
        flags = await self._flags(outcome, read, title, key, notes)
        if read.failed is not None and not flags:
            raise read.failed
        log.info("loaded %s: %s in %.0f ms, extracted in %.0f ms, %d chars via %s", key, read.how, render_ms,
                 (time.monotonic() - started) * 1000 - render_ms, len(read.extracted.markdown),
                 read.extracted.extractor)
        # a rendered page's content came from its scripts too: the document's validators do not vouch for it
        validated = not isinstance(outcome, RenderedDom)
        return Page(url=key, final_url=response.final_url, status=response.status,
                    content_type=response.content_type, title=title, markdown=read.extracted.markdown,
                    extractor=None if read.failed else read.extracted.extractor, truncated=response.truncated,
                    redirect_url=None, notes=tuple(notes + [f.note for f in flags if f.name != "truncated"]),
                    flags=tuple(f.name for f in flags), etag=response.etag if validated else None,
                    last_modified=response.last_modified if validated else None,
                    hidden_text_removed=read.extracted.hidden_text_removed)

    async def _render(self, key: str, progress: ReportProgress, profile: Profile | None,
                      validators: Validators | None, how: list[str], keep_hidden: bool = False) -> Loaded:
        """The page's main document and, when it needs one, its render: by fetch/over_http.py first when
        `chrome_reason` gives none (Chrome renders from the bytes it read, only when the server's HTML does
        not hold the content), else all in Chrome. At most browser.max_renders pages load at once. `how`
        gets the notes that say why Chrome loaded the page (`chrome_reason`) or rendered it (render_need's
        reason): a user wondering at a slow or odd page reads there what happened."""
        if self.render_slots.available_tokens == 0:
            progress("queued", f"waiting for a browser tab ({self.render_slots.total_tokens} pages are loading)")
        async with self.render_slots:
            self.loads += 1
            why = self.chrome_reason(profile)
            prefetched = None
            read_server_html = functools.partial(self._read_server_html, progress, how, keep_hidden)
            load = Load(key, self._policy_for(profile), self.config.fetch.max_bytes, progress, _checker(profile),
                        validators)
            if why is not None:
                how.append(f"loaded in Chrome: {why}")
            else:
                assert self.http is not None
                got = await self._server_decides(await self.http.load(load, await self._identity()),
                                                 read_server_html)
                if not isinstance(got, Prefetched):
                    log.debug("%s: main document over http, not rendered", key)
                    return got
                prefetched, why = got, "the page needs rendering"
            log.debug("%s: rendered by Chrome (%s)", key, why)
            return await self._in_chrome(load, profile, prefetched, read_server_html, how)

    @staticmethod
    async def _server_decides(got: Outcome, read_server_html: ReadServerHtml) -> Loaded | Prefetched:
        """The http transport's outcome, its server HTML read: ServerHtml when that holds the content (Chrome
        never runs the page), else Prefetched, for Chrome to render from the bytes already read."""
        if not isinstance(got, HtmlBody):
            return got
        read = await read_server_html(got.body, got.response.charset, got.response.final_url)
        if read.holds_content and read.extracted is not None:
            return ServerHtml(got.response, read.extracted, got.body)
        return Prefetched(got, read.extracted)

    def chrome_reason(self, profile: Profile | None) -> str | None:
        """Why the main document goes through Chrome rather than fetch/over_http.py; None when it need not."""
        fc = self.config.fetch
        if fc.transport == "chrome":
            return 'fetch.transport is "chrome"'
        if fc.render == "always":
            return 'fetch.render is "always"'
        if profile is not None:
            return ("it is read in a tab of your own browser" if profile.name == YOUR_BROWSER
                    else f"the cookies of profile {profile.name} live in Chrome")
        if self.http is None:
            return f"the address-policy proxy is off ({self.chrome.proxy_off})"
        return None

    async def _identity(self) -> Identity:
        """The Chrome version the headers fetch/over_http.py sends name, as Chromium's own would, without waiting
        for Chrome (only a render needs it: a cold start or a crash-looping Chrome must not hold up a static
        page): the last browser's, else the installed executable's `--version` (asked once), else the
        version whose TLS fingerprint is presented."""
        version = self.chrome.version or await self._installed_version()
        if self._identity_of[0] != version:
            self._identity_of = (version, Identity.of(version))
        return self._identity_of[1]

    async def _installed_version(self) -> str:
        async with self._version_lock:
            if self._installed is None:
                exe = self.chrome.executable
                self._installed = (await installed_version(exe) if exe else None) or IMPERSONATE.removeprefix("chrome")
        return self._installed

    async def _in_chrome(self, load: Load, profile: Profile | None, prefetched: Prefetched | None,
                         read_server_html: ReadServerHtml, how: list[str]) -> Loaded:
        """The page's render outcome, on a tab of its own (with the profile's cookies, when one is given:
        what the site set in return is written back, `how` told of cookies refused); a browser that went
        away is tried once more."""
        bc = self.config.browser
        key, progress = load.url, load.progress
        for attempt in (1, 2):
            # the policy and fetch.* read at each attempt, as at every use: a reload meanwhile applies to it
            attempt_load = dataclasses.replace(load, policy=self._policy_for(profile),
                                               max_bytes=self.config.fetch.max_bytes)
            rendering = Rendering(bc.settle_s, bc.block_resources, read_server_html,
                                  server_decides=self.config.fetch.render == "auto", prefetched=prefetched)
            try:
                self.renders += 1
                if profile is not None and profile.name == YOUR_BROWSER:
                    return await self._in_your_browser(attempt_load, rendering)
                async with self.chrome.open_tab(private=profile is not None) as tab:
                    given = []
                    if profile is not None:
                        given = await self.profiles.seed(tab.context, profile)
                        await self.profiles.seed_page(tab, profile)
                    try:
                        return await load_in_chrome(tab, attempt_load, rendering)
                    finally:
                        if profile is not None:
                            await self._keep_cookies(profile, tab.context, given, how)
            except BrowserCrashed as e:
                if attempt == 2:
                    raise BrowserUnavailable(f"the browser failed twice while loading {key} ({e}); "
                                             f"try again in a few seconds") from None
                log.warning("browser went away while loading %s (%s); retrying once", key, e)
                progress("render", f"loading again: {e}")
        raise AssertionError("unreachable")

    async def _in_your_browser(self, load: Load, rendering: Rendering) -> Loaded:
        """The page loaded and, when it needs it, rendered in a tab of the person's own browser: every
        request of that tab (its frames', workers' and popups' too) held to user_browser.hosts, never to the
        browser's DevTools port nor the view (UserBrowser.gate); the tab closed however it ends."""
        gate = self.user_browser.gate(load.policy)
        rendering = dataclasses.replace(rendering, gate=gate)
        notify = functools.partial(load.progress, "person")
        async with self.user_browser.render_tab(FETCH_TAB, gate, notify, self.config.fetch.timeout_s) as tab:
            return await load_in_chrome(tab, load, rendering)

    async def _keep_cookies(self, profile: Profile, context: BrowserContext, given: list[Cookie],
                            how: list[str]) -> None:
        """The cookies the site set in return go into the profile (a refreshed session stays alive), those
        for domains it is not bound to refused with a note in `how`."""
        try:
            done = await self.profiles.write_back(profile.name, context, given)
        except ProfileError as e:  # a full disk: the page is read all the same, the profile is as it was
            log.warning("%s", e)
            return
        note = None if done is None else done.note(profile.name)
        if note is not None and note not in how:  # a render tried again refuses the same cookies
            how.append(note)

    async def _read_server_html(self, progress: ReportProgress, how: list[str], keep_hidden: bool, body: bytes,
                                charset: str | None, url: str) -> ServerRead:
        """Extract from the HTML as the server sent it, before Chrome renders anything: for most of the web
        that is the content, found in a fraction of the time and without scripts' clutter."""
        progress("extract", "extracting the main content from the server's HTML")
        reading = await self.extractor.server_html(body, url, charset, keep_hidden)
        decides = self.config.fetch.render == "auto"
        if reading.need.reason is not None:
            log.info("rendering %s: %s", url, reading.need.reason)
            note = f"rendered in Chrome: {reading.need.reason}"
            if decides and note not in how:  # a retried render reads the same HTML again
                how.append(note)
        return ServerRead(reading.extracted, decides and not reading.need.render)

    async def _extract(self, outcome: TextBody | PdfBody | ServerHtml | RenderedDom,
                       progress: ReportProgress, keep_hidden: bool = False) -> _Read:
        """The content of a page that was not a redirect, and what the flags are judged on."""
        if isinstance(outcome, TextBody):
            progress("extract", "reading the text body")
            r = outcome.response
            return _Read(await self.extractor.raw(outcome.body, r.content_type, r.charset), "text body")
        if isinstance(outcome, PdfBody):
            progress("extract", "extracting the PDF's text")
            text = await self.extractor.pdf(outcome.body, outcome.response.truncated)
            return _Read(Extracted(text.markdown, "pdf", text.title), "PDF", notes=list(text.notes))
        if isinstance(outcome, ServerHtml):
            return _Read(outcome.extracted, "not rendered (the server's HTML held the content)",
                         judged_html=outcome.body)
        progress("extract", "extracting the main content")
        try:
            extracted = await self.extractor.html(outcome.html, outcome.response.final_url, keep_hidden=keep_hidden)
        except ExtractionFailed as e:
            if outcome.server is None:
                # No text at all: an error, unless a flag says why (a captcha, an empty app shell); then
                # the flag is the answer.
                return _Read(Extracted("", "trafilatura"), "rendered", outcome.title, outcome.html, failed=e)
            extracted = outcome.server
        if outcome.server is not None and _rendered_lost_text(extracted, outcome.server):
            extracted = outcome.server  # scripts took text away (or rendering broke it)
        judged = outcome.html if extracted is not outcome.server else outcome.server_body
        return _Read(extracted, "rendered", outcome.title, judged)

    async def _flags(self, outcome: Loaded, read: _Read, title: str | None, key: str,
                     notes: list[str]) -> list[Flag]:
        """No silent success: what the content is when it is not the page (webfetch/parse/flags.py), judged on
        the HTML the content came from: Chrome's DOM, or the server's HTML."""
        r = outcome.response
        html = read.judged_html
        if isinstance(html, bytes):
            html = decode_text(html, r.charset)
        truncated_note = next((n for n in notes if "was cut there" in n), None)
        # the evidence its extraction gathered on the same parse of `html`, when the flags need it
        return await self.extractor.flags(
            evidence=None if read.failed else read.extracted.evidence, status=r.status, title=title, html=html,
            markdown=read.extracted.markdown, url=key, final_url=r.final_url, truncated=r.truncated,
            truncated_note=truncated_note)


# A page longer than the sub-agent's input is read for `schema` in parts of subagent.max_input_chars, at most
# this many (3.2 M characters at the default): each part is a model call.
MAX_PARTS = 8


def checked(req: FetchRequest) -> find.Pattern | None:
    """A request's `find` pattern and `schema` checked by their text before anything loads (BadRequest naming
    where); what needs compiling is checked in a worker (Pipeline.checked)."""
    pattern = find.checked(req)
    if req.schema is not None and req.find is not None:
        raise BadRequest("`schema` answers from the whole page and `find` returns passages: pass one of them - at "
                         "`$.find`")
    return pattern


def split_parts(text: str, size: int) -> list[str]:
    """`text` in parts of at most `size` characters, each ended at a line break when one is in its second half."""
    parts = []
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            nl = text.rfind("\n", start + size // 2, end)
            end = nl + 1 if nl >= 0 else end
        parts.append(text[start:end])
        start = end
    return parts or [""]


def add_usage(a: Usage | None, b: Usage | None) -> Usage | None:
    """Two model calls' usage as one (a retry, a page's parts)."""
    if a is None or b is None:
        return a or b
    return Usage(input=a.input + b.input, output=a.output + b.output, cache_read=a.cache_read + b.cache_read,
                 cache_write=a.cache_write + b.cache_write, total_tokens=a.total_tokens + b.total_tokens,
                 cost=UsageCost(**{k: getattr(a.cost, k) + getattr(b.cost, k) for k in
                                   ("input", "output", "cache_read", "cache_write", "total")}))


def mismatch(page: Page, what: str, errors: list[str]) -> str:
    """schema_mismatch's message: the first errors, and the page offered by offset (it is cached)."""
    return (f"{what} does not validate against the schema: {'; '.join(errors)}. The page ({page.final_url}, "
            f"{len(page.markdown)} characters) is cached: fetch it with `offset` 0 to read it yourself, or ask "
            f"again with a schema that allows what the page has (null for a value it may not give)")


def merge_note(parts: int, size: int, conflicts: list[str]) -> str:
    """How the data of a page read in parts was put together, and where the parts disagreed."""
    note = (f"the page was read in {parts} parts of up to {size} characters, each answered against the schema; "
            f"the answers were merged: objects key by key, arrays joined in page order (repeats dropped), for "
            f"any other value the first part's that was not null")
    if conflicts:
        shown = ", ".join(conflicts[:10]) + (f" and {len(conflicts) - 10} more" if len(conflicts) > 10 else "")
        note += f". The parts disagreed at {shown}: the first part's value was kept; check them in the page"
    return note


@dataclass(frozen=True)
class SourceHtml:
    """The HTML a page's content was extracted from (the server's, or the rendered DOM), for its links."""

    html: str | bytes
    url: str                # the URL it was read at: relative links resolve against it
    charset: str | None


@dataclass(frozen=True)
class LoadedPage:
    page: Page
    cached: bool
    source: SourceHtml | None   # None when the page came from the cache (or is not HTML)


def cache_key(key: str, profile: Profile | None, keep_hidden: bool = False) -> str:
    """A page read with a profile is cached apart from the same URL read without one, or with another;
    a page read with its hidden text kept, apart from the same page without it (before the profile's mark,
    which cache.read_with finds at the key's end). The separator is a newline because no normalized URL
    holds one (urlsplit drops it, as WHATWG URL parsing does), so no URL's key can be another's; a space
    can (parse_url keeps it: a fetch of `…/x profile=work` would have been served `…/x` as read with
    profile work)."""
    key = f"{key}{HIDDEN_KEPT_MARK}" if keep_hidden else key
    return key if profile is None else f"{key}{PROFILE_MARK}{profile.name}"


HIDDEN_KEPT_MARK = "\nhidden=keep"


def _address_policy(config: Config) -> tuple[object, ...]:
    """The settings the address policy (fetch's and browse's, one proxy) is made of."""
    return config.fetch.allow_private, config.fetch.allow_hosts, config.browse.allow_local


def _checker(profile: Profile | None) -> Callable[[str], None] | None:
    """Refuses a main-frame hop to a host the profile does not list."""
    if profile is None:
        return None

    def check(host: str) -> None:
        if profile.allows(host):
            return
        if profile.name == YOUR_BROWSER:  # no profile to allow it in: the config's list is the user's
            raise BlockedUrl(f"the page redirects to {host}, which is not in user_browser.hosts "
                             f"({', '.join(profile.hosts)}): your browser is used only for the sites you listed")
        raise profile.refuse(host)
    return check


def login_hint(page: Page, profile: str | None, yours: bool = False) -> str | None:
    """How to get past a sign-in (login_wall, or a redirect to a sign-in page elsewhere) with a profile:
    a note an agent can act on, or None when the page is not behind one. Its commands are shell-quoted
    (shell.command): the sign-in URL is the server's choice."""
    target = page.redirect_url
    if "login_wall" not in page.flags and not (target and LOGIN_PATH.search(urlsplit(target).path)):
        return None
    url = target or page.final_url
    host = urlsplit(url).hostname or ""
    if yours:
        return (f"your browser is not signed in at {host} (or its login expired): ask the user to sign in there "
                f"in their browser, then fetch again")
    if profile is not None:
        return (f"profile {profile} did not get past the sign-in at {host}: its login may have expired or been "
                f"signed out. Ask the user to log in again with "
                f"`{shell.command('webfetch', 'profile', 'login', profile, url)}` (where no window can open, it "
                f"prints the address of a page of webfetch's local view to log in through; or "
                f"{headless_login(profile, url, new=False)}), then fetch again with profile {profile}")
    name = re.sub(r"[^A-Za-z0-9._-]", "-", host).strip(".-") or "site"
    login, import_ = (shell.command("webfetch", "profile", "login", name, url),
                      shell.command("webfetch", "profile", "import", name, "FILE"))
    return (f"to read it signed in, the user logs in once with `{login}` (a browser window opens for them; where "
            f"none can open, it prints the address of a page of webfetch's local view to log in through; or "
            f"{headless_login(name, url)}; or `{import_}` with exported cookies), then fetch with "
            f"profile {name!r} (CLI: "
            f"{shell.command('--profile', name)})")


@dataclass
class _Read:
    """A page's content as extracted, and what its flags are judged on."""

    extracted: Extracted
    how: str                              # how the page was read, for the log
    title: str | None = None              # the title the browser saw, if it rendered the page
    judged_html: str | bytes | None = None  # the HTML the content came from (None: not HTML)
    failed: ExtractionFailed | None = None  # nothing extracted: an error unless a flag explains it
    notes: list[str] = field(default_factory=list)
