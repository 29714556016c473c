"""The fetch reference server (mcpkit.servers.fetch): parity with mcp-server-fetch and its SSRF battery.

A real web site runs on 127.0.0.1 (a threaded ``http.server`` started here) and records
every request it receives; the server runs in memory (for the behaviours) and as a real
process over stdio and Streamable HTTP, in both protocol eras (for parity and the battery).
Every attack asserts that the site received no request at all.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import gzip
import ipaddress
import re
import socket
import ssl
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client
from mcpkit.protocol import types as t
from mcpkit.servers.fetch import (
    AddressPolicy,
    FetchRefused,
    FetchSettings,
    build_parser,
    build_server,
    main,
    settings_from_args,
)
from mcpkit.servers.fetch.guard import check_url, normalize_host, parse_ipv4_number, why_not_public
from mcpkit.servers.fetch.robots import RobotsTxt, product_token
from mcpkit.testing import connect

pytestmark = pytest.mark.timeout(60)

MODULE = "mcpkit.servers.fetch"

# -- the local web site ----------------------------------------------------------------------

Reply = tuple[int, dict[str, str], bytes]


@dataclass
class Seen:
    path: str
    headers: dict[str, str]


@dataclass
class Site:
    """A web site on a real loopback socket; ``requests`` is every request it received."""

    host: str = "127.0.0.1"
    tls: ssl.SSLContext | None = None
    routes: dict[str, Reply | Callable[[], Reply]] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                site.requests.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}))
                route = site.routes.get(self.path.split("?", 1)[0])
                status, headers, body = (route() if callable(route) else route) if route else (404, {}, b"")
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((self.host, 0), Handler)
        self.server.daemon_threads = True
        if self.tls is not None:
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        # A short poll interval: shutdown() returns within it.
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str = "/", host: str | None = None) -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{host or self.host}:{self.port}{path}"

    def paths(self) -> list[str]:
        return [seen.path for seen in self.requests]


PAGE = b"""<!doctype html><html><head><title>Ignored title</title>
<style>body { color: red }</style><script>var secret = "from a script";</script></head>
<body><nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<main><h1>Fetch test page</h1><p>Some <strong>bold</strong> text and <a href="/next.html">a link</a>.</p>
<ul><li>one</li><li>two</li></ul><img src="data:image/png;base64,AAAA" alt="inline"></main>
</body></html>"""
LONG_TEXT = "".join(f"line {i:05d} of a long text\n" for i in range(1000))  # 26,000 characters
SECRET = b"TOP SECRET: the site's internal page"


@functools.cache
def gzip_bomb() -> bytes:
    """50 MB of "A" once decompressed, about 50 KB on the wire (built once)."""
    return gzip.compress(b"A" * 50_000_000, compresslevel=6)


def html(body: bytes, charset: str = "utf-8") -> Reply:
    return 200, {"Content-Type": f"text/html; charset={charset}"}, body


def standard_routes(site: Site) -> None:
    long_html = b"<html><body><main>" + b"".join(
        f"<p>Paragraph {i} of a long page, with enough words to fill it.</p>".encode() for i in range(400)
    )
    long_html += b"</main></body></html>"
    site.routes.update(
        {
            "/page.html": html(PAGE),
            "/plain.txt": (200, {"Content-Type": "text/plain; charset=utf-8"}, b"just text, not HTML\n"),
            "/long.txt": (200, {"Content-Type": "text/plain"}, LONG_TEXT.encode()),
            "/long.html": html(long_html),
            "/data.json": (200, {"Content-Type": "application/json"}, b'{"a": 1}'),
            "/latin1.html": (
                200,
                {"Content-Type": "text/html"},
                '<html><head><meta charset="iso-8859-1"></head><body><p>caf\xe9</p></body></html>'.encode(
                    "latin-1"
                ),
            ),
            "/gzip.html": (
                200,
                {"Content-Type": "text/html", "Content-Encoding": "gzip"},
                gzip.compress(b"<html><body><p>compressed page</p></body></html>"),
            ),
            "/bomb.txt": (
                200,
                {"Content-Type": "text/plain", "Content-Encoding": "gzip"},
                gzip_bomb(),
            ),
            "/image.png": (200, {"Content-Type": "image/png"}, b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"),
            "/secret": (200, {"Content-Type": "text/plain"}, SECRET),
            "/missing": (404, {"Content-Type": "text/plain"}, b"no such page"),
            "/broken": (500, {"Content-Type": "text/plain"}, b"oops"),
        }
    )


@pytest.fixture
def site() -> Iterator[Site]:
    site = Site()
    standard_routes(site)
    site.start()
    try:
        yield site
    finally:
        site.stop()


def text_of(result: t.CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, t.TextContent)
    return block.text


def local(**overrides: Any) -> FetchSettings:
    """Settings that open 127.0.0.1 only (the site), as the parity tests run the server."""
    return FetchSettings(**{"allow_hosts": ("127.0.0.1",), **overrides})


# -- the tool and the prompt, in memory ----------------------------------------------------------


async def test_html_becomes_markdown_without_scripts_navigation_or_inline_data(site: Site) -> None:
    async with connect(build_server(local())) as client:
        result = await client.call_tool("fetch", {"url": site.url("/page.html")})
    text = text_of(result)
    assert result.is_error is not True, text
    assert text.startswith(f"Contents of {site.url('/page.html')}:\n# Fetch test page\n")
    assert "Some **bold** text" in text
    assert f"[a link]({site.url('/next.html')})" in text  # made absolute, so the model can follow it
    assert "* one\n* two" in text
    for gone in ("from a script", "color: red", "About", "data:image", "Ignored title"):
        assert gone not in text
    [seen] = [s for s in site.requests if s.path == "/page.html"]
    assert seen.headers["host"] == f"127.0.0.1:{site.port}"
    assert seen.headers["user-agent"] == "ModelContextProtocol/1.0 (Autonomous; mcpkit-fetch)"


async def test_raw_and_non_html_come_back_as_they_are_with_the_community_prefix(site: Site) -> None:
    async with connect(build_server(local())) as client:
        raw = text_of(await client.call_tool("fetch", {"url": site.url("/page.html"), "raw": True}))
        plain = text_of(await client.call_tool("fetch", {"url": site.url("/plain.txt")}))
        data = text_of(await client.call_tool("fetch", {"url": site.url("/data.json")}))
    assert raw.startswith(
        "Content type text/html; charset=utf-8 cannot be simplified to markdown, but here is the raw "
        f"content:\nContents of {site.url('/page.html')}:\n<!doctype html>"
    )
    assert 'var secret = "from a script"' in raw
    assert plain.endswith(f"Contents of {site.url('/plain.txt')}:\njust text, not HTML\n")
    assert plain.startswith("Content type text/plain; charset=utf-8 cannot be simplified")
    assert data.endswith('\n{"a": 1}')


async def test_pagination_follows_the_community_servers_words_and_indices(site: Site) -> None:
    url = site.url("/long.txt")
    prefix = (
        "Content type text/plain cannot be simplified to markdown, but here is the raw content:\n"
        f"Contents of {url}:\n"
    )
    async with connect(build_server(local())) as client:
        first = text_of(await client.call_tool("fetch", {"url": url}))
        second = text_of(
            await client.call_tool("fetch", {"url": url, "start_index": 5000, "max_length": 5000})
        )
        tail = text_of(
            await client.call_tool("fetch", {"url": url, "start_index": 22_000, "max_length": 5000})
        )
        past = text_of(await client.call_tool("fetch", {"url": url, "start_index": len(LONG_TEXT)}))
        exact = text_of(await client.call_tool("fetch", {"url": url, "max_length": len(LONG_TEXT)}))
    note = (
        "\n\n<error>Content truncated. Call the fetch tool with a start_index of {} "
        "to get more content.</error>"
    )
    assert first == prefix + LONG_TEXT[:5000] + note.format(5000)
    assert second == prefix + LONG_TEXT[5000:10000] + note.format(10000)
    assert tail == prefix + LONG_TEXT[22_000:]  # the end: no note
    assert past == prefix + "<error>No more content available.</error>"
    assert exact == prefix + LONG_TEXT  # exactly all of it: nothing remains, no note


async def test_long_html_pages_paginate_as_markdown(site: Site) -> None:
    url = site.url("/long.html")
    async with connect(build_server(local())) as client:
        pages = []
        start = 0
        while True:
            text = text_of(
                await client.call_tool("fetch", {"url": url, "start_index": start, "max_length": 3000})
            )
            body = text.split(f"Contents of {url}:\n", 1)[1]
            if "start_index of " not in body:
                pages.append(body)
                break
            body, note = body.split("\n\n<error>Content truncated.", 1)
            pages.append(body)
            start = int(note.split("start_index of ", 1)[1].split(" ", 1)[0])
    markdown = "".join(pages)
    assert len(pages) > 3
    assert [f"Paragraph {i} of" in markdown for i in (0, 199, 399)] == [True, True, True]
    assert markdown.count("Paragraph ") == 400


async def test_arguments_are_checked_like_the_community_schema(site: Site) -> None:
    async with connect(build_server(local())) as client:
        (tool,) = await client.list_tools()
        for bad in (
            {"url": site.url("/plain.txt"), "max_length": 0},
            {"url": site.url("/plain.txt"), "max_length": 1_000_000},
            {"url": site.url("/plain.txt"), "start_index": -1},
            {"url": ""},
            {},
        ):
            result = await client.call_tool("fetch", bad)
            assert result.is_error is True, bad
        ok = await client.call_tool("fetch", {"url": site.url("/plain.txt"), "max_length": 999_999})
    assert ok.is_error is not True
    assert site.paths().count("/plain.txt") == 1  # the refused calls reached nothing
    schema = tool.input_schema
    assert schema["required"] == ["url"]
    props = schema["properties"]
    assert props["url"]["type"] == "string" and props["url"]["description"] == "URL to fetch"
    assert props["max_length"] == {
        "type": "integer",
        "default": 5000,
        "exclusiveMinimum": 0,
        "exclusiveMaximum": 1000000,
        "description": "Maximum number of characters to return.",
    }
    assert props["start_index"]["default"] == 0 and props["start_index"]["minimum"] == 0
    assert props["raw"]["type"] == "boolean" and props["raw"]["default"] is False


async def test_errors_are_tool_errors_and_the_server_keeps_serving(site: Site) -> None:
    async with connect(build_server(local())) as client:
        missing = await client.call_tool("fetch", {"url": site.url("/missing")})
        broken = await client.call_tool("fetch", {"url": site.url("/broken")})
        image = await client.call_tool("fetch", {"url": site.url("/image.png")})
        scheme = await client.call_tool("fetch", {"url": "file:///etc/passwd"})
        nonsense = await client.call_tool("fetch", {"url": "not a url"})
        after = await client.call_tool("fetch", {"url": site.url("/plain.txt")})
    assert (
        missing.is_error and text_of(missing) == f"Failed to fetch {site.url('/missing')} - status code 404"
    )
    assert broken.is_error and text_of(broken) == f"Failed to fetch {site.url('/broken')} - status code 500"
    assert image.is_error and "image/png, not text" in text_of(image)
    assert scheme.is_error and "only http and https URLs can be fetched (scheme: file)" in text_of(scheme)
    assert nonsense.is_error
    assert after.is_error is not True


async def test_charsets_and_gzip_are_decoded(site: Site) -> None:
    async with connect(build_server(local())) as client:
        latin = text_of(await client.call_tool("fetch", {"url": site.url("/latin1.html")}))
        zipped = text_of(await client.call_tool("fetch", {"url": site.url("/gzip.html")}))
    assert latin.endswith("café")
    assert zipped.endswith("compressed page")


async def test_the_size_limit_cuts_the_body_and_says_so_even_for_a_gzip_bomb(site: Site) -> None:
    async with connect(build_server(local(max_bytes=10_000))) as client:
        result = await client.call_tool("fetch", {"url": site.url("/bomb.txt"), "max_length": 50_000})
        long = await client.call_tool("fetch", {"url": site.url("/long.txt"), "max_length": 50_000})
    text = text_of(result)
    assert text.startswith(
        "The response is longer than 10000 bytes (--max-bytes); only its beginning was read.\n"
    )
    assert text.endswith("\n" + "A" * 10_000)  # 50 MB once decompressed: never inflated past the limit
    assert text_of(long).endswith(LONG_TEXT[:10_000])


async def test_the_time_limit_ends_a_fetch_that_does_not_answer(site: Site) -> None:
    entered = threading.Event()

    def stall() -> Reply:
        entered.set()
        site.released.wait(30)  # until the test ends (the site's stop releases it)
        return 200, {"Content-Type": "text/plain"}, b"too late"

    site.routes["/stall"] = stall
    async with connect(build_server(local(timeout=0.5))) as client:
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await client.call_tool("fetch", {"url": site.url("/stall")})
        elapsed = loop.time() - started
        after = await client.call_tool("fetch", {"url": site.url("/plain.txt")})
    assert entered.is_set()
    assert (
        result.is_error
        and text_of(result) == f"Failed to fetch {site.url('/stall')}: no answer within 0.5 s (--timeout)"
    )
    assert elapsed < 5
    assert after.is_error is not True


async def test_redirects_are_followed_up_to_the_limit(site: Site) -> None:
    site.routes["/hop1"] = (302, {"Location": "/hop2"}, b"")
    site.routes["/hop2"] = (301, {"Location": site.url("/plain.txt")}, b"")
    site.routes["/loop"] = (307, {"Location": "/loop"}, b"")
    async with connect(build_server(local(max_redirects=2))) as client:
        followed = await client.call_tool("fetch", {"url": site.url("/hop1")})
        looping = await client.call_tool("fetch", {"url": site.url("/loop")})
    assert text_of(followed).endswith("just text, not HTML\n")
    assert looping.is_error and "more than 2 redirects (--max-redirects)" in text_of(looping)
    assert site.paths().count("/loop") == 3  # the first request and two redirects, then no more


async def test_the_prompt_fetches_for_the_user_with_its_own_agent_and_no_robots(site: Site) -> None:
    site.routes["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /\n")
    async with connect(build_server(local())) as client:
        (prompt,) = await client.list_prompts()
        result = await client.get_prompt("fetch", {"url": site.url("/page.html")})
        failed = await client.get_prompt("fetch", {"url": "http://169.254.169.254/latest/meta-data/"})
    assert prompt.name == "fetch"
    assert prompt.description == "Fetch a URL and extract its contents as markdown"
    assert [(a.name, a.description, a.required) for a in prompt.arguments] == [("url", "URL to fetch", True)]
    assert result.description == f"Contents of {site.url('/page.html')}"
    [message] = result.messages
    assert message.role == "user" and message.content.text.startswith("# Fetch test page")
    assert "/robots.txt" not in site.paths()
    assert (
        site.requests[-1].headers["user-agent"] == "ModelContextProtocol/1.0 (User-Specified; mcpkit-fetch)"
    )
    assert failed.description == "Failed to fetch http://169.254.169.254/latest/meta-data/"
    assert "cloud metadata address" in failed.messages[0].content.text


# -- robots.txt ------------------------------------------------------------------------------


async def test_robots_txt_is_obeyed_by_the_tool(site: Site) -> None:
    site.routes["/robots.txt"] = (
        200,
        {"Content-Type": "text/plain"},
        b"# a comment\nUser-agent: *\nDisallow: /private\nAllow: /private/open\n\n"
        b"User-agent: OtherBot\nDisallow: /\n",
    )
    site.routes["/private/page"] = html(b"<html><body>private</body></html>")
    site.routes["/private/open"] = html(b"<html><body>open</body></html>")
    async with connect(build_server(local())) as client:
        refused = await client.call_tool("fetch", {"url": site.url("/private/page")})
        allowed = await client.call_tool("fetch", {"url": site.url("/private/open")})
        public = await client.call_tool("fetch", {"url": site.url("/plain.txt")})
    text = text_of(refused)
    assert refused.is_error
    assert text.startswith(
        f"The sites robots.txt ({site.url('/robots.txt')}), specifies that autonomous fetching of this page "
        "is not allowed, <useragent>ModelContextProtocol/1.0 (Autonomous; mcpkit-fetch)</useragent>\n"
        f"<url>{site.url('/private/page')}</url><robots>\n# a comment\nUser-agent: *"
    )
    assert "fetch prompt" in text
    assert "/private/page" not in site.paths()  # robots.txt said no: the page was never requested
    assert text_of(allowed).endswith("open")
    assert public.is_error is not True
    assert all(
        s.headers["user-agent"].startswith("ModelContextProtocol/1.0 (Autonomous") for s in site.requests
    )


async def test_robots_txt_statuses_and_the_options_that_change_it(site: Site) -> None:
    site.routes["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /\n")
    async with connect(build_server(local(ignore_robots_txt=True))) as client:
        ignored = await client.call_tool("fetch", {"url": site.url("/plain.txt")})
    assert ignored.is_error is not True and "/robots.txt" not in site.paths()

    site.routes["/robots.txt"] = (
        200,
        {"Content-Type": "text/plain"},
        b"User-agent: *\nDisallow: /\n\nUser-agent: mybot\nAllow: /\n",
    )
    async with connect(build_server(local(user_agent="MyBot/2.0"))) as client:
        mine = await client.call_tool("fetch", {"url": site.url("/plain.txt")})
    assert mine.is_error is not True  # matched by its product token, case-insensitively
    assert site.requests[-1].headers["user-agent"] == "MyBot/2.0"

    outcomes = {}
    for status in (401, 403, 404, 500):
        site.routes["/robots.txt"] = (status, {"Content-Type": "text/plain"}, b"Disallow: /\n")
        async with connect(build_server(local())) as client:
            outcomes[status] = await client.call_tool("fetch", {"url": site.url("/plain.txt")})
    assert outcomes[404].is_error is not True  # no robots.txt: no restriction
    for status in (401, 403, 500):
        assert outcomes[status].is_error
        assert text_of(outcomes[status]).startswith(
            f"When fetching robots.txt ({site.url('/robots.txt')}), received status {status} so assuming"
        )


def test_robots_rules_longest_match_wildcards_and_groups() -> None:
    robots = RobotsTxt.parse(
        "User-agent: a\nUser-agent: b\nDisallow: /x\nAllow: /x/y$\nDisallow: /*.pdf$\n"
        "Disallow: /q?*secret\n\n"
        "User-agent: *\nDisallow: /all\nDisallow:\n"
    )
    assert not robots.allowed("/x/z", "a") and not robots.allowed("/x", "b")
    assert robots.allowed("/x/y", "a") and not robots.allowed("/x/y/z", "a")
    assert not robots.allowed("/docs/file.pdf", "b") and robots.allowed("/docs/file.pdf?v=1", "b")
    assert not robots.allowed("/q?top-secret", "a") and robots.allowed("/q?public", "a")
    assert robots.allowed("/all", "a")  # a named group replaces the * group
    assert not robots.allowed("/all/x", "c") and robots.allowed("/x", "c")
    assert robots.allowed("/robots.txt", "c")
    tie = RobotsTxt.parse("User-agent: *\nDisallow: /page\nAllow: /page\n")
    assert tie.allowed("/page", "z")  # equal length: allow wins (RFC 9309 2.2.2)
    assert product_token("ModelContextProtocol/1.0 (Autonomous; mcpkit-fetch)") == "modelcontextprotocol"


# -- the SSRF guard, in memory ---------------------------------------------------------------


def test_ip_spellings_are_normalised_as_inet_aton_reads_them() -> None:
    loopback = ipaddress.IPv4Address("127.0.0.1")
    for spelling in (
        "2130706433",
        "0x7f.1",
        "017700000001",
        "127.1",
        "0177.0.0.1",
        "0x7F000001",
        "127.0.0.1.",
        "127.0.1",
    ):
        assert parse_ipv4_number(spelling) == loopback, spelling
    assert parse_ipv4_number("example.com") is None
    assert parse_ipv4_number("1.2.3.example") is None
    for bad in ("1.2.3.4.5", "256.0.0.1", "1.2.3.0x100", "08.1", "example.09", "4294967296"):
        with pytest.raises(FetchRefused):
            parse_ipv4_number(bad)
    assert normalize_host("[::FFFF:127.0.0.1]") == loopback
    assert normalize_host("Example.COM.") == "example.com"
    for bad in ("%31%32%37.0.0.1", "a b", "back\\slash", "[::1"):
        with pytest.raises(FetchRefused):
            normalize_host(bad)


def test_every_kind_of_non_public_address_is_named() -> None:
    cases = {
        "127.0.0.1": "loopback",
        "::1": "loopback",
        "10.1.2.3": "private",
        "172.16.0.1": "private",
        "192.168.1.1": "private",
        "100.64.0.1": "private",
        "fd12::1": "private",
        "169.254.169.254": "link-local",
        "fe80::1": "link-local",
        "224.0.0.1": "multicast",
        "ff02::1": "multicast",
        "240.0.0.1": "reserved",
        "255.255.255.255": "reserved",
        "2001:db8::1": "reserved",
        "0.0.0.0": "unspecified",
        "::": "unspecified",
        "::ffff:10.0.0.1": "private",
        "::127.0.0.1": "IPv4-compatible address embedding 127.0.0.1",
        "2002:a9fe:a9fe::1": "6to4 address embedding 169.254.169.254",
        "2001:0:4136:e378:8000:63bf:80ff:fffe": "Teredo address embedding 127.0.0.1",
        "64:ff9b::a00:1": "NAT64 address embedding 10.0.0.1",
    }
    for address, kind in cases.items():
        reason = why_not_public(ipaddress.ip_address(address))
        assert reason is not None and kind in reason, (address, reason)
    for public in ("8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1"):
        assert why_not_public(ipaddress.ip_address(public)) is None, public


def test_allow_options_open_what_they_name_and_never_the_metadata_addresses_by_default() -> None:
    policy = AddressPolicy.from_options(["Intranet.Example.", "10.0.0.0/8", "[::1]", "0x7f.1"])
    assert policy.allow_names == frozenset({"intranet.example"})
    assert policy.refusal("intranet.example", ipaddress.ip_address("192.168.1.1")) is None
    assert policy.refusal("other.example", ipaddress.ip_address("192.168.1.1")) is not None
    assert policy.refusal(None, ipaddress.ip_address("10.9.8.7")) is None
    assert policy.refusal(None, ipaddress.ip_address("::ffff:127.0.0.1")) is None  # 0x7f.1 is 127.0.0.1
    assert policy.refusal(None, ipaddress.ip_address("::1")) is None
    private = AddressPolicy.from_options([], allow_private=True)
    assert private.refusal(None, ipaddress.ip_address("127.0.0.1")) is None
    for metadata in ("169.254.169.254", "fd00:ec2::254", "::ffff:169.254.169.254"):
        assert "cloud metadata" in (private.refusal(None, ipaddress.ip_address(metadata)) or ""), metadata
    assert (
        AddressPolicy.from_options(["169.254.169.254"]).refusal(None, ipaddress.ip_address("169.254.169.254"))
        is None
    )
    with pytest.raises(ValueError, match="--allow-host"):
        AddressPolicy.from_options(["10.0.0.0/33"])


def resolver_of(table: dict[str, list[str]], calls: list[str] | None = None) -> Callable[[str, int], Any]:
    async def resolve(host: str, port: int) -> list[str]:
        if calls is not None:
            calls.append(host)
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return table[host]

    return resolve


#: The issue's battery (and a few more spellings): each URL reaches the site on 127.0.0.1
#: if the guard lets it through; {port} is the site's port.
BATTERY = [
    "http://127.0.0.1:{port}/secret",
    "http://[::1]:{port}/secret",
    "http://0.0.0.0:{port}/secret",
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://2130706433:{port}/secret",
    "http://0x7f.1:{port}/secret",
    "http://017700000001:{port}/secret",
    "http://127.1:{port}/secret",
    "http://[::ffff:127.0.0.1]:{port}/secret",
    "http://[::ffff:7f00:1]:{port}/secret",
    "http://[0:0:0:0:0:ffff:127.0.0.1]:{port}/secret",
    "http://127.0.0.1.:{port}/secret",
    "http://localhost:{port}/secret",
    "http://LocalHost.:{port}/secret",
    "http://user:pass@127.0.0.1:{port}/secret",
    "http://[2002:7f00:1::]:{port}/secret",
]


@pytest.mark.parametrize(
    "template", [*BATTERY, "http://internal.test:{port}/secret", "http://mixed.test:{port}/secret"]
)
async def test_the_battery_reaches_nothing_in_memory(site: Site, template: str) -> None:
    resolve = resolver_of(
        {
            "internal.test": ["127.0.0.1"],
            "mixed.test": ["93.184.216.34", "127.0.0.1"],
            "localhost": ["127.0.0.1", "::1"],
            "localhost.": ["127.0.0.1"],
        }
    )
    url = template.format(port=site.port)
    async with connect(build_server(FetchSettings(resolver=resolve))) as client:
        result = await client.call_tool("fetch", {"url": url})
        prompt = await client.get_prompt("fetch", {"url": url})
    assert result.is_error is True
    assert text_of(result).startswith(f"Refused {url}"), text_of(result)
    assert prompt.description == f"Failed to fetch {url}"
    assert site.requests == []  # not even robots.txt


@pytest.mark.parametrize(
    "location",
    [
        "http://127.0.0.1:{port}/secret",
        "http://2130706433:{port}/secret",
        "http://[::ffff:127.0.0.1]:{port}/secret",
        "http://localhost:{port}/secret",
        "http://169.254.169.254/latest/meta-data/",
        "file:///etc/passwd",
        "gopher://127.0.0.1:{port}/_secret",
    ],
)
async def test_a_redirect_to_an_internal_address_is_refused_at_that_hop(site: Site, location: str) -> None:
    # origin.test is allowed by name (it is "the public site" here); where it redirects is not.
    resolve = resolver_of({"origin.test": ["127.0.0.1"], "localhost": ["127.0.0.1"]})
    site.routes["/go"] = (302, {"Location": location.format(port=site.port)}, b"")
    settings = FetchSettings(allow_hosts=("origin.test",), resolver=resolve)
    async with connect(build_server(settings)) as client:
        result = await client.call_tool("fetch", {"url": site.url("/go", host="origin.test")})
    assert result.is_error is True
    assert text_of(result).startswith("Refused "), text_of(result)
    assert site.paths() == ["/robots.txt", "/go"]  # the redirect's target was never requested
    assert all(s.headers["host"] == f"origin.test:{site.port}" for s in site.requests)


async def test_the_name_is_resolved_once_and_the_connection_goes_to_the_checked_address(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rebinding DNS answers the check with the allowed address and anything later with
    # another; the connection must never ask again.
    calls: list[str] = []
    answers = iter([["127.0.0.1"], ["127.0.0.1"]])

    async def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return next(answers, ["10.0.0.1"])

    real = socket.getaddrinfo

    def no_second_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        assert host != "rebind.test", "the connection resolved the name itself"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", no_second_lookup)
    settings = FetchSettings(allow_hosts=("127.0.0.1",), resolver=rebinding, ignore_robots_txt=True)
    async with connect(build_server(settings)) as client:
        result = await client.call_tool("fetch", {"url": f"http://rebind.test:{site.port}/plain.txt"})
        again = await client.call_tool("fetch", {"url": f"http://rebind.test:{site.port}/plain.txt"})
    assert text_of(result).endswith("just text, not HTML\n")
    # One lookup for the early check and one for the hop itself; the connection asked nothing.
    assert calls[:2] == ["rebind.test", "rebind.test"]
    assert again.is_error and "10.0.0.1 is a private address" in text_of(again)
    assert site.paths() == ["/plain.txt"]
    assert site.requests[0].headers["host"] == f"rebind.test:{site.port}"


async def test_when_a_checked_address_does_not_answer_the_next_checked_one_is_tried(site: Site) -> None:
    # Nothing listens on 127.0.0.2 (the site is bound to 127.0.0.1): the second answer serves.
    resolve = resolver_of({"two.test": ["127.0.0.2", "127.0.0.1"]})
    settings = FetchSettings(allow_hosts=("two.test",), resolver=resolve, ignore_robots_txt=True)
    with socket.socket() as closed:  # bound, never listening: connections to it are refused
        closed.bind(("127.0.0.1", 0))
        dead_port = closed.getsockname()[1]
        async with connect(build_server(settings)) as client:
            result = await client.call_tool("fetch", {"url": f"http://two.test:{site.port}/plain.txt"})
            dead = await client.call_tool("fetch", {"url": f"http://two.test:{dead_port}/x"})
    assert text_of(result).endswith("just text, not HTML\n")
    assert dead.is_error
    assert text_of(dead).startswith(f"Failed to fetch http://two.test:{dead_port}/x: ConnectError")
    assert site.paths() == ["/plain.txt"]


# -- TLS: connected to the checked address, verified and introduced by the URL's name --------------


@dataclass
class Certificates:
    ca_file: Path
    server: ssl.SSLContext
    sni: list[str | None]


def make_certificates(tmp_path: Path, name: str) -> Certificates:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject: str, key: Any, issuer: str, signer: Any, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if ca:
            builder = builder.add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        else:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            builder = builder.add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = certificate("fetch test CA", ca_key, "fetch test CA", ca_key, ca=True)
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = certificate(name, leaf_key, "fetch test CA", ca_key, ca=False)
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain = tmp_path / "server.pem"
    chain.write_bytes(
        leaf.public_bytes(serialization.Encoding.PEM)
        + leaf_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(chain)
    sni: list[str | None] = []
    server.sni_callback = lambda sock, server_name, context: sni.append(server_name)  # type: ignore[assignment]
    return Certificates(ca_file, server, sni)


@pytest.fixture
def tls_site(tmp_path: Path) -> Iterator[tuple[Site, Certificates]]:
    certs = make_certificates(tmp_path, "fetch.test")
    site = Site(tls=certs.server)
    standard_routes(site)
    site.start()
    try:
        yield site, certs
    finally:
        site.stop()


async def test_https_sends_the_names_sni_and_verifies_the_certificate_against_the_name(
    tls_site: tuple[Site, Certificates],
) -> None:
    site, certs = tls_site
    resolve = resolver_of({"fetch.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    settings = FetchSettings(allow_hosts=("127.0.0.1",), resolver=resolve, ca_file=str(certs.ca_file))
    async with connect(build_server(settings)) as client:
        good = await client.call_tool("fetch", {"url": site.url("/plain.txt", host="fetch.test")})
        wrong = await client.call_tool("fetch", {"url": site.url("/plain.txt", host="other.test")})
        by_address = await client.call_tool("fetch", {"url": site.url("/plain.txt")})
    assert text_of(good).endswith("just text, not HTML\n"), text_of(good)
    assert site.requests[0].headers["host"] == f"fetch.test:{site.port}"
    assert certs.sni[:2] == ["fetch.test", "fetch.test"]  # robots.txt, then the page
    # The certificate names fetch.test: for other.test (same address) verification fails.
    assert wrong.is_error and "certificate" in text_of(wrong).lower(), text_of(wrong)
    assert by_address.is_error and "certificate" in text_of(by_address).lower()
    assert "other.test" in certs.sni
    assert [s.headers["host"] for s in site.requests] == [f"fetch.test:{site.port}"] * 2


# -- real processes: stdio and Streamable HTTP, both eras ------------------------------------------


def argv(*options: str) -> list[str]:
    return [sys.executable, "-m", MODULE, *options]


async def check_parity(client: Client, site: Site) -> None:
    tools = await client.list_tools()
    assert [tool.name for tool in tools] == ["fetch"]
    (tool,) = tools
    assert tool.description.startswith(
        "Fetches a URL from the internet and optionally extracts its contents as markdown."
    )
    assert set(tool.input_schema["properties"]) == {"url", "max_length", "start_index", "raw"}
    assert tool.annotations.read_only_hint is True and tool.annotations.open_world_hint is True
    result = await client.call_tool("fetch", {"url": site.url("/page.html"), "max_length": 40})
    assert text_of(result) == (
        f"Contents of {site.url('/page.html')}:\n# Fetch test page\n\nSome **bold** text an"
        "\n\n<error>Content truncated. Call the fetch tool with a start_index of 40 "
        "to get more content.</error>"
    )
    rest = await client.call_tool("fetch", {"url": site.url("/page.html"), "start_index": 40})
    assert text_of(rest).startswith(f"Contents of {site.url('/page.html')}:\nd [a link](")
    (prompt,) = await client.list_prompts()
    assert prompt.name == "fetch" and [a.name for a in prompt.arguments] == ["url"]
    rendered = await client.get_prompt("fetch", {"url": site.url("/page.html")})
    assert rendered.description == f"Contents of {site.url('/page.html')}"
    assert rendered.messages[0].content.text.startswith("# Fetch test page")
    refused = await client.call_tool("fetch", {"url": f"http://[::1]:{site.port}/secret"})
    assert refused.is_error and "loopback" in text_of(refused)


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_parity_over_stdio(site: Site, protocol: str, subprocess_env: dict[str, str]) -> None:
    async with Client(argv("--allow-host", "127.0.0.1"), env=subprocess_env, protocol=protocol) as client:  # type: ignore[arg-type]
        assert client.is_modern == (protocol == "modern")
        await check_parity(client, site)
    assert "/secret" not in site.paths()


@pytest.fixture
async def http_server(subprocess_env: dict[str, str]) -> AsyncIterator[str]:
    proc = await asyncio.create_subprocess_exec(
        *argv("--transport", "http", "--port", "0", "--allow-host", "127.0.0.1"),
        env=subprocess_env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert line.startswith("fetch server: serving over Streamable HTTP at http://127.0.0.1:"), line
        match = re.search(r"(http://\S+/mcp)", line)
        assert match is not None, line
        yield match.group(1)
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def test_parity_over_http_in_both_eras(site: Site, http_server: str) -> None:
    for protocol in ("legacy", "modern"):
        async with Client(http_server, protocol=protocol) as client:  # type: ignore[arg-type]
            assert client.is_modern == (protocol == "modern")
            await check_parity(client, site)
    assert "/secret" not in site.paths()


async def test_the_battery_reaches_nothing_through_a_real_process(
    site: Site, subprocess_env: dict[str, str]
) -> None:
    # The server as a user runs it, without any option: every URL of the battery is refused.
    async with Client(argv(), env=subprocess_env, protocol="modern") as client:
        for template in BATTERY:
            url = template.format(port=site.port)
            result = await client.call_tool("fetch", {"url": url})
            assert result.is_error is True, url
            assert text_of(result).startswith(f"Refused {url}"), text_of(result)
    assert site.requests == []


async def test_a_redirect_to_loopback_is_refused_in_a_real_process(
    site: Site, subprocess_env: dict[str, str]
) -> None:
    # localhost is allowed by name; the redirect goes to 127.0.0.1 by address, which is not.
    site.routes["/go"] = (302, {"Location": site.url("/secret")}, b"")
    async with Client(argv("--allow-host", "localhost"), env=subprocess_env, protocol="legacy") as client:
        result = await client.call_tool("fetch", {"url": site.url("/go", host="localhost")})
    assert result.is_error is True
    assert text_of(result).startswith(f"Refused {site.url('/secret')}: 127.0.0.1 is a loopback address")
    assert "/secret" not in site.paths() and "/go" in site.paths()


def test_help_documents_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for option in (
        "--allow-host",
        "--allow-private",
        "--ignore-robots-txt",
        "--max-bytes",
        "--timeout",
        "--max-redirects",
        "--user-agent",
        "--ca-file",
        "--transport",
        "--host",
        "--port",
    ):
        assert option in out, option
    assert "--allow-private-ips" in out  # mcp-server-fetch's spelling, accepted as well
    for spelling in ("--allow-private", "--allow-private-ips"):
        settings = settings_from_args(build_parser().parse_args([spelling]))
        assert settings.allow_private is True, spelling
        policy = AddressPolicy.from_options([], allow_private=settings.allow_private)
        assert policy.refusal(None, ipaddress.ip_address("127.0.0.1")) is None
        assert "cloud metadata" in (policy.refusal(None, ipaddress.ip_address("169.254.169.254")) or "")
    assert settings_from_args(build_parser().parse_args([])).allow_private is False
    with pytest.raises(SystemExit) as bad:
        main(["--allow-host", "10.0.0.0/40"])
    assert bad.value.code == 2
    assert "--allow-host '10.0.0.0/40': not a valid network" in capsys.readouterr().err


async def test_check_url_pins_what_the_resolver_said() -> None:
    target = await check_url(
        "https://Example.Test:8443/a?b",
        AddressPolicy(),
        resolver_of({"example.test": ["8.8.8.8", "::ffff:1.1.1.1"]}),
    )
    assert target.host == "example.test" and target.host_header == "example.test:8443"
    assert [str(a) for a in target.addresses] == ["8.8.8.8", "1.1.1.1"] and target.by_name
