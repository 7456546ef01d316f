"""Layer 1: the text a model reads from web_fetch over MCP: the facts line, and a page cut to one tool result."""

from webfetch.frontends.tool_text import MAX_BYTES, MAX_LINES, browse_text, fetch_text


def frame(content: str, **fields) -> dict:
    return {"kind": "page", "url": "https://example.com/doc", "final_url": "https://example.com/doc",
            "title": "Doc", "content": content, "offset": 0, "total_chars": len(content), "cached": False,
            "age_s": 0, "notes": [], "next_offset": None, **fields}


def test_a_page_that_fits_is_the_facts_line_and_all_of_it():
    t = fetch_text(frame("# Doc\n\nShort.\n", cached=True, age_s=125))
    assert t.text == 'https://example.com/doc · "Doc" · cached (2 min old) · all 14 characters\n\n# Doc\n\nShort.\n'
    assert t.cut_at is None


def test_a_page_too_big_for_one_tool_result_is_cut_at_a_line_with_the_offset_to_read_on():
    line = "Добро пожаловать — a line with some multi-byte text in it.\n"  # 2 bytes a Cyrillic letter
    content = line * 1000  # 50 000 characters: one daemon page, but more than 50 KB
    t = fetch_text(frame(content, offset=1000, total_chars=200_000, notes=["a note"]))
    assert len(t.text.encode()) <= MAX_BYTES and t.text.count("\n") < MAX_LINES
    assert t.cut_at is not None and 1000 < t.cut_at < 1000 + len(content)
    kept = t.cut_at - 1000
    assert kept % len(line) == 0  # at a line boundary
    facts = t.text.split("\n")[0]
    assert facts == f'https://example.com/doc · "Doc" · fetched now · characters 1,000–{t.cut_at:,} of 200,000'
    assert t.text.endswith(f'[Cut at the 50 KB limit of one tool result. Call web_fetch with url '
                           f'"https://example.com/doc" and offset {t.cut_at} to read on.]\n\nNotes:\n- a note')


def test_answers_and_redirects_read_as_such():
    t = fetch_text(frame("Otters came back in 2019.", kind="answer", model="fake/fake-1", total_chars=4321))
    assert t.text.split("\n")[0].endswith(" · answer by fake/fake-1 from 4,321 characters")
    r = fetch_text({"kind": "redirect", "url": "https://a.example/", "redirect_url": "https://b.example/",
                    "status": 302})
    assert r.text == ("https://a.example/ redirects to https://b.example/ on a different host; call web_fetch with "
                      "that URL to follow it. (HTTP 302)")


def test_a_reply_starts_with_the_page_line_only_when_the_page_as_a_whole_changed_or_nothing_else_is_said():
    """Issue 40, context cost: changed lines of the document and URL the model read with its last snapshot,
    and a dialog holding the tab, are their own news; the page line (tab, title, URL) repeated over them is
    most of an action's reply. It stays wherever the page may have changed as a whole, and alone."""
    page = {"tab": "t1", "url": "http://127.0.0.1:8000/app", "title": "Dashboard"}
    diff = {"action": "click", "session": "s", "page": page, "change": "dom", "refs_reset": False,
            "snapshot": "[t1] Dashboard — http://127.0.0.1:8000/app\n- text \"In basket\"", "snapshot_kind": "diff"}
    assert browse_text(diff) == 'changed:\n- text "In basket"'
    assert browse_text({**diff, "forced": "offline"}) == 'forced: offline\nchanged:\n- text "In basket"'
    pushed = {**diff, "change": "same_document", "page": {**page, "url": "http://127.0.0.1:8000/app#/orders"}}
    assert browse_text(pushed).split("\n")[0] == ("[t1] Dashboard — http://127.0.0.1:8000/app#/orders · "
                                                  "new URL, same document")
    full = {**diff, "change": "navigation", "refs_reset": True, "snapshot_kind": "full"}
    assert browse_text(full) == '[t1] Dashboard — http://127.0.0.1:8000/app · new page\n- text "In basket"'
    nothing = {**diff, "change": "none", "snapshot": "", "snapshot_kind": "none"}
    assert browse_text(nothing) == "[t1] Dashboard — http://127.0.0.1:8000/app · no change"
    filled = {**nothing, "change": "dom", "value": "ann"}  # all that changed is what `value` says
    assert browse_text(filled) == "value now: ann"
    held = {**nothing, "dialog": {"type": "confirm", "message": "Delete everything?"}}
    assert browse_text(held) == 'dialog (confirm) waits for action dialog: "Delete everything?"'
