"""``edit_file``'s edits and the diff it answers with.

Each edit replaces the first occurrence of ``oldText``. When the text does not occur
as written, the lines are compared with leading and trailing whitespace ignored, and
the replacement takes the indentation of the first matched line, and later lines keep
their indentation relative to the edit's first line (the community server's rule, except
that nested lines stay nested: it measured them against the old text's line of the same
number). Line endings are compared as ``\\n``; a file written with ``\\r\\n``
throughout keeps them.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import TypedDict

from ._sandbox import FsError

__all__ = ["EditOperation", "apply_edits", "fenced_diff", "unified_diff"]


class EditOperation(TypedDict):
    """One replacement."""

    oldText: str
    newText: str


_INDENT = re.compile(r"^\s*")


def apply_edits(content: str, edits: Sequence[EditOperation]) -> str:
    """``content`` with every edit applied in order; FsError naming the first that does
    not match."""
    for number, edit in enumerate(edits, 1):
        old = edit["oldText"].replace("\r\n", "\n")
        new = edit["newText"].replace("\r\n", "\n")
        if not old:
            raise FsError(f"Edit {number}: oldText is empty; say which text to replace")
        if old in content:
            content = content.replace(old, new, 1)
            continue
        replaced = _replace_loosely(content, old, new)
        if replaced is None:
            raise FsError(f"Edit {number}: could not find this text in the file:\n{edit['oldText']}")
        content = replaced
    return content


def _replace_loosely(content: str, old: str, new: str) -> str | None:
    old_lines = old.split("\n")
    lines = content.split("\n")
    wanted = [line.strip() for line in old_lines]
    for i in range(len(lines) - len(old_lines) + 1):
        if all(lines[i + j].strip() == want for j, want in enumerate(wanted)):
            lines[i : i + len(old_lines)] = _reindent(
                new.split("\n"), _indent(lines[i]), _indent(old_lines[0])
            )
            return "\n".join(lines)
    return None


def _reindent(new_lines: list[str], indent: str, old_indent: str) -> list[str]:
    """``new_lines`` moved to the file's ``indent``: the first line at it, the others as far
    beyond it as they are beyond ``old_indent`` (the first old line's indentation) in the
    edit, so nested lines stay nested."""
    out = [indent + new_lines[0].lstrip()]
    for line in new_lines[1:]:
        if not line.strip():
            out.append(line.strip(" \t"))
            continue
        own = _indent(line)
        if own.startswith(old_indent):
            extra = own[len(old_indent) :]
        else:
            extra = " " * max(0, len(own) - len(old_indent))
        out.append(indent + extra + line.lstrip())
    return out


def _indent(line: str) -> str:
    match = _INDENT.match(line)
    return match.group(0) if match else ""


def unified_diff(before: str, after: str, path: str) -> str:
    """A git-style unified diff of two texts (4 lines of context)."""
    lines = difflib.unified_diff(
        _lines(before),
        _lines(after),
        fromfile=path,
        tofile=path,
        fromfiledate="original",
        tofiledate="modified",
        n=4,
    )
    return "".join(lines)


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def fenced_diff(diff: str) -> str:
    """The diff in a Markdown ``diff`` fence longer than any run of backticks inside it."""
    fence = "```"
    while fence in diff:
        fence += "`"
    return f"{fence}diff\n{diff}{fence}\n\n"
