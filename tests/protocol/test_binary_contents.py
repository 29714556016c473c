"""Binary content kept as bytes until encoded (``mcpkit.protocol._binary``, issue 18).

The wire bytes must be exactly those of the public types holding the base64 text, and the
public types must stay what users build and decode: ``str`` fields.
"""

from __future__ import annotations

import base64
import random
from typing import Any

import msgspec
import pytest

from mcpkit.protocol import _binary as binary
from mcpkit.protocol import jsonrpc, wire
from mcpkit.protocol import types as t
from mcpkit.protocol.versions import ProtocolVersion

_rng = random.Random(18)
PAYLOADS = [
    b"",
    b"\x00",
    b"\xff\xfe",
    b"abc",
    b"abcd",
    bytes(range(256)),
    bytes(_rng.getrandbits(8) for _ in range(1001)),  # 1001 % 3 == 2
    bytes(_rng.getrandbits(8) for _ in range(65_537)),  # 65537 % 3 == 2, past any small buffer
    bytes(300_001),  # 300001 % 3 == 1
]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def pairs(data: bytes) -> list[tuple[Any, Any]]:
    """(made from bytes, the public type with the text) for every place mcpkit makes binary content."""
    return [
        (binary.blob("res://x", data, "application/octet-stream"),
         t.ResourceContents(uri="res://x", blob=b64(data), mime_type="application/octet-stream")),
        (binary.blob("res://x", data), t.BlobResourceContents("res://x", b64(data))),
        (binary.image(data, "image/png"), t.ImageContent(data=b64(data), mime_type="image/png")),
        (binary.audio(data, "audio/wav"), t.AudioContent(data=b64(data), mime_type="audio/wav")),
    ]  # fmt: skip


def results(made: Any, public: Any) -> list[tuple[Any, Any]]:
    if isinstance(public, t.ResourceContents):
        embedded = (t.EmbeddedResource(resource=made), t.EmbeddedResource(resource=public))
        return [
            (t.ReadResourceResult(contents=[made]), t.ReadResourceResult(contents=[public])),
            (t.CallToolResult(content=[embedded[0]]), t.CallToolResult(content=[embedded[1]])),
        ]
    return [
        (t.CallToolResult(content=[made]), t.CallToolResult(content=[public])),
        (
            t.GetPromptResult(messages=[t.PromptMessage(role="user", content=made)]),
            t.GetPromptResult(messages=[t.PromptMessage(role="user", content=public)]),
        ),
    ]


@pytest.mark.parametrize("data", PAYLOADS, ids=lambda d: f"{len(d)}B")
def test_wire_bytes_are_those_of_the_text_path(data: bytes) -> None:
    for made, public in pairs(data):
        assert msgspec.json.encode(made) == msgspec.json.encode(public)
        assert msgspec.to_builtins(made) == msgspec.to_builtins(public)
        for result, expected in results(made, public):
            assert jsonrpc.encode_result(7, result) == jsonrpc.encode_result(7, expected)
            old = ProtocolVersion.V2024_11_05
            assert wire.downgrade(result, old) == wire.downgrade(expected, old)
            # What a peer decodes: the public type, with the base64 text.
            decoded = msgspec.json.decode(msgspec.json.encode(result), type=type(expected))
            assert decoded == expected and type(decoded) is type(expected)


@pytest.mark.parametrize("make", [bytearray, memoryview, lambda d: memoryview(d)[1:-1]])
def test_other_buffers_encode_alike_and_are_frozen(make: Any) -> None:
    data = bytes(range(200))
    buf = make(data)
    made = binary.blob("res://x", buf)
    expected = base64.b64encode(bytes(buf)).decode()
    if isinstance(buf, bytearray):
        buf[0] ^= 0xFF  # changed after the return: the content is what was returned
    assert msgspec.json.encode(made) == msgspec.json.encode(t.ResourceContents(uri="res://x", blob=expected))


def test_they_read_as_the_public_types() -> None:
    data = b"\x00\x01\x02\x03\x04"
    for made, public in pairs(data):
        assert isinstance(made, type(public))
        field = "blob" if isinstance(public, t.ResourceContents) else "data"
        assert getattr(made, field) == b64(data) and type(getattr(made, field)) is str
        assert made == public and public == made
        assert (made != public) is False and (public != made) is False
        setattr(made, field, "AAAA")  # assigning text, as to the public type
        assert getattr(made, field) == "AAAA"
        assert msgspec.json.encode(made).count(b'"AAAA"') == 1
    assert binary.blob("res://x", b"a") != t.ResourceContents(uri="res://x", blob="YQ==", mime_type="x/y")
    text: object = "YQ=="
    assert binary.blob("res://x", b"a") != text


def test_public_types_are_unchanged() -> None:
    """Users still build and decode binary content with base64 ``str`` fields."""
    hints = {
        t.ResourceContents: ("blob", "str | UnsetType"),
        t.ImageContent: ("data", "str"),
        t.AudioContent: ("data", "str"),
    }
    for cls, (name, annotation) in hints.items():
        assert cls.__annotations__[name] == annotation
        info = msgspec.inspect.type_info(cls)
        assert isinstance(info, msgspec.inspect.StructType)
        (field,) = [f for f in info.fields if f.name == name]
        assert isinstance(field.type, msgspec.inspect.StrType | msgspec.inspect.UnionType)
        assert "Bytes" not in repr(field.type)
    assert t.BlobResourceContents("u", "AAE=").blob == "AAE="
    # Decoding never makes the internal variants, and they are not exported.
    image = msgspec.json.decode(b'{"type":"image","data":"AAE=","mimeType":"image/png"}', type=t.ContentBlock)
    assert type(image) is t.ImageContent and image.data == "AAE="
    for name in ("BytesResourceContents", "BytesImageContent", "BytesAudioContent"):
        assert not hasattr(t, name)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"data": b"\x00", "mimeType": "image/png"}, t.ImageContent)
