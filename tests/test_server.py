"""Layer 2: the socket server on a real Unix socket, with a scripted request handler."""

import json
import os
import socket

import pytest
import trio

from webfetch.daemon import bind_socket
from webfetch.protocol import FetchRequest, FetchResult, PageFrame
from webfetch.server import Server

from .support.client import LineClient

EXAMPLE = '{"id":1,"op":"fetch","url":"https://example.com"}'


class Script:
    def __init__(self) -> None:
        self.cancelled: list = []
        self.started: list = []

    async def handle(self, req, rid, progress, send):
        self.started.append(rid)
        if isinstance(req, FetchRequest) and req.urls is not None:
            for i, url in enumerate(req.urls):  # a batch's page frames, each before the terminal one
                if url.startswith("sleep:"):
                    await trio.sleep(float(url[6:]))
                await send(PageFrame(id=rid, index=i, url=url, content=f"page {i}"))
            return FetchResult(id=rid, content="batch done")
        if isinstance(req, FetchRequest):
            if req.url.startswith("sleep:"):
                try:
                    await trio.sleep(float(req.url[6:]))
                except trio.Cancelled:
                    self.cancelled.append((rid, trio.current_time()))
                    raise
            if req.url == "boom":
                raise RuntimeError("kaboom")
            progress("render", "working")
            return FetchResult(id=rid, url=req.url, content=f"done {req.url}")
        return FetchResult(id=rid, content="other")


@pytest.fixture
async def served(nursery, short_tmp):
    script = Script()
    server = Server(script.handle, max_line_bytes=4096)
    path = short_tmp / "s.sock"
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(bind_socket(path)))
    await nursery.start(server.serve, listener)
    server.path, server.script = path, script
    return server


async def client(served) -> LineClient:
    return await LineClient.connect(served.path)


async def test_non_json_gets_an_example_and_the_connection_stays_open(served):
    c = await client(served)
    await c.send(b"hello there\n")
    f = await c.receive()
    assert f["type"] == "error" and f["id"] is None and f["code"] == "bad_request"
    assert EXAMPLE in f["message"]
    r = await c.request({"id": 2, "op": "fetch", "url": "x"})
    assert r["type"] == "result" and r["content"] == "done x"


async def test_binary_garbage_and_wrong_shapes(served):
    c = await client(served)
    for junk in (b"\x00\xff\xfe\x80garbage\n", b"[1,2,3]\n", b'"str"\n', b'{"id":{"a":1},"op":"status"}\n'):
        await c.send(junk)
        f = await c.receive()
        assert f["type"] == "error" and f["code"] == "bad_request" and f["id"] is None
    await c.send(b'{"id":"u","op":"teleport"}\n')
    f = await c.receive()
    assert f == {"type": "error", "id": "u", "code": "bad_request",
                 "message": "unknown op 'teleport'; expected one of fetch, search, browse, status, cancel, stop, "
                            "reload, crawl, map, cache_clear, view - at `$.op`"}
    await c.send(b'{"id":"w","op":"fetch","url":3}\n')
    f = await c.receive()
    assert f["id"] == "w" and f["message"] == "Expected `str`, got `int` - at `$.url`"
    assert (await c.request({"id": "ok", "op": "status"}))["type"] == "result"


async def test_line_too_long_closes_the_connection_after_its_frame(served):
    c = await client(served)
    await c.send(b'{"id":1,"op":"fetch","url":"' + b"a" * 5000)
    f = await c.receive()
    assert f["type"] == "error" and f["code"] == "line_too_long" and f["id"] is None
    assert "4096 bytes" in f["message"]
    assert await c.receive() is None
    other = await client(served)
    assert (await other.request({"id": 1, "op": "status"}))["type"] == "result"


async def test_duplicate_id_in_flight_is_refused(served):
    c = await client(served)
    await c.send({"id": "d", "op": "fetch", "url": "sleep:0.3"})
    await c.send({"id": "d", "op": "fetch", "url": "sleep:0.3"})
    first = await c.receive()
    assert first["type"] == "error" and first["code"] == "bad_request" and first["id"] == "d"
    assert "already in flight" in first["message"]
    done = await c.terminal("d")
    assert done["type"] == "result" and done["content"] == "done sleep:0.3"


async def test_omitted_id_is_assigned_and_echoed(served):
    c = await client(served)
    await c.send({"op": "fetch", "url": "x"})
    frames = [await c.receive(), await c.receive()]
    assert frames[0]["type"] == "progress" and frames[1]["type"] == "result"
    assert frames[0]["id"] == frames[1]["id"] and isinstance(frames[1]["id"], str)


async def test_many_requests_in_one_write_and_lines_split_across_writes(served):
    c = await client(served)
    await c.send(b"".join(b'{"id":%d,"op":"fetch","url":"u%d"}\n' % (i, i) for i in range(20)))
    line = b'{"id":"split","op":"fetch","url":"s"}\n'
    for i in range(0, len(line), 5):
        await c.send(line[i:i + 5])
        await trio.sleep(0.01)
    got = {}
    while len(got) < 21:
        f = await c.receive()
        if f["type"] == "result":
            got[f["id"]] = f["content"]
    assert got["split"] == "done s" and all(got[i] == f"done u{i}" for i in range(20))


async def test_a_requests_early_frames_arrive_in_order_before_its_terminal_one_others_interleave(served):
    c = await client(served)
    await c.send({"id": "batch", "op": "fetch", "urls": ["a", "sleep:0.3", "c"]})
    await c.send({"id": "single", "op": "fetch", "url": "s"})
    seen = []
    while ("result", "batch") not in seen:
        f = await c.receive()
        if f["type"] != "progress":
            seen.append((f["type"], f["id"]) if f["type"] != "page" else (f["type"], f["index"]))
    assert [x for x in seen if x[0] == "page"] + [("result", "batch")] == [
        ("page", 0), ("page", 1), ("page", 2), ("result", "batch")]
    assert seen[-1] == ("result", "batch") and ("result", "single") in seen


async def test_cancel_ends_the_target_with_cancelled(served):
    c = await client(served)
    await c.send({"id": "long", "op": "fetch", "url": "sleep:30"})
    while "long" not in served.script.started:
        await trio.sleep(0.01)
    r = await c.request({"id": "c1", "op": "cancel", "target": "long"})
    assert r == {"type": "result", "id": "c1", "op": "cancel", "target": "long", "found": True}
    f = await c.terminal("long")
    assert f["type"] == "error" and f["code"] == "cancelled" and "'long'" in f["message"]
    r = await c.request({"id": "c2", "op": "cancel", "target": "nothing"})
    assert r["found"] is False


async def test_disconnect_cancels_within_a_second(served):
    c = await client(served)
    await c.send({"id": 1, "op": "fetch", "url": "sleep:30"})
    while 1 not in served.script.started:
        await trio.sleep(0.01)
    gone_at = trio.current_time()
    await c.aclose()
    with trio.fail_after(1.0):
        while not served.script.cancelled:
            await trio.sleep(0.01)
    assert served.script.cancelled[0][1] - gone_at < 1.0
    assert served.in_flight == 0


async def test_half_closed_client_still_gets_its_results(served):
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.connect(str(served.path))
    stream = trio.SocketStream(sock)
    c = LineClient(stream)
    await c.send({"id": 1, "op": "fetch", "url": "sleep:1.5"})
    await stream.send_eof()  # what `nc -N` does
    f = await c.terminal(1)
    assert f["type"] == "result" and f["content"] == "done sleep:1.5"
    assert not served.script.cancelled
    assert await c.receive() is None  # the daemon closes after the last terminal frame


async def test_an_exception_becomes_internal_and_the_server_keeps_serving(served, caplog):
    c = await client(served)
    f = await c.request({"id": 1, "op": "fetch", "url": "boom"})
    assert f["type"] == "error" and f["code"] == "internal" and "kaboom" in f["message"]
    assert "Traceback" in caplog.text and "RuntimeError: kaboom" in caplog.text
    assert (await c.request({"id": 2, "op": "fetch", "url": "x"}))["type"] == "result"


async def test_silent_and_stuck_clients_do_not_block_others(served):
    silent = [await client(served) for _ in range(5)]
    results = []

    async def one(i):
        c = await client(served)
        results.append(await c.request({"id": i, "op": "fetch", "url": "sleep:0.2"}))
        await c.aclose()

    with trio.fail_after(20):
        async with trio.open_nursery() as n:
            for i in range(200):
                n.start_soon(one, i)
    assert len(results) == 200 and all(r["type"] == "result" for r in results)
    for s in silent:
        await s.aclose()


async def test_another_users_connection_is_refused_even_through_a_loosened_socket(served):
    if os.geteuid() != 0:
        pytest.skip("connecting as another user needs root (CI runs as root)")
    # the system's Python: the test's own may live where the other user cannot read
    served.path.parent.chmod(0o755)  # as if someone loosened the permissions by hand
    served.path.chmod(0o666)
    probe = (f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(served.path)!r}); "
             "s.sendall(b'{\"id\":1,\"op\":\"status\"}\\n'); print(s.makefile().read())")
    done = await trio.run_process(["/usr/bin/python3", "-c", probe], capture_stdout=True, user=65534, group=65534)
    frames = [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]
    assert frames == [{"type": "error", "id": None, "code": "forbidden", "message":
                       f"this webfetch daemon serves only its own user (uid {os.geteuid()}); start your own "
                       f"with `webfetch serve`"}]
    assert served.script.started == []
    c = await client(served)  # its own user is still served
    assert (await c.request({"id": 2, "op": "status"}))["type"] == "result"
