"""Layer 1: the CDP client against a scripted fake browser (a websocket server in the test)."""

import json

import pytest
import trio
import trio_websocket

from webfetch.cdp import CDPClosed, CDPError, open_cdp


class FakeBrowser:
    """Answers each call with the script's reply; can hold replies, send events, or hang up."""

    def __init__(self) -> None:
        self.received: list[dict] = []
        self.held: list[dict] = []
        self.hold = False
        self.ws = None
        self.connected = trio.Event()

    async def handler(self, request) -> None:
        self.ws = await request.accept()
        self.connected.set()
        try:
            while True:
                msg = json.loads(await self.ws.get_message())
                self.received.append(msg)
                if msg["method"] == "Hang.up":
                    await self.ws.aclose()
                    return
                if msg["method"] == "Fail.please":
                    await self.ws.send_message(json.dumps({"id": msg["id"], "error": {"code": -32000,
                                                                                     "message": "nope"}}))
                elif self.hold:
                    self.held.append(msg)
                else:
                    await self.reply(msg)
        except trio_websocket.ConnectionClosed:
            pass

    async def reply(self, msg: dict) -> None:
        await self.ws.send_message(json.dumps({"id": msg["id"], "result": {"echo": msg["method"]},
                                               **({"sessionId": msg["sessionId"]} if "sessionId" in msg else {})}))

    async def event(self, method: str, session: str | None = None, **params) -> None:
        msg = {"method": method, "params": params}
        if session:
            msg["sessionId"] = session
        await self.ws.send_message(json.dumps(msg))


@pytest.fixture
async def fake(nursery):
    fb = FakeBrowser()
    listeners = await nursery.start(trio_websocket.serve_websocket, fb.handler, "127.0.0.1", 0, None)
    fb.url = f"ws://127.0.0.1:{listeners.port}/devtools/browser/x"
    return fb


async def test_replies_are_routed_by_id_even_out_of_order(fake):
    async with open_cdp(fake.url) as conn:
        fake.hold = True
        results = {}

        async def call(name):
            results[name] = await conn.call(name, {"n": name})

        async with trio.open_nursery() as n:
            n.start_soon(call, "A.one")
            n.start_soon(call, "B.two")
            with trio.fail_after(5):
                while len(fake.held) < 2:
                    await trio.sleep(0.01)
            for msg in reversed(fake.held):
                await fake.reply(msg)
        assert results == {"A.one": {"echo": "A.one"}, "B.two": {"echo": "B.two"}}


async def test_errors_become_cdp_errors(fake):
    async with open_cdp(fake.url) as conn:
        with pytest.raises(CDPError) as info:
            await conn.call("Fail.please")
        assert info.value.method == "Fail.please" and info.value.message == "nope"


async def test_events_are_routed_by_session(fake):
    async with open_cdp(fake.url) as conn:
        with conn.subscribe("S1") as s1, conn.subscribe("S2") as s2, conn.subscribe(None) as top:
            await conn.call("Ping.ping")
            await fake.event("Page.loadEventFired", "S2", t=1)
            await fake.event("Target.targetCreated", None)
            await fake.event("Page.loadEventFired", "S1", t=2)
            with trio.fail_after(5):
                assert (await s1.receive())["params"] == {"t": 2}
                assert (await s2.receive())["params"] == {"t": 1}
                assert (await top.receive())["method"] == "Target.targetCreated"


async def test_a_closed_connection_fails_every_pending_call_at_once(fake):
    async with open_cdp(fake.url) as conn:
        fake.hold = True
        failures = []

        async def call():
            try:
                await conn.call("Slow.call")
            except CDPClosed as e:
                failures.append(e)

        with conn.subscribe("S") as sub:
            with trio.fail_after(5):
                async with trio.open_nursery() as n:
                    for _ in range(3):
                        n.start_soon(call)
                    while len(fake.held) < 3:
                        await trio.sleep(0.01)
                    fake.hold = False
                    n.start_soon(call_hang_up, conn)
            assert len(failures) == 3 and all("websocket closed" in str(e) for e in failures)
            with pytest.raises(CDPClosed):
                await sub.receive()
        with pytest.raises(CDPClosed):
            await conn.call("After.close")


async def call_hang_up(conn):
    with pytest.raises(CDPClosed):
        await conn.call("Hang.up")


async def test_a_cancelled_call_forgets_its_pending_entry(fake):
    async with open_cdp(fake.url) as conn:
        fake.hold = True
        with trio.move_on_after(0.2):
            await conn.call("Never.answered")
        assert conn._pending == {}
        await fake.reply(fake.held[0])  # a late reply for a forgotten call is dropped quietly
        fake.hold = False
        assert await conn.call("Still.works") == {"echo": "Still.works"}


async def test_a_subscriber_that_falls_behind_is_closed_not_blocking_others(fake):
    async with open_cdp(fake.url) as conn:
        with conn.subscribe("slow", buffer=2) as slow, conn.subscribe("fast") as fast:
            await conn.call("Ping.ping")
            for i in range(5):
                await fake.event("E.e", "slow", i=i)
            await fake.event("E.e", "fast", i=99)
            with trio.fail_after(5):
                assert (await fast.receive())["params"] == {"i": 99}
            assert (await slow.receive())["params"] == {"i": 0}
            assert (await slow.receive())["params"] == {"i": 1}
            with pytest.raises(CDPClosed, match="fell behind"):
                await slow.receive()


async def test_connecting_to_nothing_is_a_clear_error():
    from tests.support.site import free_port
    with pytest.raises(CDPClosed, match="cannot connect"):
        async with open_cdp(f"ws://127.0.0.1:{free_port()}/devtools/browser/x"):
            pass


def test_feature_flags_are_merged_because_chrome_honours_only_the_last():
    from webfetch.launch import chrome_command
    cmd = chrome_command("/usr/bin/chromium", "/tmp/p", ["--disable-features=Foo,Translate", "--enable-features=Bar",
                                                         "--proxy-server=x"])
    disabled = [a for a in cmd if a.startswith("--disable-features=")]
    assert len(disabled) == 1
    assert disabled[0].split("=", 1)[1].split(",") == [
        "Translate", "MediaRouter", "OptimizationHints", "IsolateOrigins", "site-per-process", "WebUIOmniboxPopup",
        "WebUIOmniboxAimPopup", "Foo"]
    assert "--enable-features=Bar" in cmd and "--proxy-server=x" in cmd and cmd[-1] == "about:blank"


async def test_commands_in_order_are_all_sent_before_any_reply_and_answered_in_order(fake):
    async with open_cdp(fake.url) as conn:
        fake.hold = True
        got: list = []

        async def batch():
            got.extend(await conn.call_in_order([("Input.move", {"n": 1}), ("Input.press", {}), ("Input.release", {})],
                                                "S1"))

        async with trio.open_nursery() as n:
            n.start_soon(batch)
            with trio.fail_after(5):
                while len(fake.held) < 3:  # all three on the wire while none is answered
                    await trio.sleep(0.01)
            assert [(m["method"], m["sessionId"]) for m in fake.held] == [
                ("Input.move", "S1"), ("Input.press", "S1"), ("Input.release", "S1")]
            for msg in reversed(fake.held):
                await fake.reply(msg)
        assert got == [{"echo": "Input.move"}, {"echo": "Input.press"}, {"echo": "Input.release"}]
        assert conn._pending == {}
        fake.hold = False
        with pytest.raises(CDPError):  # one failed command fails the batch, after every reply came
            await conn.call_in_order([("Ping.ping", {}), ("Fail.please", {})])
        assert conn._pending == {}
