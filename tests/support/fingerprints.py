"""The two ways webfetch meets a site, recorded by tests/support/tls_recorder.py and laid side by side: the
main document through curl_cffi impersonating webfetch.http_fetch.IMPERSONATE, and a render through the
Chromium the daemon runs, launched the way the daemon launches it. tests/test_fingerprint.py holds the rows
in MUST_MATCH equal; bin/fingerprint prints the table."""

from __future__ import annotations

import trio
from curl_cffi import CurlOpt, requests

from webfetch.http_fetch import IMPERSONATE
from webfetch.launch import find_chrome, launch_chrome

from .tls_recorder import EXTENSION_NAMES, HOST, PAGE, Connection, FingerprintRecorder, H2Preface, is_grease

RECORD_TIMEOUT_S = 30.0
# the values of the navigation headers a site reads most, shown (and allowed to differ: see MAY_DIFFER)
HEADER_VALUES = ("user-agent", "sec-ch-ua", "sec-ch-ua-platform", "accept", "accept-encoding", "accept-language",
                 "priority")

# The rows that may differ, and why that is acceptable; every other row must match.
MAY_DIFFER = {
    "JA3 (extensions as sent)": "Chrome permutes its extensions on every connection (curl_cffi does too), so JA3 "
                                "changes per connection for both; JA3N and JA4 sort them",
    "extensions as sent": "the same permutation: a different random order per connection, for both clients",
    "headers only one sends": "curl_cffi's default headers (recorded here, a bare session) are not what webfetch "
                              "sends: issue 28 item 1 has webfetch/http_fetch.py send the headers of the Chromium "
                              "the daemon runs; headers are not part of the TLS or HTTP/2 fingerprint",
    **{name: "the same: curl_cffi's defaults are a Chrome 152 on Windows, Chromium's its own"
       for name in HEADER_VALUES},
    "GREASE in signature algorithms": "Chromium 156 puts a GREASE value first in its signature algorithms; "
                                      "curl_cffi 0.17's chrome152 does not, and has no option to. JA4, JA3 "
                                      "and Akamai's fingerprint all drop GREASE, so none of them sees it; a "
                                      "server that reads the raw list could",
}


def record_curl(rec: FingerprintRecorder, path: str = "/curl_cffi") -> Connection:
    """One fresh session's GET, verified against the recorder's test CA (not verify=False), HOST mapped to
    127.0.0.1 as --host-resolver-rules maps it for Chromium."""
    with requests.Session(impersonate=IMPERSONATE, verify=str(rec.cert.ca_file),
                          curl_options={CurlOpt.RESOLVE: [f"{HOST}:{rec.port}:127.0.0.1"]}) as session:
        response = session.get(rec.url(path), timeout=RECORD_TIMEOUT_S)
    if response.status_code != 200 or response.content != PAGE:
        raise AssertionError(f"curl_cffi got {response.status_code} {response.content[:80]!r}")
    return rec.requests(path)[0]


async def record_chromium(rec: FingerprintRecorder, path: str = "/chromium") -> tuple[Connection, str]:
    """A navigation in the system Chromium, launched by webfetch.launch with webfetch's flags, plus two that
    only a test needs: trust the recorder's leaf by its SPKI hash, and map HOST to 127.0.0.1. Returns the
    recorded connection and Chromium's product string."""
    chrome = find_chrome()
    if chrome is None:
        raise AssertionError("no Chromium found: bin/test installs it (or set WEBFETCH_CHROME)")
    flags = [f"--ignore-certificate-errors-spki-list={rec.cert.spki_sha256}",
             f"--host-resolver-rules=MAP {HOST} 127.0.0.1"]
    async with launch_chrome(chrome, flags) as (cdp, _):
        product = str((await cdp.call("Browser.getVersion"))["product"])
        await cdp.call("Target.createTarget", {"url": rec.url(path)})
        with trio.fail_after(RECORD_TIMEOUT_S):
            while not rec.requests(path):
                await trio.sleep(0.05)
    return rec.requests(path)[0], product


def _hex(values: list[int]) -> str:
    return ",".join("GREASE" if is_grease(v) else f"{v:04x}" for v in values)


def _grease_positions(values: list[int]) -> str:
    return ",".join(str(i) for i, v in enumerate(values) if is_grease(v)) or "none"


def rows(conn: Connection) -> dict[str, str]:
    """Every compared field of one recorded connection, as text."""
    h, h2 = conn.hello, conn.h2 or H2Preface()
    headers = dict(h2.headers or conn.http1_headers)
    return {
        "JA4": h.ja4(),
        "JA4_r": h.ja4_r(),
        "JA3N (extensions sorted)": f"{h.ja3n()}  {h.ja3_text(sort_extensions=True)}",
        "JA3 (extensions as sent)": h.ja3(),
        "TLS versions offered": _hex(h.supported_versions) + f" (legacy {h.legacy_version:04x})",
        "cipher suites": _hex(h.ciphers),
        "extensions as sent": ",".join("GREASE" if is_grease(e) else EXTENSION_NAMES.get(e, f"{e:04x}")
                                       for e in h.extensions),
        "supported groups": _hex(h.groups),
        "key shares": _hex(h.key_shares),
        "signature algorithms (GREASE left out)": _hex(h.clean(h.sig_algs)),
        "GREASE in signature algorithms": _grease_positions(h.sig_algs),
        "ALPN": ",".join(h.alpn),
        "ALPS (codepoints, protocols)": f"{_hex([e for e in h.extensions if e in (0x4469, 0x44CD)])} {h.alps}",
        "certificate compression": _hex(h.cert_compression),
        "session id length": str(h.session_id_length),
        "GREASE positions": (f"ciphers {_grease_positions(h.ciphers)}; groups {_grease_positions(h.groups)}; "
                             f"versions {_grease_positions(h.supported_versions)}; key shares "
                             f"{_grease_positions(h.key_shares)}; extensions {_grease_positions(h.extensions)} "
                             f"of {len(h.extensions)}"),
        "ALPN agreed": str(conn.alpn),
        "HTTP/2 Akamai fingerprint": h2.akamai(),
        "HTTP/2 SETTINGS": ";".join(f"{k}:{v}" for k, v in h2.settings),
        "HTTP/2 WINDOW_UPDATE": str(h2.window_update),
        "HTTP/2 PRIORITY frames": str(h2.priority_frames),
        "HTTP/2 HEADERS priority (depends, exclusive, weight)": str(h2.headers_priority),
        "HTTP/2 frames before the first request": ",".join(h2.frames),
        "pseudo-header order": ",".join(h2.pseudo_headers),
        **{name: headers.get(name, "(not sent)") for name in HEADER_VALUES},
    }


def _header_rows(a: Connection, b: Connection) -> tuple[dict[str, str], dict[str, str]]:
    """The order of the headers both send (must match), and those only one sends (may differ)."""
    names_a = [k for k, _ in (a.h2.headers if a.h2 else a.http1_headers)]
    names_b = [k for k, _ in (b.h2.headers if b.h2 else b.http1_headers)]
    common_a, common_b = [n for n in names_a if n in names_b], [n for n in names_b if n in names_a]
    only_a, only_b = [n for n in names_a if n not in names_b], [n for n in names_b if n not in names_a]
    return ({"header order (headers both send)": ",".join(common_a), "headers only one sends": ",".join(only_a)},
            {"header order (headers both send)": ",".join(common_b), "headers only one sends": ",".join(only_b)})


def compare(a: Connection, b: Connection) -> tuple[dict[str, str], dict[str, str]]:
    extra_a, extra_b = _header_rows(a, b)
    return rows(a) | extra_a, rows(b) | extra_b


def differing(a: Connection, b: Connection) -> list[str]:
    ra, rb = compare(a, b)
    return [name for name in ra if ra[name] != rb[name]]


def side_by_side(a: Connection, label_a: str, b: Connection, label_b: str) -> str:
    """A row per field: one value when both agree, both (and why that is acceptable, or MUST MATCH) when not."""
    ra, rb = compare(a, b)
    width = max(len(label_a), len(label_b))
    out = [f"{'field':<40} both, or {label_a} / {label_b}"]
    for name in ra:
        if ra[name] == rb[name]:
            out.append(f"{name:<40} = {ra[name]}")
            continue
        why = MAY_DIFFER.get(name, "MUST MATCH")
        out.append(f"{name:<40} DIFFERS ({why})")
        out.append(f"    {label_a:<{width}}  {ra[name]}")
        out.append(f"    {label_b:<{width}}  {rb[name]}")
    return "\n".join(out)
