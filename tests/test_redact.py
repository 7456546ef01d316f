"""The one rule for what webfetch never shows (webfetch/redact.py): which names carry a secret, and their
values masked in URLs, request bodies (form, JSON, multipart) and free text; and the daemon's log, which
puts every line through it."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time

import pytest

from webfetch import redact
from webfetch.frontends.client import ClientError

from .support.daemon import ServedDaemon
from .support.site import free_port

M = redact.MASK


@pytest.mark.parametrize("name", [
    "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Api-Key", "X-CSRF-Token", "X-XSRF-TOKEN",
    "X-Auth-User", "access_token", "id_token", "apiKey", "client_secret", "session_id", "JSESSIONID", "PHPSESSID",
    "password", "user[password]", "passwd", "pwd", "pin", "card.cvv", "otp", "sid", "X-Amz-Credential",
    "X-Amz-Signature", "sig", "csrfmiddlewaretoken",
    # what signs a person in once more from a callback URL: OAuth's code, CAS's ticket, a SAML response
    "code", "ticket", "SAMLResponse", "pw", "user_pw", "jwt"])
def test_a_secret_name_by_the_rule(name):
    assert redact.is_secret_name(name) and redact.is_secret_name(name.upper())


@pytest.mark.parametrize("name", [
    "Keep-Alive", "Content-Type", "Accept", "q", "user", "next", "state", "shipping", "spinner", "Sec-Fetch-Mode",
    "ETag", "Vary", "Location", "Content-Security-Policy", "X-Requested-With"])
def test_not_a_secret_name(name):
    assert not redact.is_secret_name(name)


def test_a_url_keeps_its_plain_parameters_and_masks_the_secret_ones():
    assert redact.url("https://ann:hunter2@h.example/cb?access_token=a1&q=ok&API_KEY=k#access_token=f1&"
                      "id_token=i1&state=s") == \
        f"https://ann:{M}@h.example/cb?access_token={M}&q=ok&API_KEY={M}#access_token={M}&id_token={M}&state=s"
    assert redact.url("https://ghp_abc@github.com/x.git") == f"https://{M}@github.com/x.git"
    assert redact.url("/spa#/callback?access_token=f2&x=1") == f"/spa#/callback?access_token={M}&x=1"
    assert redact.url("ws://127.0.0.1:9222/devtools/browser/x?token=S") == \
        f"ws://127.0.0.1:9222/devtools/browser/x?token={M}"
    assert redact.url("https://h/a%40b?access%5Ftoken=x&q=a=b") == f"https://h/a%40b?access%5Ftoken={M}&q=a=b"
    assert redact.url("https://app.example/oauth/callback?code=4/0Ab&state=xyz") == \
        f"https://app.example/oauth/callback?code={M}&state=xyz"
    plain = "https://h.example/p@x?q=ok&page=2#top"
    assert redact.url(plain) == plain


def test_free_text_has_each_of_its_urls_masked():
    said = ("cannot connect to ws://u:SECRET1@127.0.0.1:1/devtools?token=SECRET2: refused; "
            "and 'https://h/x?q=1&session=SECRET3' failed")
    shown = redact.text(said)
    assert not any(s in shown for s in ("SECRET1", "SECRET2", "SECRET3"))
    assert shown == (f"cannot connect to ws://u:{M}@127.0.0.1:1/devtools?token={M} refused; "
                     f"and 'https://h/x?q=1&session={M}' failed")
    assert redact.text("nothing to hide: token=abc without a URL") == "nothing to hide: token=abc without a URL"


def test_request_bodies_have_their_password_like_fields_masked():
    form = "user=ann&password=hunter2&csrf_token=c1&next=%2Fhome"
    assert redact.body(form, "application/x-www-form-urlencoded; charset=UTF-8") == \
        f"user=ann&password={M}&csrf_token={M}&next=%2Fhome"
    doc = {"user": {"name": "ann", "password": "pw1", "prefs": [{"apiKey": "k1"}]}, "session": {"id": "x1"},
           "q": "ok"}
    shown = json.loads(redact.body(json.dumps(doc), "application/json"))
    assert shown == {"user": {"name": "ann", "password": M, "prefs": [{"apiKey": M}]}, "session": M, "q": "ok"}
    untouched = '{"name":"ann"}'
    assert redact.body(untouched, "application/json") is untouched, "the text as sent when nothing is secret"
    # cut by a size limit: masked by its look, and nothing after a secret object's opening
    cut = '{"user": {"name": "ann", "password": "pw2"}, "token": "t2", "session": {"id": "x2", "more'
    assert redact.body(cut, "application/json") == \
        f'{{"user": {{"name": "ann", "password": "{M}"}}, "token": "{M}", "session": "{M}"'
    assert redact.body('{"password": "pw3"}', "") == json.dumps({"password": M}), "JSON by its look"
    deep = {"a": "b"}
    for _ in range(redact.JSON_DEPTH + 5):
        deep = {"x": deep}
    assert "b" not in redact.body(json.dumps(deep), "application/json").replace('"x"', "")
    multipart = ('--B1\r\nContent-Disposition: form-data; name="user"\r\n\r\nann\r\n'
                 '--B1\r\nContent-Disposition: form-data; name="password"\r\n\r\nhunter2\r\n--B1--\r\n')
    assert redact.body(multipart, 'multipart/form-data; boundary="B1"') == (
        '--B1\r\nContent-Disposition: form-data; name="user"\r\n\r\nann\r\n'
        f'--B1\r\nContent-Disposition: form-data; name="password"\r\n\r\n{M}\r\n--B1--\r\n')
    assert redact.body("password=x", "text/plain") == "password=x", "another type is not read"


def test_a_json_body_of_escaped_quotes_is_masked_in_linear_time():
    """A page's POST body is masked in the event loop (browse's `request` view, a HAR of up to a thousand
    of them): read by its look, `\\"` repeated made the search start over from each quote mark, minutes for
    one body of this size (quadratic). Bounded by pytest's timeout. The strings are read as tokens: a
    member name inside a string value is not one, one after an unterminated array item is."""
    hostile = '{"a": 1, ' + '\\"' * 200_000
    assert redact.body(hostile, "application/json") == hostile
    assert redact.body('{"token": "t1", "a": ' + '\\"' * 200_000, "") == f'{{"token": "{M}", "a": ' + '\\"' * 200_000
    inside = '{"x": "has \\"password\\": inside", "token": "t3", "cut'
    assert redact.body(inside, "application/json") == f'{{"x": "has \\"password\\": inside", "token": "{M}", "cut'
    assert redact.body('["a", "pin": 1234, "b\\"c": "d', "application/json") == f'["a", "pin": "{M}", "b\\"c": "d'


LOGGER = """
import logging, sys
from pathlib import Path
from webfetch.frontends.logs import log_to_file, log_to_stderr
if sys.argv[1] == "-":
    log_to_stderr("info")
else:
    log_to_file(Path(sys.argv[1]), "info")
log = logging.getLogger("webfetch.test")
log.info("fetch url=%s", "http://h/x?access_token=LOGSECRET1&q=ok")
try:
    raise RuntimeError("cannot connect to ws://u:LOGSECRET2@127.0.0.1:1/x")
except RuntimeError:
    log.exception("browser down")
"""


@pytest.mark.parametrize("where", ["file", "stderr"])
def test_the_daemons_log_masks_the_secrets_of_every_url_in_a_line_and_a_traceback(tmp_path, where):
    path = tmp_path / "webfetch.log"
    r = subprocess.run([sys.executable, "-c", LOGGER, str(path) if where == "file" else "-"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    written = path.read_text() if where == "file" else r.stderr
    assert "LOGSECRET" not in written
    assert f"url=http://h/x?access_token={M}&q=ok" in written
    assert f"RuntimeError: cannot connect to ws://u:{M}@127.0.0.1:1/x" in written


def test_an_errors_message_keeps_no_secret_of_a_url():
    from webfetch.errors import HttpError

    e = HttpError("https://h/x?api_key=ERRSECRET&q=ok answered HTTP 404", 404)
    assert e.message == str(e) == f"https://h/x?api_key={M}&q=ok answered HTTP 404"


def test_the_redacting_formatter_is_what_the_log_lines_go_through():
    from webfetch.frontends.logs import Redacting

    record = logging.LogRecord("webfetch.x", logging.INFO, __file__, 1, "loaded %s", ("http://h/?token=T1",), None)
    assert Redacting().format(record).endswith(f"webfetch.x: loaded http://h/?token={M}")


def _browser_state(d: ServedDaemon) -> str | None:
    try:
        return d.status()["browser"]["state"]
    except ClientError:  # not listening yet
        return None


def test_a_browser_endpoints_token_and_password_never_show_in_status_errors_or_the_log(short_tmp, site):
    """A browser.endpoint that cannot be reached, its password and token in the URL: the daemon's status,
    the errors of the fetches that needed it, and its log (a real `webfetch serve`) show neither, nor the
    secrets of the fetched URLs."""
    port = free_port()
    endpoint = f"ws://ann:EPSECRET1@127.0.0.1:{port}/devtools/browser/x?token=EPSECRET2"
    d = ServedDaemon(short_tmp, f'[browser]\nendpoint = "{endpoint}"\n[fetch]\nallow_private = true\n'
                               f'transport = "http"\n', log_level="info")
    try:
        deadline = time.monotonic() + 60
        while _browser_state(d) != "crash_loop":  # three failed connections: seconds
            assert time.monotonic() < deadline, "the endpoint never counted as failing"
            time.sleep(0.1)
        status = d.status()
        assert status["browser"]["endpoint"] == f"ws://ann:{M}@127.0.0.1:{port}/devtools/browser/x?token={M}"
        assert any(f"cannot connect to ws://ann:{M}@127.0.0.1:{port}" in p for p in status["problems"]), status
        needs_browser, _ = d.fetch(site.url("/js?access_token=ERRSECRET1&q=ok"))
        assert needs_browser["code"] == "browser_unavailable", needs_browser
        assert f"cannot connect to ws://ann:{M}@127.0.0.1:{port}" in needs_browser["message"]
        missing, _ = d.fetch(site.url("/missing-page?access_token=ERRSECRET2&q=ok"))
        assert missing["code"] == "http_error"
        assert missing["message"].startswith(site.url(f"/missing-page?access_token={M}&q=ok answered HTTP 404"))
        frames = json.dumps([status, needs_browser, missing])
    finally:
        d.stop()
    logged = (short_tmp / "daemon.log").read_text()
    assert f"url={site.url(f'/missing-page?access_token={M}&q=ok')}" in logged, logged
    assert f"cannot connect to ws://ann:{M}@127.0.0.1:{port}" in logged
    for secret in ("EPSECRET1", "EPSECRET2", "ERRSECRET1", "ERRSECRET2"):
        assert secret not in frames and secret not in logged, secret

