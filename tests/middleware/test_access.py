"""AccessLog: one JSON line per request, in both eras, in memory, over HTTP and over stdio
(where stdout carries JSON-RPC only)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, MCPServer
from mcpkit.middleware import AccessLog
from mcpkit.protocol import types as t
from mcpkit.protocol.auth import Principal
from mcpkit.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, MCPError
from mcpkit.testing import serve_http

ERAS = ["legacy", "modern"]
#: The documented order of a line's keys.
ORDER = (
    "time",
    "id",
    "method",
    "target",
    "principal",
    "client",
    "client_name",
    "era",
    "protocol_version",
    "transport",
    "duration_ms",
    "outcome",
    "error_code",
)
FIELDS = set(ORDER)


def make_server(access: AccessLog, started: asyncio.Event | None = None) -> MCPServer:
    server = MCPServer("logged", middleware=[access])

    @server.tool()
    def echo(text: str) -> str:
        """Echo."""
        return text

    @server.tool()
    def fails() -> str:
        """An isError result."""
        raise RuntimeError("went wrong")

    @server.tool()
    def refuses() -> str:
        """A JSON-RPC error."""
        raise MCPError(INVALID_PARAMS, "no")

    @server.tool()
    async def waits() -> str:
        """Waits until cancelled."""
        if started is not None:
            started.set()
        await asyncio.Event().wait()
        return "never"

    @server.prompt()
    def greet(name: str) -> str:
        """Greets."""
        return f"hello {name}"

    @server.resource("data://broken")
    def broken() -> str:
        raise RuntimeError("resource failed")

    return server


def lines_of(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def by_target(lines: list[dict[str, Any]]) -> dict[str | None, dict[str, Any]]:
    return {line["target"]: line for line in lines if line["method"] in ("tools/call", "prompts/get")}


@pytest.mark.parametrize("era", ERAS)
async def test_one_line_per_request_with_every_field(era: str) -> None:
    out = io.StringIO()
    info = t.Implementation(name="tester", version="1")
    async with Client(make_server(AccessLog(file=out)), protocol=era, client_info=info) as client:
        skip = len(lines_of(out))  # initialize (legacy) or server/discover (modern)
        await client.list_tools()
        assert (await client.call_tool("echo", {"text": "secret value"})).is_error is False
        assert (await client.call_tool("fails", {})).is_error
        with pytest.raises(MCPError):
            await client.call_tool("refuses", {})
        await client.get_prompt("greet", {"name": "Ada"})
        with pytest.raises(MCPError):
            await client.read_resource("data://broken")
    lines = lines_of(out)[skip:]
    assert [line["method"] for line in lines] == [
        "tools/list",
        "tools/call",
        "tools/call",
        "tools/call",
        "prompts/get",
        "resources/read",
    ]
    for line in lines:
        assert set(line) == FIELDS
        assert line["time"].endswith("Z") and line["time"][10] == "T"
        assert line["era"] == era and line["transport"] == "memory"
        assert line["client_name"] == "tester" and line["client"].startswith("connection:")
        assert line["principal"] is None
        assert line["duration_ms"] >= 0
        assert line["protocol_version"] == ("2026-07-28" if era == "modern" else "2025-11-25")
    targets = by_target(lines)
    assert (targets["echo"]["outcome"], targets["echo"]["error_code"]) == ("ok", None)
    assert targets["fails"]["outcome"] == "tool_error"
    assert (targets["refuses"]["outcome"], targets["refuses"]["error_code"]) == ("error", INVALID_PARAMS)
    assert targets["greet"]["outcome"] == "ok"
    read = lines[-1]
    assert (read["target"], read["outcome"], read["error_code"]) == ("data://broken", "error", INTERNAL_ERROR)
    assert "secret value" not in out.getvalue() and "Ada" not in out.getvalue()


async def test_arguments_only_when_asked() -> None:
    out = io.StringIO()
    async with Client(make_server(AccessLog(file=out, include_arguments=True))) as client:
        await client.call_tool("echo", {"text": "shown"})
        await client.get_prompt("greet", {"name": "Ada"})
        await client.list_tools()
    targets = by_target(lines_of(out))
    assert targets["echo"]["arguments"] == {"text": "shown"}
    assert targets["greet"]["arguments"] == {"name": "Ada"}
    assert "arguments" not in lines_of(out)[-1]


@pytest.mark.parametrize("era", ERAS)
async def test_a_cancelled_request_is_logged(era: str) -> None:
    out = io.StringIO()
    started = asyncio.Event()
    async with Client(make_server(AccessLog(file=out), started), protocol=era) as client:
        call = asyncio.ensure_future(client.call_tool("waits", {}))
        await asyncio.wait_for(started.wait(), 5)
        call.cancel()
        async with asyncio.timeout(5):
            while "waits" not in by_target(lines_of(out)):
                await asyncio.sleep(0.01)
    line = by_target(lines_of(out))["waits"]
    assert (line["outcome"], line["error_code"]) == ("cancelled", None)


async def test_the_default_is_the_mcpkit_access_logger(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="mcpkit.access"):
        async with Client(make_server(AccessLog())) as client:
            await client.call_tool("echo", {"text": "x"})
    records = [r for r in caplog.records if r.name == "mcpkit.access"]
    call = [r for r in records if r.access["method"] == "tools/call"]  # type: ignore[attr-defined]
    assert len(call) == 1
    assert json.loads(call[0].getMessage())["target"] == "echo"


async def test_a_file_path_is_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    access = AccessLog(file=path)
    async with Client(make_server(access)) as client:
        await client.call_tool("echo", {"text": "x"})
    access.close()
    assert any(json.loads(line)["target"] == "echo" for line in path.read_text().splitlines())


@pytest.mark.parametrize("era", ERAS)
async def test_a_file_line_is_the_logged_line_and_follows_its_client(
    era: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A file line splices the client's fields (principal .. transport) in encoded once for
    # a run of requests of one client: two clients taking turns must each get their own,
    # and the text must be what the logger form writes, key for key, in the same order.
    out = io.StringIO()
    server = make_server(AccessLog(file=out))
    server.add_middleware(AccessLog("test.access.same"))
    ada, bob = t.Implementation(name="ada", version="1"), t.Implementation(name="bob", version="1")
    with caplog.at_level(logging.INFO, logger="test.access.same"):
        async with (
            Client(server, protocol=era, client_info=ada) as first,
            Client(server, protocol=era, client_info=bob) as second,
        ):
            for i in range(3):
                await first.call_tool("echo", {"text": f"a{i}"})
                await second.call_tool("echo", {"text": f"b{i}"})
                assert (await second.call_tool("fails", {})).is_error

    def calls(lines: list[str]) -> list[dict[str, Any]]:
        parsed = [json.loads(line) for line in lines]
        for line in parsed:
            assert list(line) == [*ORDER], line
            del line["time"], line["duration_ms"]  # (each log times the request itself)
        return [line for line in parsed if line["method"] == "tools/call"]

    logged = [r.getMessage() for r in caplog.records if r.name == "test.access.same"]
    written = calls(out.getvalue().splitlines())
    assert written == calls(logged)
    assert [(line["client_name"], line["target"]) for line in written] == [
        ("ada", "echo"),
        ("bob", "echo"),
        ("bob", "fails"),
    ] * 3
    assert len({line["client"] for line in written}) == 2


@pytest.mark.parametrize("era", ERAS)
async def test_over_http_with_principal_and_client(era: str) -> None:
    out = io.StringIO()

    class Auth:
        async def authenticate(self, authorization: str | None, resource: str) -> Principal:
            return Principal(subject="alice", scopes=frozenset())

        def insufficient_scope(self, required: frozenset[str], resource: str) -> Any:
            raise AssertionError

        def metadata(self, resource: str) -> dict[str, Any]:
            return {"resource": resource}

    server = make_server(AccessLog(file=out))
    async with serve_http(server, auth=Auth()) as url, Client(url, protocol=era) as client:
        await client.call_tool("echo", {"text": "x"})
    line = by_target(lines_of(out))["echo"]
    assert (line["transport"], line["principal"], line["era"]) == ("http", "alice", era)
    expected = "session:" if era == "legacy" else "peer:127.0.0.1"
    assert line["client"].startswith(expected)


STDIO_SERVER = textwrap.dedent(
    """
    import logging
    import sys

    from mcpkit import MCPServer
    from mcpkit.middleware import AccessLog

    # The worst case: logging configured onto stdout, and a second log straight to it.
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
    server = MCPServer("stdio-log", middleware=[AccessLog(), AccessLog(file=sys.stdout)])

    @server.tool()
    def echo(text: str) -> str:
        print("a stray print")
        return text

    if __name__ == "__main__":
        server.run()
    """
)

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def stdio_messages(era: str) -> list[dict[str, Any]]:
    call: dict[str, Any] = {"name": "echo", "arguments": {"text": "hi"}}
    if era == "modern":
        return [{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {**call, "_meta": MODERN_META}}]
    info = {"name": "raw", "version": "0"}
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info}
    return [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
    ]


@pytest.mark.parametrize("era", ERAS)
async def test_stdio_stdout_carries_only_json_rpc(tmp_path: Path, era: str) -> None:
    path = tmp_path / "server.py"
    path.write_text(STDIO_SERVER)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    for message in stdio_messages(era):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    await proc.stdin.drain()
    async with asyncio.timeout(20):
        while True:  # read answers until the tool's arrives, then end the input
            answer = json.loads(await proc.stdout.readline())
            if answer.get("id") == 2:
                break
        proc.stdin.close()
        stdout, stderr = await proc.communicate()
    assert answer["result"]["content"][0]["text"] == "hi"
    for raw in stdout.splitlines():
        assert json.loads(raw)["jsonrpc"] == "2.0"
    logged = [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]
    calls = [line for line in logged if line["method"] == "tools/call"]
    assert len(calls) == 2  # both logs, on stderr
    assert all(line["transport"] == "stdio" and line["era"] == era for line in calls)
    assert "a stray print" in stderr.decode()
