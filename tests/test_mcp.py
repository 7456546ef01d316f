"""`webfetch mcp` as a real process, driven by the MCP SDK's own stdio client, forwarding to a real daemon (its
own Chrome) that the MCP server starts itself; pages from tests/support/site.py, prompts answered by the real pi
against the fake LLM, the browser tool on tests/support/browse_app.py with its end state checked on the app's server."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import struct
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client, StdioServerParameters

from .support import procs
from .support.browse_app import App
from .support.client import LineClient, run_cli
from .support.daemon import DEVTOOLS_PORT_ARG
from .support.procs import children, gone
from .support.site import ARTICLE_TEXT, free_port
from .support.waiting_browser import user_browser_config, waiting_browser
from .test_browse import ref

PI = Path(__file__).parent / "node" / "node_modules" / ".bin" / "pi"


def _pids_serving(socket: Path) -> list[int]:
    """The daemons started for `socket` (each test's own path, so only processes this test started)."""
    return [pid for pid in procs.pids() if b"serve" in (argv := procs.cmdline(pid)) and str(socket).encode() in argv]


class McpSetup:
    """A config, a socket path and a TMPDIR of its own for the daemon the MCP server will start."""

    def __init__(self, dir: Path, config: str, env: dict[str, str]) -> None:
        self.dir = dir
        self.socket = dir / "wf.sock"
        self.config = dir / "config.toml"
        self.config.write_text(config)
        self.env = {**os.environ, "TMPDIR": str(dir), "KAGI_API_KEY": "", "BRAVE_API_KEY": "",
                    "WEBFETCH_SOCKET": str(self.socket), **env}

    def argv(self, *extra: str) -> list[str]:
        return ["-m", "webfetch", "mcp", "--config", str(self.config), *extra]

    def client(self, mode: str = "legacy", cwd: Path | None = None) -> Client:
        # "legacy": the initialize handshake, as Claude Code, Codex and the other clients speak today;
        # "auto": the SDK's default, which speaks 2026-07-28 (server/discover) to a server that knows it
        return Client(StdioServerParameters(command=sys.executable, args=self.argv(), env=self.env, cwd=cwd),
                      mode=mode)

    def daemon_pid(self) -> int:
        pids = _pids_serving(self.socket)
        assert len(pids) == 1, f"expected one daemon on {self.socket}, found {pids}"
        return pids[0]

    async def status(self) -> dict[str, Any]:
        c = await LineClient.connect(self.socket)
        try:
            with trio.fail_after(10):
                return await c.request({"id": "st", "op": "status"})
        finally:
            await c.aclose()

    async def loaded_tabs(self) -> list[str]:
        """The URLs of the daemon's Chrome tabs that hold a page (pool tabs are blank), as Chrome lists them
        (on the port the setup gave it: `mcp_setup(devtools_port=True)`)."""
        ports = list(self.dir.glob("webfetch-chrome-*/profile/DevToolsActivePort"))
        assert ports, "the daemon's Chrome has no DevToolsActivePort: give it one with mcp_setup(devtools_port=True)"
        port = ports[0].read_text().split("\n")[0].strip()

        def get() -> list[dict[str, Any]]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                return json.loads(r.read())
        targets = await trio.to_thread.run_sync(get)
        return [t["url"] for t in targets if t["type"] == "page" and t["url"] not in ("about:blank", "")]

    def stop(self) -> None:
        pids = _pids_serving(self.socket)
        for pid in pids:
            os.kill(pid, signal.SIGTERM)
        assert gone(pids, 30), "the daemon did not stop"


@pytest.fixture
def mcp_setup(short_tmp):
    made: list[McpSetup] = []

    def make(config: str = "", *, private: bool = True, devtools_port: bool = False, **env: str) -> McpSetup:
        """`devtools_port`: the daemon's Chrome opens a DevTools port as well as its pipe, for `loaded_tabs`."""
        fetch = "[fetch]\nallow_private = true\n" if private else ""
        port = f"[browser]\nargs = [{json.dumps(DEVTOOLS_PORT_ARG)}]\n" if devtools_port else ""
        s = McpSetup(short_tmp, fetch + port + "[server]\nidle_exit_s = 120\n" + config, env)
        made.append(s)
        return s
    yield make
    for s in made:
        s.stop()


@pytest.fixture
def pi_home(llm, short_tmp):
    """An isolated pi agent dir whose only provider is the fake server."""
    assert PI.exists(), f"{PI} is missing: bin/test installs it (npm ci in tests/node)"
    home = short_tmp / "pi-agent"
    home.mkdir()
    (home / "models.json").write_text(json.dumps(llm.models_json()))
    return home


def _text(result: Any) -> str:
    return "".join(c.text for c in result.content if c.type == "text")


async def test_a_daemon_not_yet_running_is_started_tools_listed_page_fetched_with_progress(mcp_setup, site):
    setup = mcp_setup('[subagent]\ncommand = "true"\n')  # a sub-agent CLI is found: web_fetch offers `prompt`
    assert not setup.socket.exists()
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    with trio.fail_after(90):
        async with setup.client() as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            # no search backend configured: web_search is left out, not listed to fail
            assert list(tools) == ["web_fetch", "agent_browser"]
            fetch = tools["web_fetch"]
            assert fetch.annotations.read_only_hint is True and fetch.annotations.open_world_hint is True
            assert fetch.annotations.destructive_hint is False
            assert "pass a `prompt`" in fetch.description
            assert set(fetch.input_schema["properties"]) == {"url", "urls", "prompt", "schema", "offset", "raw",
                                                             "fresh", "find", "profile", "browser", "hidden"}
            assert "required" not in fetch.input_schema  # `url` or `urls`: the daemon says when neither is given
            assert setup.socket.exists()  # listing the tools started the daemon

            r = await client.call_tool("web_fetch", {"url": site.url("/article")}, progress_callback=on_progress)
    assert r.is_error is False
    text = _text(r)
    facts, _, body = text.partition("\n\n")
    assert facts.startswith(f'{site.url("/article")} · "Otters return to the valley" · fetched now · all ')
    assert ARTICLE_TEXT[0] in body and "Copyright" not in body
    assert progress and [v for v, _ in progress] == sorted(v for v, _ in progress)
    assert any(m and "loading" in m for _, m in progress), progress


async def test_errors_are_tool_errors_with_the_daemons_code(mcp_setup, site):
    setup = mcp_setup()
    with trio.fail_after(90):
        async with setup.client() as client:
            r = await client.call_tool("web_fetch", {"url": site.url("/missing-page")})
            bad = await client.call_tool("web_fetch", {"url": "ftp://example.com/x"})
            cached = await client.call_tool("web_fetch", {"url": site.url("/article"), "offset": 100, "raw": True})
    assert r.is_error is True
    assert _text(r).startswith("http_error: ") and "404" in _text(r)
    assert r.structured_content["code"] == "http_error" and r.structured_content["status"] == 404
    assert bad.is_error is True and bad.structured_content["code"] == "invalid_url"
    assert _text(bad) == ("invalid_url: 'ftp://example.com/x' is not an http(s) URL; pass a full URL such as "
                          "https://example.com/page")
    assert cached.is_error is False and " · characters 100–" in _text(cached).split("\n")[0]


async def test_web_fetch_with_urls_returns_the_pages_in_order_each_with_its_own_error(mcp_setup, site):
    setup = mcp_setup()
    closed = f"http://127.0.0.1:{free_port()}/"
    urls = [site.url("/notes.txt"), site.url("/missing-page"), closed, site.url("/article")]
    with trio.fail_after(90):
        async with setup.client() as client:
            r = await client.call_tool("web_fetch", {"urls": urls})
            neither = await client.call_tool("web_fetch", {})
            too_many = await client.call_tool("web_fetch", {"urls": [site.url(f"/p{i}") for i in range(51)]})
    assert r.is_error is False
    text = _text(r)
    head, *blocks = text.split("\n\n── ")
    assert head == "2 of 4 URLs fetched, 2 failed"
    assert [b.split("\n", 1)[0] for b in blocks] == [f"[{i + 1}/4] {u}" for i, u in enumerate(urls)]
    assert blocks[0].endswith(" · all 18 characters\n\nline one\nline two\n")
    assert blocks[1].startswith(f"[2/4] {urls[1]}\nFAILED (http_error): ") and "404" in blocks[1]
    assert blocks[2].startswith(f"[3/4] {urls[2]}\nFAILED (network_error): ")
    assert ARTICLE_TEXT[0] in blocks[3]
    assert neither.is_error is True and _text(neither) == (
        "bad_request: web_fetch needs `url` (one page) or `urls` (several, up to 50): absolute http(s) URLs")
    assert too_many.is_error is True and _text(too_many).startswith(
        "bad_request: `urls` holds 51 URLs; a batch fetches at most 50")
    assert not any(site.hits.get(f"/p{i}") for i in range(51))


async def test_a_prompt_without_a_model_returns_the_page_saying_how_to_configure_one(mcp_setup, site, pi_home):
    setup = mcp_setup(f"[subagent]\ncommand = {json.dumps(str(PI))}\n", PI_CODING_AGENT_DIR=str(pi_home))
    with trio.fail_after(90):
        async with setup.client() as client:
            r = await client.call_tool("web_fetch", {"url": site.url("/article"), "prompt": "Who noticed?"})
    text = _text(r)
    assert r.is_error is False and ARTICLE_TEXT[0] in text
    assert "Notes:\n- no model for the sub-agent: set subagent.model = \"provider/id\" in " in text


async def test_a_prompt_gets_the_configured_models_answer_and_cancel_kills_the_sub_agent(mcp_setup, site, llm,
                                                                                         pi_home):
    setup = mcp_setup(f'[subagent]\ncommand = {json.dumps(str(PI))}\nmodel = "fake/fake-1"\nthinking = "off"\n',
                      PI_CODING_AGENT_DIR=str(pi_home))
    llm.reply = lambda body: "Otters came back in **2019**."
    with trio.fail_after(120):
        async with setup.client() as client:
            r = await client.call_tool("web_fetch", {"url": site.url("/article"), "prompt": "When did otters return?"})
            facts, _, answer = _text(r).partition("\n\n")
            assert r.is_error is False
            assert " · answer by fake/fake-1 from " in facts and answer == "Otters came back in **2019**."
            assert "When did otters return?" in llm.user_text()

            llm.reply = lambda body: ("forever",)
            daemon = setup.daemon_pid()
            pis: list[int] = []
            with trio.CancelScope() as scope:
                async def cancel_when_streaming() -> None:
                    await trio.to_thread.run_sync(llm.streaming.wait, 60)
                    pis.extend(p for p in children(daemon) if procs.comm(p) == "pi")
                    scope.cancel()  # the SDK sends notifications/cancelled for the call
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(cancel_when_streaming)
                    await client.call_tool("web_fetch", {"url": site.url("/article"), "prompt": "Go on forever"})
            assert scope.cancelled_caught and pis, "no sub-agent was answering"
            assert await trio.to_thread.run_sync(gone, pis, 10), "the sub-agent outlived the cancelled call"
            assert (await setup.status())["requests"]["in_flight"] == 0


async def test_cancel_ends_the_daemon_request_and_closes_its_tab(mcp_setup, site):
    setup = mcp_setup(devtools_port=True)
    with trio.fail_after(90):
        async with setup.client() as client:
            await client.call_tool("web_fetch", {"url": site.url("/article")})  # the daemon and Chrome are up
            with trio.CancelScope() as scope:
                async def cancel_when_loading() -> None:
                    # the site counts hits in its own thread, with no trio event to wait on
                    while not site.hits.get("/slow-article"):  # noqa: ASYNC110 (the page is loading in a tab)
                        await trio.sleep(0.02)
                    scope.cancel()  # the SDK sends notifications/cancelled for the call
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(cancel_when_loading)
                    await client.call_tool("web_fetch", {"url": site.url("/slow-article")})
            assert scope.cancelled_caught
            with trio.fail_after(3):  # well before the site would send the body (30 s)
                # another process's state: asking it again is the only way to watch it
                while (await setup.status())["requests"]["in_flight"] or await setup.loaded_tabs():  # noqa: ASYNC110
                    await trio.sleep(0.05)
            # the MCP session goes on
            r = await client.call_tool("web_fetch", {"url": site.url("/article")})
            assert r.is_error is False and "· cached (" in _text(r).split("\n")[0]


async def test_tools_follow_the_daemon_search_listed_with_a_backend_browser_not_when_off_in_either_era(mcp_setup):
    setup = mcp_setup('[search]\nsearxng_url = "http://127.0.0.1:9"\n[browse]\nenabled = false\n')
    with trio.fail_after(90):
        async with setup.client(mode="auto") as client:
            assert client.protocol_version == "2026-07-28"
            tools = {t.name: t for t in (await client.list_tools()).tools}
            r = await client.call_tool("web_fetch", {"url": "http://127.0.0.1:1/"})
            off = await client.call_tool("agent_browser", {"action": "open", "url": "http://127.0.0.1:1/"})
    assert r.is_error is True and r.structured_content["code"] == "network_error"  # nothing listens on port 1
    assert _text(off) == ("browse_disabled: browser automation is switched off (browse.enabled = false in the "
                          "config); read pages with web_fetch (`webfetch fetch` on the command line)")
    assert list(tools) == ["web_fetch", "web_search"]
    assert tools["web_search"].annotations.read_only_hint is True
    assert tools["web_search"].input_schema["required"] == ["query"]


def raw_session(tool: str, arguments: dict, extra: dict | None = None) -> list[dict]:
    """The JSON-RPC lines of a client that starts a session by hand and calls one tool (id 2)."""
    return [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments, **(extra or {})}},
    ]


def test_stdout_carries_only_the_protocol_and_logs_go_to_stderr(mcp_setup, site):
    setup = mcp_setup()
    lines = raw_session("web_fetch", {"url": site.url("/article")}, {"_meta": {"progressToken": "p"}})
    proc = subprocess.Popen([sys.executable, *setup.argv("--log-level", "info")], env=setup.env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdin and proc.stdout
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
        proc.stdin.flush()
        out = []
        while not any(m.get("id") == 2 for m in out):
            line = proc.stdout.readline()
            assert line, "the server closed stdout before answering"
            out.append(json.loads(line))  # every line on stdout is a JSON-RPC message ...
        rest, err = proc.communicate(timeout=30)  # closes stdin: the server ends with its input
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert all(m["jsonrpc"] == "2.0" for m in out) and rest == b""
    assert out[0]["result"]["serverInfo"]["name"] == "webfetch"
    assert [m["method"] for m in out[1:-1]] and all(m["method"] == "notifications/progress" for m in out[1:-1])
    assert ARTICLE_TEXT[0] in out[-1]["result"]["content"][0]["text"]
    assert b"no daemon listens on" in err and proc.returncode == 0


async def test_a_daemon_that_cannot_start_is_a_tool_error_saying_why(short_tmp):
    # the daemon refuses a socket path that is a file of another kind: it exits at start (a socket directory
    # other users can write is refused before a daemon is started: tests/test_socket_trust.py)
    taken = short_tmp / "wf.sock"
    taken.write_text("not a socket")
    env = {**os.environ, "XDG_CONFIG_HOME": str(short_tmp), "WEBFETCH_SOCKET": str(taken)}
    with trio.fail_after(90):
        async with Client(StdioServerParameters(command=sys.executable, args=["-m", "webfetch", "mcp"], env=env),
                          mode="legacy") as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            r = await client.call_tool("web_fetch", {"url": "https://example.com/"})
    assert tools == ["web_fetch", "web_search", "agent_browser"]  # the daemon could not say what it serves
    assert r.is_error is True and r.structured_content["code"] == "daemon_unreachable"
    assert _text(r).startswith("daemon_unreachable: the daemon exited at start (code 1); see ")
    assert f"{taken} exists and is not a socket; remove it or choose another --socket" in _text(r)


def test_a_screenshot_in_a_result_is_image_content():
    from webfetch.frontends.mcp_server import text_result

    r = text_result("a tab", {"image": "iVBORw0KGgo=", "width": 1, "height": 1})
    assert [c.type for c in r.content] == ["text", "image"]
    assert r.content[1].mime_type == "image/png" and r.content[1].data == "iVBORw0KGgo="


# ---- the browser tool --------------------------------------------------------------------------------

@pytest.fixture
def app():
    a = App()
    yield a
    a.stop()


def _png_size(data: str) -> tuple[int, int]:
    """The width and height of a base64 PNG; AssertionError when it is not one."""
    raw = base64.b64decode(data, validate=True)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n" and raw[12:16] == b"IHDR" and raw[-8:-4] == b"IEND", raw[:16]
    return struct.unpack(">II", raw[16:24])


async def _sessions(setup: McpSetup) -> list[str]:
    return [s["session"] for s in (await setup.status())["browse"]]


async def test_the_browser_tool_logs_in_and_saves_a_profile_the_server_records_and_closes_with_the_client(
        mcp_setup, app):
    setup = mcp_setup(devtools_port=True)
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    with trio.fail_after(120):
        async with setup.client() as client:
            browser = {t.name: t for t in (await client.list_tools()).tools}["agent_browser"]
            assert browser.annotations.read_only_hint is False and browser.annotations.open_world_hint is True
            assert "`open` a URL -> read the snapshot" in browser.description
            assert "stale_ref: use the refs of the newest snapshot" in browser.description
            assert browser.input_schema["required"] == ["action"]
            assert {"open", "snapshot", "click", "fill", "screenshot", "close"} <= set(
                browser.input_schema["properties"]["action"]["enum"])

            async def act(**args: Any) -> Any:
                return await client.call_tool("agent_browser", args, progress_callback=on_progress)

            opened = await act(action="open", url=app.url("/login"))
            text = _text(opened)
            assert opened.is_error is False
            assert text.startswith(f"[t1] Sign in — {app.url('/login')} · new page\n- heading "), text
            assert any(m and m.startswith(f"loading {app.url('/login')}") for m in progress), progress
            sessions = await _sessions(setup)
            assert len(sessions) == 1 and re.fullmatch(r"mcp-\d+-[0-9a-f]{8}", sessions[0]), sessions

            # the daemon's refusal is a tool error with its code and fields: the overlay covers the button
            sign_in = ref(text, '- button "Sign in"')
            covered = await act(action="click", ref=sign_in)
            assert covered.is_error is True and covered.structured_content["code"] == "covered"
            assert _text(covered).startswith(f"covered: {sign_in} (button \"Sign in\"")
            assert "We use cookies" in covered.structured_content["covered_by"]
            accepted = await act(action="click", ref=ref(text, '- button "Accept cookies"'))
            assert _text(accepted).startswith("changed:\n") and "removed:" in _text(accepted)
            filled = await act(action="fill", ref=ref(text, '- textbox "Username"'), text="ann")
            assert _text(filled).startswith("value now: ann")
            home = await act(action="fill", ref=ref(text, '- textbox "Password"'), text="hunter2", submit=True)
            assert app.state["login"] == {"user": "ann", "password": "hunter2"}
            home_text = _text(home)
            assert home_text.startswith("[t1] Dashboard — ") and "Signed in" not in home_text.split("\n")[0]

            stale = await act(action="click", ref=sign_in)  # a ref of the login page
            assert stale.is_error is True and stale.structured_content["code"] == "stale_ref"
            assert _text(stale).startswith("stale_ref: ")
            unknown = await act(action="click", ref="e999")
            assert unknown.is_error is True and unknown.structured_content["code"] == "unknown_ref"

            await act(action="check", ref=ref(home_text, '- checkbox "Newsletter"'), checked=True)
            await act(action="select", ref=ref(home_text, '- combobox "Country"'), values=["Japan"])
            await act(action="fill", ref=ref(home_text, '- textbox "Nickname"'), text="annie")
            saved = await act(action="click", ref=ref(home_text, '- button "Save profile"'))
            assert '- paragraph "Profile saved"' in _text(saved)
            assert app.state["profile"] == {"country": "jp", "newsletter": True, "nick": "annie", "size": "Medium"}

            shot = await act(action="screenshot")
            assert shot.is_error is False and [c.type for c in shot.content] == ["text", "image"]
            assert shot.content[1].mime_type == "image/png"
            width, height = _png_size(shot.content[1].data)
            assert width > 100 and height > 100

            # an MCP cancellation ends the daemon's request at once; the session goes on
            with trio.CancelScope() as scope:
                async def cancel_when_waiting() -> None:
                    # another process's state: asking it again is the only way to watch it
                    while not (await setup.status())["requests"]["in_flight"]:  # noqa: ASYNC110
                        await trio.sleep(0.05)
                    scope.cancel()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(cancel_when_waiting)
                    await act(action="wait", text="never there", timeout_s=30)
            assert scope.cancelled_caught
            with trio.fail_after(3):  # not the 30 s the wait asked for
                while (await setup.status())["requests"]["in_flight"]:  # noqa: ASYNC110
                    await trio.sleep(0.05)
            read = await act(action="read")
            assert "Signed in as **ann**" in _text(read)

            # the model's close ends the session (its cookies with it); the next action starts a fresh one
            closed = await act(action="close")
            assert _text(closed) == f"closed the browser session {sessions[0]}"
            assert await _sessions(setup) == []
            again = await act(action="open", url=app.url("/app"))
            assert _text(again).startswith(f"[t1] Sign in — {app.url('/login')}")  # no cookie: sent to log in
            assert await _sessions(setup) == sessions
            assert app.url("/login") in await setup.loaded_tabs()
    # the client closed stdin: the server closed its session before it exited, and the context's tab went too
    assert await _sessions(setup) == []
    assert app.url("/login") not in await setup.loaded_tabs()


async def test_a_server_killed_with_sigterm_closes_its_browse_session_first(mcp_setup, app):
    setup = mcp_setup(devtools_port=True)
    lines = raw_session("agent_browser", {"action": "open", "url": app.url("/login")})
    proc = await trio.lowlevel.open_process([sys.executable, *setup.argv()], env=setup.env,
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdin and proc.stdout
        await proc.stdin.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
        out = b""
        with trio.fail_after(90):
            while b'"id":2' not in out:
                data = await proc.stdout.receive_some()
                assert data, "the server closed stdout before answering"
                out += data
        assert len(await _sessions(setup)) == 1
        proc.send_signal(signal.SIGTERM)  # stdin stays open: the signal alone ends it
        with trio.fail_after(10):
            assert await proc.wait() == -signal.SIGTERM
    finally:
        if proc.returncode is None:
            proc.kill()
            with trio.CancelScope(shield=True):
                await proc.wait()
    assert await _sessions(setup) == []
    assert app.url("/login") not in await setup.loaded_tabs()


async def test_the_browser_tool_uploads_from_the_directory_the_client_started_it_in(mcp_setup, short_tmp):
    from .support.files_app import FilesApp
    app = FilesApp()
    project = short_tmp / "project"
    project.mkdir()
    (project / "cv.pdf").write_bytes(b"%PDF-1.4 not really\n")
    (project / ".env").write_text("KEY=1\n")
    setup = mcp_setup()
    try:
        with trio.fail_after(120):
            async with setup.client(cwd=project) as client:
                async def act(**args: Any) -> Any:
                    return await client.call_tool("agent_browser", args)

                snap = _text(await act(action="open", url=app.url("/upload")))
                doc = ref(snap, '- button "Document"')
                uploaded = await act(action="upload", ref=doc, files=["cv.pdf"])
                assert "the file input holds: cv.pdf" in _text(uploaded), _text(uploaded)
                dotfile = await act(action="upload", ref=doc, files=[".env"])
                assert dotfile.is_error is True and dotfile.structured_content["code"] == "upload_refused"
                await act(action="click", ref=ref(snap, '- button "Send"'))
                assert app.uploads[0]["doc"] == [("cv.pdf", b"%PDF-1.4 not really\n")]
    finally:
        app.stop()


def test_a_browse_result_reads_as_in_pi():
    from webfetch.frontends.tool_text import browse_text

    r = {"action": "click", "session": "s", "page": {"tab": "t2", "url": "http://h/a", "title": ""},
         "change": "dom", "refs_reset": False, "snapshot": "[t2] — http://h/a\n- button \"Go\" [ref=e3]",
         "snapshot_kind": "diff", "status": 404, "value": "x", "dialog": {"type": "alert", "message": "hi \"you\""},
         "new_tabs": [{"tab": "t3", "url": "http://h/b"}], "downloads": [{"url": "http://h/r.csv",
         "filename": "r.csv", "state": "saved", "path": "/d/r.csv", "size": 3, "mime": "text/csv"}], "notes": ["n1"],
         "next_offset": 40}
    assert browse_text(r) == "\n".join([
        "HTTP 404", "value now: x",
        'dialog (alert) accepted: "hi \\"you\\""', "new tab t3: http://h/b (now active)",
        "downloaded r.csv (3 bytes, text/csv) to /d/r.csv", "note: n1",
        "changed:", '- button "Go" [ref=e3]', "(more: call again with offset 40)"])
    held = {**r, "dialog": {"type": "confirm", "message": "Sure?"}, "change": "none",
            "snapshot_kind": "none", "snapshot": "", "new_tabs": None, "downloads": None, "notes": None, "status": 200,
            "value": None, "next_offset": None}
    assert browse_text(held) == 'dialog (confirm) waits for action dialog: "Sure?"'
    assert browse_text({"action": "close", "session": "mcp-1-ab"}) == "closed the browser session mcp-1-ab"


# ---- as MCP clients see it (issue 26 item 7) -----------------------------------------------------------

async def test_arguments_are_checked_against_the_tools_schema_and_refused_in_its_terms(mcp_setup, app):
    setup = mcp_setup(private=False)  # the default address policy: the metadata address below is refused
    with trio.fail_after(90):
        async with setup.client() as client:
            async def error(tool: str, args: dict[str, Any]) -> str:
                r = await client.call_tool(tool, args)
                assert r.is_error is True, _text(r)
                return _text(r)

            assert await error("web_fetch", {"url": None}) == (
                "bad_request: web_fetch needs `url` (one page) or `urls` (several, up to 50): absolute http(s) URLs")
            assert await error("web_fetch", {"url": "https://example.com/", "raw": "false"}) == (
                'bad_request: web_fetch: `raw` must be true or false, not the string "false"')
            assert await error("web_fetch", {"url": "https://example.com/", "colour": "red"}) == (
                "bad_request: web_fetch takes no argument 'colour'; its arguments are url, urls, prompt, schema, "
                "offset, raw, fresh, find, profile, browser, hidden")
            assert await error("web_fetch", {"url": "https://example.com/", "offset": -1}) == (
                "bad_request: web_fetch: `offset` must be at least 0, not -1")
            assert (await error("agent_browser", {"action": "fly"})).startswith(
                'bad_request: agent_browser: `action` must be one of "open", "snapshot", "click", ')
            # the tools the model was given, not web_search, which this daemon cannot serve
            assert await error("web_serch", {"query": "x"}) == (
                "bad_request: no tool named 'web_serch'; this server has web_fetch, agent_browser")
            # the file this daemon reads, not the default one
            assert await error("web_search", {"query": "otters"}) == (
                "search_unconfigured: no web search backend is configured. Either set KAGI_API_KEY (or "
                f"search.kagi_api_key in {setup.config}); or set BRAVE_API_KEY (or search.brave_api_key in "
                f"{setup.config}); or set search.searxng_url in {setup.config} to an instance with JSON output, "
                "then restart the daemon")
            assert await error("web_fetch", {"url": "http://169.254.169.254/latest/meta-data/"}) == (
                "blocked_url: 169.254.169.254 is a cloud metadata address (the instance metadata service of AWS, "
                "Google Cloud, Azure, Oracle Cloud, DigitalOcean, OpenStack and others, which answers with the "
                "machine's credentials), which webfetch does not fetch; it is not a web page to read")

            # a browser action before open, and after close, says what to do
            session = re.escape("'mcp-") + r"\d+-[0-9a-f]{8}'"
            no_page = rf"no_such_tab: no page is open in browse session {session}: call open with a url first"
            assert re.fullmatch(no_page, await error("agent_browser", {"action": "snapshot"}))
            assert await _sessions(setup) == []  # and no browser context was made for it
            await client.call_tool("agent_browser", {"action": "close"})
            assert re.fullmatch(no_page, await error("agent_browser", {"action": "click", "ref": "e1"}))


async def test_fresh_loads_a_cached_page_again_and_a_flagged_page_says_so_on_its_first_line(mcp_setup, site):
    from .support.flag_pages import CLOUDFLARE_VERIFY
    site.html("/mine", "<html><head><title>Mine</title></head><body><main><h1>Mine</h1><p>" + "v1 " * 80
              + "</p></main></body></html>")
    site.html("/wall", CLOUDFLARE_VERIFY)
    setup = mcp_setup()
    with trio.fail_after(90):
        async with setup.client() as client:
            first = await client.call_tool("web_fetch", {"url": site.url("/mine")})
            cached = await client.call_tool("web_fetch", {"url": site.url("/mine")})
            fresh = await client.call_tool("web_fetch", {"url": site.url("/mine"), "fresh": True})
            wall = await client.call_tool("web_fetch", {"url": site.url("/wall")})
    assert " · fetched now · " in _text(first).split("\n")[0]
    assert " · cached (" in _text(cached).split("\n")[0]
    assert " · fetched now · " in _text(fresh).split("\n")[0] and site.hits["/mine"] == 2
    assert _text(wall).split("\n")[0].endswith(" · FLAGS: challenge (read the notes before using this content)")


async def test_without_a_sub_agent_prompt_is_not_offered_and_a_prompted_call_says_it_got_the_page(mcp_setup, site,
                                                                                                  short_tmp):
    setup = mcp_setup(f'[subagent]\ncommand = "{short_tmp}/no-such-pi"\n')
    with trio.fail_after(90):
        async with setup.client() as client:
            fetch = {t.name: t for t in (await client.list_tools()).tools}["web_fetch"]
            r = await client.call_tool("web_fetch", {"url": site.url("/article"), "prompt": "Who noticed?"})
            long = await client.call_tool("web_fetch", {"url": site.url("/large")})
    assert "prompt" not in fetch.input_schema["properties"] and "prompt" not in fetch.description
    # a long page without a prompt: its first page and where to read on, not a word about the sub-agent
    assert long.is_error is False and " · characters 0–" in _text(long).split("\n")[0]
    assert "sub-agent" not in _text(long) and "install pi" not in _text(long) and "Notes:" not in _text(long)
    assert set(fetch.input_schema["properties"]) == {"url", "urls", "offset", "raw", "fresh", "find", "profile",
                                                     "browser", "hidden"}
    facts = _text(r).split("\n")[0]
    assert r.is_error is False and facts.endswith(
        " · NOT AN ANSWER: the prompt could not be answered, this is the page itself (the notes say why)")
    assert f"Notes:\n- the sub-agent CLI `{short_tmp}/no-such-pi` was not found; " in _text(r)


async def test_a_config_error_is_every_calls_answer_and_the_server_keeps_serving(short_tmp):
    bad = short_tmp / "config.toml"
    bad.write_text("[fetch]\ncolour = 1\n")
    env = {**os.environ, "WEBFETCH_SOCKET": str(short_tmp / "wf.sock"), "XDG_STATE_HOME": str(short_tmp)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "webfetch", "mcp", "--config", str(bad)],
                                   env=env)
    with trio.fail_after(60):
        async with Client(params, mode="legacy") as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            first = await client.call_tool("web_fetch", {"url": "https://example.com/"})
            again = await client.call_tool("agent_browser", {"action": "open", "url": "https://example.com/"})
    assert tools == ["web_fetch", "web_search", "agent_browser"]
    want = (f"config_error: webfetch cannot start: {bad}: line 2: unknown key `fetch.colour`; docs/CONFIG.md lists "
            "the keys webfetch knows; fix the config file, then restart the MCP server (or the client)")
    assert first.is_error is True and _text(first) == want and _text(again) == want
    assert not (short_tmp / "wf.sock").exists()  # no daemon was started with a config it cannot read


def test_webfetch_mcp_help_says_what_it_is_and_how_to_add_it():
    out = subprocess.run([sys.executable, "-m", "webfetch", "mcp", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0
    assert "An MCP server on stdin/stdout: web_fetch, web_search" in out.stdout
    assert "claude mcp add -s user webfetch -- webfetch mcp" in out.stdout
    assert "codex mcp add webfetch -- webfetch mcp" in out.stdout


@pytest.mark.chromium
async def test_a_background_daemon_with_another_config_is_restarted_and_the_first_result_says_so(short_tmp, site):
    """Issue 26's trap seen from an MCP client: a daemon the CLI started earlier read another config."""
    old, new = short_tmp / "old.toml", short_tmp / "new.toml"
    old.write_text('[fetch]\nallow_private = true\n[subagent]\ncommand = "/nonexistent/pi-for-tests"\n')
    new.write_text(old.read_text() + "[cache]\nttl_s = 60\n")
    sock = short_tmp / "wf.sock"
    env = {**os.environ, "WEBFETCH_SOCKET": str(sock)}
    started = run_cli("start", "--config", str(old), env={"WEBFETCH_SOCKET": str(sock)})
    assert started.returncode == 0, started.stderr
    first_pid = json.loads(run_cli("status", "--json", env={"WEBFETCH_SOCKET": str(sock)}).stdout)["daemon"]["pid"]
    params = StdioServerParameters(command=sys.executable, args=["-m", "webfetch", "mcp", "--config", str(new)],
                                   env=env)
    try:
        with trio.fail_after(90):
            async with Client(params, mode="legacy") as client:
                first = await client.call_tool("web_fetch", {"url": site.url("/article")})
                second = await client.call_tool("web_fetch", {"url": site.url("/article")})
        texts = [c.text for c in first.content]
        assert ARTICLE_TEXT[0] in texts[0]
        assert texts[-1] == (f"webfetch: restarted the daemon (pid {first_pid}), which read {old}, and this "
                             f"command reads {new}")
        assert len(second.content) == 1, "said once"
        now = json.loads(run_cli("status", "--json", env={"WEBFETCH_SOCKET": str(sock)}).stdout)["daemon"]
        assert now["config"] == str(new) and now["pid"] != first_pid
    finally:
        run_cli("stop", env={"WEBFETCH_SOCKET": str(sock)})


async def test_the_tools_browser_user_reaches_the_persons_browser_and_its_wait_is_said(mcp_setup):
    """`browser: "user"` goes from the MCP client through to the daemon's connection to the person's browser:
    while that browser asks the person (a handshake that waits), the tool's progress says so, and at the
    deadline the call is a tool error with the daemon's code."""
    with waiting_browser() as endpoint:
        setup = mcp_setup(user_browser_config(endpoint), private=False)
        progress: list[str | None] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(message)

        with trio.fail_after(90):
            async with setup.client() as client:
                fetched = await client.call_tool("web_fetch", {"url": "https://docs.example/", "browser": "user"},
                                                 progress_callback=on_progress)
                opened = await client.call_tool("agent_browser", {"action": "open", "url": "https://docs.example/",
                                                                  "browser": "user"})
    for r in (fetched, opened):
        assert r.is_error is True and r.structured_content["code"] == "user_browser_unapproved", r
    assert _text(fetched).startswith("user_browser_unapproved: your browser has not allowed webfetch's connection")
    assert any(m and m.startswith("allow the connection in your browser") for m in progress), progress
