"""Fixtures for the resource-server tests: signing keys (made once per session) and
a live fake authorization server."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rs_support import FakeAS, Signer, serve_asgi


@pytest.fixture(scope="session")
def rsa_signer() -> Signer:
    return Signer.rsa()


@pytest.fixture(scope="session")
def other_rsa_signer() -> Signer:
    """A key nobody trusts (same kid as ``rsa_signer``: a forger's key)."""
    return Signer.rsa()


@pytest.fixture(scope="session")
def ec_signer() -> Signer:
    return Signer.ec()


@pytest.fixture
async def live_as(rsa_signer: Signer, ec_signer: Signer) -> AsyncIterator[FakeAS]:
    """The fake authorization server on a loopback port, publishing both public keys."""
    fake = FakeAS(jwks={"keys": [rsa_signer.jwk(), ec_signer.jwk()]})
    async with serve_asgi(fake) as base_url:
        fake.base_url = base_url
        yield fake
