"""What webfetch never shows: the one rule for which names carry a secret, and the functions that mask their
values in headers, URLs, request bodies and free text. Every output that could carry a credential goes
through here (browse's `request`, `network` and HAR; the daemon's log; error messages; `status`), so that
what is redacted is decided in this one place.

The rule (`is_secret_name`), on a name in any case: it is one of the credential headers (Cookie, Set-Cookie,
Authorization, Proxy-Authorization), or it contains one of `SECRET_PARTS` (token, key, secret, auth,
session, csrf, xsrf, and the password-like pass, pwd, cookie, credential, signature, sessid, and saml), or
one of its words (the runs of letters and digits) is one of `SECRET_WORDS` (pin, otp, cvv, cvc, sid, sig,
code, pw, jwt, ticket). HTTP/2's
pseudo-headers (`:authority`, `:path`…) are the request line, not named secrets. It is a substring rule on
purpose: it catches `X-Api-Key`, `access_token`, `csrfmiddlewaretoken`, `PHPSESSID`, `user[password]`, at
the price of masking some harmless names too (`keywords`, `author`, `WWW-Authenticate`): a value masked by
mistake costs a reader one lookup, a value shown by mistake is a leaked login. (`Keep-Alive` is not one:
"keep" is no "key".)

A masked value reads `MASK`; its length is not shown. What is not covered: a secret in a URL's path (a
webhook's `/hooks/T0/B0/xyz`), in a response body, or in a request body of another type than
x-www-form-urlencoded, JSON or multipart/form-data."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote_plus

MASK = "<redacted>"

SECRET_HEADERS = frozenset({"cookie", "set-cookie", "authorization", "proxy-authorization"})
SECRET_PARTS = ("token", "key", "secret", "auth", "session", "csrf", "xsrf",
                "pass", "pwd", "cookie", "credential", "signature", "sessid", "saml")
# `code` is OAuth's authorization code and `ticket` CAS's service ticket: each, in a callback URL, signs the
# bearer in once more; `pw` and `jwt` are what they say. (A harmless `zip_code` is masked too, by the rule.)
SECRET_WORDS = frozenset({"pin", "otp", "cvv", "cvc", "sid", "sig", "code", "pw", "jwt", "ticket"})
# headers whose value is a URL (or a request's path): shown with that URL's secrets masked
URL_HEADERS = frozenset({"referer", "location", "content-location"})

JSON_CHARS = 1 << 20   # a JSON body parsed up to this size; a longer one is masked by the text fallback
JSON_DEPTH = 64        # nesting followed this deep; anything deeper is masked whole

_WORD = re.compile(r"[a-z0-9]+")
# name=value pairs of a query, a fragment or a form: the name after the start or a separator, the value up
# to the next separator (a fragment may be a route with its own query: `#/cb?access_token=…`)
_PAIR = re.compile(r"(?P<lead>^|[?&;#/])(?P<name>[^=&;?#/]+)=(?P<value>[^&;#]*)")
# a URL in free text: a scheme, then anything up to a space, a quote or an angle bracket. The scheme's length
# is bounded so that each start is tried in a few steps: a long run of `a.a.a…` stays linear.
_URL_IN_TEXT = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]{0,31}://[^\s'\"<>`]+")
_USERINFO = re.compile(r"^(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<info>[^/?#@]*)@")
# in JSON that could not be parsed (cut by a size limit), read as tokens from the start: a string (to its
# closing quote, or to the end when the cut is inside it), and after one, `: value` makes it a member's name,
# the value a string or a scalar, or the opening of an object or array (then everything after it is masked:
# its end may not be there). Each string is read once: a search for `"name":` from every quote mark instead
# went back over the rest of the body from each escaped quote (`\"\"\"…`), quadratic time in the event loop.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?', re.DOTALL)
_JSON_VALUE = re.compile(r'\s*:\s*(?P<value>"(?:[^"\\]|\\.)*"?|[\[{]|[^,}\]\s]+)', re.DOTALL)


def is_secret_name(name: str) -> bool:
    """Does a header, parameter or field of this name carry a secret? (The module's rule, above.)"""
    lowered = name.lower()
    return (lowered in SECRET_HEADERS or any(part in lowered for part in SECRET_PARTS)
            or any(word in SECRET_WORDS for word in _WORD.findall(lowered)))


def header(name: str, value: str) -> str:
    """A header's value as shown: masked when its name says it carries a secret, a URL's secrets masked
    when it is a URL (Referer, Location), as it is otherwise."""
    if name.startswith(":"):  # HTTP/2's request line: :method, :scheme, :authority (the host), :path
        return url(value) if name == ":path" else value
    if is_secret_name(name):
        return MASK
    return url(value) if name.lower() in URL_HEADERS else value


def url(address: str) -> str:
    """`address` with the values of its secret query and fragment parameters masked (`access_token`,
    `api_key`, `id_token` in an OAuth fragment…), and its user-info's password (the whole user-info when it
    has no password: a token given as a user name, `https://TOKEN@host`). Works on a relative one too."""
    address = _USERINFO.sub(_userinfo, address, count=1)
    cut = address.find("?")
    hash_at = address.find("#")
    if cut < 0 or 0 <= hash_at < cut:
        cut = hash_at
    if cut < 0:
        return address
    return address[:cut] + _PAIR.sub(_pair, address[cut:])


def text(message: str) -> str:
    """Free text (a log line, an error message) with every URL in it through `url`."""
    return _URL_IN_TEXT.sub(lambda m: url(m.group(0)), message) if "://" in message else message


def body(data: str, mime: str) -> str:
    """A request body as shown: the values of its secret fields masked, for a form (urlencoded or
    multipart) or JSON (by its type, or by its look when it has none); any other body as it is."""
    kind = mime.split(";", 1)[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        return "&".join(_form_pair(p) for p in data.split("&"))
    if kind == "multipart/form-data":
        return _multipart(data, mime)
    if kind.endswith(("/json", "+json")) or (not kind and data.lstrip()[:1] in ("{", "[")):
        return _json(data)
    return data


def _userinfo(m: re.Match[str]) -> str:
    user, colon, _password = m.group("info").partition(":")
    return f"{m.group('scheme')}{user}:{MASK}@" if colon else f"{m.group('scheme')}{MASK}@"


def _pair(m: re.Match[str]) -> str:
    if not is_secret_name(unquote_plus(m.group("name"))):
        return m.group(0)
    return f"{m.group('lead')}{m.group('name')}={MASK}"


def _form_pair(pair: str) -> str:
    name, eq, _value = pair.partition("=")
    return f"{name}={MASK}" if eq and is_secret_name(unquote_plus(name)) else pair


def _multipart(data: str, mime: str) -> str:
    """Each part named by a secret field (`Content-Disposition: form-data; name="password"`) with its
    content masked."""
    found = re.search(r'boundary="?([^";]+)"?', mime)
    if found is None:
        return data
    delimiter = "--" + found.group(1)
    parts = data.split(delimiter)
    for i, part in enumerate(parts):
        head, blank, _content = part.partition("\r\n\r\n")
        name = re.search(r'\bname="([^"]*)"', head, re.IGNORECASE)
        if blank and name is not None and is_secret_name(name.group(1)):
            parts[i] = f"{head}\r\n\r\n{MASK}\r\n"
    return delimiter.join(parts)


def _json(data: str) -> str:
    """JSON with the value under each secret key masked, whole (an object under `"session"` goes with
    it), at any depth; the text as it was when nothing is. JSON that cannot be parsed (cut by a limit,
    or not JSON after all) is masked by its look (`_JSON_MEMBER`)."""
    if len(data) <= JSON_CHARS:
        try:
            parsed = json.loads(data)
        except (ValueError, RecursionError):
            pass
        else:
            masked, changed = _mask_json(parsed, 0)
            return json.dumps(masked, ensure_ascii=False) if changed else data
    return _json_by_look(data)


def _mask_json(value: Any, depth: int) -> tuple[Any, bool]:
    if depth >= JSON_DEPTH and isinstance(value, (dict, list)):
        return MASK, True
    if isinstance(value, dict):
        changed = False
        out: dict[str, Any] = {}
        for k, v in value.items():
            if is_secret_name(k):
                out[k], changed = MASK, True
            else:
                out[k], inner = _mask_json(v, depth + 1)
                changed = changed or inner
        return out, changed
    if isinstance(value, list):
        items = [_mask_json(v, depth + 1) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    return value, False


def _json_by_look(data: str) -> str:
    out = []
    at = pos = 0
    while (start := data.find('"', pos)) >= 0:
        name = _JSON_STRING.match(data, start)
        assert name is not None  # a quote mark is a string's start, whatever follows
        member = _JSON_VALUE.match(data, name.end())
        pos = name.end() if member is None else member.end()  # past the value: a string's inside is no name
        if member is None or not is_secret_name(name.group()[1:-1]):
            continue
        out.append(data[at:member.start("value")])
        out.append(f'"{MASK}"')
        if member.group("value") in ("{", "["):  # its end may be past the cut: nothing after it is shown
            return "".join(out)
        at = member.end("value")
    out.append(data[at:])
    return "".join(out)
