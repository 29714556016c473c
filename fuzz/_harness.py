"""What every fuzz target is: a function of bytes that must not crash, and hypothesis strategies.

A target module defines ``TARGET = Target(name, one_input, strategy)``:

* ``one_input(data: bytes) -> None`` runs one input and raises :class:`Finding` (or lets any
  unexpected exception escape) when an invariant is broken. Documented errors are caught inside.
  atheris calls it with its mutated bytes; the corpus replay calls it with each seed.
* ``strategy`` draws *structured* inputs (bytes too) for hypothesis, which finds what random
  bytes rarely reach: a well-formed envelope with one odd member, a header one character off.

Every call is also held to a time budget (:data:`BUDGET` CPU seconds, generous: it catches
quadratic or exponential behaviour, not a slow machine).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "BUDGET",
    "CORPUS",
    "HANG",
    "Finding",
    "Target",
    "corpus_of",
    "fields",
    "joined",
    "json_values",
    "timed",
]

#: CPU seconds one input may take (CPU, not wall time: a loaded machine must not fail a run).
BUDGET = 2.0
#: Wall seconds after which an input that waits (the dispatch target) is taken to hang.
HANG = 10.0
CORPUS = Path(__file__).resolve().parent / "corpus"


class Finding(AssertionError):
    """An invariant broken by an input: a bug to fix, then a regression test."""


@dataclass(frozen=True)
class Target:
    name: str
    #: Runs one input; raises on a broken invariant.
    one_input: Callable[[bytes], None]
    #: Draws inputs (bytes) for hypothesis.
    strategy: st.SearchStrategy[bytes]
    #: The modules whose coverage this target is about (for ``run.py --coverage``).
    modules: tuple[str, ...] = ()


def timed(one_input: Callable[[bytes], None]) -> Callable[[bytes], None]:
    """``one_input`` held to :data:`BUDGET` seconds per input."""

    def run(data: bytes) -> None:
        start = time.process_time()
        one_input(data)
        took = time.process_time() - start
        if took > BUDGET:
            raise Finding(f"one input took {took:.2f} s (budget {BUDGET} s): {data[:200]!r}")

    run.__name__ = one_input.__name__
    return run


def corpus_of(name: str) -> list[bytes]:
    """The seed corpus of a target (fuzz/corpus/NAME/*), sorted by file name."""
    folder = CORPUS / name
    if not folder.is_dir():
        return []
    return [path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()]


_scalars: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(exclude_categories=()), max_size=20),
)

#: JSON-shaped values, lone surrogates included (json.dumps escapes them as JavaScript does).
json_values: st.SearchStrategy[Any] = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def fields(data: bytes, count: int) -> list[str]:
    """``data`` as text (bad UTF-8 replaced), cut at NUL bytes into ``count`` fields."""
    parts = data.decode("utf-8", "replace").split("\x00", count - 1)
    return parts + [""] * (count - len(parts))


def joined(*parts: str) -> bytes:
    """The inverse of :func:`fields`, for hypothesis strategies (NULs inside fields dropped)."""
    return "\x00".join(part.replace("\x00", "") for part in parts).encode("utf-8", "surrogatepass")
