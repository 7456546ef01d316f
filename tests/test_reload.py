"""Reloading the config while the daemon runs (`reload` op, `webfetch reload`, SIGHUP): each reloadable
setting before and after, as a client sees it; a fetch in flight finishes; a broken file changes nothing
and its error names the file and the line; a setting only a restart applies is named as such."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import trio

from webfetch.config import load_config_and_source

from .support.client import LineClient, run_cli
from .support.daemon import Harness
from .support.site import ARTICLE_TEXT, Site, simple_page
from .test_service import request, serve, wait_until

NO_PI = '[subagent]\ncommand = "/nonexistent/pi-for-tests"\n'
LOCAL = NO_PI + "[fetch]\nallow_private = true\n"

# Every daemon here starts its Chromium (Harness.start, not a fixture conftest would see).
pytestmark = pytest.mark.chromium


async def start_with_file(nursery: trio.Nursery, tmp: Path, text: str) -> tuple[Harness, Path]:
    """A daemon started from the config file `tmp`/config.toml holding `text`, as `webfetch serve --config`."""
    cfg = tmp / "config.toml"
    cfg.write_text(text)
    config, source = load_config_and_source(cfg)
    return await Harness.start(nursery, tmp / "wf.sock", config, source=source), cfg


async def reload_with(d: Harness, cfg: Path, text: str) -> dict:
    await trio.Path(cfg).write_text(text)
    return await d.request({"id": "r", "op": "reload"})


async def status(d: Harness) -> dict:
    return await d.request({"id": "s", "op": "status"})


async def test_allow_hosts_reloaded_lets_the_host_through_for_fetch_and_an_open_browse_session(nursery, short_tmp,
                                                                                              site):
    d, cfg = await start_with_file(nursery, short_tmp, NO_PI)
    refused = await d.fetch(site.url("/article"))
    assert refused["code"] == "blocked_url", refused
    browse = {"id": "b", "op": "browse", "session": "s1", "action": "open", "url": site.url("/article")}
    assert (await d.request(browse))["code"] == "blocked_url"
    before = (await status(d))["daemon"]

    answer = await reload_with(d, cfg, NO_PI + '[fetch]\nallow_hosts = ["127.0.0.1"]\n')
    assert answer == {"type": "result", "id": "r", "op": "reload", "config": str(cfg),
                      "config_digest": answer["config_digest"], "changed": ["fetch.allow_hosts"],
                      "applied": ["fetch.allow_hosts"], "needs_restart": []}
    after = (await status(d))["daemon"]
    assert after["config_digest"] == answer["config_digest"] != before["config_digest"]
    assert after["pid"] == before["pid"] and after["needs_restart"] == []

    page = await d.fetch(site.url("/article"))
    assert page["type"] == "result" and ARTICLE_TEXT[0] in page["content"], page
    # the session opened under the old policy follows the new one (its gate forgets the old verdicts)
    opened = await d.request(browse)
    assert opened["type"] == "result" and opened["session"] == "s1", opened


async def slow_fetch_under_way(d: Harness, site: Site) -> LineClient:
    """A client whose fetch "slow" of the stalled article has reached the server (site.stall releases it)."""
    c = await d.client()
    await c.send({"id": "slow", "op": "fetch", "url": site.url("/slow-article")})
    with trio.fail_after(10):
        while site.hits.get("/slow-article", 0) == 0:
            await trio.sleep(0.02)
    return c


async def test_a_fetch_in_flight_during_a_reload_finishes(nursery, short_tmp, site):
    d, cfg = await start_with_file(nursery, short_tmp, LOCAL)
    c = await slow_fetch_under_way(d, site)
    answer = await reload_with(d, cfg, LOCAL + "timeout_s = 20\npage_chars = 200\n")
    assert answer["applied"] == ["fetch.timeout_s", "fetch.page_chars"]
    site.stall.set()
    with trio.fail_after(30):
        done = await c.terminal("slow")
    await c.aclose()
    assert done["type"] == "result" and ARTICLE_TEXT[0] in done["content"], done
    # the next request reads the new page size
    again = await d.fetch(site.url("/slow-article"))
    assert again["cached"] and len(again["content"]) < 400 and again["next_offset"], again


async def test_a_page_loading_when_the_policy_narrows_is_not_cached_for_the_next_request(nursery, short_tmp, site):
    # A hit is served without asking the policy again, so a load that began under the old policy must not be
    # kept once a reload has emptied the cache for the new one.
    d, cfg = await start_with_file(nursery, short_tmp, LOCAL)
    c = await slow_fetch_under_way(d, site)
    answer = await reload_with(d, cfg, NO_PI)
    assert answer["applied"] == ["fetch.allow_private"]
    site.stall.set()
    with trio.fail_after(30):
        done = await c.terminal("slow")
    await c.aclose()
    assert done["type"] == "result" and ARTICLE_TEXT[0] in done["content"], done  # it asked before the reload
    again = await d.fetch(site.url("/slow-article"))
    assert again["type"] == "error" and again["code"] == "blocked_url", again


async def test_cache_search_and_browse_settings_apply_and_the_browser_flags_need_a_restart(nursery, short_tmp, site):
    d, cfg = await start_with_file(nursery, short_tmp, LOCAL)
    site.html("/one", simple_page("One", "The first page of two, long enough to be a page of its own."))
    site.html("/two", simple_page("Two", "The second page of two, long enough to be a page of its own."))
    for path in ("/one", "/two"):
        assert (await d.fetch(site.url(path)))["type"] == "result"
    cache = (await status(d))["cache"]
    assert cache["entries"] == 2

    # cache.max_bytes: a smaller bound evicts the least recently used page at once (and with no pages kept
    # on disk, it is loaded again)
    answer = await reload_with(d, cfg, LOCAL + f"[cache]\nmax_bytes = {cache['bytes'] - 1}\ndisk_max_bytes = 0\n")
    assert answer["applied"] == ["cache.max_bytes", "cache.disk_max_bytes"] and answer["needs_restart"] == []
    assert (await status(d))["cache"]["entries"] == 1
    assert (await d.fetch(site.url("/two")))["cached"] is True
    assert (await d.fetch(site.url("/one")))["cached"] is False

    # search: a backend configured by reload is listed, and the unconfigured error is gone
    assert (await status(d))["search"] == []
    assert (await d.request({"id": "q", "op": "search", "query": "x"}))["code"] == "search_unconfigured"
    searx = LOCAL + f'[search]\nsearxng_url = "{site.url("/searx")}"\n'
    answer = await reload_with(d, cfg, searx)
    # back to the default bounds, too
    assert answer["changed"] == ["cache.max_bytes", "cache.disk_max_bytes", "search.searxng_url"]
    assert (await status(d))["search"] == ["searxng"]
    failed = await d.request({"id": "q", "op": "search", "query": "x"})
    assert failed["code"] == "search_failed", failed  # asked the instance the reload named
    assert failed["message"].startswith("SearXNG refused the search (HTTP 404)")
    assert "/searx/search" in failed["message"]

    # browse.enabled: an open session closes, and the op answers browse_disabled
    opened = await d.request({"id": "b", "op": "browse", "session": "s1", "action": "open", "url": site.url("/one")})
    assert opened["type"] == "result"
    answer = await reload_with(d, cfg, searx + "[browse]\nenabled = false\n")
    assert answer["applied"] == ["browse.enabled"]
    off = await d.request({"id": "b", "op": "browse", "session": "s1", "action": "snapshot"})
    assert off["code"] == "browse_disabled", off
    with trio.fail_after(10):
        while (await status(d))["browse"]:
            await trio.sleep(0.05)
    assert (await status(d))["browse_enabled"] is False

    # browser.args: named as needing a restart, applied with the rest left alone, and shown by status
    answer = await reload_with(d, cfg, searx + '[browse]\nenabled = true\n[browser]\nargs = ["--mute-audio"]\n')
    assert (answer["changed"], answer["applied"], answer["needs_restart"]) == (
        ["browser.args", "browse.enabled"], ["browse.enabled"], ["browser.args"])
    now = await status(d)
    assert now["daemon"]["needs_restart"] == ["browser.args"] and now["browse_enabled"] is True
    assert d.daemon.config.browser.args == []  # what runs: the browser has the flags it was launched with


@pytest.mark.parametrize("text,message", [
    (LOCAL + "[cache\nttl_s = 1\n", "line 5: not valid TOML: Expected ']' at the end of a table declaration "
                                     "(column 7)"),
    (LOCAL + "[cache]\nttl_s = 60\ncolour = 1\n", "line 7: unknown key `cache.colour`; docs/CONFIG.md lists the keys"),
    (LOCAL + "[cache]\n\nttl_s = \"soon\"\n", "line 7: key `cache.ttl_s`: Expected `float`, got `str`"),
])
async def test_a_broken_config_keeps_the_old_one_and_names_the_file_and_line(nursery, short_tmp, site, text,
                                                                             message):
    d, cfg = await start_with_file(nursery, short_tmp, LOCAL)
    before = await status(d)
    error = await reload_with(d, cfg, text)
    assert error["type"] == "error" and error["code"] == "config_error", error
    assert error["message"].startswith(f"{cfg}: {message}"), error
    assert error["message"].endswith("; the daemon still runs the config it had")
    after = await status(d)
    assert after["daemon"] == before["daemon"]
    assert (await d.fetch(site.url("/article")))["type"] == "result"  # the old policy still lets it through


def test_webfetch_reload_and_sighup_to_webfetch_serve(short_tmp, site):
    path, cfg = short_tmp / "wf.sock", short_tmp / "c.toml"
    cfg.write_text(LOCAL)
    proc = serve(path, cfg)
    try:
        wait_until("the socket", path.exists)
        assert request(path, {"op": "status"})["search"] == []
        cfg.write_text(LOCAL + f'[search]\nsearxng_url = "{site.url("/searx")}"\n')
        r = run_cli("reload", "--socket", str(path))
        assert (r.returncode, r.stdout) == (0, f"reloaded {cfg}: applied search.searxng_url\n"), r.stderr
        assert request(path, {"op": "status"})["search"] == ["searxng"]

        cfg.write_text(LOCAL + '[browse]\nenabled = false\n[browser]\nargs = ["--mute-audio"]\n')
        os.kill(proc.pid, signal.SIGHUP)
        wait_until("the reload", lambda: request(path, {"op": "status"})["browse_enabled"] is False)
        now = request(path, {"op": "status"})
        assert now["search"] == [] and now["daemon"]["needs_restart"] == ["browser.args"]
        r = run_cli("status", "--socket", str(path))
        assert "restart:  the config changes browser.args: `webfetch restart` applies them" in r.stdout

        cfg.write_text(LOCAL + "[cache]\nttl_s = = 1\n")
        # the CLI's own read of the file fails too: it still asks the daemon, which names the line
        r = run_cli("reload", "--socket", str(path), "--config", str(cfg))
        assert r.returncode == 1 and r.stderr.startswith(f"webfetch: config_error: {cfg}: line 6: not valid TOML"), r
        assert proc.poll() is None
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert "reloaded" in stderr and "needs `webfetch restart`: browser.args" in stderr, stderr
    assert "still running the config it had" in stderr and "Traceback" not in stderr, stderr


async def test_browse_allow_local_reloaded_lets_an_open_session_reach_the_port_and_fetch_still_not(
        nursery, short_tmp, site):
    d, cfg = await start_with_file(nursery, short_tmp, NO_PI)
    browse = {"id": "b", "op": "browse", "session": "s1", "action": "open", "url": site.url("/article")}
    refused = await d.request(browse)
    assert refused["code"] == "blocked_url" and f'browse.allow_local = ["127.0.0.1:{site.port}"]' in \
        refused["message"], refused

    answer = await reload_with(d, cfg, NO_PI + f'[browse]\nallow_local = ["127.0.0.1:{site.port}"]\n')
    assert answer["applied"] == ["browse.allow_local"] and answer["needs_restart"] == []
    assert (await status(d))["browse_allow_local"] == [f"127.0.0.1:{site.port}"]
    opened = await d.request(browse)
    assert opened["type"] == "result" and opened["page"]["url"] == site.url("/article"), opened
    assert (await d.fetch(site.url("/article")))["code"] == "blocked_url"

    await reload_with(d, cfg, NO_PI)  # and taken away again
    again = await d.request({**browse, "new_tab": True})
    assert again["code"] == "blocked_url", again


async def test_view_enabled_reloaded_opens_and_closes_the_front_door_and_its_port_needs_a_restart(nursery,
                                                                                                  short_tmp):
    d, cfg = await start_with_file(nursery, short_tmp, NO_PI)
    assert (await status(d))["view"] is None

    answer = await reload_with(d, cfg, NO_PI + "[view]\nenabled = true\n")
    assert answer["applied"] == ["view.enabled"] and answer["needs_restart"] == []
    with trio.fail_after(10):
        while (view := (await status(d))["view"]) is None:
            await trio.sleep(0.05)
    host, port = urlsplit(view).hostname, urlsplit(view).port
    stream = await trio.open_tcp_stream(host, port)
    await stream.send_all(f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
    assert (await stream.receive_some(100)).startswith(b"HTTP/1.1 401")  # the door, wanting its token
    await stream.aclose()

    answer = await reload_with(d, cfg, NO_PI + "[view]\nenabled = false\nport = 8765\n")
    assert answer["applied"] == ["view.enabled"] and answer["needs_restart"] == ["view.port"]
    with trio.fail_after(10):
        while (await status(d))["view"] is not None:
            await trio.sleep(0.05)
    with pytest.raises(OSError):
        await trio.open_tcp_stream(host, port)
