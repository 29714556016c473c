"""Descriptions from docstrings: the summary for a tool, and per-parameter text
from Google-style ``Args:`` sections or reST ``:param x:`` fields."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any

__all__ = ["split_docstring", "unwrap"]


_GOOGLE_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters):\s*$", re.I
)
_GOOGLE_ITEM = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_FIELD = re.compile(
    r"^:(param|parameter|arg|argument|key|keyword|type)\s+(?:[^:]*?\s)?\*{0,2}(\w+)\s*:(.*)$"
)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def unwrap(fn: Any) -> Any:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def split_docstring(fn: Callable[..., Any]) -> tuple[str | None, dict[str, str]]:
    """Split ``fn``'s docstring into its description and per-parameter descriptions.

    Understands Google style (``Args:`` / ``Arguments:`` / ``Parameters:`` sections) and reST
    (``:param name: text``; ``:type name:`` lines are dropped).  The description is the cleaned
    docstring with those parameter parts removed (other sections such as ``Returns:`` are kept), or
    None when nothing is left.
    """
    doc = inspect.getdoc(unwrap(fn))
    if not doc:
        return None, {}
    lines = doc.splitlines()  # getdoc already applied inspect.cleandoc
    keep: list[str] = []
    params: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line, stripped = lines[i], lines[i].strip()
        if _GOOGLE_SECTION.match(stripped):
            header_indent, item_indent, current, end = _indent(line), None, None, i + 1
            j = i + 1
            while j < len(lines):
                body = lines[j]
                if body.strip():
                    if _indent(body) <= header_indent:
                        break
                    item_indent = _indent(body) if item_indent is None else item_indent
                    item = _GOOGLE_ITEM.match(body.strip()) if _indent(body) <= item_indent else None
                    if item:
                        current = item[1]
                        params[current] = item[2].strip()
                    elif current is not None:
                        params[current] = f"{params[current]} {body.strip()}".strip()
                    end = j + 1
                j += 1
            i = end  # trailing blank lines belong to the text that follows
            continue
        rest = _REST_FIELD.match(stripped)
        if rest:
            text = rest[3].strip()
            i += 1
            while (
                i < len(lines)
                and lines[i].strip()
                and not lines[i].strip().startswith(":")
                and _indent(lines[i]) > _indent(line)
            ):
                text = f"{text} {lines[i].strip()}"
                i += 1
            if rest[1] != "type":
                params[rest[2]] = text
            continue
        keep.append(line)
        i += 1
    description = re.sub(r"\n{3,}", "\n\n", "\n".join(keep)).strip()
    return description or None, {k: v for k, v in params.items() if v}
