"""A lone surrogate escape over real stdio is answered under its request's id (issue 17).

``json.dumps`` escapes a lone surrogate exactly as JavaScript's ``JSON.stringify`` does
(``"\\ud83d"``), so the lines below are what a JavaScript client sends for a string cut
in the middle of an emoji. The server reads it with U+FFFD in its place (docs/security.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rawpeer import RawPeer, modern_meta

CUT = "cut \ud83d"  # a Python str holding half a surrogate pair, like a cut JS string


@pytest.fixture
async def peer(server_path: Path, subprocess_env: dict[str, str]):  # type: ignore[no-untyped-def]
    p = await RawPeer.spawn(server_path, subprocess_env)
    yield p
    assert await p.close() == 0


def echo_line(rid: int | str, text: str, **params: object) -> bytes:
    line = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}, **params},
        }
    ).encode()
    assert b"\\ud83d" in line  # the escape itself travels, not UTF-8 bytes
    return line + b"\n"


async def test_legacy_session_answers_under_the_request_id(peer: RawPeer) -> None:
    await peer.initialize()
    await peer.send_raw(echo_line(41, CUT))
    reply = await peer.recv()
    assert reply["id"] == 41, reply
    assert reply["result"]["content"] == [{"type": "text", "text": "cut \ufffd"}]


async def test_modern_request_answers_under_the_request_id(peer: RawPeer) -> None:
    await peer.send_raw(echo_line("m-1", CUT, _meta=modern_meta()))
    reply = await peer.recv()
    assert reply["id"] == "m-1", reply
    assert reply["result"]["content"] == [{"type": "text", "text": "cut \ufffd"}]


async def test_surrogate_in_the_id_is_replaced_and_answered(peer: RawPeer) -> None:
    await peer.initialize()
    await peer.send_raw(echo_line("id-\udc00", CUT))
    reply = await peer.recv()
    assert reply["id"] == "id-\ufffd", reply
    assert "result" in reply
