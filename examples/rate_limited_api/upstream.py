"""A stand-in for a rate-limited external API: a tiny weather service on loopback.

It enforces its own limit the way real APIs do: at most ``limit`` requests to
``/forecast`` in any ``window`` seconds; a request beyond that is answered
``429 Too Many Requests`` with a ``Retry-After`` header. It keeps count of what
it served and refused at ``GET /stats``, so you can check that a client never
went over the limit.

::

    python upstream.py                 # prints its URL (a free port on 127.0.0.1), then serves
    python upstream.py --limit 5 --port 8100

    curl 'http://127.0.0.1:PORT/forecast?city=Paris&days=2'
    curl 'http://127.0.0.1:PORT/stats'

Endpoints:

- ``GET /forecast?city=NAME&days=N`` (1 to 7 days): a made-up but stable forecast
  as JSON. The city ``Atlantis`` fails on purpose (``500`` with internal details
  in the body), to show what a server does with an upstream failure.
- ``GET /stats``: ``{"served": n, "rejected": n, "failed": n, "peak": n, "limit": n, "window": s}``
  (``rejected`` counts the 429s; ``peak`` is the most requests admitted in any window).
  Not rate limited.

Plain asyncio and the standard library only: HTTP/1.1 with keep-alive, GET only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import signal
import time
import zlib
from collections import deque
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["Upstream", "serving"]

SKIES = ["sunny", "partly cloudy", "cloudy", "light rain", "showers", "windy", "fog"]
REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
}


class Upstream:
    """The service: ``await start()`` returns its URL; ``await close()`` stops it."""

    def __init__(self, limit: int = 5, window: float = 1.0) -> None:
        self.limit = limit
        self.window = window
        self.served = 0
        self.rejected = 0
        self.failed = 0
        self.peak = 0
        self._admitted: deque[float] = deque()
        self._server: asyncio.Server | None = None
        self.url = ""

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        self._server = await asyncio.start_server(self._connection, host, port)
        bound_port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://{host}:{bound_port}"
        return self.url

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1)

    def stats(self) -> dict[str, Any]:
        return {
            "served": self.served,
            "rejected": self.rejected,
            "failed": self.failed,
            "peak": self.peak,
            "limit": self.limit,
            "window": self.window,
        }

    # -- the API --------------------------------------------------------------------------

    def _admit(self) -> float:
        """Admit one request (0.0), or the seconds until one would be admitted."""
        now = time.monotonic()
        while self._admitted and self._admitted[0] <= now - self.window:
            self._admitted.popleft()
        if len(self._admitted) >= self.limit:
            return self._admitted[0] + self.window - now
        self._admitted.append(now)
        self.peak = max(self.peak, len(self._admitted))
        return 0.0

    def respond(self, method: str, target: str) -> tuple[int, dict[str, str], Any]:
        url = urlsplit(target)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        if method != "GET":
            return 404, {}, {"error": "not found"}
        if url.path == "/stats":
            return 200, {}, self.stats()
        if url.path != "/forecast":
            return 404, {}, {"error": "not found"}
        wait = self._admit()
        if wait > 0:
            self.rejected += 1
            retry = max(1, math.ceil(wait))
            return 429, {"Retry-After": str(retry)}, {"error": "rate limit exceeded", "retry_after": retry}
        city = query.get("city", "").strip()
        try:
            days = int(query.get("days", "1"))
        except ValueError:
            days = 0
        if not city or not 1 <= days <= 7:
            return 400, {}, {"error": "city is required and days must be 1 to 7"}
        if city.lower() == "atlantis":
            self.failed += 1
            # What a real service might leak when it breaks: never show this to a client.
            return 500, {}, {"error": "db-7.internal:5432 connection refused (user=weather password=hunter2)"}
        self.served += 1
        return 200, {}, {"city": city, "days": [_day(city, n) for n in range(days)]}

    # -- HTTP/1.1 ------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _version = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    name, sep, value = line.partition(":")
                    if sep:
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0") or "0")
                if length:
                    await reader.readexactly(length)
                status, extra, payload = self.respond(method, target)
                body = json.dumps(payload).encode()
                close = headers.get("connection", "").lower() == "close"
                response = [f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}"]
                response += [f"{name}: {value}" for name, value in extra.items()]
                response += [
                    "Content-Type: application/json",
                    f"Content-Length: {len(body)}",
                    f"Connection: {'close' if close else 'keep-alive'}",
                ]
                writer.write(("\r\n".join(response) + "\r\n\r\n").encode("latin-1") + body)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()


def _day(city: str, n: int) -> dict[str, Any]:
    seed = zlib.crc32(f"{city.lower()}:{n}".encode())
    high = 8 + seed % 22
    return {"day": n + 1, "high_c": high, "low_c": high - 4 - seed % 7, "sky": SKIES[seed % len(SKIES)]}


@contextlib.asynccontextmanager
async def serving(limit: int = 5, window: float = 1.0, port: int = 0) -> AsyncIterator[Upstream]:
    """Run an :class:`Upstream` on 127.0.0.1 (a free port by default) in the current event loop."""
    upstream = Upstream(limit, window)
    await upstream.start(port=port)
    try:
        yield upstream
    finally:
        await upstream.close()


async def main(limit: int, port: int) -> None:
    async with serving(limit, port=port) as upstream:
        print(upstream.url, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=5, help="requests per second (default 5)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    args = parser.parse_args()
    asyncio.run(main(args.limit, args.port))
