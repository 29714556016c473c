"""Scope selection (MCP "Scope Selection Strategy" and "Step-Up Authorization Flow"; pure).

Scopes are kept as ordered lists without duplicates so the requested ``scope``
string is stable and readable; comparisons are set-based.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = [
    "OFFLINE_ACCESS",
    "covers",
    "format_scope",
    "initial_scopes",
    "union_scopes",
    "with_offline_access",
]

OFFLINE_ACCESS = "offline_access"


def union_scopes(*groups: Iterable[str] | None) -> list[str] | None:
    """Order-preserving union; None when every group is empty or absent."""
    merged: dict[str, None] = {}
    for group in groups:
        for scope in group or ():
            merged.setdefault(scope, None)
    return list(merged) or None


def initial_scopes(
    challenged: Sequence[str] | None,
    scopes_supported: Sequence[str] | None,
    configured: Sequence[str] | None = None,
) -> list[str] | None:
    """The scopes of a first authorization.

    Explicitly ``configured`` scopes win; otherwise the challenge's ``scope`` (it is
    authoritative for the current operation), else every PRM ``scopes_supported``,
    else None — the ``scope`` parameter is then omitted.
    """
    for candidate in (configured, challenged, scopes_supported):
        if candidate:
            return union_scopes(candidate)
    return None


def with_offline_access(
    scopes: list[str] | None, as_scopes_supported: Sequence[str] | None, enabled: bool = True
) -> list[str] | None:
    """Add ``offline_access`` when the AS lists it (MCP "Refresh Tokens": MAY, only then).

    Never turns an omitted scope into ``offline_access`` alone: that would replace
    the AS's default scope with a refresh-only grant.
    """
    if not enabled or not scopes or not as_scopes_supported or OFFLINE_ACCESS not in as_scopes_supported:
        return scopes
    return union_scopes(scopes, [OFFLINE_ACCESS])


def covers(granted: Iterable[str] | None, required: Iterable[str] | None) -> bool:
    """Whether ``granted`` includes every ``required`` scope (nothing required → True)."""
    return set(required or ()) <= set(granted or ())


def format_scope(scopes: Iterable[str] | None) -> str | None:
    """RFC 6749 §3.3: space-delimited; None for nothing."""
    text = " ".join(scopes or ())
    return text or None
