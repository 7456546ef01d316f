"""Forcing one's own app's states in browse, with real Chromium on a local app (tests/support/states_app.py):
the network off (`offline`), each checked by what the page shows and by what its server got."""

from __future__ import annotations

import json

import pytest
import trio

from .support.states_app import StatesApp
from .test_browse import Browser, ref


@pytest.fixture
def peer():
    with StatesApp("localhost") as p:  # a second origin: `localhost` is not 127.0.0.1 to a browser
        yield p


@pytest.fixture
def app(peer):
    with StatesApp("127.0.0.1", peer=f"http://localhost:{peer.port}") as a:
        yield a


async def opened(daemon, app: StatesApp) -> tuple[Browser, dict]:
    b = Browser(await daemon.client())
    await b.ok("open", url=app.url("/"))
    await b.ok("wait", text="3 items")
    return b, await b.ok("snapshot", mode="full")


async def test_offline_shows_the_apps_offline_banner_and_its_requests_never_leave(daemon, app):
    b, page = await opened(daemon, app)
    assert "You are offline" not in page["snapshot"]
    off = await b.ok("offline")
    assert off["value"] == "offline"
    assert "You are offline" in off["snapshot"], off  # the page's own `offline` event showed its banner
    assert off["snapshot"].splitlines()[0].endswith(" [forced: offline]"), off["snapshot"]
    assert off["forced"] == "offline"
    before = len(app.hits("/api/items"))
    await b.ok("click", ref=ref(page["snapshot"], '- button "Reload items"'))
    shown = await b.ok("wait", text="no answer")
    assert "You are offline" in (await b.ok("snapshot", mode="full"))["snapshot"], shown
    assert len(app.hits("/api/items")) == before, "no request reached the server while offline"
    on = await b.ok("offline", enabled=False)
    assert on["value"] == "online"
    back = await b.ok("snapshot")
    assert "forced" not in back["snapshot"].splitlines()[0] and "forced" not in back, back
    await b.ok("click", ref=ref(page["snapshot"], '- button "Reload items"'))
    await b.ok("wait", text="3 items")
    with trio.fail_after(5):
        while len(app.hits("/api/items")) == before:
            await trio.sleep(0.05)


async def reload_items(b: Browser, page: dict, until: str) -> dict:
    await b.ok("click", ref=ref(page["snapshot"], '- button "Reload items"'))
    await b.ok("wait", text=until)
    return await b.ok("snapshot", mode="full")


async def test_a_500_forced_by_a_route_shows_the_apps_error_state_and_the_server_sees_no_request(
        daemon, app, tmp_path):
    b, page = await opened(daemon, app)
    before = len(app.hits("/api/items"))
    set_ = await b.ok("route", url="*/api/items*", status=500, body='{"error": "database is down"}',
                      headers={"Content-Type": "application/json"})
    assert set_["content"].startswith("route 1: */api/items* → 500, 29 B application/json"), set_
    shown = await reload_items(b, page, "Error: the server answered 500")
    assert "[forced: 1 route]" in shown["snapshot"].splitlines()[0], shown["snapshot"]
    assert len(app.hits("/api/items")) == before, "the route answered: the server saw no request"
    # the network log and the HAR say who answered
    [routed] = [r for r in (await b.ok("network", find="/api/items"))["requests"] if r.get("routed")]
    assert routed["status"] == 500 and routed["routed"] == "route 1: 500, 29 B application/json", routed
    listed = (await b.ok("network", find="/api/items"))["content"]
    assert "(routed: route 1: 500, 29 B application/json)" in listed, listed
    har = await b.ok("har", path=str(tmp_path / "s.har"))
    entries = json.loads((tmp_path / "s.har").read_text())["log"]["entries"]
    assert [e["_routed"] for e in entries if "_routed" in e] == ["route 1: 500, 29 B application/json"], har


async def test_a_route_that_aborts_shows_the_apps_offline_banner(daemon, app):
    b, page = await opened(daemon, app)
    before = len(app.hits("/api/items"))
    await b.ok("route", url=app.url("/api/*"), abort="InternetDisconnected")
    shown = await reload_items(b, page, "no answer")
    assert "You are offline" in shown["snapshot"], shown["snapshot"]
    assert len(app.hits("/api/items")) == before
    [failed] = (await b.ok("network", find="/api/items", status_class="failed"))["requests"]
    assert failed["failure"] == "net::ERR_INTERNET_DISCONNECTED" and failed["routed"] == (
        "route 1: abort InternetDisconnected"), failed


async def test_a_route_given_times_answers_that_many_requests_then_the_server_does(daemon, app):
    b, page = await opened(daemon, app)
    before = len(app.hits("/api/items"))
    await b.ok("route", url="*/api/items", status=503, times=1)
    await reload_items(b, page, "Error: the server answered 503")
    assert len(app.hits("/api/items")) == before
    assert (await b.ok("routes"))["content"] == "no routes set: every request goes to its server"
    await reload_items(b, page, "3 items")
    assert len(app.hits("/api/items")) == before + 1


async def test_routes_are_listed_replaced_by_pattern_removed_bounded_and_gone_with_the_session(daemon, app):
    b, _ = await opened(daemon, app)
    await b.ok("route", url="*/a", status=404)
    await b.ok("route", url="*/b", abort="TimedOut", times=2)
    await b.ok("route", url="*/a", status=410)  # the same pattern: replaces the first
    assert (await b.ok("routes"))["content"] == (
        "2 routes, newest last (the newest matching one answers):\n"
        "route 2: */b → abort TimedOut (answered 0, 2 more times)\n"
        "route 3: */a → 410, 0 B (answered 0)")
    gone = await b.ok("unroute", url="*/b")
    assert gone["content"] == "removed route 2: */b → abort TimedOut (answered 0, 2 more times)\n1 route left"
    for n in range(49):
        await b.ok("route", url=f"*/n{n}", status=500)
    refused = await b("route", url="*/one-too-many", status=500)
    assert refused["type"] == "error" and refused["code"] == "bad_request", refused
    assert "50 routes are set in this session" in refused["message"]
    await b.ok("route", url="*/n3", status=502)  # a pattern routed already is no 51st
    assert (await b.ok("unroute"))["content"].endswith("\n0 routes left")
    await b.ok("route", url="*/kept-until-close", status=500)
    await b.ok("close")
    assert (await b.ok("route", url="*/after", status=500))["content"].endswith("(1 route set)")


async def test_a_routes_pattern_and_body_file_are_checked(daemon, app, tmp_path):
    b, _ = await opened(daemon, app)
    for bad in ({"url": "/api/items", "status": 500}, {"url": "*/x"}, {"url": "*/x", "status": 500,
                                                                         "abort": "Failed"},
                {"url": "*/x", "headers": {"Bad Name": "v"}}, {"url": "*/x", "headers": {"X": "a\r\nB: c"}}):
        r = await b("route", **bad)
        assert r["type"] == "error" and r["code"] == "bad_request", (bad, r)
    secret = tmp_path / ".env"
    secret.write_text("TOKEN=hunter2")
    r = await b("route", url="*/x", body_file=str(secret), cwd=str(tmp_path))
    assert r["type"] == "error" and r["code"] == "upload_refused", r
    (tmp_path / "items.json").write_text('["from", "a", "file"]')
    r = await b.ok("route", url="*/api/items", body_file="items.json", cwd=str(tmp_path))
    assert r["content"].startswith("route 1: */api/items → 200, 21 B application/json"), r


async def test_geolocation_timezone_locale_and_media_are_what_the_pages_own_script_reads(daemon, app):
    b = Browser(await daemon.client())
    assert (await b.ok("emulate"))["content"] == "nothing emulated: the pages see the browser as it is"
    set_ = await b.ok("emulate", latitude=48.8566, longitude=2.3522, timezone="Asia/Tokyo", locale="fr-FR",
                      color_scheme="dark", reduced_motion=True)  # before the first open: its page sees it all
    assert set_["content"] == ("emulating:\ngeolocation 48.8566,2.3522\nlocale fr-FR\ntimezone Asia/Tokyo\n"
                               "color scheme dark\nreduced motion"), set_
    page = await b.ok("open", url=app.url("/where"))
    first, *_ = page["snapshot"].splitlines()
    assert first.endswith(" [forced: geolocation 48.8566,2.3522; locale fr-FR; timezone Asia/Tokyo; "
                          "color scheme dark; reduced motion]"), first
    facts = (await b.ok("read"))["content"]
    for fact in ("zone=Asia/Tokyo", "language=fr-FR", "languages=fr-FR", "intl=fr-FR", "number=1x234,5",
                 "dark=true", "reduced=true"):
        assert fact in facts, (fact, facts)
    assert app.hits("/where")[-1]["accept-language"].startswith("fr-FR"), app.hits("/where")
    await b.ok("click", ref=ref(page["snapshot"], '- button "Locate me"'))
    await b.ok("wait", text="position: 48.8566,2.3522")  # asked and answered: the permission was granted
    # reset: the next document is the browser's own again
    await b.ok("emulate", reset=True)
    reloaded = await b.ok("nav", to="reload")
    assert "forced" not in reloaded["snapshot"].splitlines()[0]
    facts = (await b.ok("read"))["content"]
    assert "language=fr-FR" not in facts and "zone=Asia/Tokyo" not in facts and "dark=false" in facts, facts


async def test_extra_headers_reach_the_apps_origin_only_and_never_carry_credentials(daemon, app, peer):
    b, page = await opened(daemon, app)
    for secret in ("Cookie", "authorization"):
        r = await b("emulate", headers={secret: "x"})
        assert r["type"] == "error" and r["code"] == "bad_request" and "profile" in r["message"], r
    set_ = await b.ok("emulate", headers={"X-Test-Flag": "on", "X-Api-Key": "k-123"}, user_agent="StatesTest/1.0")
    assert set_["content"].startswith(
        f"emulating:\nuser agent 'StatesTest/1.0'\nheader X-Test-Flag: on (to {app.url('')})\n"
        f"header X-Api-Key: <redacted> (to {app.url('')})"), set_["content"]  # a secret-like value is masked
    await reload_items(b, page, "3 items")
    got = app.hits("/api/items")[-1]
    assert got["x-test-flag"] == "on" and got["x-api-key"] == "k-123" and got["user-agent"] == "StatesTest/1.0"
    await b.ok("click", ref=ref(page["snapshot"], '- button "Ask the peer"'))
    await b.ok("wait", text="peer: pong")
    [ping] = peer.hits("/api/ping")
    assert "x-test-flag" not in ping and "x-api-key" not in ping, ping  # the second origin never got them
    first = (await b.ok("snapshot"))["snapshot"].splitlines()[0]
    assert first.endswith(f" [forced: user agent; headers X-Test-Flag, X-Api-Key to {app.url('')}]"), first


async def test_a_route_answers_a_document_too_and_open_tells_its_status(daemon, app):
    b = Browser(await daemon.client())
    await b.ok("route", url="*/where", status=503, body="<title>Down</title><h1>Down for maintenance</h1>",
               headers={"Content-Type": "text/html"})  # set before the first open
    page = await b.ok("open", url=app.url("/where"))
    assert page["snapshot"].startswith(f"[t1] Down — {app.url('/where')} [forced: 1 route]\n"), page
    assert 'heading "Down for maintenance"' in page["snapshot"] and page["status"] == 503, page
    assert app.hits("/where") == []



def test_emulate_refuses_what_is_not_a_place_a_locale_or_an_origin():
    from webfetch.browse.emulation import Emulation, requested
    from webfetch.errors import BadRequest
    from webfetch.protocol import BrowseRequest

    def asked(**fields) -> Emulation:
        return requested(Emulation(), BrowseRequest(session="s", action="emulate", **fields), "http://127.0.0.1:3000/a")

    for bad, says in (({"timezone": "Mars/Olympus"}, "not a time zone"), ({"timezone": "../etc/passwd"}, "time zone"),
                      ({"locale": "fr_FR.UTF-8"}, "not a locale"), ({"latitude": 1.0}, "together"),
                      ({"headers": {"X": "1"}, "header_origins": ["ftp://h"]}, "not an origin"),
                      ({"headers": {"Proxy-Authorization": "x"}}, "profile")):
        with pytest.raises(BadRequest, match=says):
            asked(**bad)
    assert asked(headers={"X-A": "1"}).header_origins == ("http://127.0.0.1:3000",)  # the page's own by default
    everywhere = asked(headers={"X-A": "1"}, header_origins=["*"])
    assert everywhere.headers_for("https://elsewhere.example/") == (("X-A", "1"),)
    assert asked(headers={"X-A": "1"}).headers_for("http://localhost:3000/") == ()
    with pytest.raises(BadRequest, match="no http"):
        requested(Emulation(), BrowseRequest(session="s", action="emulate", headers={"X": "1"}), "about:blank")
