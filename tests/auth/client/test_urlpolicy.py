"""The URL safety policy: schemes, loopback, private ranges, numeric tricks, DNS results."""

from __future__ import annotations

import ipaddress

import pytest

from mcpkit.auth.client.errors import UnsafeURLError
from mcpkit.auth.client.urlpolicy import HostClass, UrlPolicy, classify_host, classify_ip, origin_of

STRICT = UrlPolicy(resolve=False)
LOOPBACK_OK = UrlPolicy(allow_loopback=True, resolve=False)
PRIVATE_OK = UrlPolicy(allow_private=True, resolve=False)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f.1",
        "0x7f000001",
        "0177.0.0.1",
        "::1",
        "[::1]",
        "::ffff:127.0.0.1",
        "[::ffff:7f00:1]",
        "localhost",
        "LOCALHOST.",
        "app.localhost",
    ],
)
def test_loopback_forms(host: str) -> None:
    assert classify_host(host) is HostClass.LOOPBACK


@pytest.mark.parametrize(
    "host",
    [
        "169.254.169.254",
        "10.0.0.1",
        "10.255.255.255",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "100.64.0.1",  # CGNAT
        "0.0.0.0",
        "0",
        "0x",  # inet_aton reads it as 0 → 0.0.0.0
        "224.0.0.1",
        "255.255.255.255",
        "::",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "[fe80::1%25eth0]",
        "ff02::1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "64:ff9b::7f00:1",  # NAT64 of loopback: not real loopback
        "2002:a00:1::",  # 6to4 of 10.0.0.1
        "0xa9.0xfe.0xa9.0xfe",  # 169.254.169.254 in hex
        "2852039166",  # 169.254.169.254 as one number
        "metadata.google.internal",
        "metadata",
    ],
)
def test_private_forms(host: str) -> None:
    assert classify_host(host) is HostClass.PRIVATE


@pytest.mark.parametrize("host", ["8.8.8.8", "2001:4860:4860::8888", "::ffff:8.8.8.8", "1.1.1.1"])
def test_public_addresses(host: str) -> None:
    assert classify_host(host) is HostClass.PUBLIC


@pytest.mark.parametrize("host", ["example.com", "auth.example.com.", "a-1.example", "127.example.com"])
def test_names(host: str) -> None:
    assert classify_host(host) is HostClass.NAME


@pytest.mark.parametrize(
    "host", ["1.2.3.4.5", "256.1.1.1", "1..1", "999999999999", "1.2.3.0x1ff", "08.1.1.1"]
)
def test_malformed_numeric_hosts_are_errors(host: str) -> None:
    with pytest.raises(ValueError):
        classify_host(host)


def test_classify_ip_direct() -> None:
    assert classify_ip(ipaddress.ip_address("93.184.216.34")) is HostClass.PUBLIC
    assert classify_ip(ipaddress.ip_address("::ffff:127.0.0.1")) is HostClass.LOOPBACK


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JavaScript:alert(document.cookie)",
        "file:///etc/passwd",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:msgbox(1)",
        "ftp://example.com/x",
        "//example.com/x",
        "example.com/authorize",
        "https://user:pass@example.com/authorize",
        "https://example.com/authorize#frag",
        "https://example.com/a b",
        "https://example.com/a\nb",
        'https://example.com/"quoted"',
        "https://example.com/`id`",
        "https://example.com/a|b",
        "https://exämple.com/",
        "http://example.com/authorize",  # plain http off loopback
        "https:///nohost",
    ],
)
def test_refused_urls(url: str) -> None:
    with pytest.raises(UnsafeURLError):
        STRICT.check(url, purpose="test")


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "https://10.0.0.1/",
        "https://[::ffff:127.0.0.1]/",
        "http://0x7f.1/",
        "http://2130706433/",
        "https://[fd00::1]/",
        "http://localhost:8080/",
        "https://metadata.google.internal/computeMetadata/v1/",
    ],
)
def test_ssrf_targets_refused_by_default(url: str) -> None:
    with pytest.raises(UnsafeURLError):
        STRICT.check(url)


def test_loopback_needs_opt_in_and_allows_http() -> None:
    with pytest.raises(UnsafeURLError, match="allow_loopback"):
        STRICT.check("http://127.0.0.1:9000/token")
    assert LOOPBACK_OK.check("http://127.0.0.1:9000/token").port == 9000
    assert LOOPBACK_OK.check("http://[::1]:9000/token").host == "::1"
    assert LOOPBACK_OK.check("http://0x7f.1/x").host == "0x7f.1"


def test_private_needs_opt_in_and_https() -> None:
    assert PRIVATE_OK.check("https://10.0.0.1/token").host == "10.0.0.1"
    with pytest.raises(UnsafeURLError, match="http"):
        PRIVATE_OK.check("http://10.0.0.1/token")
    insecure = UrlPolicy(allow_private=True, allow_insecure_http=True, resolve=False)
    assert insecure.check("http://10.0.0.1/token").scheme == "http"


def test_public_https_allowed() -> None:
    assert STRICT.check("https://auth.example.com/authorize?x=1&y=$(calc)").host == "auth.example.com"


def test_trusted_origin_skips_host_checks() -> None:
    policy = STRICT.with_trusted([origin_of("http://127.0.0.1:8000/mcp")])
    assert policy.check("http://127.0.0.1:8000/.well-known/oauth-protected-resource").port == 8000
    with pytest.raises(UnsafeURLError):
        policy.check("http://127.0.0.1:8001/.well-known/oauth-protected-resource")
    with pytest.raises(UnsafeURLError):
        policy.check("javascript:alert(1)")


def test_origin_of_normalises() -> None:
    assert origin_of("HTTPS://Example.COM/a") == "https://example.com:443"
    assert origin_of("http://[::1]:80/") == "http://[::1]:80"


async def test_resolution_checks_every_address() -> None:
    answers = {"rebind.example": ["93.184.216.34", "10.0.0.7"], "ok.example": ["93.184.216.34"]}

    async def resolver(host: str, port: int) -> list[str]:
        return answers[host]

    policy = UrlPolicy(resolver=resolver)
    assert (await policy.check_resolved("https://ok.example/x")).host == "ok.example"
    with pytest.raises(UnsafeURLError, match="resolves to a private"):
        await policy.check_resolved("https://rebind.example/x")
    answers["lo.example"] = ["127.0.0.1"]
    with pytest.raises(UnsafeURLError, match="loopback"):
        await policy.check_resolved("https://lo.example/x")
    assert await UrlPolicy(allow_loopback=True, resolver=resolver).check_resolved("https://lo.example/x")
    answers["v6.example"] = ["fe80::1%eth0"]
    with pytest.raises(UnsafeURLError):
        await policy.check_resolved("https://v6.example/x")


async def test_resolution_failure_is_not_fatal() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        raise OSError("NXDOMAIN")

    assert await UrlPolicy(resolver=resolver).check_resolved("https://nowhere.example/x")


async def test_real_resolver_on_localhost_name() -> None:
    # getaddrinfo in the running loop: "localhost" is caught literally, before resolution.
    with pytest.raises(UnsafeURLError):
        await UrlPolicy().check_resolved("http://localhost:1/x")
    assert await UrlPolicy(allow_loopback=True).check_resolved("http://localhost:1/x")


@pytest.mark.parametrize("url", ["https://[", "https://[x/", "https://a]/token"])
def test_urls_the_standard_library_cannot_split_are_refused(url: str) -> None:
    # httpx reads "https://[" as a host named "%5B"; the OAuth client also splits these URLs
    # with urllib, which raises ValueError: found by fuzz/oauth.py (an issuer from a hostile PRM).
    with pytest.raises(UnsafeURLError, match="unparsable"):
        UrlPolicy(resolve=False).check(url, purpose="authorization server")
