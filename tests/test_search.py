"""Web search against fake Kagi, Brave and SearXNG servers on 127.0.0.1 answering with recorded-shape
responses (the real APIs are not reachable here). The search actor runs for real, over real HTTP."""

import json
import logging
import os
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec
import pytest
import trio

from webfetch.config import Config, SearchConfig
from webfetch.protocol import SearchRequest
from webfetch.search import Search

from .support.bombs import bomb, peak_kb, reset_peak
from .support.client import run_cli
from .support.daemon import make_config
from .support.site import Site

KEY = "kagi-SECRET-key-0123456789"
BRAVE_KEY = "brave-SECRET-key-9876543210"

KAGI_RESULTS = {
    "meta": {"id": "120b5ac1-e2f9-4a1f", "node": "us-east4", "ms": 412, "api_balance": 4.215},
    "data": [
        {"t": 0, "rank": 1, "url": "https://trio.readthedocs.io/en/stable/reference-core.html",
         "title": "Trio&#x27;s core functionality &mdash; Trio 0.27.0 documentation",
         "snippet": "Memory channels give you <b>backpressure</b>: <b>send</b>() blocks while the buffer is full "
                    "&amp; the receiver is behind.",
         "published": "2024-05-01T08:00:00Z"},
        {"t": 0, "rank": 2, "url": "https://example.org/blog/trio-channels", "title": "Channels in trio",
         "snippet": "A walk through " + "open_memory_channel and its buffer sizes, " * 12},
        {"t": 1, "list": ["trio memory channel example", "trio <b>vs</b> asyncio queues"]},
    ],
}
BRAVE_RESULTS = {
    "type": "search",
    "query": {"original": "trio nursery"},
    "web": {"type": "search", "results": [
        {"title": "Trio <strong>nurseries</strong>", "url": "https://trio.readthedocs.io/nurseries",
         "description": "A nursery is a scope that waits for its children&#x27;s tasks.", "age": "January 5, 2024",
         "page_age": "2024-01-05T10:00:00"},
        {"title": "Structured concurrency", "url": "https://vorpus.org/blog/notes-on-structured-concurrency/",
         "description": "Go statement considered harmful.", "age": "3 days ago"},
    ]},
}
SEARXNG_RESULTS = {
    "query": "trio cancel scope", "number_of_results": 2,
    "results": [
        {"url": "https://trio.readthedocs.io/cancel", "title": "Cancellation and timeouts",
         "content": "Cancel scopes &amp; deadlines.", "engine": "duckduckgo", "publishedDate": None},
        {"url": "https://example.com/scopes", "title": "Scopes", "content": "",
         "publishedDate": "2023-11-02T00:00:00"},
    ],
    "suggestions": ["trio move_on_after", "trio fail_after"],
    "answers": [], "corrections": [], "infoboxes": [], "unresponsive_engines": [],
}


class FakeAPI:
    """One fake server for the three APIs; `answers[path]` is (status, body, headers) or a callable."""

    def __init__(self) -> None:
        self.site = Site()
        self.requests: list[tuple[str, dict[str, list[str]], dict[str, str]]] = []
        self.answers: dict[str, Any] = {}
        for path in ("/api/v0/search", "/res/v1/web/search", "/search"):
            self.site.route(path, self._serve)
        self.site.start()
        self.url = f"http://127.0.0.1:{self.site.port}"

    def _serve(self, h) -> None:
        parts = urlsplit(h.path)
        self.requests.append((parts.path, parse_qs(parts.query), dict(h.headers)))
        answer = self.answers[parts.path]
        if answer == "hang":
            self.site.stall.wait(30)
            return
        status, body, headers = answer
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        h.reply(status, "application/json", data, headers)

    def stop(self) -> None:
        self.site.stall.set()
        self.site.stop()


@pytest.fixture
def api():
    a = FakeAPI()
    yield a
    a.stop()


def search_config(api: FakeAPI, **kw: Any) -> SearchConfig:
    return SearchConfig(kagi_url=api.url, brave_url=api.url, **kw)


async def run_search(nursery, config: SearchConfig, env: dict[str, str], **request: Any):
    s = Search(config, env)
    await nursery.start(s.run)
    progress: list[tuple[str, str]] = []
    result = await s.search(SearchRequest(**{"query": "trio memory channel backpressure", **request}),
                            lambda stage, msg: progress.append((stage, msg)))
    return s, result, progress


async def test_kagi_results_are_normalized_and_formatted(nursery, api):
    api.answers["/api/v0/search"] = (200, KAGI_RESULTS, {})
    _, r, progress = await run_search(nursery, search_config(api), {"KAGI_API_KEY": KEY}, limit=5)
    path, query, headers = api.requests[0]
    assert path == "/api/v0/search" and query == {"q": ["trio memory channel backpressure"], "limit": ["5"]}
    assert headers["Authorization"] == f"Bot {KEY}"
    assert progress == [("search", "asking Kagi")]
    assert r.backend == "kagi" and r.query == "trio memory channel backpressure"
    assert msgspec.to_builtins(r.results[0]) == {
        "title": "Trio's core functionality — Trio 0.27.0 documentation",
        "url": "https://trio.readthedocs.io/en/stable/reference-core.html",
        "snippet": "Memory channels give you backpressure: send() blocks while the buffer is full & the "
                   "receiver is behind.",
        "published": "2024-05-01"}
    assert r.results[1].published is None
    assert r.related == ["trio memory channel example", "trio vs asyncio queues"]
    lines = r.content.split("\n")
    assert lines[0] == 'Kagi results for "trio memory channel backpressure" (2):'
    assert lines[1] == ("1. Trio's core functionality — Trio 0.27.0 documentation — "
                        "https://trio.readthedocs.io/en/stable/reference-core.html (2024-05-01)")
    assert lines[2].startswith("   Memory channels give you backpressure")
    assert lines[3] == "2. Channels in trio — https://example.org/blog/trio-channels"
    assert len(lines[4].strip()) <= 300 and lines[4].endswith("…")
    assert lines[-1] == "Related searches: trio memory channel example; trio vs asyncio queues"


async def test_brave_results(nursery, api):
    api.answers["/res/v1/web/search"] = (200, BRAVE_RESULTS, {})
    _, r, _ = await run_search(nursery, search_config(api), {"BRAVE_API_KEY": BRAVE_KEY}, query="trio nursery")
    path, query, headers = api.requests[0]
    assert path == "/res/v1/web/search" and query == {"q": ["trio nursery"], "count": ["10"]}
    assert headers["X-Subscription-Token"] == BRAVE_KEY
    assert [msgspec.to_builtins(h) for h in r.results] == [
        {"title": "Trio nurseries", "url": "https://trio.readthedocs.io/nurseries",
         "snippet": "A nursery is a scope that waits for its children's tasks.", "published": "2024-01-05"},
        {"title": "Structured concurrency", "url": "https://vorpus.org/blog/notes-on-structured-concurrency/",
         "snippet": "Go statement considered harmful.", "published": None}]
    assert r.content.startswith('Brave results for "trio nursery" (2):\n1. Trio nurseries — ')


async def test_searxng_results_and_suggestions(nursery, api):
    api.answers["/search"] = (200, SEARXNG_RESULTS, {})
    _, r, _ = await run_search(nursery, search_config(api, searxng_url=api.url + "/"), {}, query="trio cancel scope")
    path, query, headers = api.requests[0]
    assert path == "/search" and query == {"q": ["trio cancel scope"], "format": ["json"]}
    assert "Authorization" not in headers
    assert r.backend == "searxng" and [h.url for h in r.results] == ["https://trio.readthedocs.io/cancel",
                                                                     "https://example.com/scopes"]
    assert r.results[0].snippet == "Cancel scopes & deadlines." and r.results[1].published == "2023-11-02"
    assert r.related == ["trio move_on_after", "trio fail_after"]
    assert r.content == ('SearXNG results for "trio cancel scope" (2):\n'
                         "1. Cancellation and timeouts — https://trio.readthedocs.io/cancel\n"
                         "   Cancel scopes & deadlines.\n"
                         "2. Scopes — https://example.com/scopes (2023-11-02)\n"
                         "\nRelated searches: trio move_on_after; trio fail_after")


async def test_no_results(nursery, api):
    api.answers["/api/v0/search"] = (200, {"meta": {"id": "x"}, "data": []}, {})
    _, r, _ = await run_search(nursery, search_config(api), {"KAGI_API_KEY": KEY}, query="zzqx")
    assert r.results == [] and r.related == []
    assert r.content == 'Kagi results for "zzqx" (0):\nNo results.'


async def _error(nursery, config, env, **request) -> dict[str, Any]:
    """The error frame a client would see, without its type and id."""
    from webfetch.errors import WebfetchError
    from webfetch.protocol import encode_frame, error_frame
    with pytest.raises(WebfetchError) as info:
        await run_search(nursery, config, env, **request)
    frame = json.loads(encode_frame(error_frame(None, info.value)))
    return {k: v for k, v in frame.items() if k not in ("type", "id")}


@pytest.mark.parametrize("layers", [1, 2])
async def test_a_compression_bomb_from_a_backend_is_refused_in_bounded_memory(nursery, api, layers):
    """A SearXNG instance is any URL the user names: 1 GiB inflated from 1 MB (or from 3 KB, gzip'd twice)
    is read raw and inflated only up to the answer's cap. (httpx alone inflated it all, here in the test's
    own process, which runs the search actor.)"""
    encoding = ", ".join(["gzip"] * layers)
    api.answers["/search"] = (200, bomb(b'{"results": [', layers=layers), {"Content-Encoding": encoding})
    config = search_config(api, searxng_url=api.url)
    pid = os.getpid()
    reset_peak(pid)
    before = peak_kb(pid)
    e = await _error(nursery, config, {}, backend="searxng")
    assert peak_kb(pid) - before < 100_000
    assert e == {"code": "search_failed", "message": "SearXNG's answer is larger than 4194304 bytes once inflated"}


async def test_kagi_errors_come_from_the_body(nursery, api):
    api.answers["/api/v0/search"] = (401, {"meta": {"id": "x"}, "data": None, "error": [
        {"code": 2, "msg": f"Unauthorized: bad token Bot {KEY}", "ref": None}]}, {})
    e = await _error(nursery, search_config(api), {"KAGI_API_KEY": KEY})
    assert e["code"] == "search_failed"
    assert e["message"] == ("Kagi refused the search (HTTP 401): Unauthorized: bad token Bot *** (error 2); "
                            "check the API key: set KAGI_API_KEY (or search.kagi_api_key in the config file)")
    api.answers["/api/v0/search"] = (400, {"meta": {"id": "y"}, "data": None, "error": [
        {"code": 101, "msg": "Insufficient credit to perform this request.", "ref": None}]}, {})
    e = await _error(nursery, search_config(api), {"KAGI_API_KEY": KEY})
    assert e["message"] == ("Kagi refused the search (HTTP 400): Insufficient credit to perform this request. "
                            "(error 101)")
    api.answers["/api/v0/search"] = (200, {"meta": {"id": "z"}, "data": None}, {})
    e = await _error(nursery, search_config(api), {"KAGI_API_KEY": KEY})
    assert e["message"] == "Kagi answered without results (`data` is null)"


async def test_searxng_without_json_output_says_how_to_enable_it(nursery, api):
    api.answers["/search"] = (403, "<html>403 Forbidden</html>", {})
    e = await _error(nursery, search_config(api, searxng_url=api.url), {})
    assert e["code"] == "search_failed"
    assert e["message"] == (f"the SearXNG instance at {api.url} does not allow JSON output (HTTP 403): add `json` "
                            "to `search.formats` in its settings.yml (formats: [html, json]) and restart it")


async def test_rate_limit_names_the_retry_after_and_is_not_retried(nursery, api):
    api.answers["/res/v1/web/search"] = (429, {"type": "ErrorResponse", "error": {"code": "RATE_LIMITED"}},
                                         {"Retry-After": "30"})
    e = await _error(nursery, search_config(api), {"BRAVE_API_KEY": BRAVE_KEY})
    assert e == {"code": "search_failed", "message": "Brave is limiting the request rate (HTTP 429): retry after 30 s",
                 "retry_after": "30"}
    assert len(api.requests) == 1


async def test_a_backend_that_never_answers_times_out(nursery, api):
    api.answers["/api/v0/search"] = "hang"
    t0 = time.monotonic()
    e = await _error(nursery, search_config(api, timeout_s=0.5), {"KAGI_API_KEY": KEY})
    assert e == {"code": "timeout", "message": "Kagi did not answer within 0.5 s; try again, or raise search.timeout_s"}
    assert time.monotonic() - t0 < 5


async def test_invalid_json_is_a_clear_failure(nursery, api):
    api.answers["/api/v0/search"] = (200, "<html>maintenance</html>", {})
    e = await _error(nursery, search_config(api), {"KAGI_API_KEY": KEY})
    assert e == {"code": "search_failed",
                 "message": "Kagi answered HTTP 200 with something that is not JSON: '<html>maintenance</html>'"}


async def test_an_unreachable_backend(nursery, api):
    dead = SearchConfig(kagi_url="http://127.0.0.1:9")
    e = await _error(nursery, dead, {"KAGI_API_KEY": KEY})
    assert e["code"] == "search_failed" and e["message"].startswith("cannot reach Kagi at http://127.0.0.1:9: ")
    assert KEY not in e["message"]


@pytest.mark.parametrize("env,config,request_backend,chosen", [
    ({"KAGI_API_KEY": KEY, "BRAVE_API_KEY": BRAVE_KEY}, {"searxng_url": "x"}, None, "kagi"),
    ({"KAGI_API_KEY": "", "BRAVE_API_KEY": BRAVE_KEY}, {"searxng_url": "x"}, None, "brave"),
    ({}, {"searxng_url": "x"}, None, "searxng"),
    ({}, {"kagi_api_key": KEY}, None, "kagi"),
    ({"KAGI_API_KEY": KEY}, {"searxng_url": "x", "backend": "searxng"}, None, "searxng"),
    ({"KAGI_API_KEY": KEY, "BRAVE_API_KEY": BRAVE_KEY}, {"backend": "kagi"}, "brave", "brave"),
])
def test_backend_selection_order(env, config, request_backend, chosen):
    assert Search(SearchConfig(**config), env).choose(request_backend) == chosen


def test_unconfigured_backends_say_how_to_configure_them_in_the_daemons_config_file(monkeypatch, tmp_path):
    from webfetch.errors import SearchUnconfigured
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with pytest.raises(SearchUnconfigured) as info:  # no config file: the one the daemon would read
        Search(SearchConfig(), {"KAGI_API_KEY": "", "BRAVE_API_KEY": ""}).choose(None)
    default = tmp_path / "webfetch" / "config.toml"
    assert info.value.message == (
        f"no web search backend is configured. Either set KAGI_API_KEY (or search.kagi_api_key in {default}); "
        f"or set BRAVE_API_KEY (or search.brave_api_key in {default}); or set search.searxng_url in {default} "
        "to an instance with JSON output, then restart the daemon")
    with pytest.raises(SearchUnconfigured) as info:  # the daemon's --config
        Search(SearchConfig(), {}, config_file="/srv/wf/config.toml").choose("searxng")
    assert info.value.message == ("the SearXNG search backend is not configured: set search.searxng_url in "
                                  "/srv/wf/config.toml to an instance with JSON output")
    with pytest.raises(SearchUnconfigured, match=r"^the Brave search backend is not configured: set BRAVE_API_KEY"):
        Search(SearchConfig(), {"KAGI_API_KEY": KEY}).choose("brave")


async def test_results_are_cached_by_backend_query_and_limit(nursery, api):
    api.answers["/api/v0/search"] = (200, KAGI_RESULTS, {})
    s = Search(search_config(api), {"KAGI_API_KEY": KEY})
    await nursery.start(s.run)
    ask = lambda **kw: s.search(SearchRequest(**{"query": "trio", **kw}), lambda *a: None)  # noqa: E731
    first, again, spaced = await ask(), await ask(), await ask(query="  trio ")
    assert (first.cached, again.cached, spaced.cached) == (False, True, True)
    assert len(api.requests) == 1
    await ask(limit=3)
    assert len(api.requests) == 2


async def test_the_key_never_appears_in_frames_or_logs(start_daemon, api, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("KAGI_API_KEY", KEY)
    d = await start_daemon(Config(**{**msgspec.structs.asdict(make_config()), "search": search_config(api)}))
    frames = []
    for answer in [(200, KAGI_RESULTS, {}),
                   (401, {"data": None, "error": [{"code": 2, "msg": f"bad key {KEY}"}]}, {}),
                   (500, f"oops {KEY}", {}), (429, {}, {"Retry-After": "60"})]:
        api.answers["/api/v0/search"] = answer
        c = await d.client()
        await c.send({"id": 1, "op": "search", "query": f"q{len(frames)}"})
        with trio.fail_after(30):
            while (f := await c.receive())["type"] == "progress":
                frames.append(f)
        frames.append(f)
        await c.aclose()
    assert [f["type"] for f in frames if f["type"] != "progress"] == ["result", "error", "error", "error"]
    status = await d.request({"id": "s", "op": "status"})
    everything = json.dumps(frames) + json.dumps(status) + caplog.text
    assert KEY not in everything
    assert status["search"] == ["kagi"]


async def test_daemon_search_op(start_daemon, api):
    api.answers["/search"] = (200, SEARXNG_RESULTS, {})
    d = await start_daemon(Config(**{**msgspec.structs.asdict(make_config()),
                                     "search": search_config(api, searxng_url=api.url)}))
    progress: list = []
    r = await d.request({"id": 1, "op": "search", "query": "trio cancel scope", "limit": 1}, progress)
    assert r["type"] == "result" and r["op"] == "search" and r["backend"] == "searxng"
    assert len(r["results"]) == 1 and r["cached"] is False
    assert [p["stage"] for p in progress] == ["search"]
    bad = await d.request({"id": 2, "op": "search", "query": "x", "backend": "google"})
    assert bad["code"] == "bad_request" and "$.backend" in bad["message"]
    unconfigured = await d.request({"id": 3, "op": "search", "query": "x", "backend": "kagi"})
    assert unconfigured["code"] == "search_unconfigured"
    empty = await d.request({"id": 4, "op": "search", "query": "  "})
    assert empty["code"] == "bad_request" and empty["message"].startswith("the query is empty")


@pytest.mark.chromium
def test_cli_search(short_tmp, api):
    api.answers["/search"] = (200, SEARXNG_RESULTS, {})
    cfg = short_tmp / "c.toml"
    # the daemon the first call starts must still serve the second one (its idle exit once came between
    # them on a loaded machine): stopped at the end instead
    cfg.write_text(f'[search]\nsearxng_url = "{api.url}"\n[server]\nidle_exit_s = 60\n')
    env = {"WEBFETCH_SOCKET": str(short_tmp / "wf.sock"), "KAGI_API_KEY": "", "BRAVE_API_KEY": ""}
    run = lambda *a: run_cli("search", "--config", str(cfg), *a, env=env)  # noqa: E731
    try:
        r = run("trio cancel scope", "--limit", "2")
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith('SearXNG results for "trio cancel scope" (2):\n1. Cancellation and timeouts')
        r = run("trio   cancel scope", "--limit", "2", "--json")
        frames = [json.loads(line) for line in r.stdout.splitlines()]
        assert frames[-1]["type"] == "result" and frames[-1]["cached"] is True
        r = run("x", "--backend", "brave")
        assert r.returncode == 1 and r.stderr.startswith("webfetch: search_unconfigured: the Brave search backend")
    finally:
        run_cli("stop", env=env)
