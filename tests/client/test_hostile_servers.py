"""A client that survives hostile servers (issue 17, item 4).

Every attack runs against a real malicious server (tests/client/hostile/server.py:
a process over stdio, or a raw asyncio HTTP server on a 127.0.0.1 socket) and a
real client in its own process (tests/client/hostile/driver.py), which reports
how long the call took, how it failed, how much its peak resident memory grew
(VmHWM against VmRSS before the call, from /proc/self/status), and whether the
client still worked afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client
from mcpkit.client.options import DEFAULT_MAX_MESSAGE_BYTES
from mcpkit.protocol.errors import INVALID_REQUEST, MESSAGE_TOO_LARGE, REQUEST_TIMEOUT, MCPError

HOSTILE = Path(__file__).parent / "hostile"
SERVER = HOSTILE / "server.py"
DRIVER = HOSTILE / "driver.py"
MIB = 1024 * 1024

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(SERVER), "http"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "PORT n" once it listens
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.kill()
        proc.wait()


def attack(transport: str, name: str, timeout: float, url: str = "") -> dict[str, Any]:
    argv = [sys.executable, str(DRIVER), "stdio", name, str(timeout)]
    if transport == "http":
        argv = [sys.executable, str(DRIVER), "http", url, name, str(timeout)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def url_for(transport: str, request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("http_url")) if transport == "http" else ""


# -- 1 GiB answers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("transport", "name"),
    [("stdio", "big"), ("http", "big"), ("http", "big_chunked"), ("http", "big_event")],
)
def test_a_1_gib_answer_fails_its_call_with_bounded_memory(
    transport: str, name: str, request: pytest.FixtureRequest
) -> None:
    report = attack(transport, name, 120, url_for(transport, request))
    assert report["error"]["code"] == MESSAGE_TOO_LARGE, report
    assert "max_message_bytes" in report["error"]["message"]
    # Failed once the limit is passed, not after the rest of the gigabyte.
    assert report["seconds"] < 10, report
    # Discarded as it streams: the client never holds more than about the limit.
    assert report["peak_growth_kib"] * 1024 < 2 * DEFAULT_MAX_MESSAGE_BYTES, report
    assert report["ok_after"] == "ok"  # one bad answer does not end the connection


def test_a_1_gib_event_on_the_legacy_sse_stream_fails_the_call_and_closes_cleanly(http_url: str) -> None:
    # 2024-11-05 HTTP+SSE: one stream carries every answer, so past an event too large to
    # read the connection cannot go on; the call fails naming the limit, later ones are told
    # the connection closed.
    sse_url = http_url.removesuffix("/mcp") + "/sse"
    done = subprocess.run(
        [sys.executable, str(DRIVER), "http", sse_url, "big_event", "60", "sse"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["error"]["code"] == MESSAGE_TOO_LARGE, report
    assert "max_message_bytes" in report["error"]["message"]
    assert report["seconds"] < 10
    assert report["peak_growth_kib"] * 1024 < 2 * DEFAULT_MAX_MESSAGE_BYTES, report
    assert report["ok_after_error"] == {"closed": "SessionClosed", "message": "connection closed"}
    assert report["close_seconds"] < 5


def test_an_http_body_declared_too_large_is_refused_before_it_is_read(http_url: str) -> None:
    report = attack("http", "big", 30, http_url)
    assert report["error"]["code"] == MESSAGE_TOO_LARGE
    assert "1073741824 bytes" in report["error"]["message"]
    assert report["peak_growth_kib"] < 4 * 1024
    assert report["seconds"] < 5


# -- time: endless streams and drips ------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("name", ["endless", "drip"])
def test_a_call_that_never_finishes_fails_at_its_deadline(
    transport: str, name: str, request: pytest.FixtureRequest
) -> None:
    report = attack(transport, name, 2, url_for(transport, request))
    assert report["error"]["code"] == REQUEST_TIMEOUT, report
    assert "timed out after 2.0s" in report["error"]["message"]
    # An overall deadline: a byte a second, or a message a millisecond, does not extend it.
    assert 1.9 <= report["seconds"] < 6, report
    assert report["peak_growth_kib"] < 8 * 1024, report
    assert report["close_seconds"] < 10
    if transport == "http" or name == "endless":
        assert report["ok_after"] == "ok", report  # the stream was dropped; the connection lives
    else:
        # stdio drip: the half-written line holds the one pipe; later answers cannot get
        # past it, so later calls fail at their deadline too, and close() still ends it.
        assert report["ok_after_error"]["code"] == REQUEST_TIMEOUT


def test_endless_http_stream_is_closed_when_the_call_gives_up(http_url: str) -> None:
    report = attack("http", "endless", 2, http_url)
    # Had the stream been left open, the log handler would keep receiving its messages
    # for the rest of the run; with it closed the count stops at the deadline.
    assert report["error"]["code"] == REQUEST_TIMEOUT
    assert report["ok_after_seconds"] < 2


# -- garbage and strangers ----------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize(
    ("name", "text"), [("garbage", "survived garbage"), ("wrong_ids", "survived wrong ids")]
)
def test_garbage_and_answers_to_unknown_ids_are_ignored(
    transport: str, name: str, text: str, request: pytest.FixtureRequest
) -> None:
    report = attack(transport, name, 30, url_for(transport, request))
    assert report.get("result") == text, report
    assert report["seconds"] < 10
    assert report["peak_growth_kib"] < 16 * 1024
    assert report["ok_after"] == "ok"


# -- notification floods ------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_notification_flood_is_coalesced_and_bounded(
    transport: str, request: pytest.FixtureRequest
) -> None:
    report = attack(transport, "flood", 60, url_for(transport, request))
    assert report.get("result") == "survived flood", report
    assert report["seconds"] < 30
    # 20 000 notifications to slow handlers: the queue (1024) overflowed and the rest
    # were dropped or coalesced, not queued without bound.
    assert report["dropped_notifications"] > 0
    seen = report["seen"]
    assert 0 < seen["logs"] <= 6667
    assert 0 < seen["progress"] < 6667  # the async progress callback: newest wins
    assert report["peak_growth_kib"] < 16 * 1024, report
    assert report["ok_after"] == "ok"


# -- in this process: pages and settings ---------------------------------------------------------


async def test_a_server_paging_for_ever_stops_at_max_list_pages() -> None:
    env = {**os.environ, "HOSTILE_ENDLESS_PAGES": "1"}
    client = Client([sys.executable, str(SERVER), "stdio"], env=env, protocol="2025-06-18", max_list_pages=20)
    async with client:
        with pytest.raises(MCPError) as caught:
            await asyncio.wait_for(client.list_tools(), 30)
    assert caught.value.code == INVALID_REQUEST
    assert "after 20 (max_list_pages)" in caught.value.message


async def test_a_smaller_max_message_bytes_applies_to_stdio() -> None:
    # The tool list is a few KiB: with a 1 KiB limit its answer is refused, by name.
    client = Client([sys.executable, str(SERVER), "stdio"], protocol="2025-06-18", max_message_bytes=1024)
    async with client:
        with pytest.raises(MCPError) as caught:
            await client.list_tools()
        assert caught.value.code == MESSAGE_TOO_LARGE
        assert caught.value.data == {"limit": 1024}
        result = await client.call_tool("ok")  # small answers still pass
        assert result.content[0].text == "ok"  # type: ignore[union-attr]


async def test_a_smaller_max_message_bytes_applies_to_http(http_url: str) -> None:
    client = Client(http_url, protocol="2025-06-18", max_message_bytes=1024)
    async with client:
        with pytest.raises(MCPError) as caught:
            await client.list_tools()
        assert caught.value.code == MESSAGE_TOO_LARGE
        assert "1024 bytes" in caught.value.message
        result = await client.call_tool("ok")
        assert result.content[0].text == "ok"  # type: ignore[union-attr]


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_queued_notifications"):
        Client(["true"], max_queued_notifications=0)
