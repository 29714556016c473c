"""fuzz/envelope.py in its short form, and proof that its invariants catch the bug it found."""

from __future__ import annotations

import fuzz.envelope
import pytest
from fuzz._harness import Finding
from fuzz.envelope import TARGET
from fuzz_short import random_test, seed_test

from mcpkit.protocol import jsonrpc
from mcpkit.protocol.errors import PARSE_ERROR, ProtocolError

test_seed_corpus_keeps_the_invariants = seed_test(TARGET)
test_generated_inputs_keep_the_invariants = random_test(TARGET, examples=300)

SURROGATE = (
    b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"t":"\\ud83d"}}}'
)


def test_the_lone_surrogate_bug_breaks_an_invariant(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the old decoder (lone surrogates refused as -32700, id lost), the harness fails."""
    real = jsonrpc.decode_message

    def old_decoder(data: bytes, *, allow_batch: bool = False) -> object:
        if b"\\ud83d" in bytes(data):
            raise ProtocolError(PARSE_ERROR, "Parse error: Input data was truncated")
        return real(data, allow_batch=allow_batch)

    monkeypatch.setattr(fuzz.envelope, "decode_message", old_decoder)
    with pytest.raises(Finding, match="valid JSON answered -32700"):
        TARGET.one_input(SURROGATE)


def test_the_fixed_decoder_passes_the_same_input() -> None:
    TARGET.one_input(SURROGATE)
