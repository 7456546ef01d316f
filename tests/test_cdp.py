"""Layer 1: the CDP client against a scripted fake browser, over both transports: a websocket server in
the test (a browser webfetch attaches to) and a pair of real pipes framed as Chrome's
--remote-debugging-pipe frames them (the Chrome webfetch launches). Then the pipe's framing itself."""

import json
import os
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing
import trio_websocket

from webfetch.cdp import CDPClosed, CDPError, open_cdp, open_cdp_pipe
from webfetch.cdp_transport import READ_CHUNK, PipeTransport


class BrowserPipeEnd:
    """The browser's end of a DevTools pipe pair, as Chrome speaks it: JSON texts each ended by a NUL byte.
    Written apart from cdp_transport.py, so that the two sides are not one implementation agreeing with
    itself."""

    def __init__(self, reads: int, writes: int) -> None:
        self._in = trio.lowlevel.FdStream(reads)
        self._out = trio.lowlevel.FdStream(writes)
        self._buf = b""
        self._lock = trio.Lock()

    async def get_message(self) -> bytes:
        while b"\0" not in self._buf:
            chunk = await self._in.receive_some()
            if not chunk:
                raise EOFError
            self._buf += chunk
        message, _, self._buf = self._buf.partition(b"\0")
        return message

    async def send_message(self, text: str) -> None:
        async with self._lock:
            await self._out.send_all(text.encode() + b"\0")

    async def aclose(self) -> None:
        await self._out.aclose()
        await self._in.aclose()


class FakeBrowser:
    """Answers each call with the script's reply; can hold replies, send events, or hang up."""

    def __init__(self) -> None:
        self.received: list[dict] = []
        self.held: list[dict] = []
        self.hold = False
        self.ws = None
        self.connected = trio.Event()
        self.url: str | None = None  # on a websocket: its URL; on a pipe: our ends of the pipes
        self.ours: tuple[int, int] | None = None

    def open(self):
        """webfetch's CDP connection to this browser."""
        if self.url is not None:
            return open_cdp(self.url)
        assert self.ours is not None
        return open_cdp_pipe(PipeTransport(*(trio.lowlevel.FdStream(fd) for fd in self.ours)))

    async def handler(self, request) -> None:
        self.ws = await request.accept()
        await self.serve()

    async def serve(self) -> None:
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
        except (trio_websocket.ConnectionClosed, EOFError, trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    async def reply(self, msg: dict) -> None:
        await self.ws.send_message(json.dumps({"id": msg["id"], "result": {"echo": msg["method"]},
                                               **({"sessionId": msg["sessionId"]} if "sessionId" in msg else {})}))

    async def event(self, method: str, session: str | None = None, **params) -> None:
        msg = {"method": method, "params": params}
        if session:
            msg["sessionId"] = session
        await self.ws.send_message(json.dumps(msg))


# what a pending call's CDPClosed says when the browser hangs up, on each transport
HANG_UP = {"websocket": "websocket closed", "pipe": "the browser closed its DevTools pipe (it exited)"}


@pytest.fixture(params=["websocket", "pipe"])
async def fake(request, nursery):
    fb = FakeBrowser()
    fb.transport = request.param
    if request.param == "websocket":
        listeners = await nursery.start(trio_websocket.serve_websocket, fb.handler, "127.0.0.1", 0, None)
        fb.url = f"ws://127.0.0.1:{listeners.port}/devtools/browser/x"
    else:
        to_browser, from_browser = os.pipe(), os.pipe()
        fb.ws = BrowserPipeEnd(to_browser[0], from_browser[1])
        fb.ours = (to_browser[1], from_browser[0])
        nursery.start_soon(fb.serve)
    yield fb
    if request.param == "pipe":
        await fb.ws.aclose()


async def test_replies_are_routed_by_id_even_out_of_order(fake):
    async with fake.open() as conn:
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
    async with fake.open() as conn:
        with pytest.raises(CDPError) as info:
            await conn.call("Fail.please")
        assert info.value.method == "Fail.please" and info.value.message == "nope"


async def test_events_are_routed_by_session(fake):
    async with fake.open() as conn:
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
    async with fake.open() as conn:
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
            assert len(failures) == 3 and all(HANG_UP[fake.transport] in str(e) for e in failures), failures
            with pytest.raises(CDPClosed):
                await sub.receive()
        with pytest.raises(CDPClosed):
            await conn.call("After.close")


async def call_hang_up(conn):
    with pytest.raises(CDPClosed):
        await conn.call("Hang.up")


async def test_a_cancelled_call_forgets_its_pending_entry(fake):
    async with fake.open() as conn:
        fake.hold = True
        with trio.move_on_after(0.2):
            await conn.call("Never.answered")
        assert conn._pending == {}
        await fake.reply(fake.held[0])  # a late reply for a forgotten call is dropped quietly
        fake.hold = False
        assert await conn.call("Still.works") == {"echo": "Still.works"}


async def test_a_subscriber_that_falls_behind_is_closed_not_blocking_others(fake):
    async with fake.open() as conn:
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
    async with fake.open() as conn:
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


async def test_calls_sent_at_once_arrive_whole_even_when_larger_than_a_pipe_holds(fake):
    """Several tasks call at once with messages of 300 KB (a pipe holds 64 KiB, so each write waits for the
    browser to read): every message reaches the browser whole, none interleaved with another."""
    async with fake.open() as conn:
        got: dict[int, dict] = {}

        async def call(i: int) -> None:
            got[i] = await conn.call("Runtime.evaluate", {"expression": str(i) * 300_000})

        with trio.fail_after(20):
            async with trio.open_nursery() as n:
                for i in range(6):
                    n.start_soon(call, i)
        assert got == {i: {"echo": "Runtime.evaluate"} for i in range(6)}
        assert sorted(m["params"]["expression"] for m in fake.received) == [str(i) * 300_000 for i in range(6)]


# --- the pipe's framing ---------------------------------------------------------------------------------


@asynccontextmanager
async def pipes(max_message: int = 512 * 1024 * 1024):
    """webfetch's PipeTransport on two real pipes, and the browser's ends as raw trio streams."""
    to_browser, from_browser = os.pipe(), os.pipe()
    transport = PipeTransport(trio.lowlevel.FdStream(to_browser[1]), trio.lowlevel.FdStream(from_browser[0]),
                              max_message)
    browser_reads, browser_writes = trio.lowlevel.FdStream(to_browser[0]), trio.lowlevel.FdStream(from_browser[1])
    try:
        yield transport, browser_reads, browser_writes
    finally:
        for stream in (transport, browser_reads, browser_writes):
            await stream.aclose()


async def test_the_pipe_gives_whole_messages_however_the_bytes_arrive():
    big = b'{"id":3,"result":{"v":"' + b"x" * (3 * READ_CHUNK + 17) + b'"}}'
    async with pipes() as (transport, _, browser):
        async def write() -> None:
            for piece in (b'{"id":1,', b'"result":{}}\0{"id":2,"result":{}}\0' + big[:10], big[10:], b"\0"):
                await browser.send_all(piece)
                await trio.sleep(0.02)  # each piece a read of its own

        with trio.fail_after(10):
            async with trio.open_nursery() as n:
                n.start_soon(write)
                assert await transport.receive() == b'{"id":1,"result":{}}'  # split across two reads
                assert await transport.receive() == b'{"id":2,"result":{}}'  # one read held two messages' bytes
                assert await transport.receive() == big  # four chunks of at most READ_CHUNK, then its NUL


async def test_each_message_is_a_checkpoint_even_when_one_read_brought_many():
    """As trio's receive calls are, and as the websocket's is: a reader routing a read's worth of events
    at once would run ahead of the tasks that take them in order."""
    async with pipes() as (transport, _, browser):
        await browser.send_all(b'{"id":1}\0{"id":2}\0{"id":3}\0')
        assert await transport.receive() == b'{"id":1}'  # the read
        for expected in (b'{"id":2}', b'{"id":3}'):  # already in the buffer
            with trio.testing.assert_checkpoints():
                assert await transport.receive() == expected


@pytest.mark.parametrize("ended", [True, False], ids=["with-its-NUL", "never-ended"])
async def test_a_message_over_the_cap_ends_the_connection_with_a_clear_error(ended):
    """The pipe's size limit acts as the websocket's: the calls waiting fail at once (one of them waited for
    the reply that was too large), the pipe is closed (Chrome exits on it), and no more than the cap is
    ever buffered: a message with no end is not read on for ever."""
    async with pipes(max_message=1000) as (transport, browser_reads, browser):
        async with open_cdp_pipe(transport) as conn:
            async def answer_too_large() -> None:
                request = await browser_reads.receive_some()
                msg_id = json.loads(request.rstrip(b"\0"))["id"]
                reply = json.dumps({"id": msg_id, "result": {"v": "x" * 5000}}).encode()
                await browser.send_all(reply + b"\0" if ended else reply)

            with trio.fail_after(10):
                async with trio.open_nursery() as n:
                    n.start_soon(answer_too_large)
                    with pytest.raises(CDPClosed, match="^the browser sent a message over 1000 bytes$"):
                        await conn.call("DOM.getOuterHTML")
            assert conn.is_closed
            with pytest.raises(CDPClosed, match="over 1000 bytes"):
                await conn.call("After.that")
            with trio.fail_after(5):
                assert await browser_reads.receive_some() == b""  # our end is closed: Chrome reads EOF
