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
