"""A server whose tool forks (``multiprocessing`` with the ``fork`` start method).

The server's loop handles SIGTERM (``add_signal_handler``): the C-level handler writes the
signal's number to the loop's wakeup socket, and the Python-level one is the loop's. A
forked child inherits both, so before mcpkit undid them in forked children (Python 3.12's
asyncio resets the wakeup socket itself; 3.11's does not), a SIGTERM sent to a worker
(``Pool.terminate()``) reached the *server's* loop, which shut down, and on asyncio's loop
the worker itself ignored the signal (the loop's handler there does nothing).
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import pytest

from _wait import eventually
from mcpkit import Client

SERVER = '''
import multiprocessing
import sys
import time

from mcpkit import MCPServer

server = MCPServer("forks")


def busy(started):
    started.set()
    time.sleep(60)


@server.tool()
def terminate_a_busy_worker() -> str:
    """Start a forked pool worker, wait until it is busy, then terminate the pool (SIGTERM)."""
    context = multiprocessing.get_context("fork")
    started = context.Manager().Event()
    pool = context.Pool(1)
    pool.apply_async(busy, (started,))
    if not started.wait(30):
        return "the worker never started"
    begun = time.monotonic()
    pool.terminate()  # SIGTERM to the busy worker, then joins it
    pool.join()
    return f"terminated in {time.monotonic() - begun:.1f} s"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        server.run("http", port=int(sys.argv[1]))
    else:
        server.run()
'''


async def terminate_three_busy_workers(client: Client) -> None:
    for _ in range(3):
        result = await asyncio.wait_for(client.call_tool("terminate_a_busy_worker", {}), 60)
        text = result.content[0].text  # type: ignore[union-attr]
        assert not result.is_error, text
        # The worker died of the signal (not after its 60 s sleep).
        assert text.startswith("terminated in ") and float(text.split()[2]) < 20, text
    # And the server is still serving.
    assert [tool.name for tool in await client.list_tools()] == ["terminate_a_busy_worker"]


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
async def test_sigterm_to_a_forked_worker_stays_in_the_worker_stdio(tmp_path: Path, loop: str) -> None:
    path = tmp_path / "forks.py"
    path.write_text(SERVER)
    env = {**os.environ, "MCPKIT_LOOP": loop}
    async with Client([sys.executable, str(path)], env=env, timeout=60) as client:
        await terminate_three_busy_workers(client)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
async def test_sigterm_to_a_forked_worker_stays_in_the_worker_http(tmp_path: Path, loop: str) -> None:
    # uvicorn's SIGTERM handler (a flag for its serve loop) was the one the worker inherited here.
    path = tmp_path / "forks.py"
    path.write_text(SERVER)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(path), str(port), env={**os.environ, "MCPKIT_LOOP": loop}
    )
    try:

        def listening() -> bool:
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", port)) == 0

        await eventually(listening, timeout=30)
        async with Client(f"http://127.0.0.1:{port}/mcp", timeout=60) as client:
            await terminate_three_busy_workers(client)
    finally:
        process.terminate()
        try:
            code = await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
    assert code == 0
