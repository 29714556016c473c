"""Bad input over real stdio: each gets the right JSON-RPC error and the server keeps serving."""

from __future__ import annotations

from pathlib import Path

import pytest

from rawpeer import RawPeer

PARSE, INVALID_REQUEST, NO_METHOD, INVALID_PARAMS = -32700, -32600, -32601, -32602


@pytest.fixture
async def peer(server_path: Path, subprocess_env: dict[str, str]):  # type: ignore[no-untyped-def]
    p = await RawPeer.spawn(server_path, subprocess_env)
    yield p
    assert await p.close() == 0


async def assert_still_serving(peer: RawPeer) -> None:
    reply = await peer.request("tools/call", {"name": "echo", "arguments": {"text": "alive"}})
    assert reply["result"]["content"] == [{"type": "text", "text": "alive"}]


async def test_request_before_initialize_is_refused(peer: RawPeer) -> None:
    reply = await peer.request("tools/list")
    assert reply["error"]["code"] == INVALID_PARAMS
    assert "initialize" in reply["error"]["message"]
    await peer.initialize()
    await assert_still_serving(peer)


@pytest.mark.parametrize(
    ("raw", "code", "rid"),
    [
        (b"garbage\n", PARSE, None),
        (b'{"jsonrpc":"2.0","id":1,"method":\n', PARSE, None),
        (b'{"jsonrpc":"1.0","id":7,"method":"ping"}\n', INVALID_REQUEST, 7),
        (b'{"id":8,"method":"ping"}\n', INVALID_REQUEST, 8),
        (b'{"jsonrpc":"2.0","id":9,"method":"tools/list","params":42}\n', INVALID_REQUEST, 9),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}\n', INVALID_REQUEST, None),
        (b"[1,2,3]\n", INVALID_REQUEST, None),
        (b'"just a string"\n', INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"\xff\xfe"}}\n', PARSE, 10),
        (b"\xff\xfe\xfd\n", PARSE, None),
        (
            b'{"jsonrpc":"2.0","id":11,"method":"ping","params":' + b"[" * 5000 + b"]" * 5000 + b"}\n",
            PARSE,
            None,
        ),
    ],
    ids=[
        "garbage",
        "truncated",
        "wrong-version",
        "no-version",
        "scalar-params",
        "null-id",
        "array",
        "string",
        "bad-utf8-in-params",
        "bad-utf8",
        "deep-nesting",
    ],
)
async def test_malformed_messages(peer: RawPeer, raw: bytes, code: int, rid: int | None) -> None:
    await peer.initialize()
    await peer.send_raw(raw)
    reply = await peer.recv()
    assert reply["jsonrpc"] == "2.0"
    assert reply["error"]["code"] == code, reply
    assert reply["id"] == rid
    await assert_still_serving(peer)


async def test_unknown_method_and_invalid_params(peer: RawPeer) -> None:
    await peer.initialize()
    assert (await peer.request("no/such/method"))["error"]["code"] == NO_METHOD
    assert (await peer.request("tools/call", {"name": 5}))["error"]["code"] == INVALID_PARAMS
    assert (await peer.request("tools/call", {"name": "nope"}))["error"]["code"] == INVALID_PARAMS
    assert (await peer.request("resources/read", {}))["error"]["code"] == INVALID_PARAMS
    await assert_still_serving(peer)


async def test_huge_line_is_refused_without_killing_the_server(peer: RawPeer) -> None:
    await peer.initialize()
    big = b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"echo","arguments":{"text":"'
    await peer.send_raw(big + b"x" * (4 << 20) + b'"}}}\n')
    reply = await peer.recv()
    assert reply["error"]["code"] == INVALID_REQUEST
    assert "maximum size" in reply["error"]["message"]
    assert reply["id"] == 12  # recovered from the head of the discarded line
    await assert_still_serving(peer)


async def test_stray_print_does_not_corrupt_stdout(peer: RawPeer) -> None:
    await peer.initialize()
    reply = await peer.request("tools/call", {"name": "shout", "arguments": {"text": "hello"}})
    assert reply["result"]["content"] == []
    await assert_still_serving(peer)


async def test_eof_ends_the_server_cleanly_after_answering(peer: RawPeer) -> None:
    await peer.initialize()
    await peer.send(
        {
            "jsonrpc": "2.0",
            "id": 99,
            "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"seconds": 0.3}},
        }
    )
    assert peer.proc.stdin is not None
    peer.proc.stdin.close()
    reply = await peer.recv()
    while "id" not in reply:  # the tool's log notification comes first
        reply = await peer.recv()
    assert reply["id"] == 99
    assert reply["result"]["content"][0]["text"] == "slept 0.3"
