"""The user's own app in a browse session, with real Chromium: a dev server on a loopback port that only
browse sessions reach, and only when browse.allow_local lists it (fetch still refuses it); a host in
fetch.allow_hosts, which browse reaches on every port, as doctor says; a phone's viewport as the page sees it;
a full-page screenshot; the page saved as PDF."""

from __future__ import annotations

import base64
import json
import os
import struct
import urllib.parse

import pypdfium2
import pytest

from webfetch.config import BrowseConfig, BrowserConfig, FetchConfig
from webfetch.frontends.doctor import check_address_policy

from .support.daemon import make_config
from .support.site import Site
from .test_browse import Browser
from .test_hostile import CHROME_LNA_OFF

# What the page reports of the device it runs on, into its text and to its server
DEVICE_PAGE = """<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Dev app</title></head><body><h1>Dev app</h1><p id="device" style="word-break:break-all"></p><script>
function report() {
  const d = {width: innerWidth, touch: 'ontouchstart' in window, points: navigator.maxTouchPoints,
             dpr: devicePixelRatio, ua: navigator.userAgent};
  document.getElementById('device').textContent = 'device ' + JSON.stringify(d);
  fetch('/report?d=' + encodeURIComponent(JSON.stringify(d)));
}
report();
addEventListener('resize', report);
</script></body></html>"""
TALL_PAGE = """<!doctype html><html><head><title>Tall</title></head><body style="margin:0">
<div style="height:3000px;background:linear-gradient(#fff,#00f)"><h1>Top</h1></div><p>Bottom</p></body></html>"""


class DevServer(Site):
    """The user's dev server: a loopback port of its own, pages that tell what device they ran on."""

    def __init__(self) -> None:
        super().__init__()
        self.reports: list[dict] = []
        self.routes["/"] = lambda h: h.reply(200, "text/html; charset=utf-8", DEVICE_PAGE)
        self.routes["/tall"] = lambda h: h.reply(200, "text/html; charset=utf-8", TALL_PAGE)
        self.routes["/report"] = self._report

    def _report(self, h) -> None:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(h.path).query)
        self.reports.append(json.loads(query["d"][0]))
        h.reply(204, "text/plain", b"")


@pytest.fixture
def dev():
    servers = [DevServer().start(), DevServer().start()]
    yield servers
    for s in servers:
        s.stop()


@pytest.fixture
def no_outbound_proxy(monkeypatch):
    for name in ("https_proxy", "http_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def local_config(*allow_local: str):
    # fetch's defaults: loopback refused (the harness allows private addresses unless told otherwise)
    return make_config(fetch=FetchConfig(), browse=BrowseConfig(allow_local=list(allow_local)),
                       browser=BrowserConfig(args=CHROME_LNA_OFF))


async def test_a_listed_dev_server_port_is_reached_by_browse_only(start_daemon, dev, no_outbound_proxy):
    app, other = dev
    h = await start_daemon(local_config(f"127.0.0.1:{app.port}"))
    b = Browser(await h.client())
    page = await b.ok("open", url=app.url("/"))
    assert page["page"]["title"] == "Dev app" and page["page"]["url"] == app.url("/")  # plain http kept
    assert app.reports and app.reports[-1]["width"] == 1280, "the page's own fetch reached its server"

    # fetch of the very same URL: the policy refuses it, as before
    fetched = await h.fetch(app.url("/"))
    assert fetched["code"] == "blocked_url", fetched
    assert "fetch.allow_private" in fetched["message"] and "browse.allow_local" not in fetched["message"]

    # another loopback port in the same session: refused, and the error names the line to add
    hits = dict(other.hits)
    refused = await b("open", url=other.url("/"))
    assert refused["code"] == "blocked_url", refused
    assert (f'put `browse.allow_local = ["127.0.0.1:{app.port}", "127.0.0.1:{other.port}"]` in the [browse] table '
            f"of the config, then run `webfetch reload`") in refused["message"]
    # the listed port by another name: the host as typed is what is listed
    renamed = await b("open", url=f"http://localhost:{app.port}/")
    assert renamed["code"] == "blocked_url" and f'"localhost:{app.port}"' in renamed["message"], renamed
    assert other.hits == hits
    # the session is still usable
    assert (await b.ok("snapshot"))["page"]["tab"] == "t1"

    status = await h.request({"id": "s", "op": "status"})
    assert status["browse_allow_local"] == [f"127.0.0.1:{app.port}"]


async def test_localhost_listed_by_name_reaches_a_server_on_127_0_0_1(start_daemon, dev, no_outbound_proxy):
    app, _ = dev
    h = await start_daemon(local_config(f"localhost:{app.port}"))
    b = Browser(await h.client())
    # localhost resolves to ::1 and 127.0.0.1, both loopback; the server listens on the second only
    page = await b.ok("open", url=f"http://localhost:{app.port}/")
    assert page["page"]["title"] == "Dev app"
    assert (await b("open", url=app.url("/")))["code"] == "blocked_url"  # 127.0.0.1 is not how it is listed


async def test_a_host_in_fetch_allow_hosts_is_open_to_browse_on_every_port_as_doctor_says(start_daemon, dev,
                                                                                          no_outbound_proxy):
    # one address policy, told the same way by the policy, its error and doctor: fetch.allow_hosts is the
    # daemon's list, browse sessions included, on every port; browse.allow_local is the narrower grant
    app, other = dev
    config = make_config(fetch=FetchConfig(allow_hosts=["127.0.0.1"]), browser=BrowserConfig(args=CHROME_LNA_OFF))
    said = check_address_policy(config).detail
    assert said.startswith("every address that is not public refused (loopback, private, link-local, carrier-grade "
                           "NAT, cloud metadata, …); fetch, crawl and browse sessions may reach 127.0.0.1 on every "
                           "port (fetch.allow_hosts); browse sessions reach nothing more (browse.allow_local lists "
                           "none); "), said
    h = await start_daemon(config)
    b = Browser(await h.client())
    for server in (app, other):  # both ports, in the session (the page's own request too) and by fetch alike
        assert (await b.ok("open", url=server.url("/")))["page"]["title"] == "Dev app"
        assert server.reports and server.reports[-1]["width"] == 1280, "the page's own fetch reached its server"
        assert (await h.fetch(server.url("/")))["type"] == "result"

    # nothing more: another loopback address the list does not hold is refused, and the error names the
    # browse.allow_local line that would let only browse sessions reach only that port
    refused = await b("open", url=f"http://127.0.0.2:{app.port}/")
    assert refused["code"] == "blocked_url", refused
    assert refused["message"] == (
        f"127.0.0.2:{app.port} is a loopback address, which browse sessions reach only when the config lists it: to "
        f'let them reach this dev server, put `browse.allow_local = ["127.0.0.2:{app.port}"]` in the [browse] table '
        f"of the config, then run `webfetch reload` (fetch still refuses it)"), refused
    assert (await h.fetch(f"http://127.0.0.2:{app.port}/"))["code"] == "blocked_url"


async def test_a_phone_viewport_is_what_the_page_sees(daemon, dev):
    app, _ = dev
    b = Browser(await daemon.client())
    page = await b.ok("open", url=app.url("/"), mobile=True)
    assert page["viewport"] == {"width": 390, "height": 844, "scale": 3.0, "mobile": True}
    seen = app.reports[-1]
    assert (seen["width"], seen["touch"], seen["points"], seen["dpr"]) == (390, True, 5, 3), seen
    assert "Mobile" in seen["ua"] and "Android" in seen["ua"], seen["ua"]
    assert '"width":390' in (await b.ok("read"))["content"]

    # back to a desktop: the tab reloads, so touch and the user agent go with it
    desktop = await b.ok("viewport", mobile=False)
    assert desktop["change"] == "navigation" and desktop["viewport"]["mobile"] is False
    seen = app.reports[-1]
    assert (seen["width"], seen["touch"], seen["points"], seen["dpr"]) == (1280, False, 0, 1), seen
    assert "Mobile" not in seen["ua"]

    # a size alone: the page gets a resize, no reload
    narrow = await b.ok("viewport", width=700, height=900)
    assert narrow["change"] == "dom", narrow  # the page rewrote its text on the resize
    assert narrow["viewport"] == {"width": 700, "height": 900, "scale": 1.0, "mobile": False}
    assert app.reports[-1]["width"] == 700

    # a new tab of the session has the session's device
    await b.ok("open", url=app.url("/"), new_tab=True)
    assert app.reports[-1]["width"] == 700

    bad = await b("viewport")
    assert bad["code"] == "bad_request" and "width, height, mobile or scale" in bad["message"]


def png_size(image: str) -> tuple[int, int]:
    width, height = struct.unpack(">II", base64.b64decode(image)[16:24])
    return width, height


async def test_a_full_page_screenshot_is_taller_than_the_viewport(daemon, dev):
    app, _ = dev
    b = Browser(await daemon.client())
    await b.ok("open", url=app.url("/tall"))
    shot = await b.ok("screenshot")
    assert png_size(shot["image"]) == (1280, 800) == (shot["width"], shot["height"])
    whole = await b.ok("screenshot", full_page=True)
    width, height = png_size(whole["image"])
    assert width == 1280 and height >= 3000 and height == whole["height"], (width, height)


async def test_the_page_saved_as_pdf(daemon, dev, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    app, _ = dev
    b = Browser(await daemon.client())
    await b.ok("open", url=app.url("/tall"))
    target = tmp_path / "out" / "page.pdf"
    target.parent.mkdir()
    saved = await b.ok("pdf", path=str(target))
    assert saved["path"] == str(target) and saved["size"] == target.stat().st_size > 1000
    data = target.read_bytes()
    assert data.startswith(b"%PDF")
    doc = pypdfium2.PdfDocument(data)
    assert len(doc) >= 2, "3000 px of page print on more than one sheet"
    assert "Top" in doc[0].get_textpage().get_text_range()
    doc.close()
    assert target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["page.pdf"]  # no temporary file left

    # no path: a new file in the session's own directory
    default = await b.ok("pdf")
    directory, name = os.path.split(default["path"])
    assert os.path.dirname(directory) == str(tmp_path / "cache" / "webfetch" / "browse") and name.endswith(".pdf")
    assert (tmp_path / "cache" / "webfetch" / "browse" / directory / name).read_bytes().startswith(b"%PDF")
    assert os.stat(directory).st_mode & 0o777 == 0o700

    # bad paths: a clear error each, nothing written, the session usable
    for path, words in [("page.pdf", "must be absolute"), (str(tmp_path / "missing" / "p.pdf"), "does not exist"),
                        (str(tmp_path / "out" / "notes.txt"), "must end in .pdf"),
                        ("/proc/webfetch-test.pdf", "cannot write")]:
        bad = await b("pdf", path=path)
        assert bad["code"] == "bad_request" and words in bad["message"], (path, bad)
        assert "leave `path` out" in bad["message"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["page.pdf"]
    assert (await b.ok("snapshot"))["page"]["title"] == "Tall"


async def test_pdf_and_har_never_replace_a_file_unless_told_to(daemon, dev, tmp_path):
    app, _ = dev
    b = Browser(await daemon.client())
    await b.ok("open", url=app.url("/tall"))
    for action, suffix, magic in (("pdf", ".pdf", b"%PDF"), ("har", ".har", b"{")):
        mine = tmp_path / f"mine{suffix}"
        mine.write_bytes(b"the user's own file\n")
        link = tmp_path / f"link{suffix}"  # a dangling symlink is a name taken too: nothing is made where it points
        link.symlink_to(tmp_path / f"elsewhere{suffix}")
        for taken in (mine, link):
            refused = await b(action, path=str(taken))
            assert refused["code"] == "file_exists", refused
            assert refused["message"].startswith(f"{taken} exists already; pass `overwrite: true` to replace it (CLI: "
                                                 f"--overwrite), or give another path, or leave `path` out")
        assert mine.read_bytes() == b"the user's own file\n" and not (tmp_path / f"elsewhere{suffix}").exists()
        replaced = await b.ok(action, path=str(mine), overwrite=True)
        assert str(mine) in (replaced.get("path") or replaced["content"])
        assert mine.read_bytes().startswith(magic) and mine.stat().st_mode & 0o777 == 0o600
        new = tmp_path / f"new{suffix}"
        await b.ok(action, path=str(new))
        assert new.read_bytes().startswith(magic) and new.stat().st_mode & 0o777 == 0o600
    # no temporary file left beside them
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.har", "link.pdf", "mine.har", "mine.pdf", "new.har",
                                                          "new.pdf"]


def test_a_file_made_between_the_check_and_the_write_is_not_replaced(tmp_path):
    """`overwrite` false: the file is linked into its name, which fails when one got there meanwhile."""
    from webfetch.trust.private_files import write_file

    raced = tmp_path / "page.pdf"
    raced.write_bytes(b"made meanwhile\n")
    with pytest.raises(FileExistsError):
        write_file(raced, b"%PDF-1.7 ...", overwrite=False)
    assert raced.read_bytes() == b"made meanwhile\n" and os.listdir(tmp_path) == ["page.pdf"]
