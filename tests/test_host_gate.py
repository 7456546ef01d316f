"""One host gate (urls.HostGate) decides every request a page makes, in a render and in a browse session:
the same URLs under the same policies get the same verdicts from the gate itself, from a rendered page
and from a browsed page.

A page's requests are observed where they leave the browser: Chrome is given an outbound HTTP proxy of
the test's own (loopback included), which records every request that reaches it and answers it itself,
so a request to any address can be seen arriving, 169.254.169.254 and a name that does not resolve
included. Chrome having a proxy of its own also switches webfetch's address-policy proxy off (chrome/browser.py):
the gate is then the only check between a page and the network, which is what is measured."""

from __future__ import annotations

import http.server
import ipaddress
import json
import threading

import pytest
import trio

from webfetch.config import BrowserConfig, FetchConfig
from webfetch.dns import HostCache, IPAddress, resolve
from webfetch.urls import AddressPolicy, HostGate

from .support.daemon import make_config
from .support.site import QuietHTTPServer
from .test_hostile import CHROME_LNA_OFF

PAGE_HOST = "page.test"   # the page under test, allowed by name in every policy (never resolved)
PUBLIC_HOST = "public.test"

# name -> URL the page requests; every http(s) one has a path of its own, every ws one a port of its own,
# so each arrival at the recording proxy names its row
URLS = {
    "loopback": "http://127.0.0.1:9001/row/loopback",
    "loopback2": "http://127.0.0.2:9002/row/loopback2",
    "localhost": "http://localhost:9003/row/localhost",
    "metadata": "http://169.254.169.254/row/metadata",
    "public": f"http://{PUBLIC_HOST}/row/public",
    "unresolvable": "http://nowhere.invalid/row/unresolvable",
    "ws_loopback2": "ws://127.0.0.2:9007/row/ws_loopback2",
    "ws_public": f"ws://{PUBLIC_HOST}:9008/row/ws_public",
    "data": "data:text/plain,row-data",
    "blob": f"blob:http://{PAGE_HOST}/0f9e2ac4-5d1b-4f5e-9a57-3c1d2b7e8f60",
}
# Chrome never pauses a websocket's handshake (nor a data: or blob: URL, which need no network) in Fetch:
# the gate's verdict on a ws URL is asked directly only; in a page, the connection is the policy proxy's
# to refuse (test_hostile.py). The pages request every other row, each with fetch().
PAGE_ROWS = {row for row, url in URLS.items() if not url.startswith(("ws", "blob"))}

POLICIES = {
    "default": {},
    "allow_private": {"allow_private": True},
    "allow_hosts": {"allow_hosts": ["127.0.0.2"]},
}

# the verdicts: the rows each policy lets through
ALLOWED = {
    "default": {"public", "unresolvable", "ws_public"},
    # every address but the cloud metadata one, which only its own allow_hosts entry opens
    "allow_private": set(URLS) - {"data", "blob", "metadata"},
    "allow_hosts": {"loopback2", "public", "unresolvable", "ws_loopback2", "ws_public"},
}


async def resolver(host: str) -> list[IPAddress]:
    """The system's resolver, plus one public name: no test may need the internet."""
    if host == PUBLIC_HOST:
        return [ipaddress.ip_address("93.184.216.34")]
    return await resolve(host)


def policy_config(name: str) -> dict[str, object]:
    config = dict(POLICIES[name])
    config["allow_hosts"] = [PAGE_HOST, *config.get("allow_hosts", [])]
    return config


@pytest.mark.parametrize("policy", POLICIES)
async def test_the_gate_itself(policy):
    config = policy_config(policy)
    gate = HostGate(AddressPolicy.from_config(bool(config.get("allow_private")), config["allow_hosts"],
                                              HostCache(resolver)))
    with trio.fail_after(10):
        verdicts = {row: await gate.check(url) for row, url in URLS.items()}
    assert {row for row, why in verdicts.items() if why is None} == ALLOWED[policy]
    # a refusal says why: the address and what would allow it (never for the metadata address), or the scheme
    refused = {row: why for row, why in verdicts.items() if why is not None}
    for row, why in refused.items():
        if row in ("data", "blob"):
            assert f"{row}: URLs" in why, (row, why)
        elif row == "metadata":
            assert "cloud metadata address" in why and "allow" not in why, why
        else:
            assert "fetch.allow_private" in why, (row, why)


async def test_a_gate_looks_each_host_up_once_and_remembers_why():
    asked: list[str] = []

    async def counting(host: str) -> list[IPAddress]:
        asked.append(host)
        return await resolver(host)

    gate = HostGate(AddressPolicy(resolver=counting))
    with trio.fail_after(10):
        first = [await gate.check(url) for url in (URLS["localhost"], URLS["public"])]
        again = [await gate.check(url + "?again") for url in (URLS["localhost"], URLS["public"])]
    assert asked == ["localhost", PUBLIC_HOST]
    assert again == first and first[1] is None and (first[0] or "").startswith("localhost (")


class RecordingProxy:
    """An HTTP proxy that lets nothing through: it serves the test page for PAGE_HOST, answers every
    other request itself, and records which rows arrived."""

    def __init__(self, page: str) -> None:
        self.arrived: set[str] = set()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                if "/row/" in self.path:
                    proxy.arrived.add(self.path.rsplit("/", 1)[1])
                body = page.encode() if self.path.startswith(f"http://{PAGE_HOST}/") else b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "text/html" if body != b"{}" else "application/json")
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)


        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# One page asks for every URL at once. What it reads from a data: and a blob: URL it writes into itself:
# requests that need no network keep working, whatever the gate says of such URLs.
GATE_PAGE = """<!doctype html><html><head><title>Host gate</title></head><body><article><h1>Host gate</h1>
<p>This page asks for one URL of every kind at once, each as a subresource, and the test reads which of
its requests left the browser. The words are here so that the extractor keeps the page as an article.</p>
<p>Every request goes out through the recording proxy, which answers it itself.</p></article>
<script>
for (const url of %s) fetch(url, {mode: "no-cors"}).catch(() => {});
const show = text => document.querySelector("article").insertAdjacentHTML("beforeend", "<p>" + text + "</p>");
fetch("data:text/plain,read from a data URL").then(r => r.text()).then(show);
fetch(URL.createObjectURL(new Blob(["read from a blob URL"]))).then(r => r.text()).then(show);
</script></body></html>"""


@pytest.fixture
def proxy():
    p = RecordingProxy(GATE_PAGE % json.dumps([URLS[row] for row in sorted(PAGE_ROWS)]))
    yield p
    p.stop()


async def start(start_daemon, proxy, policy: str, **fetch: object):
    args = [f"--proxy-server={proxy.url}", "--proxy-bypass-list=<-loopback>", *CHROME_LNA_OFF]
    return await start_daemon(make_config(fetch=FetchConfig(**policy_config(policy), **fetch),
                                          browser=BrowserConfig(args=args)),
                              resolver=HostCache(resolver))


@pytest.mark.parametrize("policy", POLICIES)
async def test_a_rendered_page_gets_the_gates_verdicts(start_daemon, proxy, policy):
    d = await start(start_daemon, proxy, policy, render="always")
    r = await d.fetch(f"http://{PAGE_HOST}/gate")
    assert r["type"] == "result" and "Host gate" in r["content"], r
    assert "read from a data URL" in r["content"] and "read from a blob URL" in r["content"]
    await trio.sleep(0.5)  # anything that got out has arrived by now
    assert proxy.arrived == ALLOWED[policy] & PAGE_ROWS


@pytest.mark.parametrize("policy", POLICIES)
async def test_a_browsed_page_gets_the_gates_verdicts(start_daemon, proxy, policy):
    d = await start(start_daemon, proxy, policy)
    c = await d.client()
    try:
        with trio.fail_after(60):
            r = await c.request({"id": 1, "op": "browse", "session": "s", "action": "open",
                                 "url": f"http://{PAGE_HOST}/gate"})
            assert r["type"] == "result" and "Host gate" in r["snapshot"], r
            read = await c.request({"id": 2, "op": "browse", "session": "s", "action": "read"})
        assert "read from a data URL" in read["content"] and "read from a blob URL" in read["content"], read
        await trio.sleep(0.5)
        assert proxy.arrived == ALLOWED[policy] & PAGE_ROWS
    finally:
        await c.aclose()
