"""Browse actions with real Chromium on the local app (tests/support/browse_app.py), issue 30's item 6: a
change inside a collapsed run of the snapshot is reported with the changed rows' lines (and refs that
work), and an action settles once the page is done yet waits for a page still changing."""

from __future__ import annotations

from .support.browse_app import App
from .test_browse import Browser, app, ref  # noqa: F401 - app is a fixture

__all__ = ["app"]


async def test_a_change_to_row_1500_of_a_collapsed_table_is_reported_with_its_lines(daemon, app: App):
    b = Browser(await daemon.client())
    page = await b.ok("open", url=app.url("/stock"))
    assert "- … 2997 more row like these" in page["snapshot"] and "Item 1500" not in page["snapshot"]

    sold = await b.ok("click", ref=ref(page["snapshot"], '- button "Sell out item 1500"'))
    assert sold["change"] == "dom" and sold["snapshot_kind"] == "diff", sold
    assert sold["snapshot"].splitlines()[1:] == [
        "- … row 1501 of 3000 changed inside a collapsed run:",
        '  - row "Item 1500 (sold out) Buy 1500"',
        '    - cell "Item 1500 (sold out)"',
        "    - cell",  # its link is gone
        '    - cell "Buy 1500"',
        f'      - button "Buy 1500" [ref={ref(sold["snapshot"], "- button")}]',
    ]
    # the ref it gave works, and an action that changes nothing reports nothing: the change was told once
    bought = await b.ok("click", ref=ref(sold["snapshot"], '- button "Buy 1500"'))
    assert (bought["change"], bought["snapshot_kind"], bought["snapshot"]) == ("none", "none", ""), bought

    # forty rows changed: counted, the first five shown, the rest reached with find
    frozen = await b.ok("click", ref=ref(page["snapshot"], '- button "Freeze 2000-2039"'))
    lines = frozen["snapshot"].splitlines()[1:]
    assert lines[0] == ("- … 40 rows (2001, 2002, 2003, 2004, 2005, …) of 3000 changed inside a collapsed run; "
                        "the first 5 below, snapshot with find: to reach the others:")
    shown = [line.strip() for line in lines if "- button" in line]
    assert [s.split(" [")[0] for s in shown] == [f'- button "Buy {n}"' for n in range(2000, 2005)]
    assert all("[disabled, ref=e" in s for s in shown)
    found = await b.ok("snapshot", find="Buy 2039")
    assert '- button "Buy 2039" [disabled, ref=' in found["snapshot"]


async def test_a_change_seen_on_a_settle_turn_that_was_not_the_last_is_still_reported(daemon, app: App):
    # the click marks row 701 and starts a slow request in the next animation frame: the settle's first quiet
    # turn (and the snapshot taken with it) ends while that request loads, so the settle waits and looks again
    b = Browser(await daemon.client())
    page = await b.ok("open", url=app.url("/stock"))
    restocked = await b.ok("click", ref=ref(page["snapshot"], '- button "Restock item 700"'))
    assert app.state.get("slow_done"), "the request the click started was waited for"
    assert restocked["change"] == "dom" and restocked["snapshot_kind"] == "diff", restocked
    assert restocked["snapshot"].splitlines()[1:3] == ["- … row 701 of 3000 changed inside a collapsed run:",
                                                       '  - row "Item 700 (restocked) details 700 Buy 700"']


async def test_changes_made_a_frame_or_a_task_after_the_action_are_waited_for(daemon, app: App):
    b = Browser(await daemon.client())
    snap = (await b.ok("open", url=app.url("/late")))["snapshot"]
    drawn = await b.ok("click", ref=ref(snap, '- button "Draw"'))
    assert drawn["change"] == "dom" and "Drawn in a frame" in drawn["snapshot"], drawn
    later = await b.ok("click", ref=ref(snap, '- button "Later"'))
    assert later["change"] == "dom" and "Done a task later" in later["snapshot"], later
    plan = await b.ok("select", ref=ref(snap, '- combobox "Plan"'), values=["Pro"])
    assert plan["change"] == "dom" and "Plan is Pro" in plan["snapshot"], plan
    hits = await b.ok("fill", ref=ref(snap, '- textbox "Search"'), text="lamps")
    assert hits["change"] == "dom" and "Results for lamps" in hits["snapshot"], hits
    # a field below the fold: filling it scrolls the page, and the page answers the scroll in the next frame
    far = await b.ok("fill", ref=ref(snap, '- textbox "Far field"'), text="x")
    assert far["change"] == "dom" and "Scrolled down" in far["snapshot"], far
