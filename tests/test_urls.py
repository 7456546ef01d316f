"""Layer 1: URL validation, normalization and the address policy."""

import pytest

from webfetch.errors import BlockedUrl, InvalidUrl
from webfetch.urls import AddressPolicy, prepare_url, same_host

DEFAULT = AddressPolicy()
PRIVATE_OK = AddressPolicy(allow_private=True)


@pytest.mark.parametrize("url,expected", [
    ("http://Example.COM", "https://example.com/"),
    ("HTTPS://example.com:443/a/b?x=1&y=2#frag", "https://example.com/a/b?x=1&y=2"),
    ("http://example.com:80/p", "https://example.com/p"),
    ("https://example.com:8443/p", "https://example.com:8443/p"),
    ("  https://bücher.example/ ", "https://xn--bcher-kva.example/"),
])
async def test_normalization_and_https_upgrade(url, expected):
    assert await prepare_url(url, DEFAULT) == expected


@pytest.mark.parametrize("url,message", [
    ("ftp://example.com/x", "is not an http(s) URL"),
    ("example.com/page", "is not an http(s) URL"),
    ("http://", "has no host"),
    ("", "empty URL"),
    ("http://[::1", "is not a valid URL"),
    ("https://example.com:99999/", "is not a valid URL"),
])
async def test_invalid_urls_say_what_to_pass(url, message):
    with pytest.raises(InvalidUrl) as info:
        await prepare_url(url, DEFAULT)
    assert message in info.value.message
    assert info.value.code == "invalid_url"


@pytest.mark.parametrize("url", ["http://127.0.0.1/", "http://localhost:8080/", "http://10.1.2.3/",
                                 "http://192.168.0.1/", "http://172.16.5.5/", "http://[::1]/", "http://[fd00::1]/",
                                 "http://0.0.0.0/", "http://[::ffff:127.0.0.1]/"])
async def test_private_addresses_are_blocked_by_default(url):
    with pytest.raises(BlockedUrl) as info:
        await prepare_url(url, DEFAULT)
    assert info.value.code == "blocked_url"
    assert "fetch.allow_private" in info.value.message and "fetch.allow_hosts" in info.value.message


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/",
                                 "http://[::ffff:169.254.169.254]/"])
async def test_a_link_local_address_is_blocked_without_a_hint_to_open_it(url):
    # the cloud metadata service: a model must not be told which setting would let it read the credentials
    with pytest.raises(BlockedUrl) as info:
        await prepare_url(url, DEFAULT)
    host = url.split("/")[2].strip("[]")
    assert info.value.message.startswith(host) and info.value.message.endswith(
        " is a link-local address (where a cloud's metadata service answers with the machine's credentials), "
        "which webfetch does not fetch; it is not a web page to read")
    assert "allow" not in info.value.message


async def test_allowed_local_hosts_keep_plain_http():
    assert await prepare_url("http://127.0.0.1:8000/x", PRIVATE_OK) == "http://127.0.0.1:8000/x"
    assert await prepare_url("http://localhost/", PRIVATE_OK) == "http://localhost/"
    only = AddressPolicy.from_config(False, ["LocalHost"])
    assert await prepare_url("http://localhost:9/", only) == "http://localhost:9/"
    with pytest.raises(BlockedUrl):
        await prepare_url("http://127.0.0.1/", only)


def test_same_host_ignores_www_scheme_and_port():
    assert same_host("https://www.example.com/a", "http://example.com:8080/b")
    assert not same_host("https://example.com/", "https://api.example.com/")
    assert not same_host("http://127.0.0.1:1/", "http://localhost:1/")


def test_likely_key_needs_no_dns_and_matches_public_hosts():
    from webfetch.urls import likely_key
    assert likely_key("http://Example.com:80/a?b#frag", DEFAULT) == "https://example.com/a?b"
    assert likely_key("http://intranet:8080/x", AddressPolicy.from_config(False, ["intranet"])) == \
        "http://intranet:8080/x"
