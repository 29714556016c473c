"""Glob patterns over relative paths, as ``search_files`` and ``directory_tree`` match them.

The community server matches with minimatch (``dot: true``) against the path relative to
the starting directory, so prompts written for it use its dialect: ``*`` and ``?`` stay
within one path segment, ``**`` as a whole segment spans any number of segments (zero
included), ``[...]`` is a character class (``[!...]`` or ``[^...]`` negated), ``{a,b}``
expands to alternatives and ``\\`` escapes the next character. Dotfiles match like any
other name. The patterns are compiled to regular expressions once per call.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence

__all__ = ["MAX_ALTERNATIVES", "compile_glob", "exclusion"]

#: Brace expansion stops here: ``{a,b}{c,d}...`` grows exponentially, and a pattern is
#: client input.
MAX_ALTERNATIVES = 256


def compile_glob(pattern: str) -> Callable[[str], bool]:
    """A predicate telling whether a relative POSIX path matches ``pattern``."""
    alternatives = _expand_braces(pattern)
    regex = re.compile("|".join(f"(?:{_translate(p)})" for p in alternatives), re.DOTALL)
    return lambda path: regex.fullmatch(path) is not None


def exclusion(patterns: Sequence[str], *, bare_names: bool) -> Callable[[str], bool]:
    """A predicate for ``excludePatterns``: true when a relative path is excluded.

    ``bare_names`` is ``directory_tree``'s rule: a pattern without ``*`` also excludes
    an entry of that name (or path) at any depth, and everything below it.
    """
    matchers: list[Callable[[str], bool]] = []
    for pattern in patterns:
        if not pattern:
            continue
        if bare_names and "*" not in pattern:
            matchers.extend(compile_glob(p) for p in (pattern, f"**/{pattern}", f"**/{pattern}/**"))
        else:
            matchers.append(compile_glob(pattern))
    return lambda path: any(match(path) for match in matchers)


def _translate(pattern: str) -> str:
    segments = pattern.split("/")
    out: list[str] = []
    last = len(segments) - 1
    for i, segment in enumerate(segments):
        if segment == "**":
            # A globstar segment: any run of whole segments (zero included) before the next.
            out.append(".*" if i == last else "(?:[^/]*/)*")
        else:
            out.append(_segment(segment) + ("" if i == last else "/"))
    return "".join(out)


def _segment(segment: str) -> str:
    out: list[str] = []
    i, n = 0, len(segment)
    while i < n:
        c = segment[i]
        i += 1
        if c == "\\" and i < n:
            out.append(re.escape(segment[i]))
            i += 1
        elif c == "*":
            while i < n and segment[i] == "*":
                i += 1  # "**" inside a segment is a plain "*"
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = _class_end(segment, i)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = segment[i:end]
                i = end + 1
                negate = body[:1] in ("!", "^")
                if negate:
                    body = body[1:]
                body = body.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
                out.append(f"(?![/])[^{body}]" if negate else f"[{body}]")
        else:
            out.append(re.escape(c))
    return "".join(out)


def _class_end(segment: str, start: int) -> int:
    """Index of the ``]`` closing a class opened just before ``start``, or -1."""
    i = start
    if i < len(segment) and segment[i] in "!^":
        i += 1
    if i < len(segment) and segment[i] == "]":
        i += 1  # a leading "]" is a member
    while i < len(segment):
        if segment[i] == "]":
            return i
        i += 1
    return -1


def _expand_braces(pattern: str) -> list[str]:
    results: list[str] = []
    pending = [pattern]
    while pending:
        current = pending.pop()
        group = _first_brace_group(current)
        if group is None:
            results.append(current)
        else:
            start, end, options = group
            pending.extend(current[:start] + option + current[end + 1 :] for option in reversed(options))
        if len(results) + len(pending) > MAX_ALTERNATIVES:
            raise ValueError(f"the pattern expands to more than {MAX_ALTERNATIVES} alternatives")
    return results


def _first_brace_group(pattern: str) -> tuple[int, int, list[str]] | None:
    """The first ``{...}`` with a top-level comma: (start, end, alternatives)."""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth, j, cuts = 1, i + 1, [i]
            while j < len(pattern) and depth:
                d = pattern[j]
                if d == "\\":
                    j += 2
                    continue
                if d == "{":
                    depth += 1
                elif d == "}":
                    depth -= 1
                elif d == "," and depth == 1:
                    cuts.append(j)
                j += 1
            if depth == 0 and len(cuts) > 1:
                end = j - 1
                cuts.append(end)
                return i, end, [pattern[a + 1 : b] for a, b in itertools.pairwise(cuts)]
        i += 1
    return None
