"""Streamable HTTP header rules in :mod:`mcpkit.protocol.http`: what a client mirrors
from a body, and what the server takes as matching it (2026-07-28 streamable-http)."""

from __future__ import annotations

import pytest

from mcpkit.protocol import http as h
from mcpkit.protocol.errors import HEADER_MISMATCH, MCPError

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
REGION = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}


def refusal(headers: dict[str, str], method: str, target: str | None = None) -> str:
    with pytest.raises(MCPError) as info:
        h.validate_modern_headers(headers, method, META, target)
    assert info.value.code == HEADER_MISMATCH
    return info.value.message


def test_mirror_headers_follow_the_spec_examples() -> None:
    params = {"name": "execute_sql", "arguments": {"region": "Zürich"}}
    headers = h.mirror_headers("2026-07-28", "tools/call", params, h.header_params(REGION))
    assert headers == {
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "execute_sql",
        "mcp-param-region": "=?base64?WsO8cmljaA==?=",
    }
    h.validate_modern_headers(
        headers, "tools/call", META, "execute_sql", params["arguments"], h.header_params(REGION)
    )
    read = h.mirror_headers("2026-07-28", "resources/read", {"uri": "file:///ä"}, None)
    assert read["mcp-name"] == "=?base64?ZmlsZTovLy/DpA==?="
    assert "mcp-name" not in h.mirror_headers("2026-07-28", "tools/list", {"name": "x"})


@pytest.mark.parametrize(
    "method", [" resources/read", "tools/call ", "\ttools/list", "é", "a\x1cb", "x\n", ""]
)
def test_a_method_no_header_can_carry_is_not_mirrored(method: str) -> None:
    # Mcp-Method has no Base64 form, and HTTP strips surrounding whitespace (RFC 9110 5.5).
    with pytest.raises(ValueError, match="mcp-method"):
        h.mirror_headers("2026-07-28", method, {"uri": "file:///a"})


def test_server_refuses_a_body_method_with_surrounding_whitespace() -> None:
    # What a client sending " resources/read" anyway delivers: HTTP trims the header.
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "resources/read", "mcp-name": "file:///a"}
    message = refusal(headers, " resources/read", "file:///a")
    assert "cannot be carried in the Mcp-Method header" in message


@pytest.mark.parametrize("junk", ["\x85", "\xa0", "\x1c", "\x0b"])
def test_only_spaces_and_tabs_are_trimmed_from_header_values(junk: str) -> None:
    # str.strip() took these for whitespace: "tools/list\x85" passed for "tools/list".
    base = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
    assert "invalid characters" in refusal({**base, "mcp-method": "tools/list" + junk}, "tools/list")
    refusal({**base, "mcp-protocol-version": "2026-07-28" + junk}, "tools/list")
    named = {**base, "mcp-method": "prompts/get", "mcp-name": junk + "greet"}
    assert "Mcp-Name header" in refusal(named, "prompts/get", "greet")
    h.validate_modern_headers(
        {**base, "mcp-method": " \ttools/list ", "mcp-protocol-version": "2026-07-28\t"},
        "tools/list",
        META,
        None,
    )


def test_a_method_with_control_characters_is_refused_even_when_header_and_body_agree() -> None:
    # streamable-http "Server Validation": a header value with invalid characters fails.
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "a\x1cb"}
    assert "invalid characters" in refusal(headers, "a\x1cb")


def test_a_final_newline_is_not_a_plain_value() -> None:
    # re's $ matches before a final "\n": "x\n" went out raw instead of Base64.
    assert h.encode_header_value("x\n") == "=?base64?eAo=?="
    assert h.decode_header_value(h.encode_header_value("x\n")) == "x\n"
    with pytest.raises(ValueError):
        h.decode_header_value("x\n")
    with pytest.raises(ValueError):
        h.decode_header_value("=?base64?eAo=?=\n")
    schema = {"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "Region\n"}}}
    assert h.invalid_x_mcp_headers(schema) == "x-mcp-header 'Region\\n' is not a valid header name"
