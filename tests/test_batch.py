"""Many URLs in one fetch (`urls`): the request's rules (1-50 URLs, not with `url` or `offset`), then through the
real daemon: a page frame per URL as soon as it is ready (a page the server holds back does not hold back the
others' frames), each with its own error (blocked, 404, a closed port, not a URL) while the rest succeed, the
final summary in the order given, at most browser.max_renders pages loading at once (the server's own count),
and the text a model reads, the room of one tool result shared out among the pages."""

from __future__ import annotations

import json
import threading
import time

import pytest
import trio

from webfetch.config import BrowserConfig, FetchConfig
from webfetch.errors import BadRequest
from webfetch.frontends.tool_text import Limits, batch_text
from webfetch.protocol import MAX_BATCH_URLS, decode_request

from .support.daemon import make_config
from .support.site import ARTICLE_TEXT, free_port, simple_page

# --- the request --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "message"), [
    ({}, "Object missing required field `url`; pass `url`, or `urls` with up to 50 URLs"),
    ({"url": "https://a.example/", "urls": ["https://b.example/"]},
     "pass `url` (one page) or `urls` (several), not both - at `$.urls`"),
    ({"urls": []}, "`urls` is empty; pass 1 to 50 URLs - at `$.urls`"),
    ({"urls": [f"https://a.example/{i}" for i in range(51)]},
     "`urls` holds 51 URLs; a batch fetches at most 50: split them into calls of 50 or fewer - at `$.urls`"),
    ({"urls": ["https://a.example/"], "offset": 10},
     "`offset` reads on in one page and does not go with `urls`: fetch that page's `url` with the `offset` its "
     "batch entry gave - at `$.offset`"),
    ({"urls": "https://a.example/"}, "Expected `array | null`, got `str` - at `$.urls`"),
])
def test_a_batch_request_names_1_to_50_urls_and_nothing_that_reads_one_page(fields, message):
    with pytest.raises(BadRequest) as e:
        decode_request(json.dumps({"id": 7, "op": "fetch", **fields}).encode())
    assert e.value.message == message and e.value.request_id == 7


def test_fifty_urls_are_a_batch():
    env = decode_request(json.dumps({"op": "fetch", "urls": [f"https://a.example/{i}" for i in range(50)]}).encode())
    assert len(env.request.urls) == MAX_BATCH_URLS and env.request.url == ""


# --- what a model reads -------------------------------------------------------------------------------


def _page(index: int, url: str, content: str, **extra) -> dict:
    return {"type": "page", "id": 1, "op": "fetch", "kind": "page", "url": url, "final_url": url, "status": 200,
            "content_type": "text/html", "title": f"Page {index}", "content": content, "offset": 0,
            "next_offset": extra.pop("next_offset", None), "total_chars": extra.pop("total_chars", len(content)),
            "cached": False, "age_s": 0.0, "extractor": "trafilatura", "truncated": False, "redirect_url": None,
            "model": None, "usage": None, "notes": [], "flags": [], "index": index, **extra}


def _batch(urls: list[str], failed: dict[int, tuple[str, str]]) -> dict:
    entries = [{"index": i, "url": u, **({"error": failed[i][0], "message": failed[i][1]} if i in failed else
                                         {"kind": "page"})} for i, u in enumerate(urls)]
    head = f"{len(urls) - len(failed)} of {len(urls)} URLs fetched" + (f", {len(failed)} failed" if failed else "")
    return {"type": "result", "id": 1, "op": "fetch", "kind": "batch", "pages": entries,
            "fetched": len(urls) - len(failed), "failed": len(failed), "content": head + "\n…"}


def test_the_pages_read_in_the_order_given_whatever_order_they_came_in():
    urls = ["https://a.example/", "https://b.example/", "https://c.example/"]
    pages = [_page(2, urls[2], "third"), {"type": "page", "id": 1, "index": 1, "url": urls[1],
                                          "error": {"code": "http_error", "message": "HTTP 404"}},
             _page(0, urls[0], "first", next_offset=5, total_chars=40)]
    text = batch_text(pages, _batch(urls, {1: ("http_error", "HTTP 404")}))
    assert text == (
        "2 of 3 URLs fetched, 1 failed\n\n"
        "── [1/3] https://a.example/\nhttps://a.example/ · \"Page 0\" · fetched now · characters 0–5 of 40\n\nfirst"
        "\n\n[More: call web_fetch with url \"https://a.example/\" and offset 5 to read on.]\n\n"
        "── [2/3] https://b.example/\nFAILED (http_error): HTTP 404\n\n"
        "── [3/3] https://c.example/\nhttps://c.example/ · \"Page 2\" · fetched now · all 5 characters\n\nthird")


def test_pages_that_do_not_fit_one_result_share_it_short_ones_whole_and_each_cut_one_says_where_to_read_on():
    urls = [f"https://a.example/{i}" for i in range(4)]
    long = "".join(f"line {i} of a long page\n" for i in range(3000))
    pages = [_page(0, urls[0], "short"), _page(1, urls[1], long), _page(2, urls[2], long),
             _page(3, urls[3], "also short")]
    text = batch_text(pages, _batch(urls, {}), limits=Limits(bytes=20_000, lines=2000))
    assert len(text.encode()) <= 20_000
    blocks = text.split("\n\n── ")
    assert [b.split("\n", 1)[0] for b in blocks[1:]] == [f"[{i + 1}/4] {u}" for i, u in enumerate(urls)]
    assert blocks[1].endswith("\n\nshort") and blocks[4].endswith("\n\nalso short")
    for b, url in ((blocks[2], urls[1]), (blocks[3], urls[2])):
        kept = b.split("\n\n", 1)[1].split("\n\n[Cut at", 1)[0]
        assert 8_000 < len(b.encode()) < 10_500, len(b.encode())  # an equal share of what the short ones left
        assert b.endswith(f"[Cut at the 50 KB limit of one tool result. Call web_fetch with url \"{url}\" and offset "
                          f"{len(kept)} to read on.]")
        assert long.startswith(kept)


# --- through the daemon -------------------------------------------------------------------------------


async def _frames(client, rid) -> list[dict]:
    frames = []
    while True:
        f = await client.receive()
        assert f is not None, "the daemon closed the connection"
        if f.get("id") != rid or f["type"] == "progress":
            continue
        frames.append(f)
        if f["type"] in ("result", "error"):
            return frames


async def test_a_batch_with_failing_urls_among_good_ones(start_daemon, site):
    # 127.0.0.1 let through; 127.0.0.2, another loopback address, is one the policy refuses
    daemon = await start_daemon(make_config(fetch=FetchConfig(allow_hosts=["127.0.0.1"])))
    closed = f"http://127.0.0.1:{free_port()}/"
    urls = [site.url("/article"), site.url("/missing-page"), site.url("/article", "127.0.0.2"), closed,
            "ftp://example.com/x", site.url("/notes.txt")]
    client = await daemon.client()
    with trio.fail_after(90):
        await client.send({"id": "b", "op": "fetch", "urls": urls})
        frames = await _frames(client, "b")
    *pages, result = frames
    assert [f["type"] for f in pages] == ["page"] * 6 and result["type"] == "result"
    by_index = {f["index"]: f for f in pages}
    assert sorted(by_index) == list(range(6))
    assert by_index[0]["kind"] == "page" and ARTICLE_TEXT[0] in by_index[0]["content"]
    assert by_index[0]["url"] == urls[0] and by_index[0]["op"] == "fetch" and by_index[0]["flags"] == []
    assert by_index[5]["content"] == "line one\nline two\n" and by_index[5]["extractor"] == "raw"
    errors = {i: by_index[i].get("error") or by_index[i] for i in (1, 2, 3, 4)}
    assert (errors[1]["code"], errors[1]["status"]) == ("http_error", 404)
    assert errors[2]["code"] == "blocked_url" and "fetch.allow_private" in errors[2]["message"]
    assert errors[3]["code"] == "network_error" and "ERR_CONNECTION_REFUSED" in errors[3]["message"]
    assert errors[4]["code"] == "invalid_url"
    assert [by_index[i]["url"] for i in range(6)] == urls
    assert (result["kind"], result["fetched"], result["failed"]) == ("batch", 2, 4)
    assert [(e["index"], e["url"], e.get("kind"), e.get("error")) for e in result["pages"]] == [
        (0, urls[0], "page", None), (1, urls[1], None, "http_error"), (2, urls[2], None, "blocked_url"),
        (3, urls[3], None, "network_error"), (4, urls[4], None, "invalid_url"), (5, urls[5], "page", None)]
    lines = result["content"].split("\n")
    assert lines[0] == "2 of 6 URLs fetched, 4 failed"
    assert lines[1].startswith(f"1. {urls[0]} — Otters return to the valley (")
    assert lines[2].startswith(f"2. {urls[1]} — failed (http_error): ")
    # the daemon serves on, and what the batch loaded is in the cache for a single fetch
    again = await daemon.fetch(site.url("/article"))
    assert again["cached"] is True and site.hits["/article"] == 1
    await client.aclose()


async def test_each_page_reaches_the_client_while_a_slower_one_is_still_loading(daemon, site):
    released = threading.Event()

    def held(h) -> None:
        released.wait(60)
        h.reply(200, "text/html", simple_page("Held back", *ARTICLE_TEXT))

    site.route("/held", held)
    for i in range(3):
        site.html(f"/quick{i}", simple_page(f"Quick {i}", *ARTICLE_TEXT))
    urls = [site.url("/held")] + [site.url(f"/quick{i}") for i in range(3)]
    client = await daemon.client()
    try:
        with trio.fail_after(90):
            await client.send({"id": "b", "op": "fetch", "urls": urls})
            arrived = []
            while len(arrived) < 3:  # without streaming these would wait for /held, which waits for them
                f = await client.receive()
                if f["type"] == "page":
                    arrived.append(f["index"])
                assert f["type"] in ("progress", "page"), f
            assert sorted(arrived) == [1, 2, 3] and site.hits["/held"] == 1
            released.set()
            rest = await _frames(client, "b")
    finally:
        released.set()
        await client.aclose()
    assert [(f["type"], f.get("index")) for f in rest] == [("page", 0), ("result", None)]
    assert rest[0]["title"] == "Held back" and [e["title"] for e in rest[1]["pages"]] == [
        "Held back", "Quick 0", "Quick 1", "Quick 2"]


async def test_a_batch_loads_at_most_max_renders_pages_at_once_the_servers_count(start_daemon, site):
    daemon = await start_daemon(make_config(browser=BrowserConfig(max_renders=2)))
    changed = threading.Condition()
    loading = {"now": 0, "most": 0, "started": 0}

    def counted(h) -> None:
        with changed:
            loading["now"] += 1
            loading["started"] += 1
            loading["most"] = max(loading["most"], loading["now"])
            changed.notify_all()
            # held until a second one loads beside it (a deadline, not a timing), so that a third would
            # overlap them too if the daemon let it
            changed.wait_for(lambda: loading["now"] >= 2 or loading["started"] == 8, timeout=20)
        time.sleep(0.2)
        with changed:
            loading["now"] -= 1
        h.reply(200, "text/html", simple_page("Counted", *ARTICLE_TEXT))

    urls = []
    for i in range(8):
        site.route(f"/counted{i}", counted)
        urls.append(site.url(f"/counted{i}"))
    with trio.fail_after(120):
        r = await daemon.request({"id": "b", "op": "fetch", "urls": urls})
    assert (r["kind"], r["fetched"]) == ("batch", 8), r
    assert loading["most"] == 2  # two at once: concurrent, but never more than the tabs there are


async def test_a_batch_with_find_searches_each_page_and_a_bad_pattern_loads_nothing(daemon, site):
    site.html("/other", simple_page("Other", "Nothing about the animal here, only weather and roads."))
    with trio.fail_after(60):
        r = await daemon.request({"id": "b", "op": "fetch", "urls": [site.url("/article"), site.url("/other")],
                                  "find": "otter"})
        bad = await daemon.request({"id": "c", "op": "fetch", "urls": [site.url("/article")], "find": "/(x/"})
    assert [(e["kind"], e["title"]) for e in r["pages"]] == [("find", "Otters return to the valley"),
                                                             ("find", "Other")]
    assert (bad["type"], bad["code"]) == ("error", "bad_request")
    assert "not a valid regular expression" in bad["message"]
    assert site.hits["/article"] == 1
