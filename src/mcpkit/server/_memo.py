"""One analysis per handler function, however many names or URIs it is registered under.

Servers generated from data register one handler many times (a reader for each table, a
template per tenant, a proxy's forwarding function). Analysing the function each time (its
signature, annotations, schemas and docstring: 10-30 µs) made start-up with 10,000 such
registrations spend most of its time redoing the same work; the registries keep the result
here instead.
"""

from __future__ import annotations

import operator
import types
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["AnalysisMemo"]

T = TypeVar("T")


def _stamp(fn: types.FunctionType, key: Any) -> tuple[Any, ...]:
    # Everything the analysis reads from the function that can be reassigned after it was
    # defined; compared by identity, so a changed annotation or docstring is analysed afresh.
    attrs = fn.__dict__
    return (
        key,
        fn.__annotations__,
        fn.__defaults__,
        fn.__kwdefaults__,
        fn.__doc__,
        fn.__code__,
        attrs.get("__signature__"),
        attrs.get("__wrapped__"),
    )


class AnalysisMemo(Generic[T]):
    """The last analysis of each plain function, held weakly (a removed handler is let go).

    Only ``def`` functions are kept: partials, bound methods and callable objects are made
    afresh or may compare by value, so they are analysed on every registration as before.
    """

    def __init__(self) -> None:
        self._memo: weakref.WeakKeyDictionary[Callable[..., Any], tuple[tuple[Any, ...], T]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, fn: Callable[..., Any], key: Any, analyse: Callable[[], T]) -> T:
        """``analyse()``'s result for ``fn``, reused while ``fn`` and ``key`` (compared by
        identity) are unchanged."""
        if type(fn) is not types.FunctionType:
            return analyse()
        stamp = _stamp(fn, key)
        found = self._memo.get(fn)
        if found is not None and all(map(operator.is_, found[0], stamp)):
            return found[1]
        value = analyse()
        self._memo[fn] = (stamp, value)
        return value
