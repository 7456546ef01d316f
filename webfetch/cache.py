"""The cache actor: extracted pages by normalized URL, with a TTL, a sweeper, an LRU byte bound, and
single-flight loading (concurrent requests for one URL share one render)."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import trio

from .errors import WebfetchError

log = logging.getLogger("webfetch.cache")

V = TypeVar("V")

# A page read with a profile is cached under its URL, this, and the profile's name (pipeline.cache_key).
PROFILE_MARK = "\nprofile="


def read_with(profile: str) -> Callable[[str], bool]:
    """Whether a cache key is of a page read with `profile`: its pages go when it is deleted."""
    mark = f"{PROFILE_MARK}{profile}"
    return lambda key: key.endswith(mark)


@dataclass
class _Entry(Generic[V]):
    value: V
    size: int
    created: float


@dataclass
class _Flight(Generic[V]):
    done: trio.Event = field(default_factory=trio.Event)
    value: V | None = None
    created: float = 0.0
    error: WebfetchError | None = None   # shared with the waiters: they asked for the same page


class Cache(Generic[V]):
    """Times come from trio's clock, so tests can drive TTL and sweeping with the mock clock."""

    def __init__(self, ttl_s: float, sweep_s: float, max_bytes: int, sizeof: Callable[[V], int],
                 max_entry_bytes: int | None = None) -> None:
        """`max_entry_bytes`: a value larger than this is not kept (default: `max_bytes`)."""
        self.ttl_s = ttl_s
        self.sweep_s = sweep_s
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_bytes if max_entry_bytes is None else max_entry_bytes
        self._sizeof = sizeof
        self._entries: OrderedDict[str, _Entry[V]] = OrderedDict()
        self._flights: dict[str, _Flight[V]] = {}
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        # Bumped by `clear`: a load that began before a clear is not stored by it. A reload that narrows the
        # address policy clears the cache, and a hit is served without asking the policy again, so a page
        # loaded under the old policy must not land after the clear.
        self.generation = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> tuple[V, float] | None:
        """The fresh value and its age in seconds, or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        age = trio.current_time() - entry.created
        if age >= self.ttl_s:
            self._remove(key)
            return None
        self._entries.move_to_end(key)
        return entry.value, age

    def lookup(self, key: str) -> tuple[V, float] | None:
        """`get`, counted as a hit when found (misses are counted by whoever then loads)."""
        hit = self.get(key)
        if hit is not None:
            self.hits += 1
        return hit

    def put(self, key: str, value: V, created: float | None = None) -> None:
        size = self._sizeof(value)
        self._remove(key)
        if size > min(self.max_bytes, self.max_entry_bytes):
            return  # would evict everything else and still not fit, or too much of it (the owner's choice)
        self._entries[key] = _Entry(value, size, trio.current_time() if created is None else created)
        self.bytes += size
        self._evict()

    def _evict(self) -> None:
        while self.bytes > self.max_bytes:
            oldest = next(iter(self._entries))
            self._remove(oldest)

    def reconfigure(self, ttl_s: float, sweep_s: float, max_bytes: int, max_entry_bytes: int | None = None) -> None:
        """New limits from a reload: a smaller byte bound evicts the least recently used entries at once, a
        shorter TTL expires entries at their next read or sweep; sweep_s counts from the next sweep. A smaller
        entry bound applies to the next values stored."""
        self.ttl_s, self.sweep_s, self.max_bytes = ttl_s, sweep_s, max_bytes
        self.max_entry_bytes = max_bytes if max_entry_bytes is None else max_entry_bytes
        self._evict()

    def clear(self) -> None:
        """Forget every entry (loads under way still finish for their callers, and are not kept)."""
        self._entries.clear()
        self.bytes = 0
        self.generation += 1

    def forget(self, matching: Callable[[str], bool]) -> int:
        """Forget the entries whose key `matching` accepts (a deleted profile's pages); how many. Loads
        under way finish for their callers and are not kept, as after `clear`."""
        keys = [k for k in self._entries if matching(k)]
        for key in keys:
            self._remove(key)
        self.generation += 1
        return len(keys)

    def _remove(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.bytes -= entry.size

    def sweep(self) -> int:
        """Drop expired entries; how many went."""
        now = trio.current_time()
        expired = [k for k, e in self._entries.items() if now - e.created >= self.ttl_s]
        for key in expired:
            self._remove(key)
        return len(expired)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await trio.sleep(self.sweep_s)
            gone = self.sweep()
            if gone:
                log.info("cache sweep removed %d expired entries (%d left, %d bytes)", gone, len(self), self.bytes)

    async def get_or_load(self, key: str, load: Callable[[], Awaitable[V]],
                          fresh: bool = False) -> tuple[V, float, bool]:
        """(value, age_s, cached). Concurrent callers for one key share one `load`; if the caller running
        it is cancelled, a waiting caller takes over rather than failing with someone else's cancel."""
        async def loaded_now() -> tuple[V, float | None]:
            return await load(), None
        return await self.get_or_load_aged(key, loaded_now, fresh)

    async def get_or_load_aged(self, key: str, load: Callable[[], Awaitable[tuple[V, float | None]]],
                               fresh: bool = False) -> tuple[V, float, bool]:
        """`get_or_load` whose loader may take the value from where it was kept (the disk cache) rather than
        load it: it returns the value and its age then (None: loaded now), and the value is cached and
        served as that old."""
        if not fresh:
            hit = self.lookup(key)
            if hit is not None:
                return hit[0], hit[1], True
        while True:
            flight = self._flights.get(key)
            if flight is None:
                break
            await flight.done.wait()
            if flight.error is not None:
                raise flight.error
            if flight.value is not None:
                self.hits += 1
                return flight.value, trio.current_time() - flight.created, True
            # the loader was cancelled: try again, perhaps as the loader
        self.misses += 1
        flight = _Flight[V]()
        self._flights[key] = flight
        generation = self.generation
        try:
            value, age = await load()
            flight.created = trio.current_time() - (age or 0.0)
            flight.value = value
            if generation == self.generation:
                self.put(key, value, flight.created)
            return value, age or 0.0, age is not None
        except WebfetchError as e:
            flight.error = e
            raise
        finally:
            del self._flights[key]
            flight.done.set()

    def statistics(self) -> dict[str, int]:
        return {"entries": len(self._entries), "bytes": self.bytes, "hits": self.hits, "misses": self.misses}
