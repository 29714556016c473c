"""``Visibility``: which tools, prompts and resources a caller can see and use.

Allow and deny lists of names or globs (``fnmatch``: ``db_*``, ``*_admin``), and a rule
per principal. What is hidden is left out of list results and refused when called,
read or fetched, exactly as if it did not exist (``Middleware.hides``), so lists, pages
and calls always agree.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Collection, Iterable

from ..protocol.auth import Principal
from ..server.context import Context
from ..server.middleware import ComponentKind, Middleware

__all__ = ["Visibility"]

#: ``rule(principal, kind, name)``: whether this caller may see the component.
PrincipalRule = Callable[[Principal | None, ComponentKind, str], bool]
_ALL_KINDS: tuple[ComponentKind, ...] = ("tool", "prompt", "resource", "resource_template")
_TOOLS: tuple[ComponentKind, ...] = ("tool",)


def _compile(patterns: Iterable[str]) -> re.Pattern[str] | None:
    patterns = list(patterns)
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


class Visibility(Middleware):
    """Show only what ``allow`` matches (everything when it is empty), minus what ``deny``
    matches, and what ``rule(principal, kind, name)`` lets the caller see.

    ``kinds`` says which components the lists apply to (tools only, by default); the
    rule sees every kind. Names are as clients see them (after mounting and transforms);
    resources are matched by URI, templates by URI template. ::

        Visibility(allow=["db_*", "search"], deny=["db_drop*"])
        Visibility(rule=lambda who, kind, name: not name.startswith("admin_") or
                   (who is not None and "admin" in who.scopes))

    When what a rule allows changes, call ``server.notify_list_changed(...)``.
    """

    runs_inline = True

    def __init__(
        self,
        *,
        allow: Collection[str] = (),
        deny: Collection[str] = (),
        rule: PrincipalRule | None = None,
        kinds: Collection[ComponentKind] = _TOOLS,
    ) -> None:
        unknown = set(kinds) - set(_ALL_KINDS)
        if unknown:
            raise ValueError(f"kinds must be among {_ALL_KINDS}, not {sorted(unknown)}")
        if not (allow or deny or rule):
            raise ValueError("Visibility needs allow=, deny= or rule=")
        self._allow = _compile(allow)
        self._deny = _compile(deny)
        self._rule = rule
        self._kinds = frozenset(kinds)

    def hides(self, ctx: Context, kind: ComponentKind, name: str) -> bool:
        if kind in self._kinds:
            if self._allow is not None and not self._allow.match(name):
                return True
            if self._deny is not None and self._deny.match(name):
                return True
        return self._rule is not None and not self._rule(ctx.principal, kind, name)
