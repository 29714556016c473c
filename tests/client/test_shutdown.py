"""Client shutdown escalates: close stdin, then SIGTERM, then SIGKILL (stdio "Shutdown")."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

from mcpkit.transports.stdio import open_process_channel

STUBBORN = textwrap.dedent(
    """
    import signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.read()          # returns at EOF...
    while True:               # ...and then refuses to exit
        time.sleep(1)
    """
)

POLITE = "import sys; sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.read()"
TERMINABLE = "import sys, time; sys.stdout.write('ready\\n'); sys.stdout.flush(); time.sleep(60)"


async def _close_and_time(code: str, tmp_path: Path) -> tuple[float, int | None]:
    script = tmp_path / "s.py"
    script.write_text(code)
    channel = await open_process_channel(sys.executable, [str(script)], terminate_timeout=0.5)
    assert await channel.read() == [b"ready"]
    started = time.perf_counter()
    await channel.close()
    return time.perf_counter() - started, channel.returncode


async def test_polite_server_exits_on_stdin_eof(tmp_path: Path) -> None:
    took, code = await _close_and_time(POLITE, tmp_path)
    assert code == 0 and took < 0.5


async def test_server_ignoring_eof_gets_sigterm(tmp_path: Path) -> None:
    took, code = await _close_and_time(TERMINABLE, tmp_path)
    assert code == -15 and 0.5 <= took < 1.0


async def test_server_ignoring_sigterm_gets_sigkill(tmp_path: Path) -> None:
    took, code = await _close_and_time(STUBBORN, tmp_path)
    assert code == -9 and 1.0 <= took < 2.0
