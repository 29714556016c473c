"""Which event loop mcpkit runs on: uvloop when it is installed, else asyncio's own.

Every entry point that starts an event loop — ``MCPServer.run()`` (stdio and HTTP),
the reference servers, ``mcpkit`` CLI commands, the Inspector, multi-worker HTTP —
goes through :func:`run` (or, for uvicorn's worker processes, :func:`uvicorn_loop`),
so one setting decides the loop for all of them.

Why: a sequential stdio round trip spends a large share of its instructions in
the loop turn itself (asyncio's selector loop is Python code; uvloop's is libuv
in C). ``pip install 'mcpkit[speed]'`` installs uvloop and mcpkit picks it up.

The ``MCPKIT_LOOP`` environment variable overrides the choice:

* ``auto`` (or unset): uvloop if it can be imported, else asyncio;
* ``uvloop``: uvloop, and an error if it is not installed;
* ``asyncio``: asyncio's default loop, even with uvloop installed.

Code that is already inside a running loop (a test, an application embedding
a server) is not affected: mcpkit's transports work on either loop.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

__all__ = [
    "LOOP_ENV",
    "SPEED_EXTRA_HINT",
    "LoopName",
    "chosen_loop",
    "loop_factory",
    "run",
    "running_loop",
    "uvicorn_loop",
]

T = TypeVar("T")
LoopName = Literal["uvloop", "asyncio"]

#: The environment variable that forces a loop: ``auto`` (default), ``uvloop`` or ``asyncio``.
LOOP_ENV = "MCPKIT_LOOP"
_CHOICES = ("auto", "uvloop", "asyncio")
#: Where to get uvloop, for the error when it is asked for and missing.
SPEED_EXTRA_HINT = "pip install 'mcpkit[speed]'"


def _uvloop_available() -> bool:
    # uvloop does not build on Windows; find_spec does not import it (no start-up cost here).
    return sys.platform != "win32" and importlib.util.find_spec("uvloop") is not None


def chosen_loop(setting: str | None = None) -> LoopName:
    """The loop :func:`run` would start: ``"uvloop"`` or ``"asyncio"``.

    ``setting`` is a value of ``MCPKIT_LOOP`` (default: the environment's). A value
    other than ``auto``, ``uvloop`` or ``asyncio`` — or ``uvloop`` where uvloop is not
    installed — raises :class:`ValueError` saying so, rather than quietly running
    on another loop than the one asked for.
    """
    raw = os.environ.get(LOOP_ENV, "") if setting is None else setting
    value = raw.strip().lower() or "auto"
    if value not in _CHOICES:
        raise ValueError(f"{LOOP_ENV}={raw!r} is not a loop mcpkit knows: use auto, uvloop or asyncio")
    if value == "asyncio":
        return "asyncio"
    available = _uvloop_available()
    if value == "uvloop" and not available:
        raise ValueError(f"{LOOP_ENV}=uvloop but uvloop is not installed here: {SPEED_EXTRA_HINT}")
    return "uvloop" if available else "asyncio"


def loop_factory(setting: str | None = None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The ``loop_factory`` for :class:`asyncio.Runner`: uvloop's, or None for asyncio's default."""
    if chosen_loop(setting) == "asyncio":
        return None
    import uvloop

    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(main: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """Run ``main`` to completion on the chosen loop (like :func:`asyncio.run`) and return its result.

    On asyncio's loop this is exactly :func:`asyncio.run`: the same runner, the same
    shutdown of async generators and the default executor.
    """
    try:
        factory = loop_factory()
    except BaseException:
        main.close()  # never started: no "coroutine was never awaited" warning on top of the error
        raise
    with asyncio.Runner(debug=debug, loop_factory=factory) as runner:
        return runner.run(main)


def uvicorn_loop(setting: str | None = None) -> LoopName:
    """uvicorn's ``loop=`` setting for the chosen loop, for servers uvicorn starts itself
    (multi-worker HTTP: each worker process runs its own loop)."""
    return chosen_loop(setting)


def running_loop() -> LoopName:
    """Which loop the running code is on: ``"uvloop"`` or ``"asyncio"`` (for diagnostics)."""
    module = type(asyncio.get_running_loop()).__module__
    return "uvloop" if module.startswith("uvloop") else "asyncio"
