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
import functools
import importlib.util
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

__all__ = [
    "LOOP_ENV",
    "SPEED_EXTRA_HINT",
    "LoopName",
    "add_signal_handler",
    "chosen_loop",
    "loop_factory",
    "reset_signals_in_forked_children",
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


def add_signal_handler(sig: int, callback: Callable[..., object], *args: Any) -> bool:
    """``add_signal_handler`` on the running loop; whether it is set (False where the loop
    cannot have one: Windows, a thread other than the main one). The children this process
    forks start without it (:func:`reset_signals_in_forked_children`)."""
    try:
        asyncio.get_running_loop().add_signal_handler(sig, callback, *args)
    except (NotImplementedError, RuntimeError, ValueError):
        return False
    reset_signals_in_forked_children()
    return True


#: Where the signal handling of a serving process comes from: the loops, uvicorn, mcpkit.
_SERVING_MODULES = ("asyncio.", "uvloop.", "uvicorn.", "mcpkit.")
_fork_hook = False


def reset_signals_in_forked_children() -> None:
    """Have every child this process forks from now on start without the server's signal handling.

    A forked child (a ``multiprocessing`` worker with the ``fork`` start method, which a
    tool may start) inherits the serving process's signal handlers and its loop's wakeup
    socket. A SIGTERM sent to that child (``Pool.terminate()``) was then written into the
    parent's loop, which shut the server down, while the child itself ignored it (asyncio's
    handler there does nothing; uvicorn's sets a flag nobody reads), so ``terminate()``
    waited for it forever. In the child, the wakeup socket is dropped (as Python 3.12's
    asyncio does; 3.11's does not), and SIGTERM and SIGINT, when their handlers are the
    serving process's, get their defaults back (ending the process; ``KeyboardInterrupt``).
    A handler the application set itself is left as it is.
    """
    global _fork_hook
    if not _fork_hook and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_forget_serving_signals)
        _fork_hook = True


def _forget_serving_signals() -> None:
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:  # (not the main thread: nothing was set here)
        pass
    for sig, default in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
        if _module_of(signal.getsignal(sig)).startswith(_SERVING_MODULES):
            signal.signal(sig, default)


def _module_of(handler: object) -> str:
    """The module a signal handler was defined in (through partials and bound methods)."""
    while isinstance(handler, functools.partial):
        handler = handler.func
    handler = getattr(handler, "__func__", handler)
    module = getattr(handler, "__module__", None)
    return module if isinstance(module, str) else ""
