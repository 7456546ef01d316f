"""A fetch's `schema`: the sub-agent (the real pi, against the fake model server) answers with JSON that must
validate against it (kind "data"), is asked once more with the errors when it does not, and a reply that still
does not validate is `schema_mismatch`. Bad schemas are `bad_request` naming where; the reply is validated in a
parser worker, killed at the request's deadline."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from .support.flag_pages import LOGIN_REQUIRED
from .support.site import simple_page
from .test_subagent import PI, pi_home, sub_config  # noqa: F401  (pi_home is a fixture)

PRICE = {"type": "object", "properties": {"product": {"type": "string"}, "price": {"type": ["number", "null"]}},
         "required": ["product", "price"], "additionalProperties": False}
PRICED = simple_page("Otter plush", "The Otter plush toy costs 24.50 euros and ships in a week.",
                     "Reviews say it is soft.")
UNPRICED = simple_page("Otter plush", "The Otter plush toy is back. Ask the shop for its price.",
                       "Reviews say it is soft.")


def page_of(body: dict) -> str:
    """The fenced page text of a model request (the user message between the fence tags)."""
    text = "\n".join(m["content"] if isinstance(m["content"], str) else
                     "".join(p.get("text", "") for p in m["content"]) for m in body["messages"] if m["role"] == "user")
    return text[text.index("<untrusted_page_content"):text.index("</untrusted_page_content>")]


def honest_model(body: dict) -> str:
    """A model that does as the prompt says: the price when the page gives one, else null."""
    page = page_of(body)
    found = re.search(r"costs ([0-9.]+) euros", page)
    return json.dumps({"product": "Otter plush", "price": float(found.group(1)) if found else None})


async def test_a_schema_is_answered_with_validated_data_and_usage(start_daemon, site, llm, pi_home):  # noqa: F811
    site.html("/priced", PRICED)
    llm.reply = lambda body: '```json\n{"product": "Otter plush", "price": 24.5}\n```'
    d = await start_daemon(sub_config())
    r = await d.fetch(site.url("/priced"), schema=PRICE, prompt="the product and its price", model="fake/fake-1")
    assert r["type"] == "result" and r["kind"] == "data", r
    assert r["data"] == {"product": "Otter plush", "price": 24.5}
    assert json.loads(r["content"]) == r["data"]
    assert r["model"] == "fake/fake-1" and r["usage"]["total_tokens"] == 15 and r["flags"] == []
    sent = llm.user_text()
    assert '"price"' in sent and "the product and its price" in sent
    assert "never invent" in sent and "null" in sent
    assert len(llm.requests) == 1


async def test_a_value_the_page_lacks_comes_back_null(start_daemon, site, llm, pi_home):  # noqa: F811
    site.html("/unpriced", UNPRICED)
    llm.reply = honest_model
    d = await start_daemon(sub_config())
    r = await d.fetch(site.url("/unpriced"), schema=PRICE, model="fake/fake-1")
    assert r["kind"] == "data", r
    assert r["data"] == {"product": "Otter plush", "price": None}
    assert "A value the page does not contain is null" in llm.user_text()


async def test_a_reply_that_fails_once_is_asked_again_with_its_errors(start_daemon, site, llm, pi_home):  # noqa: F811
    site.html("/priced", PRICED)
    replies = iter(['{"product": "Otter plush", "price": "24.50 euros"}', '{"product": "Otter plush", "price": 24.5}'])
    llm.reply = lambda body: next(replies)
    d = await start_daemon(sub_config())
    r = await d.fetch(site.url("/priced"), schema=PRICE, model="fake/fake-1")
    assert r["kind"] == "data" and r["data"]["price"] == 24.5, r
    assert len(llm.requests) == 2
    retry = llm.user_text()
    assert "did not validate" in retry and "at $.price: '24.50 euros' is not of type 'number', 'null'" in retry
    assert r["usage"]["total_tokens"] == 30  # both calls counted


async def test_a_reply_that_fails_twice_is_schema_mismatch_naming_the_errors(start_daemon, site, llm,
                                                                             pi_home):  # noqa: F811
    site.html("/priced", PRICED)
    llm.reply = lambda body: '{"product": 7, "price": "cheap", "colour": "brown"}'
    d = await start_daemon(sub_config())
    r = await d.fetch(site.url("/priced"), schema=PRICE, model="fake/fake-1")
    assert r["type"] == "error" and r["code"] == "schema_mismatch", r
    assert "at $.price: 'cheap' is not of type 'number', 'null'" in r["message"]
    assert "at $.product: 7 is not of type 'string'" in r["message"]
    assert "Additional properties are not allowed ('colour' was unexpected)" in r["message"]
    assert "fetch it with `offset` 0" in r["message"]
    assert len(llm.requests) == 2
    raw = await d.fetch(site.url("/priced"), offset=0)  # the page offered is the cached one
    assert raw["kind"] == "page" and raw["cached"] is True and "24.50 euros" in raw["content"]


async def test_a_batch_gives_each_page_its_data_and_a_walled_one_its_flag(start_daemon, site, llm,
                                                                          pi_home):  # noqa: F811
    site.html("/priced", PRICED)
    site.html("/members", LOGIN_REQUIRED)
    llm.reply = honest_model
    d = await start_daemon(sub_config())
    c = await d.client()
    await c.send({"id": "b", "op": "fetch", "urls": [site.url("/priced"), site.url("/members")], "schema": PRICE,
                  "model": "fake/fake-1"})
    pages: list = []
    r = await c.terminal("b", pages=pages)
    assert r["kind"] == "batch" and r["fetched"] == 2, r
    by_index = {p["index"]: p for p in pages}
    good, walled = by_index[0], by_index[1]
    assert good["kind"] == "data" and good["data"] == {"product": "Otter plush", "price": 24.5}, good
    assert good["flags"] == []
    assert walled["kind"] == "data" and walled["data"] == {"product": "Otter plush", "price": None}, walled
    assert walled["flags"] == ["login_wall"]
    assert any(n.startswith("the data was read from a page flagged login_wall") for n in walled["notes"])
    assert [e.get("flags", []) for e in r["pages"]] == [[], ["login_wall"]]


async def test_a_page_beyond_the_sub_agents_input_is_read_in_parts_and_merged(start_daemon, site, llm,
                                                                              pi_home):  # noqa: F811
    schema = {"type": "object", "properties": {"paragraphs": {"type": "array", "items": {"type": "integer"}},
                                               "title": {"type": "string"}}}

    def per_part(body: dict) -> str:
        numbers = [int(n) for n in re.findall(r"Paragraph (\d+):", page_of(body))]
        return json.dumps({"paragraphs": [numbers[0], numbers[-1]], "title": f"from {numbers[0]}"})

    llm.reply = per_part
    d = await start_daemon(sub_config(max_input_chars=100_000))
    r = await d.fetch(site.url("/large"), schema=schema, model="fake/fake-1")
    assert r["kind"] == "data", r
    parts = len(llm.requests)
    assert parts == -(-r["total_chars"] // 100_000) or parts == -(-r["total_chars"] // 100_000) + 1
    assert r["data"]["paragraphs"][0] == 0 and r["data"]["paragraphs"][-1] == 1499
    assert len(r["data"]["paragraphs"]) == 2 * parts
    assert r["data"]["title"] == "from 0"
    note = next(n for n in r["notes"] if n.startswith(f"the page was read in {parts} parts"))
    assert "disagreed at $.title" in note
    assert f"this part (1 of {parts})" in llm.user_text(0) and f"this part ({parts} of {parts})" in llm.user_text(-1)


async def test_a_pattern_that_backtracks_on_the_reply_is_killed_at_the_deadline(start_daemon, site, llm,
                                                                                pi_home):  # noqa: F811
    site.html("/priced", PRICED)
    schema = {"type": "object", "properties": {"product": {"type": "string", "pattern": "^(a+)+$"}}}
    llm.reply = lambda body: json.dumps({"product": "a" * 40 + "!"})
    d = await start_daemon(sub_config())
    assert (await d.fetch(site.url("/priced")))["kind"] == "page"  # cached: the deadline is the validation's
    r = await d.fetch(site.url("/priced"), schema=schema, model="fake/fake-1", timeout_s=8)
    assert r["type"] == "error" and r["code"] == "timeout", r
    assert "validating the sub-agent's reply against the schema ran for 8 s" in r["message"]
    assert (await d.request({"id": 2, "op": "status"}))["type"] == "result"  # the daemon was never blocked


DEEP: dict = {"type": "object"}
for _ in range(40):
    DEEP = {"type": "array", "items": DEEP}

BAD_SCHEMAS = [
    ({"type": "object", "properties": {"price": {"type": "numbr"}}},
     "`schema` is not a valid JSON Schema (draft 2020-12): 'numbr' is not valid under any of the given schemas - at "
     "`$.schema.properties.price.type`"),
    ({"$defs": {"node": {"type": "object", "properties": {"children": {"type": "array",
                                                                       "items": {"$ref": "#/$defs/node"}}}}},
      "$ref": "#/$defs/node"},
     '`$ref` "#/$defs/node" leads back to a schema it is part of (a cycle); webfetch takes schemas without recursion: '
     'write out the levels you need - at `$.schema.$defs.node.properties.children.items.$ref`'),
    ({"$ref": "https://example.com/schema.json"},
     '`$ref` "https://example.com/schema.json" points outside the schema; only refs into it are taken (`#` or '
     '`#/$defs/NAME`), nothing is fetched - at `$.schema.$ref`'),
    (DEEP, "`schema` nests deeper than 32 objects and arrays; flatten it - at `$.schema" + ".items" * 32 + "`"),
    ({"type": "object", "description": "x" * 70_000},
     "`schema` is 70037 bytes of JSON; at most 65536 are taken: describe only the fields you need - at `$.schema`"),
]


@pytest.mark.parametrize(("schema", "message"), BAD_SCHEMAS, ids=["invalid", "cycle", "remote", "deep", "large"])
async def test_a_bad_schema_is_bad_request_naming_where_before_any_load(daemon, site, schema, message):
    r = await daemon.fetch(site.url("/article"), schema=schema)
    assert r["type"] == "error" and r["code"] == "bad_request", r
    assert r["message"] == message
    batch = await daemon.request({"id": "b", "op": "fetch", "urls": [site.url("/article")], "schema": schema})
    assert batch["type"] == "error" and batch["message"] == message
    assert "/article" not in site.hits


def test_a_huge_reply_is_refused_unread():
    from webfetch.parse import json_answer
    reply = json_answer.read_reply("[" + "1," * 200_000 + "1]", {"type": "array"})
    assert reply.errors == [f"the reply is {400_003} characters; at most {256 * 1024} are read"]


def test_cli_schema_from_a_file_prints_the_data(short_tmp, site, llm, pi_home):  # noqa: F811
    site.html("/priced", PRICED)
    llm.reply = honest_model
    cfg = short_tmp / "c.toml"
    cfg.write_text(f'[fetch]\nallow_private = true\n[server]\nidle_exit_s = 1\n[subagent]\ncommand = "{PI}"\n')
    schema = short_tmp / "price.json"
    schema.write_text(json.dumps(PRICE))
    r = subprocess.run([sys.executable, "-m", "webfetch", "fetch", "--config", str(cfg), site.url("/priced"),
                        "--schema", str(schema), "--model", "fake/fake-1"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "WEBFETCH_SOCKET": str(short_tmp / "wf.sock")})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"product": "Otter plush", "price": 24.5}
    bad = subprocess.run([sys.executable, "-m", "webfetch", "fetch", "--config", str(cfg), site.url("/priced"),
                          "--schema", "{not json"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "WEBFETCH_SOCKET": str(short_tmp / "wf.sock")})
    assert bad.returncode == 2
    assert "--schema: '{not json' is neither a file nor JSON" in bad.stderr
