"""PKCE (RFC 7636) with ``S256`` only, and the ``state`` value (pure)."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass

__all__ = ["PKCE", "make_state", "s256_challenge"]


def s256_challenge(verifier: str) -> str:
    """RFC 7636 §4.2: ``BASE64URL-ENCODE(SHA256(ASCII(code_verifier)))`` without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def make_state() -> str:
    """An unguessable ``state`` (RFC 6749 §10.12): 256 bits, URL-safe."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class PKCE:
    """A code verifier and its ``S256`` challenge."""

    verifier: str
    challenge: str
    method: str = "S256"

    @classmethod
    def generate(cls, length: int = 64) -> PKCE:
        """RFC 7636 §4.1: 43–128 characters from the unreserved set (base64url is a subset)."""
        if not 43 <= length <= 128:
            raise ValueError("code_verifier length must be 43..128")
        verifier = secrets.token_urlsafe(length)[:length]
        return cls(verifier, s256_challenge(verifier))
