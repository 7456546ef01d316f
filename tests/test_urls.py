"""Layer 1: URL validation, normalization and the address policy."""

import ipaddress
import re

import pytest

from webfetch.addresses import is_public
from webfetch.errors import BlockedUrl, InvalidUrl
from webfetch.urls import AddressPolicy, HostGate, likely_key, parse_local, prepare_url, same_host, wildcard_match

from .support.addresses import LINK_LOCAL, METADATA, TABLE, name_of, resolver

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
    assert "is not a public address (" in info.value.message
    assert "fetch.allow_private" in info.value.message and "fetch.allow_hosts" in info.value.message


@pytest.mark.parametrize("url", ["http://[fe80::1]/", "http://169.254.1.1/", "http://[2002:a9fe:101::]/"])
async def test_a_link_local_address_is_blocked_without_a_hint_to_open_it(url):
    # where some cloud may serve its metadata: a model must not be told which setting would open it
    with pytest.raises(BlockedUrl) as info:
        await prepare_url(url, DEFAULT)
    host = url.split("/")[2].strip("[]")
    assert info.value.message == (
        f"{host} is a link-local address (where a cloud's metadata service answers with the machine's credentials), "
        "which webfetch does not fetch; it is not a web page to read")


@pytest.mark.parametrize("url,service", [
    ("http://169.254.169.254/latest/meta-data/", "the instance metadata service of AWS, Google Cloud, Azure, "
                                                 "Oracle Cloud, DigitalOcean, OpenStack and others"),
    ("http://[::ffff:169.254.169.254]/", "the instance metadata service of AWS, Google Cloud, Azure, Oracle Cloud, "
                                         "DigitalOcean, OpenStack and others"),
    ("http://100.100.100.200/latest/meta-data/", "Alibaba Cloud's instance metadata service"),
    ("http://192.0.0.192/latest/", "Oracle Cloud Classic's instance metadata service"),
    ("http://[fd00:ec2::254]/latest/", "AWS EC2's instance metadata service over IPv6"),
    ("http://169.254.170.2/v2/credentials", "AWS ECS's task metadata and credentials endpoint"),
])
async def test_a_cloud_metadata_address_is_named_as_such_without_a_hint_to_open_it(url, service):
    # the machine's credentials: a model must not be told which setting would let it read them
    with pytest.raises(BlockedUrl) as info:
        await prepare_url(url, DEFAULT)
    host = url.split("/")[2].strip("[]")
    assert info.value.message == (
        f"{host} is a cloud metadata address ({service}, which answers with the machine's credentials), which "
        "webfetch does not fetch; it is not a web page to read")


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


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/a?b", "http://10.1.2.3/x", "http://[::1]:81/",
                                 "http://93.184.216.34/p", "https://[2001:4860::8888]/q"])
async def test_likely_key_of_an_address_is_the_key_prepare_url_gives(url):
    # an address's reach needs no lookup, so a cache hit on a local page is found at the first try
    from webfetch.urls import likely_key
    private = AddressPolicy.from_config(True, [])
    assert likely_key(url, private) == await prepare_url(url, private)


# --- browse.allow_local: the user's dev server, for browse sessions only ------------------------------

def scripted(answers: dict[str, list[str]]):
    async def resolve(host: str) -> list:
        return [ipaddress.ip_address(a) for a in answers.get(host, [host])]
    return resolve


NAMES = scripted({"localhost": ["::1", "127.0.0.1"], "rebound.test": ["127.0.0.1"], "lan.test": ["10.0.0.7"],
                  "public.test": ["93.184.216.34"]})
FETCH = AddressPolicy(resolver=NAMES)
BROWSE = FETCH.for_browse(["localhost:3000", "127.0.0.1:5173", "[::1]:*"])


@pytest.mark.parametrize("url,allowed", [
    ("http://localhost:3000/", True),          # listed by name: both of its addresses are loopback
    ("http://127.0.0.1:5173/app", True),
    ("http://[::1]:9999/", True),               # host:* is every port
    ("http://localhost:3001/", False),          # another port of a listed host
    ("http://localhost/", False),               # port 80 is not 3000
    ("http://127.0.0.1:3000/", False),          # the host as typed: 127.0.0.1 is not `localhost`
    ("http://rebound.test:3000/", False),       # a name that resolves to loopback is not localhost
    ("http://10.0.0.7:5173/", False),           # private ranges still refused
    ("http://169.254.169.254:80/", False),      # and the metadata address
])
async def test_allow_local_lets_browse_reach_exactly_the_listed_loopback_ports(url, allowed):
    if allowed:
        assert (await prepare_url(url, BROWSE)).startswith("http://"), "a local host keeps plain http"
    else:
        with pytest.raises(BlockedUrl):
            await prepare_url(url, BROWSE)
    with pytest.raises(BlockedUrl):  # fetch's policy never has them
        await prepare_url(url, FETCH)


async def test_a_listed_name_that_resolves_off_loopback_is_refused():
    policy = AddressPolicy(resolver=scripted({"localhost": ["10.0.0.7"]})).for_browse(["localhost:3000"])
    with pytest.raises(BlockedUrl):
        await prepare_url("http://localhost:3000/", policy)


async def test_a_refused_loopback_port_names_the_config_line_that_allows_it():
    with pytest.raises(BlockedUrl) as e:
        await prepare_url("http://localhost:8080/x", BROWSE)
    assert e.value.message == (
        'localhost:8080 (::1) is a loopback address, which browse sessions reach only when the config lists it: to '
        'let them reach this dev server, put `browse.allow_local = ["localhost:3000", "127.0.0.1:5173", "[::1]:*", '
        '"localhost:8080"]` in the [browse] table of the config, then run `webfetch reload` (fetch still refuses it)')
    with pytest.raises(BlockedUrl) as e:  # fetch's message is fetch's
        await prepare_url("http://localhost:8080/x", FETCH)
    assert "browse.allow_local" not in e.value.message and "fetch.allow_hosts" in e.value.message
    with pytest.raises(BlockedUrl) as e:  # a private address is not what browse.allow_local is for
        await prepare_url("http://lan.test:3000/", BROWSE)
    assert "browse.allow_local" not in e.value.message


@pytest.mark.parametrize("entry,message", [
    ("localhost", "is not host:port or host:*"),
    ("localhost:99999", "the port must be 1-65535 or *"),
    ("10.0.0.5:80", "10.0.0.5 is not a loopback address"),
    ("http://localhost:3000", "is not host:port or host:*"),
])
def test_a_bad_allow_local_entry_says_what_is_wrong(entry, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_local(entry)


async def test_the_gate_judges_a_host_by_port_too():
    gate = HostGate(BROWSE)
    assert await gate.check("http://localhost:3000/a") is None
    assert "browse.allow_local" in (await gate.check("http://localhost:3001/a") or "")
    assert await gate.check("ws://localhost:3000/socket") is None


# --- the boundary: every special-purpose range of IANA's registries ---------------------------------------

def url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


@pytest.mark.parametrize("address,says", TABLE)
async def test_every_special_purpose_address_is_refused_and_public_ones_pass(address, says):
    """The one function's decision, and the policy's on a name that resolves there and on the address."""
    assert is_public(ipaddress.ip_address(address)) is (says is None)
    policy = AddressPolicy(resolver=resolver)
    name = name_of(address)
    if says is None:  # public: let through, and upgraded to https as a public host is
        assert await prepare_url(f"http://{name}/page", policy) == f"https://{name}/page"
        assert await prepare_url(f"http://{url_host(address)}/page", policy) == f"https://{url_host(address)}/page"
        return
    with pytest.raises(BlockedUrl) as info:
        await prepare_url(f"http://{name}/page", policy)
    message = info.value.message
    assert message.startswith(f"{name} ({ipaddress.ip_address(address)}) is "), message
    assert says in message, message
    # a metadata or link-local address is never told how it could be allowed; every other one is
    assert ("fetch.allow_private" in message) is not says.startswith((METADATA, LINK_LOCAL)), message
    with pytest.raises(BlockedUrl) as info:
        await prepare_url(f"http://{url_host(address)}/page", policy)
    assert says in info.value.message


@pytest.mark.parametrize("address", [a for a, says in TABLE if says is not None])
async def test_the_allow_lists_let_a_refused_address_through_as_a_local_host(address):
    # as a host on this machine or its network: plain http stays http, and the cache key says so without DNS
    url = f"http://{url_host(address)}:8080/x"
    metadata = dict(TABLE)[address].startswith(METADATA)
    for policy in ((AddressPolicy.from_config(False, [address]),) if metadata else
                   (PRIVATE_OK, AddressPolicy.from_config(False, [address]))):
        assert await prepare_url(url, policy) == url
        assert likely_key(url, policy) == url
    name = name_of(address)
    listed = AddressPolicy.from_config(False, [name], resolver)
    assert await prepare_url(f"http://{name}:8080/x", listed) == f"http://{name}:8080/x"


@pytest.mark.parametrize("address", [a for a, says in TABLE if says is not None and says.startswith(METADATA)])
async def test_a_cloud_metadata_address_stays_refused_unless_itself_is_listed(address):
    """fetch.allow_private opens the private network, and a listed network the addresses in it, but not the
    machine's credentials: a metadata address is reached only when allow_hosts names it (or the host)."""
    name = name_of(address)
    opened = [AddressPolicy(allow_private=True, resolver=resolver),
              AddressPolicy.from_config(True, ["10.0.0.0/8"], resolver),
              AddressPolicy.from_config(False, ["::/0" if ":" in address else "0.0.0.0/0"], resolver),
              AddressPolicy.from_config(False, [str(ipaddress.ip_network(address).supernet(new_prefix=16))],
                                        resolver)]
    for policy in opened:
        for url in (f"http://{url_host(address)}/latest/", f"http://{name}/latest/"):
            with pytest.raises(BlockedUrl) as info:
                await prepare_url(url, policy)
            assert METADATA in info.value.message and "allow" not in info.value.message, info.value.message
            assert await HostGate(policy).check(url) == info.value.message
    for entry, url in ((address, f"http://{url_host(address)}/latest/"), (name, f"http://{name}/latest/")):
        listed = AddressPolicy.from_config(True, [entry], resolver)
        assert await prepare_url(url, listed) == url
        assert await HostGate(listed).check(url) is None


async def test_a_tailscale_network_is_reached_once_listed():
    tailnet = AddressPolicy.from_config(False, ["100.64.0.0/10"], scripted({"box.tailnet.test": ["100.101.102.103"]}))
    assert await prepare_url("http://box.tailnet.test:3000/", tailnet) == "http://box.tailnet.test:3000/"
    with pytest.raises(BlockedUrl) as info:  # Alibaba Cloud's metadata address is in that range too
        await prepare_url("http://box.tailnet.test:3000/", AddressPolicy(resolver=tailnet.resolver))
    assert "100.64.0.0/10: shared address space" in info.value.message


def test_a_wildcard_is_matched_in_linear_time():
    # robots.txt's rules and browse's routes: `*` any run of characters (slashes too), anchored or not
    pieces = tuple("http://127.0.0.1:*/api/*".split("*"))
    assert wildcard_match(pieces, "http://127.0.0.1:8000/api/items?page=2", anchored=True)
    assert not wildcard_match(pieces, "https://127.0.0.1:8000/api/items", anchored=True)
    assert wildcard_match(("*/items",), "*/items", anchored=True)  # one piece: the text itself
    assert wildcard_match(("", "/a", ""), "http://h/a/b", anchored=True)
    assert not wildcard_match(("", "/a"), "http://h/a/b", anchored=True)  # anchored: it must end there
    assert wildcard_match(("", "/a"), "http://h/a/b", anchored=False)
    assert wildcard_match(("", "ab", "ab"), "xabab", anchored=True) and not wildcard_match(("", "ab", "ab"), "xab",
                                                                                           anchored=True)
    # a pattern that makes a backtracking matcher (fnmatch, `.*` regexes) run for ever: one pass each piece
    hostile = tuple(("*a" * 60 + "*b").split("*"))
    assert not wildcard_match(hostile, "a" * 200_000, anchored=True)
    assert wildcard_match(hostile, "a" * 200_000 + "b", anchored=True)
