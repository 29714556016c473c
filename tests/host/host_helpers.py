"""Helpers for host tests: specs for the backend server, and reading JSON-lines files."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcpkit.host import ServerSpec

SERVERS = Path(__file__).resolve().parent / "servers"
BACKEND = SERVERS / "backend.py"


def backend_spec(name: str, record: Path, **options: Any) -> ServerSpec:
    """A stdio spec running ``servers/backend.py`` as server ``name``."""
    env = {"SERVER_NAME": name, "RECORD_FILE": str(record), **options.pop("env", {})}
    return ServerSpec(
        name=name, transport="stdio", command=sys.executable, args=(str(BACKEND),), env=env, **options
    )


def read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait until ``check()`` holds (polling), or fail."""
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)
