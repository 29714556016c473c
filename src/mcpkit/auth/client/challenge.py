"""``WWW-Authenticate`` parsing (RFC 9110 §11.6.1) and the Bearer challenge (RFC 6750 §3).

A header may carry several challenges, each ``scheme token68`` or
``scheme param=value, param="quoted, value"``; a response may carry several
headers. Commas separate both parameters and challenges, so a comma followed by
``name=`` continues the current challenge and anything else starts a new one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["BearerChallenge", "Challenge", "bearer_challenge", "parse_www_authenticate", "split_scope"]

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_WS = re.compile(r"[ \t]*")
_SEP = re.compile(r"[ \t,]*")
_PARAM_START = re.compile(r"([!#$%&'*+\-.^_`|~0-9A-Za-z]+)[ \t]*=[ \t]*")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
#: Unquoted values: RFC 9110 wants a token, but servers send ``scope=mcp:basic`` — accept
#: anything up to whitespace or a comma (not starting with "=", which marks token68 padding).
_BARE_VALUE = re.compile(r'[^\s,"=][^\s,"]*')
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*(?=[ \t]*(?:,|$))")
_UNESCAPE = re.compile(r"\\(.)")


@dataclass(frozen=True)
class Challenge:
    """One challenge: the scheme (lower-cased), its parameters (names lower-cased) or token68."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)
    token68: str | None = None


def _param_at(text: str, pos: int) -> tuple[str, str, int] | None:
    """``name=value`` at ``pos`` → (name, value, end), else None."""
    start = _PARAM_START.match(text, pos)
    if start is None:
        return None
    quoted = _QUOTED.match(text, start.end())
    if quoted is not None:
        return start.group(1).lower(), _UNESCAPE.sub(r"\1", quoted.group(1)), quoted.end()
    token = _BARE_VALUE.match(text, start.end())
    if token is not None:
        return start.group(1).lower(), token.group(0), token.end()
    return None


def _parse_one(text: str) -> list[Challenge]:
    challenges: list[Challenge] = []
    pos = _SEP.match(text, 0).end()  # type: ignore[union-attr]
    while pos < len(text):
        scheme = _TOKEN.match(text, pos)
        if scheme is None:
            break  # malformed: keep what parsed so far
        pos = _WS.match(text, scheme.end()).end()  # type: ignore[union-attr]
        params: dict[str, str] = {}
        token68: str | None = None
        param = _param_at(text, pos)
        if param is None and (t68 := _TOKEN68.match(text, pos)) is not None:
            token68, pos = t68.group(0), t68.end()
        while param is not None:
            name, value, pos = param
            params.setdefault(name, value)  # RFC 9110 §11.2: a name occurs once; keep the first
            after = _SEP.match(text, pos).end()  # type: ignore[union-attr]
            param = _param_at(text, after) if "," in text[pos:after] else None
            if param is None:
                pos = after
        challenges.append(Challenge(scheme.group(0).lower(), params, token68))
        pos = _SEP.match(text, pos).end()  # type: ignore[union-attr]
    return challenges


def parse_www_authenticate(values: Iterable[str]) -> list[Challenge]:
    """All challenges of all ``WWW-Authenticate`` header values, in order."""
    return [c for value in values for c in _parse_one(value)]


def split_scope(value: str | None) -> list[str] | None:
    """RFC 6749 §3.3: a space-delimited list of scope tokens; None when absent or empty."""
    if value is None:
        return None
    scopes = list(dict.fromkeys(value.split()))
    return scopes or None


@dataclass(frozen=True)
class BearerChallenge:
    """The parameters MCP reads from a ``Bearer`` challenge (RFC 6750 §3, RFC 9728 §5.1)."""

    resource_metadata: str | None = None
    scope: list[str] | None = None
    error: str | None = None
    error_description: str | None = None


def bearer_challenge(values: Iterable[str]) -> BearerChallenge | None:
    """The first ``Bearer`` challenge among the header values, or None."""
    for challenge in parse_www_authenticate(values):
        if challenge.scheme == "bearer":
            p = challenge.params
            return BearerChallenge(
                resource_metadata=p.get("resource_metadata"),
                scope=split_scope(p.get("scope")),
                error=p.get("error"),
                error_description=p.get("error_description"),
            )
    return None
