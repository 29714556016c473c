from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from oauth_world import AuthServer, ResourceServer, World, serve


@pytest.fixture
async def world() -> AsyncIterator[World]:
    auth = AuthServer("as1")
    rs = ResourceServer(auth)
    async with serve(auth, rs):
        yield World(auth, rs)
