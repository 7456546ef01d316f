"""A download the agent's page starts in the person's own browser: their browser saves it where its own
setting says (webfetch changes no setting of theirs), and the result says it was saved there; nothing is
written to webfetch's downloads directory. (The person's browser as in tests/test_user_browser.py.)"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import trio

from webfetch.config import BrowseConfig

from .support.files_app import REPORT, FilesApp
from .test_browse import Browser, ref
from .test_user_browser import app, home, person, user_config  # noqa: F401 - fixtures (person signs in to app)

pytestmark = pytest.mark.chromium


@pytest.fixture
def files():
    server = FilesApp()
    yield server
    server.stop()


async def test_a_download_is_saved_where_the_persons_browser_saves_them(
        start_daemon, person, home, files, tmp_path: Path):  # noqa: F811 - fixtures of test_user_browser
    ours = tmp_path / "webfetch-downloads"
    config = user_config([f"127.0.0.1:{files.port}"])
    daemon = await start_daemon(msgspec.structs.replace(config, browse=BrowseConfig(downloads_dir=str(ours))))
    b = Browser(await daemon.client())
    page = await b.ok("open", url=files.url("/downloads"), browser="user")
    clicked = await b.ok("click", ref=ref(page["snapshot"], '- link "Report"'))
    assert clicked["page"]["url"] == files.url("/downloads")   # the tab stays on its page
    [d] = clicked["downloads"]
    assert d == {"url": files.url("/files/report.csv"), "filename": "report.csv", "state": "saved",
                 "size": len(REPORT), "mime": "text/csv",
                 "message": "saved by your browser where it saves downloads (its own setting, which webfetch does "
                            "not change), under a name of its choosing"}
    with trio.fail_after(10):   # the person's browser's own place: ~/Downloads for this Chromium
        while not (home / "Downloads" / "report.csv").exists():
            await trio.sleep(0.1)
    assert (home / "Downloads" / "report.csv").read_bytes() == REPORT
    await b.ok("close")
    assert not ours.exists() or not any(ours.rglob("*"))
