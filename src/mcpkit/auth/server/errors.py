"""What a token verifier raises.

Two kinds of failure must stay apart: a token that is bad (the client's problem:
401 ``invalid_token``, RFC 6750 section 3.1) and a verifier that cannot decide
right now (the JWKS or introspection endpoint is down: the client's token may be
fine, so answering 401 would send it round an authorization loop for nothing).
"""

from __future__ import annotations

__all__ = ["TokenVerificationError", "VerifierUnavailableError"]


class TokenVerificationError(Exception):
    """The token is not acceptable here: malformed, expired, badly signed, for another
    resource, inactive…

    ``description`` goes to the client as ``error_description``: it must say what
    is wrong in general terms and never contain the token itself.
    """

    def __init__(self, description: str = "invalid token") -> None:
        super().__init__(description)
        self.description = description


class VerifierUnavailableError(Exception):
    """The token could not be checked (key set or introspection endpoint unreachable).

    Fails closed: the request is refused with 503, not admitted and not blamed on the token.
    """
