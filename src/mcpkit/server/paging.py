"""Pages of the list methods (``tools/list``, ``resources/list``, ...): offset cursors, and a page's
cost kept to the page.

A cursor is the base64 of an offset into the caller's ordered list. With nothing hiding components
(no middleware ``hides``), that list is the registry itself in registration order, so a page is a
slice of it taken in C (``itertools.islice``): filtering the whole registry in Python for each page
made listing N components cost O(N^2 / page size) (issue 18: 10,000 tools in 101 pages). When
something hides components, what a caller sees depends on the request (its principal, its
session), so its list is filtered afresh for each page, as before, and offsets count only what it
sees (an offset into the registry would tell how many components are hidden from it).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Collection
from itertools import islice
from typing import Any, TypeVar

from msgspec import UNSET

from ..protocol.errors import INVALID_PARAMS, MCPError

__all__ = ["page", "page_of"]

T = TypeVar("T")


def _start(cursor: str | Any, count: int) -> int:
    if not isinstance(cursor, str):
        return 0
    try:
        start = int(base64.urlsafe_b64decode(cursor.encode()).decode())
        if start < 0 or start > count:
            raise ValueError
    except ValueError:
        raise MCPError(INVALID_PARAMS, f"Invalid cursor: {cursor!r}") from None
    return start


def _next(end: int, count: int) -> str | Any:
    return base64.urlsafe_b64encode(str(end).encode()).decode() if end < count else UNSET


def page(items: list[T], cursor: str | Any, size: int | None) -> tuple[list[T], str | Any]:
    """The page of ``items`` at ``cursor`` (``size`` None: all from there) and the next cursor or UNSET."""
    start = _start(cursor, len(items))
    if size is None:
        return items[start:], UNSET
    end = start + size
    return items[start:end], _next(end, len(items))


def page_of(
    entries: Collection[T], cursor: str | Any, size: int | None, shown: Callable[[T], bool] | None
) -> tuple[list[T], str | Any]:
    """The page of ``entries`` (iterated in their order) that ``shown`` keeps (None: all of them).

    Without a filter the page costs its own length, plus a skip to the cursor in C; with one,
    every entry is tested, as the caller's list depends on the request.
    """
    if shown is not None:
        return page([entry for entry in entries if shown(entry)], cursor, size)
    count = len(entries)
    start = _start(cursor, count)
    if size is None:
        return list(islice(entries, start, None)), UNSET
    end = start + size
    return list(islice(entries, start, end)), _next(end, count)
