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


# A long list whose members take their names from elsewhere than their own text: find over it walks only
# the members whose text may match (snapshot.js, cannotMatch), and must still reach every one of these.
NAMED_LIST = "<!doctype html><html><body><h1>Orders</h1><ul>" + "".join(
    f"<li><span>Order {i}</span> <button>Open {i}</button></li>" for i in range(400)) + """
<li><span>Order 400</span> <button aria-label="Refund Zebra">R</button></li>
<li><span>Order 401</span> <input value="Quokka note"></li>
<li><span>Order 402</span> <img alt="Yak photo" src="data:,"></li>
<li><span>Order 403</span><div>Wal</div><div>rus</div></li>
<li><span>Order 404</span> <span class="host"></span></li>
<li><div>ΟΔΟΣ</div><div>ΧΑ</div></li>
</ul><script>
document.querySelector(".host").attachShadow({mode: "open"}).innerHTML = "<button>Narwhal inside</button>";
</script></body></html>"""


async def test_find_over_a_long_list_reaches_names_from_attributes_values_and_shadow_roots(daemon, site):
    site.html("/named", NAMED_LIST)
    b = Browser(await daemon.client())
    page = await b.ok("open", url=site.url("/named"))
    assert "more listitem like these" in page["snapshot"]
    for find, line in (("refund zebra", '- button "Refund Zebra"'), ("Quokka", '- textbox "Order 401"'),
                       ("yak", '- img "Yak photo"'), ("wal rus", '- listitem "Order 403Wal rus"'),
                       ("narwhal", '- button "Narwhal inside"'), ("οδος", '- listitem "ΟΔΟΣ ΧΑ"'),
                       ("Open 399", '- button "Open 399"')):
        found = (await b.ok("snapshot", find=find, mode="full"))["snapshot"]
        assert any(x.strip().startswith(line) for x in found.splitlines()), (find, found)
    assert "Order 12" not in (await b.ok("snapshot", find="Open 399", mode="full"))["snapshot"]
