"""A browse session's downloads: the directory they are saved in, the names they get, the size cap, and what
the agent is told of each.

Chrome saves a session's downloads in the session's own directory under their guid (`allowAndName`, set by
`Chrome.open_context`), so no name a server chose ever reaches the file system while the bytes arrive. The
Page.downloadProgress events of the tab that started one say how far it is: one over `fetch.max_bytes` is
cancelled and its partial file removed; a finished one is renamed to its sanitised name, never over an
earlier file.

Where: `browse.downloads_dir`, by default `$XDG_CACHE_HOME/webfetch/downloads` (~/.cache/...), one
directory per session (0700, files 0600). The cache directory, not the user's XDG download directory: these
files are what pages sent an agent, not what the user chose to keep, and a daemon under systemd has no
`user-dirs.dirs` to read; the cache is ours to fill and the user's to empty.

In the person's own browser (`directory` None) their browser saves a download where its own setting says,
under a name of its choosing: webfetch does not change that setting (it is theirs, for every tab), so it
only follows the download, stops one over the cap, and says it was saved there."""

from __future__ import annotations

import logging
import mimetypes
import os
import stat
import tempfile
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import trio

from ..chrome.browser import BrowserContext
from ..chrome.cdp import CDPClosed, CDPError
from ..config import BrowseConfig, cache_home
from ..errors import WebfetchError
from ..protocol import Download

log = logging.getLogger("webfetch.browse")

NAME_MAX_BYTES = 120        # a saved file's name, in UTF-8 bytes (file systems allow 255)
SUFFIX_MAX = 16             # the extension kept when a long name is cut
State = Literal["saved", "too_large", "failed", "in_progress"]


def downloads_root(config: BrowseConfig) -> Path:
    """Where sessions' download directories are made."""
    if config.downloads_dir:
        return Path(os.path.expanduser(config.downloads_dir))
    return cache_home() / "webfetch" / "downloads"


def session_directory(config: BrowseConfig, session: str) -> Path:
    """A new directory (0700) for one session's downloads, named after it and unique."""
    root = downloads_root(config)
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"{safe_filename(session)[:40]}-", dir=root))
    except OSError as e:
        raise WebfetchError(f"cannot make a directory for the session's downloads under {root} ({e}); set "
                            f"browse.downloads_dir in the config to a writable directory") from None


def safe_filename(name: str) -> str:
    """A name a server suggested, made safe to save under: its last path component only, no control or
    format characters (a right-to-left override hides an extension), no leading dot (a dotfile), at most
    NAME_MAX_BYTES bytes with its extension kept; "download" when nothing is left."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if unicodedata.category(c)[0] != "C")
    name = name.strip().lstrip(".").strip() or "download"
    if len(name.encode()) > NAME_MAX_BYTES:
        stem, dot, suffix = name.rpartition(".")
        suffix = f".{suffix}" if dot and stem and len(suffix) < SUFFIX_MAX else ""
        stem = name[:len(name) - len(suffix)]
        while len((stem + suffix).encode()) > NAME_MAX_BYTES:
            stem = stem[:-1]
        name = stem.rstrip() + suffix
    return name


@dataclass
class DownloadRecord:
    """One download as it goes: started by a tab's page, saved, stopped at the cap, or failed."""

    guid: str
    url: str
    filename: str           # sanitised: the name it is saved under, unless taken (then "name (2).ext")
    mime: str
    state: State = "in_progress"
    path: str | None = None
    size: int | None = None
    message: str | None = None
    ended: bool = False     # Chrome's last event for it came (completed or canceled) and its file is settled
    reported: bool = False  # a result has told it in its final state

    @property
    def final(self) -> bool:
        return self.ended

    def public(self) -> Download:
        return Download(url=self.url, filename=self.filename, state=self.state, path=self.path, size=self.size,
                        mime=self.mime, message=self.message)


# What one session may save in all, in caps (fetch.max_bytes): a page can start downloads from every frame
# it makes, each under the cap, and must not fill the disk that way.
SESSION_CAPS = 8


class Downloads:
    """A session's downloads: its tabs' pumps report each one's start (`began`) and progress (`progress`)."""

    def __init__(self, directory: Path | None, max_bytes: int, context: BrowserContext) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self._context = context
        self._records: dict[str, DownloadRecord] = {}
        self._changed = trio.Event()

    def began(self, p: dict[str, Any], content_type: str | None) -> DownloadRecord:
        """Page.downloadWillBegin: a record, in progress."""
        filename = safe_filename(p.get("suggestedFilename") or "")
        mime = (content_type or "").split(";", 1)[0].strip().lower() or mimetypes.guess_type(filename)[0]
        record = DownloadRecord(guid=p["guid"], url=p.get("url", ""), filename=filename,
                                mime=mime or "application/octet-stream")
        self._records[record.guid] = record
        self._pulse()
        return record

    def progress(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        """Page.downloadProgress: stop one past the cap, name one that finished, clean up one that did not."""
        record = self._records.get(p.get("guid", ""))
        if record is None or record.ended:
            return
        received = int(p.get("receivedBytes") or 0)
        total = int(p.get("totalBytes") or 0)
        state = p.get("state")
        limit = min(self.max_bytes, self._session_left())
        if state == "inProgress":
            if record.state == "in_progress" and max(received, total) > limit:
                self._too_large(record, max(received, total))
                nursery.start_soon(self._cancel, record.guid)
            return
        if state == "completed" and record.state == "in_progress" and received <= limit:
            if self.directory is None:
                self._saved_by_the_browser(record, received)
            else:
                self._save(record)
        elif state == "completed" and record.state == "in_progress":
            self._too_large(record, received)
        elif record.state == "in_progress":
            record.state, record.size = "failed", received
            record.message = "the download was cancelled or failed before it finished; nothing was saved"
        record.ended = True
        self._remove_partials()
        self._pulse()

    async def wait_final(self, records: list[DownloadRecord], timeout_s: float) -> None:
        """Until every one of `records` is saved, stopped or failed, or `timeout_s` passed."""
        with trio.move_on_after(timeout_s):
            while not all(r.final for r in records):
                await self._changed.wait()

    def aclose(self) -> None:
        """The session ended: a download Chrome finished whose `completed` event had not been handled yet
        is saved under its name as any other (the session's event pumps stop before its context goes, so
        one finishing then is never told); the partial files of downloads still going are removed, and the
        directory too if nothing was saved in it."""
        if self.directory is None:
            return   # the person's browser keeps its files where it keeps them
        for record in self._records.values():
            if record.state == "in_progress" and self._finished_on_disk(record):
                self._save(record)
                log.info("browse: a download that finished as its session closed was kept: %s", record.path)
            if record.state != "saved":
                self._remove_partial(record.guid)
        try:
            self.directory.rmdir()
        except OSError:
            pass  # it holds downloads: they are the user's now

    def _finished_on_disk(self, record: DownloadRecord) -> bool:
        """Whether Chrome finished `record`'s file: it writes a download to `<guid>.crdownload` and renames
        it to `<guid>` once every byte is there. Not when it is over the cap (then it is removed)."""
        assert self.directory is not None
        try:
            st = (self.directory / record.guid).lstat()
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_size <= min(self.max_bytes, self._session_left())

    def _session_left(self) -> int:
        return SESSION_CAPS * self.max_bytes - sum(r.size or 0 for r in self._records.values() if r.state == "saved")

    def _too_large(self, record: DownloadRecord, size: int) -> None:
        record.state, record.size = "too_large", size
        if size <= self.max_bytes:
            record.message = (f"the session's downloads would pass their bound of {SESSION_CAPS * self.max_bytes} "
                              f"bytes ({SESSION_CAPS} × fetch.max_bytes): stopped at {size} bytes and the partial "
                              f"file removed; close the session to start afresh")
            return
        record.message = (f"larger than the size cap of {self.max_bytes} bytes (fetch.max_bytes): stopped at "
                          f"{size} bytes and the partial file removed")

    @staticmethod
    def _saved_by_the_browser(record: DownloadRecord, size: int) -> None:
        record.state, record.size = "saved", size
        record.message = ("saved by your browser where it saves downloads (its own setting, which webfetch does not "
                          "change), under a name of its choosing")

    def _save(self, record: DownloadRecord) -> None:
        """The finished file, from its guid to its own name: never over an earlier file (a hard link fails
        where the name is taken), readable by the user alone."""
        assert self.directory is not None
        src = self.directory / record.guid
        stem, dot, suffix = record.filename.rpartition(".")
        if not dot or not stem:
            stem, suffix = record.filename, ""
        else:
            suffix = "." + suffix
        for n in range(1, 1000):
            name = record.filename if n == 1 else f"{stem} ({n}){suffix}"
            try:
                os.link(src, self.directory / name)
            except FileExistsError:
                continue
            except OSError as e:
                record.state, record.message = "failed", f"could not save the file: {e}"
                return
            os.unlink(src)
            dest = self.directory / name
            dest.chmod(0o600)
            record.state, record.filename, record.path = "saved", name, str(dest)
            record.size = dest.stat().st_size
            return
        record.state, record.message = "failed", f"{record.filename} and its 999 numbered variants are taken"

    def _remove_partials(self) -> None:
        """The files of every download that ended unsaved, not only the last: Chrome can write a cancelled
        download's file (empty, under its guid) after the cancel was reported."""
        if self.directory is None:
            return   # the person's browser removes what it cancelled
        for record in self._records.values():
            if record.ended and record.state != "saved":
                self._remove_partial(record.guid)

    def _remove_partial(self, guid: str) -> None:
        if self.directory is None:
            return
        for leftover in self.directory.glob(f"{guid}*"):
            leftover.unlink(missing_ok=True)

    async def _cancel(self, guid: str) -> None:
        try:
            await self._context.cancel_download(guid)
        except (CDPError, CDPClosed) as e:
            log.debug("could not cancel download %s: %s", guid, e)  # it ended meanwhile: progress cleans up

    def _pulse(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


def as_download(p: dict[str, Any], attachment: bool) -> tuple[str, dict[str, Any]]:
    """The CDP command that hands a paused document response (Fetch.requestPaused `p`) to Chrome's download
    manager: as it is when it is an attachment, else made one (a type Chrome would show, an image or a
    PDF, is saved too)."""
    if attachment:
        return "Fetch.continueRequest", {"requestId": p["requestId"]}
    headers = [h for h in p.get("responseHeaders") or [] if h["name"].lower() != "content-disposition"]
    return "Fetch.continueResponse", {
        "requestId": p["requestId"], "responseCode": p["responseStatusCode"],
        "responseHeaders": headers + [{"name": "Content-Disposition", "value": "attachment"}]}


class TabDownloads:
    """One tab's downloads: the document responses its pump handed to Chrome's download manager, and each
    download Chrome then reported, saved by the session's `Downloads`."""

    def __init__(self, saver: Downloads | None) -> None:
        self._saver = saver             # the session's: where the page's downloads go, and the size cap
        self._records: list[DownloadRecord] = []
        self._types: dict[str, str] = {}    # a download's URL -> its Content-Type, seen at the response
        self._responses = 0                 # document responses handed to the download manager

    @property
    def records(self) -> Sequence[DownloadRecord]:
        """Every download the page started, in order."""
        return self._records

    @property
    def responses(self) -> int:
        """Document responses turned into downloads so far (each becomes one of `records` when Chrome
        reports it began)."""
        return self._responses

    def handed_over(self, url: str, ctype: str) -> None:
        """The pump handed a document response for `url` (of Content-Type `ctype`) to the download manager."""
        self._types[url] = ctype
        self._responses += 1

    def began(self, p: dict[str, Any]) -> None:
        """Page.downloadWillBegin."""
        if self._saver is not None:  # else the context denies downloads and none begins
            self._records.append(self._saver.began(p, self._types.get(p.get("url", ""))))

    def progress(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        """Page.downloadProgress."""
        if self._saver is not None:
            self._saver.progress(p, nursery)

    def unreported(self) -> list[DownloadRecord]:
        """The downloads no result has told in their final state yet (one may begin after the result of the
        action that started it went out: a link with `download`, a file a script made)."""
        return [d for d in self._records if not d.reported]

    def take(self) -> list[Download]:
        """The downloads for a result: those not told yet, each counted as told once it has ended."""
        told = self.unreported()
        for d in told:
            d.reported = d.final
        return [d.public() for d in told]
