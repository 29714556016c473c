"""The short form of a fuzz target that ``make test`` runs: its seed corpus, then a fixed
number of hypothesis examples (derandomized, so a run is repeatable and CI never flakes on a
new random draw; ``make fuzz`` is where new inputs are searched for)."""

from __future__ import annotations

from collections.abc import Callable

from fuzz._harness import Target, corpus_of
from hypothesis import HealthCheck, given, settings


def seed_test(target: Target) -> Callable[[], None]:
    def test_seed_corpus_keeps_the_invariants() -> None:
        seeds = corpus_of(target.name)
        assert seeds, f"fuzz/corpus/{target.name} is empty"
        for seed in seeds:
            target.one_input(seed)

    return test_seed_corpus_keeps_the_invariants


def random_test(target: Target, examples: int) -> Callable[[], None]:
    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(target.strategy)
    def test_generated_inputs_keep_the_invariants(data: bytes) -> None:
        target.one_input(data)

    return test_generated_inputs_keep_the_invariants  # type: ignore[no-any-return]
