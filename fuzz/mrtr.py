"""Unsealing MRTR ``requestState`` (2026-07-28 basic/patterns/mrtr), which the client returns.

The state is the server's own sealed data handed back by an untrusted client. Invariants:

* :meth:`RequestStateCodec.open` returns the answers or raises :class:`MCPError` -32602; no
  other exception escapes whatever the string (not ASCII, not base64, huge, empty, dotted);
* a state sealed by the codec opens, with the answers sealed, for its binding and principal,
  and for no other binding or principal;
* any change to a sealed state (one character replaced, inserted or removed, a part
  truncated) is refused: the HMAC covers the encoded text, so no "equivalent" base64 spelling
  slips through.

Input layout: fields = a state string, a position and a replacement for tampering, answers JSON.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from mcpkit.protocol.errors import INVALID_PARAMS, MCPError
from mcpkit.protocol.mrtr import RequestStateCodec

from ._harness import Finding, Target, corpus_of, fields, joined, json_values, timed

CODEC = RequestStateCodec(b"fuzz-secret-0123456789abcdef0123")
BINDING = RequestStateCodec.binding("tools/call", "book", {"city": "Paris"})


def _opens(state: str, binding: str = BINDING, principal: str | None = "alice") -> dict[str, Any] | None:
    try:
        return CODEC.open(state, binding, principal)
    except MCPError as exc:
        if exc.code != INVALID_PARAMS:
            raise Finding(f"requestState refused with {exc.code}, not -32602") from None
        return None


def one_input(data: bytes) -> None:
    state, where, answers_text = fields(data, 3)
    _opens(state)
    _opens(state, principal=None)
    try:
        answers = json.loads(answers_text)
    except (ValueError, RecursionError):
        answers = {"elicit-1": answers_text}
    if not isinstance(answers, dict):
        answers = {"elicit-1": answers}
    try:
        sealed = CODEC.seal(BINDING, "alice", answers)
    except (TypeError, UnicodeEncodeError, OverflowError):
        return  # answers msgspec cannot encode (a lone surrogate, a huge int): never sealed
    opened = _opens(sealed)
    if opened != json.loads(json.dumps(answers)):
        raise Finding(f"a sealed state did not open to its answers: {opened!r} != {answers!r}")
    if _opens(sealed, principal="mallory") is not None or _opens(sealed, binding=BINDING + "x") is not None:
        raise Finding("a state opened for another principal or request")
    pos = int.from_bytes(where.encode()[:2] or b"\x00", "big") % (len(sealed) + 1)
    replacement = where[2:3]
    for tampered in (
        sealed[:pos] + replacement + sealed[pos + 1 :],
        sealed[:pos] + replacement + sealed[pos:],
        sealed[:pos] + sealed[pos + 1 :],
        sealed[:pos],
    ):
        if tampered != sealed and _opens(tampered) is not None:
            raise Finding(f"a tampered state opened: {tampered!r} (sealed {sealed!r})")


strategy: st.SearchStrategy[bytes] = st.one_of(
    st.builds(joined, st.text(max_size=40), st.text(min_size=3, max_size=4), json_values.map(json.dumps)),
    st.builds(
        joined,
        st.sampled_from(["", ".", "a.b", "e30.", "=.=", "\u00e9.x"]),
        st.text(min_size=3, max_size=4),
        st.dictionaries(st.text(max_size=6), json_values, max_size=3).map(json.dumps),
    ),
    st.sampled_from(corpus_of("mrtr") or [b"a.b\x00abc\x00{}"]),
)

TARGET = Target("mrtr", timed(one_input), strategy, ("mcpkit.protocol.mrtr",))
