"""Property-based fuzzing of the request decoder and of the connection handler on a real Unix socket.
Invariant: every non-blank line gets exactly one terminal frame, nothing escapes the handler, and the
server keeps serving. The server runs in a thread of its own so hypothesis can drive it synchronously."""

import json
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webfetch.daemon import bind_socket
from webfetch.errors import BadRequest
from webfetch.protocol import FetchResult, decode_request
from webfetch.server import Server

EXAMPLES = 300

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70) | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20)

FIELDS = {
    "fetch": {"url": st.text(max_size=40) | st.just("https://example.com/"), "prompt": json_values,
              "offset": st.integers(min_value=-5, max_value=2**64), "max_chars": json_values, "raw": json_values,
              "fresh": json_values, "timeout_s": json_values, "model": json_values, "thinking": json_values},
    "search": {"query": json_values | st.text(max_size=50), "limit": st.integers(-3, 30) | json_values,
               "backend": st.sampled_from(["kagi", "brave", "searxng", "google", ""]) | json_values},
    "status": {},
    "cancel": {"target": json_values},
}


@st.composite
def mutated_requests(draw):
    op = draw(st.sampled_from([*FIELDS, "nope", 7]))
    body = {"op": op}
    if draw(st.booleans()):
        body["id"] = draw(st.integers(min_value=-2**70, max_value=2**70) | st.text(max_size=140) | json_values)
    for name, values in FIELDS.get(op, {}).items():
        if draw(st.booleans()):
            body[name] = draw(values)
    if draw(st.booleans()):
        body[draw(st.text(max_size=8))] = draw(json_values)
    return body


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_decoder_random_bytes(data):
    try:
        decode_request(data)
    except BadRequest:
        pass


@settings(max_examples=EXAMPLES, deadline=None)
@given(json_values | mutated_requests())
def test_decoder_random_json_and_mutated_requests(value):
    try:
        decode_request(json.dumps(value).encode())
    except BadRequest:
        pass


@pytest.mark.parametrize("line", [deep(10_000), '{"a":' * 5000 + "1" + "}" * 5000,
                                  '{"op":"fetch","url":"https://x.org","offset":1' + "0" * 400 + "}",
                                  '{"op":"status","id":' + "9" * 300 + "}"])
def test_decoder_deep_nesting_and_huge_numbers(line):
    with pytest.raises(BadRequest):
        decode_request(line.encode())


class ThreadedServer:
    """The real Server on a real Unix socket, in a trio loop on its own thread."""

    def __init__(self, path) -> None:
        self.path = path
        self.ready = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    async def handle(self, req, rid, progress, send):
        progress("render", "working")
        if hasattr(req, "url"):
            return FetchResult(id=rid, url=req.url, content="ok")
        return FetchResult(id=rid, content="other")

    def _main(self) -> None:
        async def main():
            self.token = trio.lowlevel.current_trio_token()
            server = Server(self.handle, max_line_bytes=4096)
            listener = trio.SocketListener(trio.socket.from_stdlib_socket(bind_socket(self.path)))
            async with trio.open_nursery() as nursery:
                self.scope = nursery.cancel_scope
                await nursery.start(server.serve, listener)
                self.ready.set()
        try:
            trio.run(main)
        except BaseException as e:  # anything escaping the server fails the test
            self.errors.append(e)

    def stop(self) -> None:
        trio.from_thread.run_sync(self.scope.cancel, trio_token=self.token)
        self.thread.join(10)


@pytest.fixture(scope="module")
def threaded():
    d = Path(tempfile.mkdtemp(prefix="wf-fuzz-"))
    s = ThreadedServer(d / "s.sock")
    yield s
    s.stop()
    shutil.rmtree(d, ignore_errors=True)
    assert s.errors == []


def exchange(path, chunks: list[bytes]) -> list[dict]:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(path))
        for c in chunks:
            s.sendall(c)
        s.shutdown(socket.SHUT_WR)  # half-close: the answers still come, then the server closes
        frames = [json.loads(line) for line in s.makefile("rb")]
    return [f for f in frames if f["type"] in ("result", "error")]


line_bodies = (mutated_requests().map(json.dumps) | json_values.map(json.dumps)
               | st.text(max_size=60).filter(lambda t: "\n" not in t and t.strip()))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])
@given(lines=st.lists(line_bodies, min_size=1, max_size=8), cuts=st.lists(st.integers(0, 2000), max_size=6))
def test_every_line_gets_one_terminal_frame(threaded, lines, cuts):
    lines = [line for line in lines if line.strip() and len(line.encode()) < 4000]
    data = "".join(line + "\n" for line in lines).encode()
    points = sorted({c % (len(data) + 1) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True) if data[a:b]]
    terminal = exchange(threaded.path, chunks)
    assert len(terminal) == len(lines), (lines, terminal)
    # ... and the server still serves everyone
    assert exchange(threaded.path, [b'{"id":"s","op":"status"}\n'])[0]["type"] == "result"
    assert threaded.errors == []
