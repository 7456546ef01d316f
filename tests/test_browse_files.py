"""Upload and download in browse, with real Chromium on a local app (tests/support/files_app.py): an upload's
bytes checked on the server, every refusal of the upload rule (browse/uploads.py) with the session still
usable after it, downloads saved with their bytes checked, one over the size cap stopped with no partial
file left, and hostile file names sanitised. Then the two rules on their own (no browser)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio

from webfetch.browse.downloads import Downloads, safe_filename
from webfetch.browse.uploads import upload_path
from webfetch.config import BrowseConfig, FetchConfig
from webfetch.errors import BadRequest, FileNotFound, UploadRefused

from .support.client import run_cli
from .support.daemon import make_config
from .support.files_app import BIG, DATA, NOTES, REPORT, FilesApp
from .test_browse import Browser, ref

CAP = 200_000  # fetch.max_bytes in these tests: BIG is over it


@pytest.fixture
def app():
    a = FilesApp()
    yield a
    a.stop()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The client's working directory: a project with a file to upload, a dotfile, a dot-directory, and a
    symlink that leads out of it."""
    p = tmp_path / "project"
    (p / "docs").mkdir(parents=True)
    (p / "docs" / "report.bin").write_bytes(DATA)
    (p / "notes.txt").write_bytes(b"second file\n")
    (p / ".env").write_text("API_KEY=secret\n")
    (p / ".git").mkdir()
    (p / ".git" / "config").write_text("[core]\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_ed25519").write_text("PRIVATE KEY\n")
    (p / "innocent.txt").symlink_to(outside / "id_ed25519")
    return p


@pytest.fixture
def downloads(tmp_path: Path) -> Path:
    return tmp_path / "downloads"


@pytest.fixture
async def files_daemon(start_daemon, downloads: Path):
    return await start_daemon(make_config(fetch=FetchConfig(allow_private=True, max_bytes=CAP),
                                          browse=BrowseConfig(downloads_dir=str(downloads))))


async def test_an_upload_reaches_the_server_byte_for_byte(files_daemon, app: FilesApp, project: Path):
    b = Browser(await files_daemon.client())
    snap = (await b.ok("open", url=app.url("/upload")))["snapshot"]
    doc = ref(snap, '- button "Document"')
    got = await b.ok("upload", ref=doc, files=["docs/report.bin"], cwd=str(project))
    assert got["files"] == ["report.bin"]
    assert "chosen: report.bin" in (await b.ok("snapshot", mode="full"))["snapshot"]  # the page saw `change`
    # several files on a `multiple` input; an absolute path under the working directory
    more = await b.ok("upload", ref=ref(snap, '- button "Attachments"'),
                      files=[str(project / "notes.txt"), "docs/../docs/report.bin"], cwd=str(project))
    assert more["files"] == ["notes.txt", "report.bin"]
    # a label over a hidden input stands for the input (the snapshot shows it as a button)
    picture = await b.ok("upload", ref=ref(snap, '- button "Choose a picture"'), files=["notes.txt"],
                         cwd=str(project))
    assert picture["files"] == ["notes.txt"]
    await b.ok("click", ref=ref(snap, '- button "Send"'))
    [form] = app.uploads
    assert form["doc"] == [("report.bin", DATA)]
    assert form["more"] == [("notes.txt", b"second file\n"), ("report.bin", DATA)]
    assert form["picture"] == [("notes.txt", b"second file\n")]


async def test_each_refused_upload_says_why_and_the_session_stays_usable(files_daemon, app: FilesApp,
                                                                         project: Path, tmp_path: Path):
    b = Browser(await files_daemon.client())
    snap = (await b.ok("open", url=app.url("/upload")))["snapshot"]
    doc = ref(snap, '- button "Document"')

    async def refused(files: list[str], code: str, *words: str, ref_: str = doc) -> None:
        r = await b("upload", ref=ref_, files=files, cwd=str(project))
        assert r["type"] == "error" and r["code"] == code, r
        for w in words:
            assert w in r["message"], r["message"]

    await refused([str(tmp_path / "outside" / "id_ed25519")], "upload_refused", str(project), "browse.upload_roots")
    await refused(["../outside/id_ed25519"], "upload_refused", "outside")
    await refused(["innocent.txt"], "upload_refused", "outside")  # a symlink that leads out
    await refused([".env"], "upload_refused", "dotfile", "browse.upload_dotfiles")
    await refused([".git/config"], "upload_refused", ".git")
    await refused(["docs/missing.pdf"], "file_not_found", "docs/missing.pdf")
    await refused(["docs"], "upload_refused", "not a regular file")
    await refused(["notes.txt"], "not_file_input", "Title", ref_=ref(snap, '- textbox "Title"'))
    # one refused path of several sets none of them
    await refused(["notes.txt", ".env"], "upload_refused", ".env", ref_=ref(snap, '- button "Attachments"'))
    # the session goes on
    ok = await b.ok("upload", ref=doc, files=["notes.txt"], cwd=str(project))
    assert ok["files"] == ["notes.txt"]
    await b.ok("click", ref=ref(snap, '- button "Send"'))
    [form] = app.uploads
    assert form["doc"] == [("notes.txt", b"second file\n")] and form["more"] == [("", b"")]


async def told(b: Browser, result: dict[str, Any]) -> list[dict[str, Any]]:
    """The downloads `result` tells as ended, or, when it tells none yet, those the first later result does."""
    with trio.fail_after(30):
        while not [d for d in result.get("downloads") or [] if d["state"] != "in_progress"]:
            result = await b.ok("wait", ms=50)
    return [d for d in result["downloads"] if d["state"] != "in_progress"]


@pytest.mark.chromium
def test_webfetch_browse_uploads_a_path_relative_to_where_it_is_typed(short_tmp: Path, app: FilesApp,
                                                                      project: Path):
    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n[server]\nidle_exit_s = 3\n")
    env = {"WEBFETCH_SOCKET": str(short_tmp / "wf.sock"), "WEBFETCH_CONFIG": str(cfg)}

    def browse(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("browse", *args, "--session", "files", env=env, cwd=project / "docs")

    snap = browse("open", app.url("/upload")).stdout
    uploaded = browse("upload", ref(snap, '- button "Document"'), "report.bin")
    assert uploaded.returncode == 0 and "the file input holds: report.bin" in uploaded.stdout, uploaded.stderr
    outside = browse("upload", ref(snap, '- button "Document"'), "../../outside/id_ed25519")
    assert outside.returncode == 1 and outside.stderr.startswith("webfetch: upload_refused: ")
    assert str(project / "docs") in outside.stderr
    browse("click", ref(snap, '- button "Send"'))
    browse("close")
    assert app.uploads[0]["doc"] == [("report.bin", DATA)]


def _subdirectories(directory: Path) -> list[Path]:
    return list(directory.iterdir())


def _listing(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


async def test_downloads_are_saved_and_reported_with_their_bytes(files_daemon, app: FilesApp, downloads: Path):
    b = Browser(await files_daemon.client())
    page = await b.ok("open", url=app.url("/downloads"))
    snap = page["snapshot"]

    report = await b.ok("click", ref=ref(snap, '- link "Report"'))
    assert report["page"]["url"] == app.url("/downloads")  # the tab stays on its page
    [d] = report["downloads"]
    session_dir = Path(d["path"]).parent
    assert session_dir.parent == downloads and session_dir.name.startswith("s1-")
    assert d == {"url": app.url("/files/report.csv"), "filename": "report.csv", "state": "saved",
                 "path": str(session_dir / "report.csv"), "size": len(REPORT), "mime": "text/csv"}
    assert (session_dir / "report.csv").read_bytes() == REPORT
    assert (session_dir / "report.csv").stat().st_mode & 0o777 == 0o600
    assert session_dir.stat().st_mode & 0o777 == 0o700

    # a type that is not a page; a link with `download`; the same name again is not written over
    data = (await b.ok("click", ref=ref(snap, '- link "Data"')))["downloads"]
    assert [(x["filename"], x["size"], x["mime"]) for x in data] == [("data.bin", len(DATA),
                                                                      "application/octet-stream")]
    # Chrome tells a `download` link's file (a type it would show) only after the click's result may have gone:
    # a later result tells it then
    notes = await told(b, await b.ok("click", ref=ref(snap, '- link "Notes"')))
    assert [(x["filename"], x["state"], x["mime"]) for x in notes] == [("notes.txt", "saved", "text/plain")]
    again = (await b.ok("click", ref=ref(snap, '- link "Report"')))["downloads"]
    assert [x["filename"] for x in again] == ["report (2).csv"]
    # open on a download's address: saved, and the tab keeps its page
    opened = await b.ok("open", url=app.url("/files/data.bin"))
    assert opened["page"]["url"] == app.url("/downloads") and opened["downloads"][0]["filename"] == "data (2).bin"
    assert _listing(session_dir) == {"report.csv": REPORT, "data.bin": DATA, "notes.txt": NOTES,
                                     "report (2).csv": REPORT, "data (2).bin": DATA}
    await b.ok("close")
    assert _listing(session_dir)["report.csv"] == REPORT, "a session's downloads outlive it"


async def test_a_download_over_the_cap_is_stopped_and_its_partial_file_removed(files_daemon, app: FilesApp,
                                                                                downloads: Path):
    b = Browser(await files_daemon.client())
    snap = (await b.ok("open", url=app.url("/downloads")))["snapshot"]
    for link, url in (("Big file", "/files/big.bin"), ("Big stream", "/files/big-chunked.bin")):
        r = await b.ok("click", ref=ref(snap, f'- link "{link}"'))
        [d] = r["downloads"]
        assert d["state"] == "too_large" and d["url"] == app.url(url), d
        assert "path" not in d and f"{CAP} bytes (fetch.max_bytes)" in d["message"], d
        assert CAP < d["size"] <= BIG
    # the session goes on, and what it saves is only what fitted
    report = await b.ok("click", ref=ref(snap, '- link "Report"'))
    assert report["downloads"][0]["state"] == "saved"
    [session_dir] = _subdirectories(downloads)
    assert _listing(session_dir) == {"report.csv": REPORT}, "no partial file is left"


async def test_hostile_download_names_are_sanitised(files_daemon, app: FilesApp, downloads: Path):
    b = Browser(await files_daemon.client())
    snap = (await b.ok("open", url=app.url("/downloads")))["snapshot"]
    escape = (await b.ok("click", ref=ref(snap, '- link "Escape"')))["downloads"][0]
    dotfile = (await b.ok("click", ref=ref(snap, '- link "Dotfile"')))["downloads"][0]
    [session_dir] = _subdirectories(downloads)
    # Chrome's suggestion for "../../x" is "_.._x" (its separators replaced); ".bashrc" loses its dot here
    assert (escape["filename"], escape["path"]) == ("_.._x", str(session_dir / "_.._x"))
    assert (dotfile["filename"], dotfile["path"]) == ("bashrc", str(session_dir / "bashrc"))
    # nothing was written anywhere else: not beside the session's directory, not above it
    assert _listing(downloads.parent) == {f"downloads/{session_dir.name}/_.._x": b"escaped?",
                                          f"downloads/{session_dir.name}/bashrc": b"alias ls=rm"}


# --- the rules on their own ---------------------------------------------------------------------------

def test_the_upload_rule(tmp_path: Path, project: Path):
    config = BrowseConfig()
    assert upload_path("docs/report.bin", str(project), config) == str(project / "docs" / "report.bin")
    with pytest.raises(UploadRefused, match="browse.upload_roots"):
        upload_path(str(tmp_path / "outside" / "id_ed25519"), str(project), config)
    # a root in the config widens it; dotfiles when the config says so
    wider = BrowseConfig(upload_roots=[str(tmp_path / "outside")], upload_dotfiles=True)
    assert upload_path(str(tmp_path / "outside" / "id_ed25519"), str(project), wider).endswith("id_ed25519")
    assert upload_path(".env", str(project), wider) == str(project / ".env")
    # a working directory that is itself under a dot-directory is not a dotfile
    hidden_root = tmp_path / ".config" / "proj"
    hidden_root.mkdir(parents=True)
    (hidden_root / "a.txt").write_text("a")
    assert upload_path("a.txt", str(hidden_root), config) == str(hidden_root / "a.txt")
    with pytest.raises(UploadRefused, match="no directory is open to uploads"):
        upload_path(str(project / "notes.txt"), None, config)
    with pytest.raises(BadRequest, match="absolute path"):
        upload_path("notes.txt", None, BrowseConfig(upload_roots=[str(project)]))
    with pytest.raises(FileNotFound):
        upload_path("nope", str(project), config)
    # a relative root in the config is no root (it would be the daemon's own directory)
    with pytest.raises(UploadRefused, match="no directory is open"):
        upload_path(str(project / "notes.txt"), None, BrowseConfig(upload_roots=["project"]))

    # a hard link to a file outside (`ln ~/.ssh/id_ed25519 ./k`) is inside only by its name
    os.link(tmp_path / "outside" / "id_ed25519", project / "k")
    with pytest.raises(UploadRefused, match="other hard links"):
        upload_path("k", str(project), config)
    with pytest.raises(BadRequest, match="NUL"):
        upload_path("notes\0.txt", str(project), config)

def test_a_clients_working_directory_of_slash_or_home_opens_nothing(tmp_path: Path, monkeypatch):
    """An MCP host may start its servers in / or the home directory: as a root, that would open every file
    of the user's to a model a page talks to. Only browse.upload_roots, which the user writes, may be so broad."""
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "bank.txt").write_text("IBAN")
    monkeypatch.setenv("HOME", str(home))
    for cwd in ("/", str(home), str(tmp_path)):
        with pytest.raises(UploadRefused) as refused:
            upload_path(str(home / "Documents" / "bank.txt"), cwd, BrowseConfig())
        assert refused.value.message.startswith(
            f"no directory is open to uploads: the client's working directory ({cwd}) is / or your home "
            "directory, too broad to open to a page, and browse.upload_roots is empty"), refused.value.message
    # a project under the home directory is a root as before; the user may open the home in the config
    assert upload_path("bank.txt", str(home / "Documents"), BrowseConfig()) == str(home / "Documents" / "bank.txt")
    assert upload_path(str(home / "Documents" / "bank.txt"), "/", BrowseConfig(upload_roots=[str(home)]))


@pytest.mark.parametrize(("given", "saved"), [
    ("report.csv", "report.csv"), ("../../x", "x"), ("..\\..\\evil.exe", "evil.exe"), (".bashrc", "bashrc"),
    ("...", "download"), ("", "download"), ("a\x00b\x1fc\u202etxt.exe", "abctxt.exe"), ("/etc/passwd", "passwd"),
])
def test_download_names_are_made_safe(given: str, saved: str):
    assert safe_filename(given) == saved


def test_a_long_download_name_is_cut_and_keeps_its_extension():
    name = safe_filename("é" * 200 + ".tar.gz")
    assert name.endswith(".gz") and len(name.encode()) <= 120 and name.startswith("é")


# --- no swapped upload, no lost download (issue 34, item 10) -------------------------------------------------


def _upload_copies() -> list[Path]:
    """The private copy directories of this process's browse sessions (the daemon runs in the test's process)."""
    return sorted(Path(tempfile.gettempdir()).glob(f"webfetch-upload-{os.getpid()}-*"))


async def test_a_file_swapped_after_the_upload_is_not_what_the_form_sends(files_daemon, app: FilesApp,
                                                                          project: Path, tmp_path: Path):
    b = Browser(await files_daemon.client())
    snap = (await b.ok("open", url=app.url("/upload")))["snapshot"]
    before = set(_upload_copies())
    assert (await b.ok("upload", ref=ref(snap, '- button "Document"'), files=["docs/report.bin"],
                       cwd=str(project)))["files"] == ["report.bin"]
    # between the check and the submit, the checked path comes to name another file (its bytes are a secret's)
    (tmp_path / "outside" / "swap").write_bytes(b"PRIVATE KEY\n")
    os.replace(tmp_path / "outside" / "swap", project / "docs" / "report.bin")
    await b.ok("click", ref=ref(snap, '- button "Send"'))
    [form] = app.uploads
    assert form["doc"] == [("report.bin", DATA)], "the file as it was checked"
    [copies] = set(_upload_copies()) - before  # Chrome was handed a private copy, 0600 in a 0700 directory
    assert os.stat(copies).st_mode & 0o777 == 0o700
    [copy] = copies.rglob("report.bin")
    assert copy.stat().st_mode & 0o777 == 0o600 and copy.read_bytes() == DATA
    await b.ok("close")
    assert not copies.exists(), "the copies go with the session"


def test_a_file_replaced_between_the_check_and_the_copy_is_refused(tmp_path: Path, project: Path):
    from webfetch.browse.uploads import PrivateCopies, checked_upload

    path, checked = checked_upload("docs/report.bin", str(project), BrowseConfig())
    (project / "docs" / "other").write_bytes(b"not the checked file\n")
    os.replace(project / "docs" / "other", path)
    copies = PrivateCopies(tmp_path / "copies")
    with pytest.raises(UploadRefused, match="replaced by another file after it was checked"):
        copies.private_copy(path, checked)
    # a symlink put in its place is not followed
    path, checked = checked_upload("notes.txt", str(project), BrowseConfig())
    os.unlink(path)
    os.symlink(tmp_path / "outside" / "id_ed25519", path)
    with pytest.raises(UploadRefused, match="replaced by another file after it was checked"):
        copies.private_copy(path, checked)
    assert not [p for p in (tmp_path / "copies").rglob("*") if p.is_file()], "nothing was copied"


def test_a_download_chrome_finished_as_its_session_closed_is_kept(tmp_path: Path):
    """Chrome writes a download to `<guid>.crdownload` and renames it to `<guid>` when every byte is there,
    then reports it: a session that closes in between has its pumps stopped already, so the report is never
    handled. The finished file is kept under its name; one still going is removed."""
    directory = tmp_path / "session"
    directory.mkdir(mode=0o700)
    downloads = Downloads(directory, CAP, context=None)  # type: ignore[arg-type]  # only a cancel uses it
    downloads.began({"guid": "g-done", "url": "http://x/report.csv", "suggestedFilename": "report.csv"}, "text/csv")
    downloads.began({"guid": "g-going", "url": "http://x/big.bin", "suggestedFilename": "big.bin"}, None)
    downloads.began({"guid": "g-big", "url": "http://x/huge.bin", "suggestedFilename": "huge.bin"}, None)
    (directory / "g-done").write_bytes(REPORT)
    (directory / "g-going.crdownload").write_bytes(b"half of it")
    (directory / "g-big").write_bytes(b"x" * (CAP + 1))  # finished, but over the cap: not kept
    downloads.aclose()
    assert _listing(directory) == {"report.csv": REPORT}
    assert (directory / "report.csv").stat().st_mode & 0o777 == 0o600
