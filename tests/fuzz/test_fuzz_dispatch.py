"""fuzz/dispatch.py in its short form, and proof that it notices a lost or doubled answer."""

from __future__ import annotations

import fuzz.dispatch
import pytest
from fuzz._harness import Finding
from fuzz.dispatch import TARGET
from fuzz_short import random_test, seed_test

test_seed_corpus_keeps_the_invariants = seed_test(TARGET)
test_generated_inputs_keep_the_invariants = random_test(TARGET, examples=150)

PING = b'\x01{"jsonrpc":"2.0","id":5,"method":"ping"}\n{"jsonrpc":"2.0","id":"x","method":"nope/nope"}'


def test_every_request_is_answered_once() -> None:
    TARGET.one_input(PING)


def test_a_request_left_unanswered_is_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    # The harness's own view of what is owed, told that one more request was sent.
    real = fuzz.dispatch._Expect.__init__

    def owing_more(self: fuzz.dispatch._Expect, lines: list[bytes], batches: bool) -> None:
        real(self, lines, batches)
        self.exact["never-sent"] += 1

    monkeypatch.setattr(fuzz.dispatch._Expect, "__init__", owing_more)
    monkeypatch.setattr(fuzz.dispatch, "HANG", 0.5)
    with pytest.raises(Finding, match="unanswered"):
        TARGET.one_input(PING)


def test_an_answer_nobody_asked_for_is_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    real = fuzz.dispatch._Expect.__init__

    def owing_less(self: fuzz.dispatch._Expect, lines: list[bytes], batches: bool) -> None:
        real(self, lines, batches)
        self.exact.pop(5)

    monkeypatch.setattr(fuzz.dispatch._Expect, "__init__", owing_less)
    with pytest.raises(Finding, match="answered 1 times, owed 0"):
        TARGET.one_input(PING)


def test_the_unknown_method_is_answered_32601() -> None:
    answers = fuzz.dispatch._loop_run(PING)  # type: ignore[attr-defined]
    by_id = {a["id"]: a for a in answers}
    assert by_id[5]["result"] == {}
    assert by_id["x"]["error"]["code"] == -32601
