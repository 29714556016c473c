"""A token verifier for tests of authorized servers: ``<name>-token`` stands for the principal ``name``."""

from __future__ import annotations

from mcpkit.auth.server import TokenVerificationError
from mcpkit.protocol.auth import Principal


class Tokens:
    """``<name>-token`` stands for the principal ``name``."""

    async def verify(self, token: str, resource: str) -> Principal:
        name, _, rest = token.partition("-")
        if rest != "token":
            raise TokenVerificationError("unknown token")
        return Principal(subject=name)
