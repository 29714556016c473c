"""The verifier interface and the claim checks every verifier shares.

A :class:`TokenVerifier` turns an access token into a :class:`Principal`. Its
one non-negotiable duty is the audience check: a token is accepted only if it was
issued for *this* resource (2026-07-28 authorization, "Token Handling"; OAuth 2.1
section 5.2; RFC 8707 section 2). A token minted for another service is refused,
never accepted and never passed through to an upstream API.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from ...protocol.auth import Principal
from .challenge import canonical_uri
from .errors import TokenVerificationError

__all__ = [
    "TokenVerifier",
    "audience_matches",
    "expected_audiences",
    "principal_from_claims",
    "scopes_from_claims",
]


@runtime_checkable
class TokenVerifier(Protocol):
    """Checks an access token presented to ``resource`` (the endpoint's canonical URL).

    Raise :class:`~mcpkit.auth.server.TokenVerificationError` for a token that is
    not acceptable (401 ``invalid_token``) and
    :class:`~mcpkit.auth.server.VerifierUnavailableError` when it cannot be
    checked right now (503). A verifier with a fixed audience may ignore
    ``resource``; any other must require it in the token's audience.
    """

    async def verify(self, token: str, resource: str) -> Principal:
        """The principal the token stands for."""
        ...


def expected_audiences(configured: Collection[str] | None, resource: str) -> frozenset[str]:
    """The audiences a token may name: the configured ones, else the resource itself."""
    values = configured if configured else (resource,)
    return frozenset(canonical_uri(value) for value in values if value)


def audience_matches(claims: Mapping[str, Any], expected: frozenset[str]) -> bool:
    """Whether the token names one of ``expected`` in ``aud`` or ``resource``.

    ``aud`` is a string or a list of strings (RFC 7519 section 4.1.3, RFC 7662
    section 2.2); some authorization servers put the RFC 8707 resource indicator
    in a ``resource`` claim instead. A token naming no audience at all matches nothing.
    """
    for name in ("aud", "resource"):
        value = claims.get(name)
        values: Iterable[Any] = (
            (value,) if isinstance(value, str) else value if isinstance(value, list) else ()
        )
        for item in values:
            if isinstance(item, str) and canonical_uri(item) in expected:
                return True
    return False


def scopes_from_claims(claims: Mapping[str, Any]) -> frozenset[str]:
    """Granted scopes: ``scope`` (space-separated, RFC 9068 section 2.2.3 / RFC 7662
    section 2.2) or ``scp`` (a list or a string, as some providers issue it)."""
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            return frozenset(value.split())
        if isinstance(value, list):
            return frozenset(item for item in value if isinstance(item, str) and item)
    return frozenset()


def principal_from_claims(claims: Mapping[str, Any]) -> Principal:
    """The principal of verified claims: subject ``sub``, client ``client_id`` or ``azp``.

    A client-credentials token may have no ``sub``; its client is then the subject.
    """
    client_id = _string(claims, "client_id") or _string(claims, "azp")
    subject = _string(claims, "sub") or client_id
    if subject is None:
        raise TokenVerificationError("the token names no subject")
    exp = claims.get("exp")
    expires_at = float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None
    return Principal(
        subject=subject,
        client_id=client_id,
        scopes=scopes_from_claims(claims),
        expires_at=expires_at,
        claims=MappingProxyType(dict(claims)),
    )


def _string(claims: Mapping[str, Any], name: str) -> str | None:
    value = claims.get(name)
    return value if isinstance(value, str) and value else None
