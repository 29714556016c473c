"""ErrorMasking: unexpected exceptions never reach the client (checked on the wire bytes);
the log has them under the same correlation id. MCPErrors raised on purpose pass."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import httpx
import pytest

from mcpkit import Client, MCPServer
from mcpkit.middleware import AccessLog, ErrorMasking
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, MCPError
from mcpkit.server import Context
from mcpkit.testing import serve_http

ERAS = ["legacy", "modern"]
SECRET = "password=hunter2 at db.internal:5432"
CORRELATION = re.compile(r"correlation id: ([0-9a-f]{16})")


def make_server(*middleware: Any) -> MCPServer:
    server = MCPServer("masked", middleware=list(middleware))

    @server.tool()
    def fails() -> str:
        """Fails unexpectedly."""
        raise RuntimeError(SECRET)

    @server.tool()
    async def fails_async(ctx: Context) -> str:
        """Fails unexpectedly, async, with a Context."""
        raise ValueError(SECRET)

    @server.tool(timeout=5)
    def fails_guarded() -> str:
        """Fails unexpectedly under a per-tool timeout (run by the tool's guard)."""
        raise RuntimeError(SECRET)

    @server.tool()
    def refuses() -> str:
        """Refuses on purpose."""
        raise MCPError(INVALID_PARAMS, "not today", {"why": "on purpose"})

    @server.tool()
    def says_error() -> t.CallToolResult:
        """Returns its own isError result."""
        return t.CallToolResult(content=[t.TextContent(text="my own words")], is_error=True)

    @server.tool()
    def adds(a: int, b: int) -> int:
        """Adds."""
        return a + b

    @server.resource("data://broken")
    def broken() -> str:
        raise OSError(SECRET)

    @server.prompt()
    def bad_prompt() -> str:
        """Fails."""
        raise KeyError(SECRET)

    return server


def text_of(result: t.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


def logged_ids(caplog: pytest.LogCaptureFixture) -> dict[str, logging.LogRecord]:
    """Masked errors in the log, by correlation id."""
    return {r.correlation_id: r for r in caplog.records if r.name == "mcpkit.errors"}  # type: ignore[attr-defined]


@pytest.mark.parametrize("era", ERAS)
async def test_unexpected_errors_are_masked_and_logged(era: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="mcpkit.errors")
    async with Client(make_server(ErrorMasking()), protocol=era) as client:
        seen: list[str] = []
        for tool in ("fails", "fails_async", "fails_guarded"):
            result = await client.call_tool(tool, {})
            assert result.is_error
            text = text_of(result)
            assert SECRET not in text and text.startswith("Internal error (correlation id: ")
            match = CORRELATION.search(text)
            assert match is not None
            assert result.meta is not None and result.meta["io.mcpkit/correlationId"] == match.group(1)
            seen.append(match.group(1))
        for call in (client.read_resource("data://broken"), client.get_prompt("bad_prompt", {})):
            with pytest.raises(MCPError) as masked:
                await call
            error = masked.value
            assert error.code == INTERNAL_ERROR and SECRET not in error.message
            assert CORRELATION.search(error.message) is not None
            assert error.data == {"correlationId": CORRELATION.search(error.message).group(1)}  # type: ignore[union-attr]
            seen.append(error.data["correlationId"])
    records = logged_ids(caplog)
    assert sorted(records) == sorted(seen) and len(set(seen)) == 5
    for cid in seen:
        record = records[cid]
        assert SECRET in record.getMessage() and cid in record.getMessage()
        assert record.exc_info is not None and SECRET in str(record.exc_info[1])


@pytest.mark.parametrize("era", ERAS)
async def test_deliberate_errors_and_own_results_pass(era: str, caplog: pytest.LogCaptureFixture) -> None:
    async with Client(make_server(ErrorMasking()), protocol=era) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("refuses", {})
        assert (refused.value.code, refused.value.message) == (INVALID_PARAMS, "not today")
        assert refused.value.data == {"why": "on purpose"}
        own = await client.call_tool("says_error", {})
        assert own.is_error and text_of(own) == "my own words"
        invalid = await client.call_tool("adds", {"a": "x", "b": 1})
        assert invalid.is_error and "correlation id" not in text_of(invalid)
        assert text_of(await client.call_tool("adds", {"a": 1, "b": 2})) == "3"
    assert not logged_ids(caplog)


async def test_tool_errors_can_be_left_visible() -> None:
    async with Client(make_server(ErrorMasking(mask_tool_errors=False))) as client:
        assert text_of(await client.call_tool("fails", {})) == SECRET
        with pytest.raises(MCPError) as masked:
            await client.read_resource("data://broken")
        assert SECRET not in masked.value.message


async def test_without_masking_the_text_shows() -> None:
    """The baseline the middleware changes (and proof the test tools really leak)."""
    async with Client(make_server()) as client:
        assert text_of(await client.call_tool("fails", {})) == SECRET


async def test_access_log_outside_sees_the_masked_error() -> None:
    import io

    out = io.StringIO()
    async with Client(make_server(AccessLog(file=out), ErrorMasking())) as client:
        await client.call_tool("fails", {})
        with pytest.raises(MCPError):
            await client.read_resource("data://broken")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["outcome"], line["error_code"]) for line in lines[-2:]] == [
        ("tool_error", None),
        ("error", INTERNAL_ERROR),
    ]
    assert SECRET not in out.getvalue()


# -- the wire ------------------------------------------------------------------------

ACCEPT = "application/json, text/event-stream"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
CALLS = [
    ("tools/call", "fails", {"name": "fails", "arguments": {}}),
    ("tools/call", "fails_async", {"name": "fails_async", "arguments": {}}),
    ("resources/read", "data://broken", {"uri": "data://broken"}),
    ("prompts/get", "bad_prompt", {"name": "bad_prompt", "arguments": {}}),
]


async def wire_answers(url: str, era: str) -> list[bytes]:
    """The raw bytes of each answer in CALLS, as sent over HTTP."""
    out: list[bytes] = []
    async with httpx.AsyncClient(timeout=10) as http:
        base = {"accept": ACCEPT, "content-type": "application/json"}
        if era == "legacy":
            init = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "wire", "version": "0"},
            }
            opened = await http.post(
                url, headers=base, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}
            )
            base = {
                **base,
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25",
            }
            await http.post(url, headers=base, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        for rid, (method, name, params) in enumerate(CALLS, 1):
            headers = dict(base)
            if era == "modern":
                params = {**params, "_meta": MODERN_META}
                headers.update({"mcp-protocol-version": "2026-07-28", "mcp-method": method, "mcp-name": name})
            answer = await http.post(
                url, headers=headers, json={"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
            )
            out.append(answer.content)
    return out


@pytest.mark.parametrize("era", ERAS)
async def test_the_wire_never_carries_the_exception(era: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="mcpkit.errors")
    async with serve_http(make_server(ErrorMasking())) as url:
        answers = await wire_answers(url, era)
    records = logged_ids(caplog)
    assert len(records) == len(CALLS)
    for raw in answers:
        assert b"hunter2" not in raw and b"db.internal" not in raw
        assert b"RuntimeError" not in raw and b"Traceback" not in raw
        match = CORRELATION.search(raw.decode())
        assert match is not None, raw
        assert SECRET in records[match.group(1)].getMessage()
