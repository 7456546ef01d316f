"""Layer 1: the cache on trio's mock clock."""

import pytest
import trio
import trio.testing

from webfetch.cache import Cache
from webfetch.errors import HttpError


@pytest.fixture
def clock():
    return trio.testing.MockClock(autojump_threshold=0)


def make(ttl=900.0, sweep=300.0, max_bytes=1000) -> Cache[str]:
    return Cache(ttl, sweep, max_bytes, sizeof=len)


async def test_entries_expire_after_the_ttl(clock):
    c = make()
    c.put("k", "value")
    await trio.sleep(899)
    value, age = c.get("k")
    assert value == "value" and age == pytest.approx(899)
    await trio.sleep(1)
    assert c.get("k") is None and len(c) == 0 and c.bytes == 0


async def test_sweeper_removes_expired_entries_every_five_minutes(clock, nursery):
    c = make()
    await nursery.start(c.run)
    c.put("old", "x" * 10)
    await trio.sleep(600)
    c.put("new", "y" * 10)
    await trio.sleep(300.5)  # sweep at t=900: "old" is exactly 900 s old
    assert len(c) == 1 and c.bytes == 10
    await trio.sleep(600)    # sweep at t=1500: "new" is 900 s old
    assert len(c) == 0 and c.bytes == 0


async def test_byte_bound_evicts_least_recently_used(clock):
    c = make(max_bytes=30)
    c.put("a", "a" * 10)
    c.put("b", "b" * 10)
    c.put("c", "c" * 10)
    c.get("a")  # a is now the most recently used
    c.put("d", "d" * 10)
    assert c.get("b") is None
    assert [k for k in ("a", "c", "d") if c.get(k)] == ["a", "c", "d"]
    assert c.bytes == 30
    c.put("huge", "h" * 31)  # larger than the whole cache: not kept, nothing evicted for it
    assert c.get("huge") is None and len(c) == 3


async def test_a_value_over_the_entry_bound_is_not_kept_and_evicts_nothing(clock):
    """The daemon's memory cache keeps no page over 1/32 of it when pages are also kept on disk."""
    from webfetch.config import CacheConfig
    from webfetch.fetch.pipeline import memory_entry_bytes

    c = Cache(900.0, 300.0, 100, sizeof=len, max_entry_bytes=20)
    c.put("a", "a" * 20)
    c.put("big", "b" * 21)
    assert c.get("big") is None and c.get("a") is not None and c.bytes == 20
    c.reconfigure(900.0, 300.0, 100, max_entry_bytes=50)
    c.put("big", "b" * 21)
    assert c.get("big") is not None
    assert memory_entry_bytes(CacheConfig()) == 8 * 1024 * 1024           # 256 MiB / 32, with a disk cache
    assert memory_entry_bytes(CacheConfig(disk_max_bytes=0)) == 256 * 1024 * 1024   # else all of it


async def test_reconfigure_shrinks_at_once_and_a_shorter_ttl_expires_older_entries(clock):
    """What a reload does to the cache: a smaller bound evicts the least recently used entries now."""
    c = make(max_bytes=30)
    for key in "abc":
        c.put(key, key * 10)
        await trio.sleep(100)
    c.get("a")
    c.reconfigure(ttl_s=250.0, sweep_s=300.0, max_bytes=20)
    assert c.bytes == 20 and c.get("b") is None
    assert c.get("a") is None and c.get("c") == ("cc" * 5, 100)  # "a" is 300 s old: past the new TTL


async def test_ten_concurrent_requests_cause_one_load(clock):
    c = make()
    loads = 0

    async def load():
        nonlocal loads
        loads += 1
        await trio.sleep(1)
        return "page"

    results = []

    async def one():
        results.append(await c.get_or_load("k", load))

    async with trio.open_nursery() as n:
        for _ in range(10):
            n.start_soon(one)
    assert loads == 1
    assert sorted(r[2] for r in results) == [False] + [True] * 9
    assert all(r[0] == "page" for r in results)
    assert c.misses == 1 and c.hits == 9


async def test_a_load_under_way_when_the_cache_is_cleared_is_served_but_not_kept(clock):
    c = make()

    async def load():
        await trio.sleep(1)
        return "page"

    async with trio.open_nursery() as n:
        n.start_soon(c.get_or_load, "k", load)
        await trio.sleep(0.5)
        c.clear()
    assert c.get("k") is None and len(c) == 0 and c.bytes == 0


async def test_a_cancelled_loader_hands_over_to_a_waiter(clock):
    c = make()
    calls = []

    async def load():
        calls.append(trio.current_time())
        await trio.sleep(5)
        return "page"

    async with trio.open_nursery() as n:
        leader = trio.CancelScope()

        async def first():
            with leader:
                await c.get_or_load("k", load)

        n.start_soon(first)
        await trio.sleep(1)
        result = []
        n.start_soon(lambda: _append(result, c.get_or_load("k", load)))
        await trio.sleep(1)
        leader.cancel()
    assert result[0][0] == "page" and result[0][2] is False
    assert len(calls) == 2


async def _append(out, coro):
    out.append(await coro)


async def test_errors_are_shared_with_waiters_but_not_cached(clock):
    c = make()
    calls = 0

    async def load():
        nonlocal calls
        calls += 1
        await trio.sleep(1)
        raise HttpError("gone", status=404)

    errors = []

    async def one():
        try:
            await c.get_or_load("k", load)
        except HttpError as e:
            errors.append(e)

    async with trio.open_nursery() as n:
        for _ in range(3):
            n.start_soon(one)
    assert calls == 1 and len(errors) == 3
    await one()
    assert calls == 2


async def test_fresh_bypasses_the_read_and_refreshes(clock):
    c = make()
    c.put("k", "old")

    async def load():
        return "new"

    assert await c.get_or_load("k", load) == ("old", 0.0, True)
    value, age, cached = await c.get_or_load("k", load, fresh=True)
    assert (value, cached) == ("new", False)
    assert c.get("k")[0] == "new"


async def test_a_value_found_elsewhere_is_served_as_cached_and_as_old_as_it_is(clock):
    """The disk cache's way in: the loader found the value kept (600 s old); the caller and those waiting
    on the same flight get it as cached, that old, and it leaves memory when its ttl is over, not 900 s
    from now."""
    c = make()
    calls = 0

    async def found():
        nonlocal calls
        calls += 1
        await trio.sleep(1)
        return "kept", 600.0

    results = []
    async with trio.open_nursery() as n:
        for _ in range(2):
            n.start_soon(lambda: _append(results, c.get_or_load_aged("k", found)))
    assert calls == 1
    assert sorted(results) == [("kept", 600.0, True), ("kept", 600.0, True)]
    await trio.sleep(299)  # found at t=1, 600 s old
    assert c.get("k") == ("kept", pytest.approx(899))
    await trio.sleep(1)
    assert c.get("k") is None


def test_cached_pages_are_packed_and_sized_as_they_are_held():
    # A str with one character beyond Latin-1 takes 2-4 bytes a character in memory (and a UTF-8 copy once
    # pickled or encoded): the cache holds pages packed, so its byte count is what they really cost.
    import sys

    from webfetch.fetch.pipeline import Page, pack_page, page_size, unpack_page

    page = Page(url="https://a.test/", final_url="https://a.test/", status=200, content_type="text/html",
                title="It’s", markdown="Quotes’ and an emoji 😀\n" * 500, extractor="trafilatura",
                truncated=False, redirect_url=None, notes=("a note",), flags=("soft_404",))
    packed = pack_page(page)
    assert unpack_page(packed) == page
    assert sys.getsizeof(packed) <= page_size(packed) < sys.getsizeof(page.markdown) / 2
