"""The browse network, request and har actions with real Chromium on the local app (tests/support/browse_app.py):
an API answering 500 and a request the address policy refuses, both listed with why; one request's headers
(cookies and tokens redacted) and bodies; the session's traffic as a HAR 1.2 file; and the errors that leave
the session usable."""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
from typing import Any

import pytest
import trio

from webfetch.browse.network import NetworkLog, headers
from webfetch.config import BrowseConfig, BrowserConfig, FetchConfig

from .support.browse_app import PNG, SECRET_VALUES, App
from .support.daemon import make_config
from .test_browse import Browser, ref
from .test_hostile import CHROME_LNA_OFF, Blocked

SECRETS = ("cookie-secret-1", "token-secret-2", "cookie-secret-3")


@pytest.fixture
def app():
    a = App()
    yield a
    a.stop()


@pytest.fixture
def blocked():
    b = Blocked()
    yield b
    b.stop()


@pytest.fixture(autouse=True)
def no_outbound_proxy(monkeypatch):
    for name in ("https_proxy", "http_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


async def saved(start_daemon, app: App, blocked: Blocked, **browse: Any) -> Browser:
    """A session on the app's network page, its Save clicked: a 500, a refused request and a binary behind it."""
    h = await start_daemon(make_config(fetch=FetchConfig(allow_hosts=["127.0.0.1"]),
                                       browser=BrowserConfig(args=CHROME_LNA_OFF), browse=BrowseConfig(**browse)))
    b = Browser(await h.client())
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    page = await b.ok("open", url=app.url(f"/network?to={blocked.base}&down={down}"))
    await b.ok("click", ref=ref(page["snapshot"], '- button "Save"'))
    await b.ok("wait", text="saved: 500")  # the page's last step, after its three requests
    with trio.fail_after(30):  # the page has the 500's body; Chrome's loadingFinished may come a moment later
        while browse.get("network_log", True) and "time_ms" not in by_url(
                (await b.ok("network", find="/api/fail"))["requests"], "/api/fail"):
            await trio.sleep(0.05)
    return b


def by_url(requests: list[dict[str, Any]], part: str) -> dict[str, Any]:
    [found] = [r for r in requests if part in r["url"]]
    return found


async def test_network_lists_the_500_and_the_refused_request_and_request_shows_them_redacted(
        start_daemon, app, blocked):
    b = await saved(start_daemon, app, blocked)
    listed = await b.ok("network")
    requests = listed["requests"]
    doc, fail, refused, gone, logo = (by_url(requests, p)
                                      for p in ("/network?", "/api/fail", "/internal", "/gone", "/logo.png"))
    assert [r["id"] for r in requests] == sorted((r["id"] for r in requests), key=lambda i: int(i[1:])), "oldest first"
    assert (doc["method"], doc["status"], doc["type"], doc["tab"]) == ("GET", 200, "document", "t1")
    assert (fail["method"], fail["status"], fail["type"]) == ("POST", 500, "fetch")
    assert fail["size"] == len(json.dumps({"error": "database is down", "retry": False}))
    assert isinstance(fail["time_ms"], int)
    assert "127.0.0.2" in refused["blocked"] and "status" not in refused, refused
    assert (logo["status"], logo["size"]) == (200, len(PNG))
    # the proxy's own word for a connection it could not make, not Chrome's "the SOCKS proxy failed"
    assert gone["failure"] == "net::ERR_CONNECTION_REFUSED" and "blocked" not in gone, gone
    assert blocked.hits == []
    text = listed["content"]
    assert f"{fail['id']} POST 500 fetch {app.url('/api/fail?draft=1')} — " in text
    assert f"{refused['id']} GET blocked fetch {blocked.base}/internal — blocked by the address policy: " in text

    # filters: status class, resource type, URL substring
    failed = await b.ok("network", status_class="failed")
    assert [r["id"] for r in failed["requests"]] == [refused["id"], gone["id"]]
    errors = await b.ok("network", status_class="5xx", resource_type="fetch")
    assert [r["id"] for r in errors["requests"]] == [fail["id"]]
    found = await b.ok("network", find="LOGO")
    assert [r["id"] for r in found["requests"]] == [logo["id"]]
    first = await b.ok("network", max_chars=100)  # a page of one line, then the next from its offset
    assert first["requests"] == requests[:1] and first["next_offset"] == 1, first
    second = await b.ok("network", max_chars=100, offset=1)
    assert second["requests"] == requests[1:2] and second["next_offset"] == 2
    none = await b.ok("network", find="nothing-like-this")
    assert none["requests"] == [] and none["content"].startswith("network: 0 requests of t1")

    got = await b.ok("request", request_id=fail["id"])
    d = got["request"]
    assert d["entry"] == fail and d["status_text"] == "Internal Server Error"
    sent = {h["name"].lower(): h["value"] for h in d["request_headers"]}
    assert sent["cookie"] == "<redacted>" and sent["authorization"] == "<redacted>"
    assert sent["content-type"] == "application/json"
    back = {h["name"].lower(): h["value"] for h in d["response_headers"]}
    assert back["set-cookie"] == "<redacted>" and back["content-type"] == "application/json"
    assert d["request_body"] == {"size": 14, "mime_type": "application/json", "text": '{"name":"ann"}'}
    assert d["response_body"]["text"] == json.dumps({"error": "database is down", "retry": False})
    assert '{"error": "database is down", "retry": false}' in got["content"]
    assert "Cookie: <redacted>" in got["content"]
    assert not any(s in json.dumps(got) for s in SECRETS), "no secret in the frame"
    assert app.state["fail"] == '{"name":"ann"}'

    binary = (await b.ok("request", request_id=logo["id"]))["request"]["response_body"]
    assert binary == {"size": len(PNG), "mime_type": "image/png", "note": "binary: not shown"}
    why = (await b.ok("request", request_id=refused["id"]))["request"]
    assert "127.0.0.2" in why["entry"]["blocked"] and "response_body" not in why

    # a request id the log never gave out: named, and the session goes on
    unknown = await b("request", request_id="r9999")
    assert unknown["code"] == "unknown_request" and "network action lists" in unknown["message"], unknown
    assert (await b.ok("snapshot"))["page"]["title"] == "Net"


async def test_the_har_file_is_har_1_2_with_the_sessions_traffic(start_daemon, app, blocked, tmp_path):
    b = await saved(start_daemon, app, blocked)
    path = tmp_path / "session.har"
    wrote = await b.ok("har", path=str(path))
    assert str(path) in wrote["content"] and "redacted" in wrote["content"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    raw = await trio.Path(path).read_text()
    assert not any(s in raw for s in SECRETS)
    log = json.loads(raw)["log"]
    assert log["version"] == "1.2" and log["creator"]["name"] == "webfetch" and log["creator"]["version"]
    [page] = log["pages"]
    assert page["id"] == "page_t1" and page["startedDateTime"].endswith("Z") and page["title"] == "Net"
    for e in log["entries"]:
        assert e["pageref"] == "page_t1" and e["startedDateTime"].endswith("Z") and e["time"] >= 0
        assert set(e["request"]) >= {"method", "url", "httpVersion", "headers", "queryString", "cookies",
                                     "headersSize", "bodySize"}
        assert set(e["response"]) >= {"status", "statusText", "httpVersion", "headers", "cookies", "content",
                                      "redirectURL", "headersSize", "bodySize"}
        assert set(e["response"]["content"]) >= {"size", "mimeType"} and e["cache"] == {}
        assert all(e["timings"][k] >= 0 for k in ("send", "wait", "receive"))
    fail = next(e for e in log["entries"] if "/api/fail" in e["request"]["url"])
    assert fail["request"]["method"] == "POST" and fail["response"]["status"] == 500
    assert fail["request"]["httpVersion"] == "HTTP/1.1"
    assert fail["request"]["queryString"] == [{"name": "draft", "value": "1"}]
    assert fail["request"]["postData"] == {"mimeType": "application/json", "text": '{"name":"ann"}'}
    assert {"name": "sid", "value": "<redacted>"} in fail["request"]["cookies"]
    assert fail["response"]["cookies"] == [{"name": "sid", "value": "<redacted>"}]
    assert json.loads(fail["response"]["content"]["text"]) == {"error": "database is down", "retry": False}
    refused = next(e for e in log["entries"] if e["request"]["url"] == blocked.base + "/internal")
    assert refused["response"]["status"] == 0 and "127.0.0.2" in refused["_error"]
    logo = next(e for e in log["entries"] if "/logo.png" in e["request"]["url"])
    assert logo["response"]["content"] == {"size": len(PNG), "mimeType": "image/png"}

    # a path that cannot be written: said so, nothing left behind, the session goes on
    # and only a .har file: a model talked into `har path=~/.bashrc` must not replace it with page text
    rc = tmp_path / ".bashrc"
    rc.write_text("# mine\n")
    (tmp_path / "old.har").mkdir()
    for bad, why in ((tmp_path / "missing" / "x.har", "does not exist"), (tmp_path / "old.har", "is a directory"),
                     (rc, "must end in .har"), ("x.har", "must be absolute")):
        refused_write = await b("har", path=str(bad))
        assert refused_write["code"] == "bad_request" and why in refused_write["message"], refused_write
    assert sorted(p.name for p in tmp_path.iterdir()) == [".bashrc", "old.har", "session.har"]
    assert rc.read_text() == "# mine\n"
    assert (await b.ok("network", status_class="5xx"))["requests"]


async def test_secrets_are_shown_when_the_user_says_so(start_daemon, app, blocked, tmp_path):
    b = await saved(start_daemon, app, blocked, redact_secrets=False)
    fail = (await b.ok("network", status_class="5xx"))["requests"][0]
    sent = {h["name"].lower(): h["value"] for h in (await b.ok("request", request_id=fail["id"]))["request"][
        "request_headers"]}
    assert sent["cookie"] == "sid=cookie-secret-1" and sent["authorization"] == "Bearer token-secret-2"
    await b.ok("har", path=str(tmp_path / "clear.har"))
    assert "cookie-secret-3" in await trio.Path(tmp_path / "clear.har").read_text()


async def test_without_the_network_log_the_actions_say_how_to_turn_it_on(start_daemon, app, blocked):
    b = await saved(start_daemon, app, blocked, network_log=False)
    off = await b("network")
    assert off["code"] == "bad_request" and "browse.network_log" in off["message"], off
    assert (await b.ok("snapshot"))["page"]["title"] == "Net"


def test_the_log_keeps_the_newest_requests_and_forgets_the_ids_it_dropped():
    log = NetworkLog(ring=2)
    for n in range(3):
        log.on_request("t1", {"requestId": f"1.{n}", "request": {"method": "GET", "url": f"http://h/{n}"},
                              "type": "Fetch", "timestamp": 1.0, "wallTime": 1.0})
    assert [r.url for r in log.entries()] == ["http://h/1", "http://h/2"] and log.dropped == 1
    assert log.get("r1") is None and log.get("r3") is not None


def test_every_credential_header_is_redacted_by_the_one_rule_and_nothing_else():
    raw = {"Cookie": "a=1", "set-cookie": "b=2\nc=3", "Authorization": "Basic eA==", "Proxy-Authorization": "x",
           "X-Api-Key": "k", "X-CSRF-Token": "t", "Content-Type": "text/plain", "Keep-Alive": "timeout=5",
           ":authority": "127.0.0.1", ":path": "/x?access_token=a&q=ok", "Referer": "http://h/?session_id=s&q=ok"}
    assert [(h.name, h.value) for h in headers(raw, redacting=True)] == [
        ("Cookie", "<redacted>"), ("set-cookie", "<redacted>"), ("set-cookie", "<redacted>"),
        ("Authorization", "<redacted>"), ("Proxy-Authorization", "<redacted>"), ("X-Api-Key", "<redacted>"),
        ("X-CSRF-Token", "<redacted>"), ("Content-Type", "text/plain"), ("Keep-Alive", "timeout=5"),
        (":authority", "127.0.0.1"), (":path", "/x?access_token=<redacted>&q=ok"),
        ("Referer", "http://h/?session_id=<redacted>&q=ok")]
    assert [h.value for h in headers(raw, redacting=False)][:3] == ["a=1", "b=2", "c=3"]


async def _sent_secrets(start_daemon, app: App, **browse: Any) -> tuple[Any, Browser, str]:
    """A session on the app's secrets page, its Send clicked and landed; the daemon's harness, the session,
    and the URL it opened (with a secret of its own, for the log and the status)."""
    h = await start_daemon(make_config(browse=BrowseConfig(**browse)))
    b = Browser(await h.client())
    opened = app.url("/secrets?session_token=open-secret&q=ok")
    page = await b.ok("open", url=opened)
    await b.ok("click", ref=ref(page["snapshot"], '- button "Send"'))
    await b.ok("wait", text="Landed")
    with trio.fail_after(30):  # the landing's own request ends a moment after its text shows
        while "time_ms" not in by_url((await b.ok("network", find="/landing"))["requests"], "/landing"):
            await trio.sleep(0.05)
    return h, b, opened


async def test_no_secret_reaches_network_request_the_har_the_log_or_status(start_daemon, app, tmp_path):
    from webfetch.frontends.logs import Redacting

    log_file = tmp_path / "daemon.log"
    handler = logging.FileHandler(log_file)  # the daemon's records as its log file writes them
    handler.setFormatter(Redacting())
    logger = logging.getLogger("webfetch")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        h, b, _ = await _sent_secrets(start_daemon, app)
        listed = await b.ok("network")
        requests = listed["requests"]
        posted, form, landing = (by_url(requests, p) for p in ("/api/echo?access", "/api/echo?form", "/landing"))
        assert posted["url"] == app.url("/api/echo?access_token=<redacted>&q=ok")
        assert landing["url"] == app.url("/landing?q=ok#access_token=<redacted>&id_token=<redacted>&state=ok")
        assert f"POST 200 fetch {app.url('/api/echo?access_token=<redacted>&q=ok')} — " in listed["content"]
        assert (await b.ok("network", find="qs-sec"))["requests"] == [], "no search can guess at a masked value"

        got = await b.ok("request", request_id=posted["id"])
        d = got["request"]
        sent = {x["name"].lower(): x["value"] for x in d["request_headers"]}
        for name in ("authorization", "x-api-key", "x-csrf-token", "cookie"):
            assert sent[name] == "<redacted>", (name, sent)
        assert sent["content-type"] == "application/json"
        assert json.loads(d["request_body"]["text"]) == {"user": {"name": "ann", "password": "<redacted>"}}
        back = {x["name"].lower(): x["value"] for x in d["response_headers"]}
        assert back["set-cookie"] == "<redacted>" and back["content-type"] == "application/json"
        assert "X-Api-Key: <redacted>" in got["content"] and "ann" in got["content"]
        form_body = (await b.ok("request", request_id=form["id"]))["request"]["request_body"]["text"]
        assert form_body == "user=ann&password=<redacted>&remember=yes"

        path = tmp_path / "secrets.har"
        wrote = await b.ok("har", path=str(path))
        assert "with secrets redacted" in wrote["content"]
        har = await trio.Path(path).read_text()
        entries = json.loads(har)["log"]["entries"]
        echo = next(e for e in entries if "/api/echo?access" in e["request"]["url"])
        assert echo["request"]["queryString"] == [{"name": "access_token", "value": "<redacted>"},
                                                  {"name": "q", "value": "ok"}]
        assert {"name": "X-CSRF-Token", "value": "<redacted>"} in echo["request"]["headers"]
        assert json.loads(echo["request"]["postData"]["text"])["user"]["password"] == "<redacted>"
        assert echo["response"]["cookies"] == [{"name": "sid", "value": "<redacted>"}]

        status = await h.request({"id": "s", "op": "status"})
        [session] = status["browse"]
        assert session["url"] == app.url("/landing?q=ok#access_token=<redacted>&id_token=<redacted>&state=ok")

        frames = json.dumps([listed, got, status, await b.ok("request", request_id=form["id"]),
                             await b.ok("request", request_id=landing["id"])])
        for where, text in (("frames", frames), ("HAR", har)):
            assert not any(s in text for s in SECRET_VALUES), where
        # the server got them all: it is the views that mask them
        assert app.state["echo"][0][0] == "Bearer bearer-secret" and "form-secret" in app.state["echo"][1][1]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        handler.close()
    logged = log_file.read_text()
    assert "session_token=<redacted>&q=ok" in logged, "the open's URL is in the log, masked"
    assert "open-secret" not in logged and not any(s in logged for s in SECRET_VALUES)


async def test_with_redaction_off_request_shows_the_apps_own_secrets(start_daemon, app, tmp_path):
    h, b, opened = await _sent_secrets(start_daemon, app, redact_secrets=False)
    posted = by_url((await b.ok("network"))["requests"], "/api/echo?access")
    assert posted["url"] == app.url("/api/echo?access_token=qs-secret&q=ok")
    d = (await b.ok("request", request_id=posted["id"]))["request"]
    sent = {x["name"].lower(): x["value"] for x in d["request_headers"]}
    assert (sent["x-api-key"], sent["x-csrf-token"]) == ("apikey-secret", "csrf-secret")
    assert json.loads(d["request_body"]["text"])["user"]["password"] == "json-secret"
    await b.ok("har", path=str(tmp_path / "clear.har"))
    assert "frag-secret" in await trio.Path(tmp_path / "clear.har").read_text()
    # status is not the app's own view: masked whatever the setting
    status = await h.request({"id": "s", "op": "status"})
    assert "frag-secret" not in json.dumps(status)
