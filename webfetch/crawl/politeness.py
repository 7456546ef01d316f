"""Per-host politeness for crawls and maps: at most `per_host` requests to one host at once, and a host that
answered 429 (or 503) with Retry-After is left alone until then by every crawl of this daemon. A single
fetch the user asked for does not pass here."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email.utils import parsedate_to_datetime

import trio


class Politeness:
    def __init__(self, per_host: int) -> None:
        self.per_host = per_host
        self._slots: dict[str, trio.CapacityLimiter] = {}
        self._users: dict[str, int] = {}
        self._not_before: dict[str, float] = {}

    def reconfigure(self, per_host: int) -> None:
        """A reloaded crawl.per_host: hosts in use keep their bound until their crawls end."""
        self.per_host = per_host

    @asynccontextmanager
    async def slot(self, host: str) -> AsyncIterator[None]:
        """One of the host's `per_host` connections, after any Retry-After it asked for has passed."""
        limiter = self._slots.get(host)
        if limiter is None:
            limiter = self._slots[host] = trio.CapacityLimiter(self.per_host)
        self._users[host] = self._users.get(host, 0) + 1
        try:
            async with limiter:
                await self._wait_allowed(host)
                yield
        finally:
            self._users[host] -= 1
            if not self._users[host]:  # no crawl of this host left: forget it (a daemon crawls many hosts)
                del self._users[host], self._slots[host]
                if self._not_before.get(host, 0.0) <= trio.current_time():  # a Retry-After still runs
                    self._not_before.pop(host, None)

    async def _wait_allowed(self, host: str) -> None:
        # a later 429 can push the time back while this one sleeps: look again after each sleep
        until = self._not_before.get(host, 0.0)
        while until > trio.current_time():
            await trio.sleep_until(until)
            until = self._not_before.get(host, 0.0)

    def back_off(self, host: str, seconds: float) -> None:
        """No request to `host` starts for `seconds` (its Retry-After)."""
        until = trio.current_time() + seconds
        self._not_before[host] = max(until, self._not_before.get(host, 0.0))


def retry_after_s(value: str | None, default: float = 1.0) -> float:
    """Seconds a Retry-After header asks for (delta-seconds or an HTTP date); `default` when absent or bad."""
    if not value:
        return default
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return default
    return max(0.0, when.timestamp() - time.time())
