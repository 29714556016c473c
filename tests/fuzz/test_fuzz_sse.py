"""fuzz/sse.py in its short form (see fuzz/sse.py for the invariants)."""

from __future__ import annotations

from fuzz.sse import TARGET
from fuzz_short import random_test, seed_test

test_seed_corpus_keeps_the_invariants = seed_test(TARGET)
test_generated_inputs_keep_the_invariants = random_test(TARGET, examples=200)
