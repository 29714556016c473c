"""Protocol revisions and the two eras (2026-07-28 basic/versioning).

Legacy revisions open a session with ``initialize``; modern ones carry the
version, capabilities and client identity in every request's ``_meta``.
"""

from __future__ import annotations

import enum

__all__ = [
    "ALL_VERSIONS",
    "LATEST_LEGACY",
    "LATEST_MODERN",
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "ProtocolVersion",
    "negotiate_legacy",
    "parse_version",
]


class ProtocolVersion(enum.StrEnum):
    """Every revision mcpkit speaks, oldest first."""

    V2024_11_05 = "2024-11-05"
    V2025_03_26 = "2025-03-26"
    V2025_06_18 = "2025-06-18"
    V2025_11_25 = "2025-11-25"
    V2026_07_28 = "2026-07-28"

    @property
    def is_modern(self) -> bool:
        """True for revisions without the ``initialize`` handshake."""
        return self >= ProtocolVersion.V2026_07_28

    def at_least(self, other: ProtocolVersion) -> bool:
        """True when this revision is ``other`` or newer."""
        # StrEnum compares as str and these are ISO dates, so order is chronological.
        return self >= other


ALL_VERSIONS: tuple[ProtocolVersion, ...] = tuple(ProtocolVersion)
LEGACY_VERSIONS: tuple[ProtocolVersion, ...] = tuple(v for v in ProtocolVersion if not v.is_modern)
MODERN_VERSIONS: tuple[ProtocolVersion, ...] = tuple(v for v in ProtocolVersion if v.is_modern)
LATEST_LEGACY = LEGACY_VERSIONS[-1]
LATEST_MODERN = MODERN_VERSIONS[-1]

_BY_VALUE = {v.value: v for v in ProtocolVersion}


def parse_version(value: object) -> ProtocolVersion | None:
    """The known revision named by ``value``, or None."""
    return _BY_VALUE.get(value) if isinstance(value, str) else None


def negotiate_legacy(
    requested: object, supported: tuple[ProtocolVersion, ...] = LEGACY_VERSIONS
) -> ProtocolVersion:
    """Pick the version an ``initialize`` answer carries (lifecycle, "Version Negotiation").

    The client's version when we support it, otherwise our newest legacy one;
    the client then decides whether it can continue.
    """
    version = parse_version(requested)
    if version is not None and version in supported:
        return version
    return supported[-1]
