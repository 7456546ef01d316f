"""Layer 1: decoding every kind of request line, good and bad."""

import pytest

from webfetch.errors import BadRequest
from webfetch.protocol import (
    CancelRequest,
    ErrorFrame,
    FetchRequest,
    FetchResult,
    StatusRequest,
    decode_request,
    encode_frame,
)


def bad(line: bytes) -> BadRequest:
    with pytest.raises(BadRequest) as info:
        decode_request(line)
    return info.value


def test_fetch_with_all_fields():
    env = decode_request(b'{"id":"a","op":"fetch","url":"https://x.org","prompt":"q","offset":5,"max_chars":9,'
                         b'"raw":true,"fresh":true,"timeout_s":3,"model":"p/m","thinking":"low","extra":1}')
    assert env.id == "a"
    assert env.request == FetchRequest(url="https://x.org", prompt="q", offset=5, max_chars=9, raw=True,
                                       fresh=True, timeout_s=3.0, model="p/m", thinking="low")


def test_id_is_optional_and_may_be_an_integer():
    assert decode_request(b'{"op":"status"}').id is None
    assert decode_request(b'{"id":7,"op":"status"}').request == StatusRequest()
    assert decode_request(b'{"id":7,"op":"cancel","target":"x"}').request == CancelRequest(target="x")


@pytest.mark.parametrize("line", [b"hello", b"{", b"\xff\xfe", b'{"id":1,"op":"status"} trailing'])
def test_not_json_shows_an_example(line):
    e = bad(line)
    assert e.code == "bad_request" and e.request_id is None
    assert '{"id":1,"op":"fetch","url":"https://example.com"}' in e.message


@pytest.mark.parametrize("line,what", [(b"[1,2]", "an array"), (b'"s"', "a string"), (b"3", "a number"),
                                       (b"null", "null")])
def test_not_an_object(line, what):
    e = bad(line)
    assert e.message.startswith(f"expected a JSON object, got {what}")


def test_unknown_op_names_the_valid_ones_and_keeps_the_id():
    e = bad(b'{"id":3,"op":"fetchh"}')
    assert e.request_id == 3
    assert e.message == ("unknown op 'fetchh'; expected one of fetch, search, browse, status, cancel, stop, reload, "
                         "crawl, map, cache_clear, view - at `$.op`")


def test_missing_op():
    assert bad(b'{"id":3}').message.startswith("missing field `op`")


@pytest.mark.parametrize("line,message", [
    (b'{"id":1,"op":"fetch"}', "Object missing required field `url`; pass `url`, or `urls` with up to 50 URLs"),
    (b'{"id":1,"op":"fetch","url":5}', "Expected `str`, got `int` - at `$.url`"),
    (b'{"id":1,"op":"fetch","url":"u","offset":-1}', "Expected `int` >= 0 - at `$.offset`"),
    (b'{"id":1,"op":"fetch","url":"u","max_chars":0}', "Expected `int` >= 1 - at `$.max_chars`"),
    (b'{"id":1,"op":"fetch","url":"u","raw":"yes"}', "Expected `bool`, got `str` - at `$.raw`"),
    (b'{"id":1,"op":"fetch","url":"u","thinking":"Max!"}',
     "Expected `str` matching regex '^[a-z][a-z0-9_-]{0,31}$' - at `$.thinking`"),
    (b'{"id":1,"op":"fetch","url":"u","offset":1.5}', "Expected `int | null`, got `float` - at `$.offset`"),
    (b'{"id":1,"op":"search","query":"q","limit":21}', "Expected `int` <= 20 - at `$.limit`"),
    (b'{"id":1,"op":"cancel"}', "Object missing required field `target`"),
])
def test_mistyped_fields_name_the_json_path(line, message):
    e = bad(line)
    assert e.request_id == 1
    if message:
        assert e.message == message


@pytest.mark.parametrize("line", [b'{"id":true,"op":"status"}', b'{"id":1.5,"op":"status"}',
                                  b'{"id":"","op":"status"}', b'{"id":[1],"op":"status"}',
                                  b'{"id":"' + b"x" * 129 + b'","op":"status"}'])
def test_bad_ids(line):
    e = bad(line)
    assert e.request_id is None and "`id`" in e.message


def test_frames_encode_as_one_line_in_protocol_order():
    line = encode_frame(FetchResult(id="7", url="https://e.com/", final_url="https://e.com/", status=200))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert line.startswith(b'{"type":"result","id":"7","op":"fetch","kind":"page","url":"https://e.com/"')
    err = encode_frame(ErrorFrame(id=None, code="bad_request", message="m"))
    assert err == b'{"type":"error","id":null,"code":"bad_request","message":"m"}\n'
    http = encode_frame(ErrorFrame(id=2, code="http_error", message="m", status=404))
    assert http == b'{"type":"error","id":2,"code":"http_error","message":"m","status":404}\n'
