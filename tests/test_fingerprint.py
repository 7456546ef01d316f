"""Issue 28 item 2: the main document fetched in our own process (curl_cffi impersonating
webfetch.fetch.over_http.IMPERSONATE) shows a site the TLS and HTTP/2 fingerprint of the Chromium the daemon runs,
proved on loopback: tests/support/tls_recorder.py records both clients' ClientHello and HTTP/2 preface, and
tests/support/fingerprints.py lays them side by side (bin/fingerprint prints the same table)."""

from __future__ import annotations

import socket
import ssl

import pytest
import trio

from webfetch.fetch.load import MAIN_ACCEPT, Load
from webfetch.fetch.over_http import IMPERSONATE, HttpFetcher, Identity
from webfetch.urls import AddressPolicy

from .support.fingerprints import MAY_DIFFER, differing, record_chromium, record_curl, side_by_side
from .support.tls_recorder import HOST, PAGE, ClientHello, FingerprintRecorder, is_grease
from .test_proxy import start_proxy

# A Chrome 143 ClientHello as browserleaks.com published it (its ja4_ro, ja3_text, ja4, ja3_hash, ja3n_hash),
# GREASE added where Chrome puts it: our JA4/JA3 code must give the fingerprints that service computed.
CHROME_143 = ClientHello(
    legacy_version=0x0303,
    ciphers=[0x4A4A, 0x1301, 0x1302, 0x1303, 0xC02B, 0xC02F, 0xC02C, 0xC030, 0xCCA9, 0xCCA8, 0xC013, 0xC014,
             0x009C, 0x009D, 0x002F, 0x0035],
    extensions=[0x8A8A, 45, 51, 16, 65037, 23, 17613, 0, 11, 10, 43, 65281, 35, 18, 5, 13, 27, 0x9A9A],
    groups=[0xDADA, 4588, 29, 23, 24], point_formats=[0],
    sig_algs=[0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601],
    alpn=["h2", "http/1.1"], sni="tls.browserleaks.com", supported_versions=[0x3A3A, 0x0304, 0x0303])


def test_ja4_and_ja3_agree_with_a_published_chrome_hello():
    assert CHROME_143.ja4() == "t13d1516h2_8daaf6152771_d8a2da3f94cd"
    assert CHROME_143.ja3() == "98487aa16281980e7d1120d399efb6a4"
    assert CHROME_143.ja3n() == "8e19337e7524d2573be54efb2b0784c9"
    no_alpn_by_address = ClientHello(legacy_version=0x0303, ciphers=CHROME_143.ciphers,
                                     extensions=[e for e in CHROME_143.extensions if e not in (0, 16)],
                                     sig_algs=CHROME_143.sig_algs, supported_versions=[0x0303])
    assert no_alpn_by_address.ja4().startswith("t12i1514" + "00_8daaf6152771_")


def test_the_recorder_reads_a_python_ssl_hello_and_serves_http1():
    """The recorder on its own, with a client whose hello we set: SNI, ALPN and version as offered, the
    HTTP/1.1 request's header order, the page delivered."""
    with FingerprintRecorder() as rec:
        context = ssl.create_default_context(cafile=str(rec.cert.ca_file))
        context.set_alpn_protocols(["http/1.1"])
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        with socket.create_connection(("127.0.0.1", rec.port), timeout=30) as raw, \
                context.wrap_socket(raw, server_hostname=HOST) as tls:
            tls.sendall(f"GET /py HTTP/1.1\r\nHost: {HOST}\r\nX-First: 1\r\nAccept: */*\r\n\r\n".encode())
            answer = b""
            while chunk := tls.recv(65536):
                answer += chunk
        [conn] = rec.requests("/py")
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(PAGE)
    assert conn.alpn == "http/1.1" and conn.h2 is None
    assert [k for k, _ in conn.http1_headers] == ["Host", "X-First", "Accept"]
    hello = conn.hello
    assert hello.sni == HOST and hello.alpn == ["http/1.1"] and 0x0304 in hello.supported_versions
    assert hello.ja4().startswith("t13d") and hello.ja4().split("_")[0].endswith("h1")
    # OpenSSL's TLS 1.3 suites in its order, then the renegotiation SCSV (00ff) it always adds
    assert hello.ciphers == [c["id"] & 0xFFFF for c in context.get_ciphers() if c["protocol"] == "TLSv1.3"] + [0xFF]
    assert not any(is_grease(v) for v in hello.ciphers + hello.extensions)  # OpenSSL sends no GREASE


def test_curl_cffi_speaks_h2_with_chromes_preface_and_permutes_its_extensions():
    """Without Chromium (runs in bin/test --fast): curl_cffi's preface is Chrome's, and two fresh sessions
    send their extensions in different orders, as Chrome does, while the sorted fingerprints stay put."""
    with FingerprintRecorder() as rec:
        first, second = record_curl(rec, "/one"), record_curl(rec, "/two")
    assert first.alpn == "h2" and first.h2 is not None
    assert first.h2.akamai() == "1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p"
    assert first.hello.sni == HOST and first.hello.alpn == ["h2", "http/1.1"]
    assert first.hello.ja4() == second.hello.ja4() and first.hello.ja3n() == second.hello.ja3n()
    assert first.hello.extensions != second.hello.extensions  # 1 in 15! that two random orders agree


@pytest.mark.chromium
async def test_curl_cffi_presents_the_fingerprint_of_the_chromium_the_daemon_runs():
    with FingerprintRecorder() as rec:
        curl = await trio.to_thread.run_sync(record_curl, rec)
        chromium, product = await record_chromium(rec)
    label_curl, label_chromium = f"curl_cffi impersonate={IMPERSONATE}", product
    print(side_by_side(curl, label_curl, chromium, label_chromium))  # the side-by-side for the note (pytest -s)
    assert curl.error is None and chromium.error is None
    assert curl.alpn == chromium.alpn == "h2"
    assert curl.hello.ja4() == chromium.hello.ja4()
    assert curl.h2 is not None and chromium.h2 is not None
    assert curl.h2.settings == chromium.h2.settings and curl.h2.window_update == chromium.h2.window_update
    assert curl.h2.pseudo_headers == chromium.h2.pseudo_headers == [":method", ":authority", ":scheme", ":path"]
    # every other field must match too, but those MAY_DIFFER names, each with its reason
    assert set(differing(curl, chromium)) <= set(MAY_DIFFER), side_by_side(curl, label_curl, chromium, label_chromium)


@pytest.mark.chromium
async def test_webfetchs_http_client_sends_the_headers_of_chromiums_navigation(nursery):
    """webfetch's own HttpFetcher, as the daemon builds it (through the policy proxy, the Identity of the
    running Chromium's product string), against the same Chromium's navigation: the same header names, order
    and values. Except Accept's value: webfetch asks for markdown too (load.MAIN_ACCEPT), as its Chrome path
    does (test_http_fetch's test_the_server_sees_chromes_own_navigation_headers holds the two transports'
    values equal)."""
    proxy = await start_proxy(nursery, allow_hosts=["127.0.0.1"])
    fetcher = HttpFetcher(proxy)

    with FingerprintRecorder() as rec:
        chromium, product = await record_chromium(rec)
        fetcher.pool.verify = str(rec.cert.ca_file)
        with trio.fail_after(30):
            await fetcher.load(Load(f"https://127.0.0.1:{rec.port}/webfetch",
                                    AddressPolicy.from_config(False, ["127.0.0.1"]), 1_000_000, lambda *a: None),
                               Identity.of(product))
        [ours] = rec.requests("/webfetch")
    fetcher.close()
    assert ours.h2 is not None and chromium.h2 is not None
    assert ours.h2.pseudo_headers == chromium.h2.pseudo_headers
    chromiums = [(name, MAIN_ACCEPT if name == "accept" else value) for name, value in chromium.h2.headers]
    assert ours.h2.headers == chromiums
