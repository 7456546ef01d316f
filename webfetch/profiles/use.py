"""Profiles in use: what a fetch and a browse session do with one (profiles/store.py is the store).

A profile is read from its file at each use, so an import or a login made with the CLI takes effect
without a restart, and checked against the host it is about to be used on (`Profile.allows`, the one rule).
Its cookies go into a browser context before anything loads there; afterwards the context's cookies are
compared with what went in, and only the changes (cookies the site set, refreshed or deleted) are written
over the profile as it is on disk *then*, under one lock per profile. So two users of one profile (two
browse sessions, a fetch during a session) never interleave their writes and never undo each other's
changes: each writes what it changed; for one cookie both changed, the later write wins. A cookie the
context got for a domain the profile is not bound to (a single sign-on provider's, a tracker's, a parent
domain's) is not written: the write-back says how many and for which domains (`WriteBack.note`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import msgspec
import trio

from .. import page_scripts
from ..chrome.browser import BrowserContext
from ..chrome.cdp import CDPClosed, CDPError
from ..trust import shell
from .store import (
    Cookie,
    OriginState,
    Profile,
    ProfileError,
    ProfileStore,
    StorageState,
    UnknownProfile,
    check_name,
    domains_of,
    from_cdp,
    merge_cookies,
    normalize_host,
    to_cdp,
)

log = logging.getLogger("webfetch.profiles")

WRITE_BACK_TIMEOUT_S = 2.0  # reading a context's cookies: a browser that does not answer is gone
STORAGE_READ_TIMEOUT_S = 1.0  # reading a tab's localStorage: a page held by a dialog does not answer

SEED_STORAGE = page_scripts.load("seed_storage")
READ_STORAGE = page_scripts.load("read_storage").call()

CookieKey = tuple[str, str, str]


class Page(Protocol):
    """A page to call CDP on: a fetch `Tab` or a browse tab."""

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]: ...


def _key(c: Cookie) -> CookieKey:
    return (c.name, c.domain, c.path)


def apply_changes(current: list[Cookie], before: Sequence[Cookie], after: Sequence[Cookie]) -> list[Cookie]:
    """`current` (the profile on disk now) with what a browser context changed between `before` (what it
    was given) and `after` (what it holds): cookies set or changed are set, cookies it dropped (deleted or
    expired) are dropped. Cookies others wrote meanwhile and this context never touched are kept."""
    was = {_key(c): c for c in before}
    now = {_key(c): c for c in after}
    gone = was.keys() - now.keys()
    changed = [c for k, c in now.items() if was.get(k) != c]
    return merge_cookies([c for c in current if _key(c) not in gone], changed)


@dataclass
class WriteBack:
    """What a write-back did: the context's cookies as read (the next `before`), and the changed cookies it
    refused for domains the profile is not bound to."""

    cookies: list[Cookie]
    refused: list[Cookie] = field(default_factory=list)

    def note(self, name: str) -> str | None:
        """What the user is told of the refused cookies (their count and domains, never a value); None when
        there were none."""
        if not self.refused:
            return None
        domains = domains_of(self.refused)
        count = len(self.refused)
        return (f"profile {name}: {count} cookie{'s' if count != 1 else ''} the pages set for "
                f"{', '.join(domains)} {'were' if count != 1 else 'was'} not saved, as the profile is not bound to "
                f"{'those domains' if len(domains) != 1 else 'that domain'} (to keep such cookies: "
                f"{shell.command('webfetch', 'profile', 'allow', name, domains[0])})")


class ProfileUse:
    """The profiles as fetch and browse use them: load-and-check, seed a context, write its changes back."""

    def __init__(self, store: ProfileStore | None = None) -> None:
        self.store = store or ProfileStore()
        self._locks: dict[str, trio.Lock] = {}

    def _lock(self, name: str) -> trio.Lock:
        return self._locks.setdefault(name, trio.Lock())

    async def load(self, name: str, host: str) -> Profile:
        """The profile as it is on disk now, if it may be used on `host`: UnknownProfile, ProfileError
        (a bad name, a damaged file) or ProfileNotAllowed otherwise."""
        profile = await trio.to_thread.run_sync(self.store.load, check_name(name))
        if not profile.allows(host):
            raise profile.refuse(host)
        return profile

    async def load_or_create(self, name: str, host: str, *, create: bool) -> tuple[Profile, bool]:
        """The profile (checked for `host`), or, with `create`, a new empty one for `host` alone when none has
        that name (a browse session that logs in makes the profile it names); (profile, created). Without
        `create` a name no profile has is UnknownProfile listing the profiles: a typo must not quietly start
        an empty profile, and the login the user meant go unused."""
        async with self._lock(name):
            try:
                return await self.load(name, host), False
            except UnknownProfile:
                if not create:
                    known = ", ".join(await trio.to_thread.run_sync(self.store.names)) or "none yet"
                    raise UnknownProfile(f"no profile named {name!r} (profiles: {known}); to start a new, empty "
                                         f"one for {host}, open with `create: true`") from None
                profile = Profile(name=name, hosts=[normalize_host(host)], created=time.time())
                if not await trio.to_thread.run_sync(self._create, profile):
                    return await self.load(name, host), False  # a `webfetch profile` command made it first
                log.info("profile %r created for %s by a browse session", name, host)
                return profile, True

    def _create(self, profile: Profile) -> bool:
        with self.store.locked():
            if self.store.exists(profile.name):
                return False
            self.store.save(profile)
            return True

    async def seed(self, context: BrowserContext, profile: Profile) -> list[Cookie]:
        """Give a browser context the profile's cookies for the hosts it lists (Profile.usable_state), before
        anything loads in it; what was given."""
        live = profile.usable_state().cookies
        if live:
            try:
                await context.set_cookies([to_cdp(c) for c in live])
            except CDPError as e:  # an imported cookie Chrome will not take (SameSite=None without Secure…)
                raise ProfileError(f"Chrome refused a cookie of profile {profile.name!r} ({e.message}); "
                                   f"`{shell.command('webfetch', 'profile', 'export', profile.name)}`, fix or drop "
                                   f"it, and import "
                                   f"the file again with --replace") from None
        return live

    async def seed_page(self, page: Page, profile: Profile) -> None:
        """Give every document of `page` its origin's localStorage from the profile, before the page's scripts
        run (CDP's DOMStorage can write only to origins a frame of the page already shows)."""
        origins = profile.usable_state().origins
        if origins:
            source = SEED_STORAGE.call(msgspec.to_builtins(origins))
            await page.call("Page.addScriptToEvaluateOnNewDocument", {"source": source})

    async def read_storage(self, page: Page) -> OriginState | None:
        """The localStorage of the origin `page` shows, or None (no answer in time, no storage there)."""
        with trio.move_on_after(STORAGE_READ_TIMEOUT_S):
            try:
                reply = await page.call("Runtime.evaluate", {"expression": READ_STORAGE, "returnByValue": True})
                return msgspec.convert(reply["result"].get("value"), OriginState | None)
            except (CDPClosed, CDPError, msgspec.ValidationError) as e:
                log.debug("could not read a tab's localStorage: %s", e)
        return None

    async def write_back(self, name: str, context: BrowserContext, before: list[Cookie],
                         origins: Sequence[OriginState] = ()) -> WriteBack | None:
        """Write what the context changed since `before` over the profile on disk (and the localStorage of
        `origins`, read from its pages, for the origins on hosts the profile lists), but no cookie for a
        domain the profile is not bound to; what was done, or None when the context's cookies could not be
        read (the browser went away: nothing written). Shielded and bounded: it runs when a request or a
        session ends, cancelled or not."""
        with trio.CancelScope(shield=True):
            after = None
            with trio.move_on_after(WRITE_BACK_TIMEOUT_S):
                try:
                    after = [from_cdp(c) for c in await context.get_cookies()]
                except (CDPClosed, CDPError) as e:
                    log.warning("could not read the cookies of profile %r back from the browser (%s); the "
                                "profile is as it was", name, e)
            if after is None:
                return None
            async with self._lock(name):
                done: WriteBack = await trio.to_thread.run_sync(self._write, name, before, after, origins)
        if done.refused:
            log.info("%s", done.note(name))
        return done

    def _write(self, name: str, before: list[Cookie], after: list[Cookie],
               origins: Sequence[OriginState]) -> WriteBack:
        with self.store.locked():
            return self._write_locked(name, before, after, origins)

    def _write_locked(self, name: str, before: list[Cookie], after: list[Cookie],
                      origins: Sequence[OriginState]) -> WriteBack:
        try:
            current = self.store.load(name)
        except UnknownProfile:
            log.info("profile %r was deleted while in use; its changes are dropped", name)
            return WriteBack(after)
        # a changed cookie for a domain the profile is not bound to (a session's third-party and
        # elsewhere-clicked cookies, a parent domain's) is refused: it would be given to Chrome with the
        # profile once its domain is listed. What the file already holds for such domains stays as it is.
        was = {_key(c): c for c in before}
        refused = [c for c in current.unbound(after) if was.get(_key(c)) != c]
        out = {_key(c) for c in refused}
        # a refused cookie is neither written nor taken for deleted: the file's own one (if any) stays
        cookies = apply_changes(current.state.cookies, [c for c in before if _key(c) not in out],
                                [c for c in after if _key(c) not in out])
        stored = {o.origin: o for o in current.state.origins}
        stored |= {o.origin: o for o in origins if current.allows(urlsplit(o.origin).hostname or "")}
        state = StorageState(cookies=cookies, origins=list(stored.values()))
        self.store.save(msgspec.structs.replace(current, state=state, last_used=time.time()))
        return WriteBack(after, refused)
