"""mcpkit.transports.loop: the event loop every entry point runs on, and both loops for real.

uvloop is installed for the test suite (``make install`` installs the ``speed`` extra), so
both loops are exercised here: the choice itself, and real processes — a stdio server
and an HTTP server with mcpkit's client in each era — run once per loop, each side
reporting the loop it actually ran on.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcpkit.transports import loop as loop_mod
from mcpkit.transports.loop import LOOP_ENV, chosen_loop, loop_factory, run, running_loop, uvicorn_loop
from mcpkit.transports.stdio import open_process_channel

HERE = Path(__file__).resolve().parent
SERVER = HERE / "loop_server.py"
CLIENT = HERE / "loop_client.py"
LOOPS = ["asyncio", "uvloop"]


def test_uvloop_is_installed_for_the_suite() -> None:
    # Without it the uvloop half of this file could not run: make install installs mcpkit[speed].
    assert importlib.util.find_spec("uvloop") is not None, "uvloop missing: pip install -e '.[speed]'"


@pytest.mark.parametrize(
    ("setting", "expected"),
    [("", "uvloop"), ("auto", "uvloop"), (" UVLOOP ", "uvloop"), ("asyncio", "asyncio")],
)
def test_the_setting_decides(setting: str, expected: str) -> None:
    assert chosen_loop(setting) == expected
    assert uvicorn_loop(setting) == expected
    assert (loop_factory(setting) is None) == (expected == "asyncio")


def test_the_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOOP_ENV, "asyncio")
    assert chosen_loop() == "asyncio"
    monkeypatch.delenv(LOOP_ENV)
    assert chosen_loop() == "uvloop"


def test_an_unknown_setting_is_refused() -> None:
    with pytest.raises(
        ValueError, match=r"MCPKIT_LOOP='trio' is not a loop mcpkit knows: use auto, uvloop or asyncio"
    ):
        chosen_loop("trio")


def test_without_uvloop_auto_is_asyncio_and_uvloop_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_mod, "_uvloop_available", lambda: False)
    assert chosen_loop("auto") == "asyncio"
    assert loop_factory("auto") is None
    with pytest.raises(ValueError, match=r"uvloop is not installed here: pip install 'mcpkit\[speed\]'"):
        chosen_loop("uvloop")


@pytest.mark.parametrize("name", LOOPS)
def test_run_runs_on_the_chosen_loop(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(LOOP_ENV, name)

    async def main() -> tuple[str, str]:
        await asyncio.sleep(0)
        return running_loop(), type(asyncio.get_running_loop()).__module__

    seen, module = run(main())
    assert seen == name
    assert module.startswith(name)


def test_run_refusing_the_setting_closes_the_coroutine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOOP_ENV, "nope")

    async def main() -> None:
        raise AssertionError("must not start")

    coro = main()
    with pytest.raises(ValueError, match="MCPKIT_LOOP='nope'"):
        run(coro)
    assert coro.cr_frame is None  # closed: no "never awaited" warning follows the error


@pytest.mark.parametrize("name", LOOPS)
def test_the_client_pipe_can_ask_how_much_the_server_has_not_read(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # The stdio channel holds an answer until the peer has read its notifications, asking the
    # kernel how much it has not read. uvloop's subprocess pipes are socket pairs named "socket",
    # not "pipe": without finding them the probe is silently off on uvloop.
    monkeypatch.setenv(LOOP_ENV, name)

    async def main() -> tuple[str, int | None]:
        channel = await open_process_channel(sys.executable, [str(SERVER)])
        try:
            probe = channel._unread
            return running_loop(), None if probe is None else probe()
        finally:
            await channel.close()

    seen, unread = run(main())
    assert seen == name
    assert unread == 0


async def _client(loop: str, protocol: str, *target: str) -> dict[str, object]:
    env = {**os.environ, LOOP_ENV: loop}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CLIENT),
        protocol,
        *target,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 240)  # generous: CI machines can be busy
    assert proc.returncode == 0, err.decode(errors="replace")
    report: dict[str, object] = json.loads(out.decode().strip().splitlines()[-1])
    return report


def _check(report: dict[str, object], loop: str, protocol: str) -> None:
    assert report["client_loop"] == loop
    assert report["server_loop"] == loop
    assert report["modern"] is (protocol == "modern")
    assert report["echoes_ok"] is True
    assert report["steps"] == "3 steps"
    assert report["progress"] == [1, 2, 3]
    assert report["logs"] == ["3 steps"]


@pytest.mark.timeout(300)  # two processes and 72 calls: slow only on a machine that is very busy
@pytest.mark.parametrize("protocol", ["legacy", "modern"])
@pytest.mark.parametrize("loop", LOOPS)
async def test_stdio_server_and_client_on_each_loop(loop: str, protocol: str) -> None:
    # The client process runs on `loop` and spawns the server, which inherits MCPKIT_LOOP.
    report = await _client(loop, protocol, "--", sys.executable, str(SERVER))
    _check(report, loop, protocol)


@pytest.fixture(params=LOOPS)
async def http_server(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, str]]:
    """``mcpkit run loop_server.py --transport http`` on one loop: (loop, URL)."""
    loop: str = request.param
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mcpkit",
        "run",
        str(SERVER),
        "--transport",
        "http",
        "--port",
        "0",
        env={**os.environ, LOOP_ENV: loop},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        url = None
        while url is None:
            line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
            assert line, "the server exited before serving"
            match = re.search(r"Streamable HTTP\s+(http://\S+/mcp)", line)
            url = match.group(1) if match else None
        yield loop, url
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 15)
        except TimeoutError:
            proc.kill()
            await proc.wait()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_http_server_and_client_on_each_loop(http_server: tuple[str, str], protocol: str) -> None:
    loop, url = http_server
    _check(await _client(loop, protocol, url), loop, protocol)
