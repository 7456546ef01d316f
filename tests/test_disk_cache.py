"""The cache that outlives the daemon (issue 29, item 5): pages kept on disk under $XDG_CACHE_HOME/webfetch
(the test's own directory, tests/conftest.py), served by the next daemon without a request to the server,
revalidated with the server's ETag / Last-Modified after their ttl, dropped when damaged, bounded in bytes,
private, emptied by `webfetch cache clear`, and kept apart by profile. Real daemons and Chromium against
a local server whose own request log is the witness; the file format's checks without either."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import threading
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from webfetch.config import CacheConfig
from webfetch.disk_cache import MAGIC, DiskCache, StoredPage, decode_entry, encode_entry, file_name
from webfetch.fetch.pipeline import cache_key

from .support.client import run_cli
from .support.daemon import Harness, make_config
from .support.login_app import MEMBER_TEXT, LoginApp
from .support.site import Site, simple_page

PARAGRAPHS = [f"Paragraph {i} of the kept page: the heron stood in the shallows of the mill pond, waiting "
              f"for the minnows to come back to the weir." for i in range(16)]
# long enough that the server's HTML holds the content (no rendering: the page keeps its validators)
ARTICLE = simple_page("The kept page", *PARAGRAPHS)
CHANGED = simple_page("The changed page", *[p.replace("heron", "egret") for p in PARAGRAPHS])
# a memory cache that holds nothing (every page is bigger than a byte): each fetch goes to the disk cache
NO_MEMORY = CacheConfig(max_bytes=1)


class Origin:
    """A test site's pages whose server answers conditional requests as a server with validators does,
    and logs every request for them with the validators it carried."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.log: list[tuple[str, str | None, str | None]] = []  # (path, If-None-Match, If-Modified-Since)
        self._lock = threading.Lock()

    def page(self, path: str, body: str, *, etag: str | None = None, last_modified: str | None = None) -> str:
        def handler(h: Any) -> None:
            sent_etag, since = h.headers.get("If-None-Match"), h.headers.get("If-Modified-Since")
            with self._lock:
                self.log.append((path, sent_etag, since))
            headers = {k: v for k, v in (("ETag", etag), ("Last-Modified", last_modified)) if v}
            if (etag and sent_etag == etag) or (not etag and last_modified and since == last_modified):
                h.send_response(304)
                for k, v in headers.items():
                    h.send_header(k, v)
                h.end_headers()
                return
            h.reply(200, "text/html; charset=utf-8", body, headers)
        self.site.route(path, handler)
        return self.site.url(path)

    def requests(self, path: str) -> list[tuple[str | None, str | None]]:
        with self._lock:
            return [(e, s) for p, e, s in self.log if p == path]


@pytest.fixture
def origin(site):
    return Origin(site)


def pages_dir(cache_home: Path) -> Path:
    return cache_home / "webfetch" / "pages"


@asynccontextmanager
async def running_daemon(sock: Path, **sections: Any):
    """A daemon for the block; the next one on the same $XDG_CACHE_HOME finds what it kept."""
    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            h = await Harness.start(nursery, sock, make_config(**sections))
            yield h
            nursery.cancel_scope.cancel()


def page_of(r: dict[str, Any]) -> bool:
    return r["type"] == "result" and PARAGRAPHS[3] in r["content"]


# --- the file format, without a daemon ------------------------------------------------------------


def test_an_entry_reads_back_and_every_damage_is_caught():
    entry = StoredPage("http://127.0.0.1:1/x", 1_700_000_000.5, b"packed page bytes")
    data = encode_entry(entry)
    assert data.startswith(MAGIC) and decode_entry(data) == entry
    damaged = [data[:len(data) // 2], data[:-1], b"", b"garbage" * 10, data.replace(MAGIC, b"webfetch page 0\n")]
    for i in range(len(data)):  # a flipped bit anywhere: magic, digest, key, time or page
        damaged.append(data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:])
    for bad in damaged:
        with pytest.raises(Exception) as caught:
            decode_entry(bad)
        assert type(caught.value).__name__ == "Damaged"


async def test_the_store_bounds_its_bytes_least_recently_used_first(tmp_path):
    directory = tmp_path / "cache" / "webfetch" / "pages"
    size = len(encode_entry(StoredPage("k0", 0.0, b"x" * 1000)))
    store = DiskCache(directory, max_bytes=3 * size)
    for i in range(3):
        await store.put(f"k{i}", b"x" * 1000)
    assert await store.get("k0") is not None  # a read is a use: k1 is now the least recently used
    os.utime(directory / file_name("k1"), (1, 1))  # mtimes are coarse on some filesystems: make it plain
    store.sweep()
    await store.put("k3", b"x" * 1000)
    assert [await store.get(k) is not None for k in ("k0", "k1", "k2", "k3")] == [True, False, True, True]
    assert store.statistics() == {"disk_entries": 3, "disk_bytes": 3 * size}
    assert sorted(p.name for p in directory.iterdir()) == sorted(file_name(k) for k in ("k0", "k2", "k3"))
    # modes: the directories 0700, the files 0600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(directory.parent.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in directory.iterdir()} == {0o600}
    assert await store.clear() == (3, 3 * size)
    assert list(directory.iterdir()) == [] and store.statistics()["disk_entries"] == 0


async def test_a_loose_cache_directory_is_made_private(tmp_path):
    directory = tmp_path / "webfetch" / "pages"
    directory.mkdir(parents=True, mode=0o755)
    os.chmod(directory, 0o755)
    os.chmod(directory.parent, 0o755)
    await DiskCache(directory, 1 << 20).put("k", b"page")
    assert stat.S_IMODE(directory.stat().st_mode) == stat.S_IMODE(directory.parent.stat().st_mode) == 0o700


def test_a_key_with_a_profile_is_another_file():
    assert file_name(cache_key("http://h/x", None)) != file_name("http://h/x\nprofile=work")
    assert file_name("k") == hashlib.sha256(b"k").hexdigest()


# --- real daemons --------------------------------------------------------------------------------


@pytest.mark.chromium
async def test_a_restarted_daemon_serves_the_page_from_disk(origin, short_tmp, cache_home):
    url = origin.page("/kept", ARTICLE, etag='"v1"')
    async with running_daemon(short_tmp / "a.sock") as h:
        first = await h.fetch(url)
        assert page_of(first) and not first["cached"], first
        status = (await h.request({"id": "s", "op": "status"}))["cache"]
        assert status["disk_entries"] == 1 and status["disk_bytes"] > 0
        assert status["disk_dir"] == str(pages_dir(cache_home))
    async with running_daemon(short_tmp / "b.sock") as h:  # a new daemon: its memory cache is empty
        again = await h.fetch(url)
        assert page_of(again) and again["cached"], again
        assert again["content"] == first["content"] and again["age_s"] > 0
        assert (await h.fetch(url))["cached"]  # and now from memory
    assert origin.requests("/kept") == [(None, None)]  # the server's own log: one request, ever
    files = list(pages_dir(cache_home).iterdir())
    assert len(files) == 1
    assert stat.S_IMODE(pages_dir(cache_home).stat().st_mode) == 0o700
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600


@pytest.mark.chromium
async def test_after_its_ttl_a_page_is_revalidated_and_a_304_serves_it(origin, short_tmp):
    by_etag = origin.page("/etag", ARTICLE, etag='"v1"')
    by_date = origin.page("/date", ARTICLE, last_modified="Tue, 03 Nov 2026 10:00:00 GMT")
    neither = origin.page("/neither", ARTICLE)
    changes = origin.page("/changes", ARTICLE, etag='"v1"')
    async with running_daemon(short_tmp / "a.sock", cache=CacheConfig(ttl_s=1.0)) as h:
        for url in (by_etag, by_date, neither, changes):
            assert page_of(await h.fetch(url))
        origin.page("/changes", CHANGED, etag='"v2"')  # the server has a new version of this one
        await trio.sleep(1.5)  # past the ttl
        for url in (by_etag, by_date):
            r = await h.fetch(url)
            assert page_of(r) and r["cached"] and r["age_s"] < 1.0, r  # served as kept, its age refreshed
        assert not (await h.fetch(neither))["cached"]   # nothing to revalidate with: loaded again
        changed = await h.fetch(changes)
        assert not changed["cached"] and "egret" in changed["content"] and "heron" not in changed["content"]
        assert (await h.fetch(by_etag))["cached"]  # fresh again for another ttl: no request
    assert origin.requests("/etag") == [(None, None), ('"v1"', None)]
    assert origin.requests("/date") == [(None, None), (None, "Tue, 03 Nov 2026 10:00:00 GMT")]
    assert origin.requests("/neither") == [(None, None), (None, None)]
    assert origin.requests("/changes") == [(None, None), ('"v1"', None)]


@pytest.mark.chromium
async def test_a_304_refreshes_the_page_for_the_next_daemon(origin, short_tmp):
    url = origin.page("/kept", ARTICLE, etag='"v1"')
    async with running_daemon(short_tmp / "a.sock", cache=CacheConfig(ttl_s=1.0)) as h:
        assert page_of(await h.fetch(url))
        await trio.sleep(1.5)
        assert (await h.fetch(url))["cached"]  # revalidated: 304
    async with running_daemon(short_tmp / "b.sock", cache=CacheConfig(ttl_s=60.0)) as h:
        r = await h.fetch(url)
        assert page_of(r) and r["cached"] and r["age_s"] < 30, r
    assert origin.requests("/kept") == [(None, None), ('"v1"', None)]


@pytest.mark.chromium
@pytest.mark.parametrize("damage", ["truncate", "flip"])
async def test_a_damaged_entry_is_dropped_and_loaded_again_never_served(origin, short_tmp, cache_home, caplog,
                                                                        damage):
    caplog.set_level(logging.INFO)
    url = origin.page("/kept", ARTICLE, etag='"v1"')
    async with running_daemon(short_tmp / "a.sock", cache=NO_MEMORY) as h:
        assert page_of(await h.fetch(url))
        assert (await h.fetch(url))["cached"]  # from disk (the memory holds nothing)
        [path] = pages_dir(cache_home).iterdir()
        data = path.read_bytes()
        if damage == "truncate":
            path.write_bytes(data[:len(data) // 2])
        else:  # one byte of the page's text, in the middle
            i = data.index(b"Paragraph 8")
            path.write_bytes(data[:i] + b"X" + data[i + 1:])
        again = await h.fetch(url)
        assert page_of(again) and not again["cached"], again
        assert "XParagraph" not in again["content"] and "Xaragraph" not in again["content"]
        assert decode_entry(path.read_bytes()).page  # written again, whole
        assert (await h.fetch(url))["cached"]
    assert origin.requests("/kept") == [(None, None), (None, None)]  # the damaged one was not revalidated either
    dropped = [r.getMessage() for r in caplog.records if "damaged page" in r.getMessage()]
    assert len(dropped) == 1 and "127.0.0.1" not in dropped[0], dropped


@pytest.mark.chromium
async def test_the_byte_bound_evicts_the_least_recently_used(origin, short_tmp, cache_home):
    urls = [origin.page(f"/p{i}", simple_page(f"Kept page {i}", *PARAGRAPHS)) for i in range(4)]
    async with running_daemon(short_tmp / "a.sock", cache=NO_MEMORY) as h:
        assert page_of(await h.fetch(urls[0]))
        one = sum(p.stat().st_size for p in pages_dir(cache_home).iterdir())
    # room for three such pages, not four
    async with running_daemon(short_tmp / "b.sock", cache=CacheConfig(max_bytes=1, disk_max_bytes=3 * one + 100)) as h:
        for url in urls[1:]:
            assert page_of(await h.fetch(url))
        assert len(list(pages_dir(cache_home).iterdir())) == 3
        assert not (await h.fetch(urls[0]))["cached"]  # the least recently used went
        assert (await h.fetch(urls[3]))["cached"]
        status = (await h.request({"id": "s", "op": "status"}))["cache"]
        assert status["disk_entries"] == 3 and status["disk_bytes"] <= 3 * one + 100
    assert sum(p.stat().st_size for p in pages_dir(cache_home).iterdir()) <= 3 * one + 100
    assert [len(origin.requests(f"/p{i}")) for i in range(4)] == [2, 1, 1, 1]


@pytest.mark.chromium
async def test_fresh_bypasses_the_disk_and_cache_clear_empties_it(origin, short_tmp, cache_home):
    url = origin.page("/kept", ARTICLE, etag='"v1"')
    path = short_tmp / "a.sock"
    async with running_daemon(path) as h:
        assert page_of(await h.fetch(url))
        r = await h.fetch(url, fresh=True)
        assert page_of(r) and not r["cached"]
        assert origin.requests("/kept") == [(None, None), (None, None)]  # no validators sent: a fresh load
        status = await trio.to_thread.run_sync(lambda: run_cli("status", "--socket", str(path)))
        assert "disk:     1 pages" in status.stdout, status.stdout
        cleared = await trio.to_thread.run_sync(lambda: run_cli("cache", "clear", "--socket", str(path)))
        assert cleared.returncode == 0, cleared.stderr
        assert cleared.stdout.startswith("cleared the cache: 1 pages in memory, 1 on disk ("), cleared.stdout
        assert list(pages_dir(cache_home).iterdir()) == []
        assert not (await h.fetch(url))["cached"]
    assert len(origin.requests("/kept")) == 3
    # with no daemon running, the CLI deletes the files itself
    assert len(list(pages_dir(cache_home).iterdir())) == 1
    cleared = run_cli("cache", "clear", "--socket", str(short_tmp / "none.sock"))
    assert cleared.returncode == 0 and "deleted 1 cached pages" in cleared.stdout, (cleared.stdout, cleared.stderr)
    assert list(pages_dir(cache_home).iterdir()) == []


@pytest.fixture
def app():
    a = LoginApp().start()
    yield a
    a.stop()


@pytest.mark.chromium
async def test_a_profiled_page_and_an_anonymous_one_are_never_served_to_each_other(app, short_tmp, cache_home,
                                                                                    tmp_path, monkeypatch):
    from webfetch.profiles.store import Cookie, Profile, ProfileStore, StorageState

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    token = app.login("ann")
    ProfileStore().save(Profile(name="club", hosts=["127.0.0.1"], state=StorageState(cookies=[
        Cookie(name="sid", value=token, domain="127.0.0.1", path="/", httpOnly=True)])))
    async with running_daemon(short_tmp / "a.sock", cache=NO_MEMORY) as h:
        signed_in = await h.fetch(app.url(), profile="club")
        assert MEMBER_TEXT in signed_in["content"] and not signed_in["cached"]
        anonymous = await h.fetch(app.url())
        assert MEMBER_TEXT not in anonymous["content"] and not anonymous["cached"]
    assert len(list(pages_dir(cache_home).iterdir())) == 2
    async with running_daemon(short_tmp / "b.sock", cache=NO_MEMORY) as h:
        anonymous = await h.fetch(app.url())
        assert anonymous["cached"] and MEMBER_TEXT not in anonymous["content"], anonymous
        signed_in = await h.fetch(app.url(), profile="club")
        assert signed_in["cached"] and MEMBER_TEXT in signed_in["content"], signed_in
    assert [t for _, path, t in app.hits if path == "/members"] == [token, None]  # one each, ever
    # the files hold what the login showed: 0600, and their names say nothing of URL or profile
    for p in pages_dir(cache_home).iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600 and "club" not in p.name and token.encode() not in \
            p.read_bytes()
