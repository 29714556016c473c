"""Helpers for the inspector tests: a real inspector served by uvicorn in a thread."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

import httpx

from mcpkit.inspector import Inspector

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
KITCHEN_SINK = ROOT / "tests" / "servers" / "kitchen_sink.py"
ASKER = HERE / "servers" / "asker.py"
EXITS = HERE / "servers" / "exits.py"


class RunningInspector:
    """An :class:`Inspector` served on its own event loop in a background thread."""

    def __init__(self, **kwargs: Any) -> None:
        self.inspector = Inspector(**kwargs)
        self.inspector.bind()
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="inspector", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.inspector.serve(lambda _: self._ready.set()))
        finally:
            self.loop.close()

    def start(self) -> RunningInspector:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the inspector did not start")
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.inspector.stop)
            self._thread.join(15)

    @property
    def token(self) -> str:
        return self.inspector.token

    @property
    def base_url(self) -> str:
        return self.inspector.base_url

    @property
    def url(self) -> str:
        return self.inspector.url

    @property
    def port(self) -> int:
        return self.inspector.port

    def client(self, *, token: str | None = "valid", **kwargs: Any) -> httpx.Client:
        headers = dict(kwargs.pop("headers", {}))
        if token == "valid":
            headers["Authorization"] = f"Bearer {self.token}"
        elif token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=20, **kwargs)

    def events(self) -> list[tuple[str, Any]]:
        """Every event the hub holds, as (kind, decoded data)."""
        import msgspec

        return [(e.kind, msgspec.json.decode(e.data)) for e in self.inspector.hub.since(0)]


def stdio_body(server: Path, **extra: Any) -> dict[str, Any]:
    return {"transport": "stdio", "command": sys.executable, "args": [str(server)], **extra}
