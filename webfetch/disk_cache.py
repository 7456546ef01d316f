"""Pages kept on disk, so that a restarted daemon (a crawl resumed, a batch run again) is served from there
and not from the network: one file per cache key under $XDG_CACHE_HOME/webfetch/pages, bounded in bytes
(the least recently used go first), private (directories 0700, files 0600: a page read with a profile holds
what the login shows).

A file is MAGIC, a BLAKE2b digest of the rest, and the msgpack of a `StoredPage`. It is written to a
temporary file and renamed over the old one, so a reader sees the old entry or the new one, never half of
one. It is not fsynced: this is a cache, a crash costs a refetch, and an fsync per page would cost every
miss a disk flush; a file torn by a crash (or cut short, or damaged since) fails its digest and is
deleted and logged, never served. The memory cache (cache.py) stays in front: a hit never reads here.

Blocking file work runs in trio's worker threads; the index of files (name → size, last use) is shared
with them under a lock and recounted from the directory at every sweep."""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec
import trio

from .config import cache_home

log = logging.getLogger("webfetch.cache")

# The file format; a file of another version (or none) is dropped as damaged, and the page loaded again.
MAGIC = b"webfetch page 1\n"
DIGEST_BYTES = 16
NAME_CHARS = 64                  # a file's name: the sha256 of its key, in hex
TMP_SUFFIX = ".tmp"
STALE_TMP_S = 3600.0             # a temporary file this old is a crashed write's leftover


class StoredPage(msgspec.Struct, array_like=True, frozen=True):
    key: str                     # the cache key (URL and profile): the file's name is its digest; this checks it
    stored_at: float             # Unix time the page was loaded, or last revalidated with the server
    page: bytes                  # the page as the memory cache holds it (pipeline.pack_page)


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(StoredPage).decode


class Damaged(Exception):
    """An entry that must not be served: why, in a few words."""


def encode_entry(entry: StoredPage) -> bytes:
    body = _encode(entry)
    return MAGIC + hashlib.blake2b(body, digest_size=DIGEST_BYTES).digest() + body


def decode_entry(data: bytes) -> StoredPage:
    if not data.startswith(MAGIC):
        raise Damaged("it is not a page file of this webfetch version")
    digest, body = data[len(MAGIC):len(MAGIC) + DIGEST_BYTES], data[len(MAGIC) + DIGEST_BYTES:]
    if hashlib.blake2b(body, digest_size=DIGEST_BYTES).digest() != digest:
        raise Damaged("its checksum does not match: torn by a crash, cut short or damaged")
    try:
        return _decode(body)
    except msgspec.DecodeError as e:
        raise Damaged(f"it does not decode ({e})") from None


def read_key(path: str) -> str | None:
    """The cache key a page file holds, from its head alone (the msgpack array `StoredPage` starts with
    the key's string); None when the file is not one of ours or cannot be read. The digest is not checked:
    this only chooses files to delete."""
    start = len(MAGIC) + DIGEST_BYTES
    try:
        with open(path, "rb") as f:
            head = f.read(start + 1 + 5)
            body = head[start:]
            if not head.startswith(MAGIC) or body[:1] != b"\x93":  # a fixarray of StoredPage's three fields
                return None
            if len(body) > 1 and 0xA0 <= body[1] <= 0xBF:
                length, at = body[1] & 0x1F, 2
            else:
                width = {b"\xd9": 1, b"\xda": 2, b"\xdb": 4}.get(body[1:2])
                if width is None:
                    return None
                length, at = int.from_bytes(body[2:2 + width], "big"), 2 + width
            f.seek(start + at)
            raw = f.read(length)  # at most the file's size
    except OSError:
        return None
    try:
        return raw.decode() if len(raw) == length else None
    except UnicodeDecodeError:
        return None


def file_name(key: str) -> str:
    """A key's file: its digest, so the name says nothing of the URL or the profile."""
    return hashlib.sha256(key.encode()).hexdigest()


def default_directory() -> Path:
    return cache_home() / "webfetch" / "pages"


@dataclass
class _File:
    size: int
    used: float                  # last written or read (the file's mtime): the eviction order


class DiskCache:
    def __init__(self, directory: Path | None, max_bytes: int, sweep_s: float = 300.0) -> None:
        self.directory = directory  # None: nothing is kept on disk
        self.max_bytes = max_bytes  # 0: nothing is kept either
        self.sweep_s = sweep_s
        self.dropped = 0            # damaged entries found and deleted
        self._files: dict[str, _File] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._made = False
        self._wake = trio.Event()

    @property
    def enabled(self) -> bool:
        return self.directory is not None and self.max_bytes > 0

    def statistics(self) -> dict[str, int]:
        with self._lock:
            return {"disk_entries": len(self._files), "disk_bytes": self._bytes}

    def reconfigure(self, max_bytes: int, sweep_s: float) -> None:
        """New limits from a reload: a smaller bound evicts at the sweep this starts at once."""
        self.max_bytes, self.sweep_s = max_bytes, sweep_s
        self._wake.set()

    # --- the request's side -----------------------------------------------------------------------

    async def get(self, key: str) -> StoredPage | None:
        """The entry stored for `key`, whatever its age; None when there is none (or it was damaged)."""
        if not self.enabled:
            return None
        return await trio.to_thread.run_sync(self._read, key)

    async def put(self, key: str, page: bytes, stored_at: float | None = None) -> None:
        """Keep `page` for `key` (a failure to write is logged; the request goes on without it)."""
        if self.enabled:
            entry = StoredPage(key, time.time() if stored_at is None else stored_at, page)
            await trio.to_thread.run_sync(self._write, key, entry)

    async def forget(self, matching: Callable[[str], bool]) -> tuple[int, int]:
        """Delete the entries whose key `matching` accepts (a deleted profile's pages): (how many, bytes)."""
        if self.directory is None:
            return 0, 0
        return await trio.to_thread.run_sync(self.forget_now, matching)

    async def clear(self) -> tuple[int, int]:
        """Delete every entry: (how many, their bytes)."""
        if self.directory is None:
            return 0, 0
        return await trio.to_thread.run_sync(self.clear_now)

    # --- the sweeper ------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Count what is on disk at once (the daemon serves meanwhile), then every sweep_s: leftovers of
        crashed writes go, and the least recently used entries beyond the byte bound."""
        task_status.started()
        while True:
            if self.directory is not None:
                await trio.to_thread.run_sync(self.sweep)
            self._wake = trio.Event()
            with trio.move_on_after(self.sweep_s):
                await self._wake.wait()

    def sweep(self) -> None:
        assert self.directory is not None
        files: dict[str, _File] = {}
        try:
            with os.scandir(self.directory) as entries:
                for e in entries:
                    self._sweep_one(e, files)
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warning("cannot read the disk cache %s: %s", self.directory, e.strerror)
            return
        with self._lock:
            self._files, self._bytes = files, sum(f.size for f in files.values())
            gone = self._evict()
        if gone:
            log.info("disk cache sweep evicted %d pages (%d left, %d bytes)", gone, len(files), self._bytes)

    def _sweep_one(self, e: os.DirEntry[str], files: dict[str, _File]) -> None:
        try:
            st = e.stat(follow_symlinks=False)
            if len(e.name) == NAME_CHARS and e.is_file(follow_symlinks=False):
                files[e.name] = _File(st.st_size, st.st_mtime)
            elif e.name.endswith(TMP_SUFFIX) and time.time() - st.st_mtime > STALE_TMP_S:
                os.unlink(e.path)
        except OSError:
            pass  # gone meanwhile (another daemon on the same directory)

    # --- in worker threads ------------------------------------------------------------------------

    def _read(self, key: str) -> StoredPage | None:
        assert self.directory is not None
        name = file_name(key)
        path = self.directory / name
        try:
            with open(path, "rb") as f:
                data = f.read()
                os.utime(f.fileno())  # a read is a use: the least recently used go first
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("cannot read a page from the disk cache (%s): %s", name[:16], e.strerror)
            return None
        try:
            entry = decode_entry(data)
            if entry.key != key:
                raise Damaged("it holds another page")
        except Damaged as e:
            self._drop(name, str(e))
            return None
        with self._lock:
            if name in self._files:
                self._files[name].used = time.time()
        return entry

    def _drop(self, name: str, why: str) -> None:
        """A damaged entry: deleted, and said once (its name is a digest: no URL, no profile)."""
        assert self.directory is not None
        log.warning("dropped a damaged page from the disk cache (%s…): %s; it will be loaded again", name[:16], why)
        with self._lock:
            self.dropped += 1
        self._unlink(name)

    def _unlink(self, name: str) -> None:
        assert self.directory is not None
        try:
            os.unlink(self.directory / name)
        except OSError:
            pass
        with self._lock:
            f = self._files.pop(name, None)
            if f is not None:
                self._bytes -= f.size

    def _make_directory(self) -> None:
        """The pages' directory and its parent, 0700 even when they existed with looser modes."""
        assert self.directory is not None
        if self._made:
            return
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        for d in (self.directory.parent, self.directory):
            if d.stat().st_mode & 0o777 != 0o700:
                os.chmod(d, 0o700)
        self._made = True

    def _write(self, key: str, entry: StoredPage) -> None:
        assert self.directory is not None
        data = encode_entry(entry)
        if len(data) > self.max_bytes:
            return  # would evict everything else and still not fit
        name = file_name(key)
        tmp = self.directory / f".{name}.{secrets.token_hex(4)}{TMP_SUFFIX}"
        try:
            self._make_directory()
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self.directory / name)
        except OSError as e:
            log.warning("cannot keep a page in the disk cache %s: %s", self.directory, e.strerror)
            self._made = False  # the directory may be gone (a user emptied ~/.cache): made again next time
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return
        with self._lock:
            old = self._files.get(name)
            self._bytes += len(data) - (old.size if old else 0)
            self._files[name] = _File(len(data), time.time())
            self._evict()

    def _evict(self) -> int:
        """Under the lock: the least recently used entries go until the bound holds; how many went."""
        if self._bytes <= self.max_bytes:
            return 0
        assert self.directory is not None
        gone = 0
        for name, f in sorted(self._files.items(), key=lambda item: item[1].used):
            if self._bytes <= self.max_bytes:
                break
            try:
                os.unlink(self.directory / name)
            except FileNotFoundError:
                pass
            except OSError:
                continue
            del self._files[name]
            self._bytes -= f.size
            gone += 1
        return gone

    def forget_now(self, matching: Callable[[str], bool]) -> tuple[int, int]:
        """`forget`, blocking (for `webfetch profile delete` when no daemon runs). Only the head of each file
        is read, for its key: the pages of one profile go without reading the whole cache."""
        assert self.directory is not None
        count = size = 0
        try:
            with os.scandir(self.directory) as entries:
                names = [(e.name, e.path) for e in entries if len(e.name) == NAME_CHARS]
        except FileNotFoundError:
            return 0, 0
        for name, path in names:
            key = read_key(path)
            if key is None or not matching(key):
                continue
            try:
                bytes_ = os.stat(path, follow_symlinks=False).st_size
                os.unlink(path)
            except OSError:
                continue
            count, size = count + 1, size + bytes_
            with self._lock:
                f = self._files.pop(name, None)
                if f is not None:
                    self._bytes -= f.size
        return count, size

    def clear_now(self) -> tuple[int, int]:
        """`clear`, blocking (for `webfetch cache clear` when no daemon runs)."""
        assert self.directory is not None
        count = size = 0
        try:
            with os.scandir(self.directory) as entries:
                for e in entries:
                    if len(e.name) == NAME_CHARS or e.name.endswith(TMP_SUFFIX):
                        try:
                            bytes_ = e.stat(follow_symlinks=False).st_size
                            os.unlink(e.path)
                        except OSError:
                            continue
                        if len(e.name) == NAME_CHARS:
                            count, size = count + 1, size + bytes_
        except FileNotFoundError:
            pass
        with self._lock:
            self._files, self._bytes = {}, 0
        return count, size
