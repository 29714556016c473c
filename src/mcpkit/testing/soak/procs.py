"""The processes a soak runs and hurts: a private redis-server and the worker processes.

Both are real child processes; faults are real signals. A worker restarts on the
port it had, so the proxy in front of it needs no change; Redis restarts on its
port and directory, with an append-only file fsynced on every write, so what it
acknowledged survives the restart (see ``docs/soak.md``, "acknowledged").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

__all__ = ["RedisProcess", "WorkerProcess", "describe_fds", "free_port", "proc_fds", "proc_rss_kib"]

SERVER = Path(__file__).resolve().parent / "server.py"


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def proc_rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` in KiB (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def proc_fds(pid: int) -> int:
    """How many file descriptors ``pid`` holds open (Linux ``/proc``)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


_TCP_STATES = {"01": "established", "06": "time-wait", "08": "close-wait", "0A": "listen"}


def describe_fds(pid: int, ports: dict[int, str], seen: dict[str, str] | None = None) -> dict[str, int]:
    """``pid``'s descriptors by kind: TCP sockets named by the port (``ports``: port -> name)
    and state, pipes, epoll, files. Says what a descriptor count above a baseline is made of.

    A TCP socket whose connection the peer reset is in no table of the kernel any more
    (state CLOSED) until its owner closes it. ``seen`` (socket inode -> kind, updated here
    on every call) remembers what such a socket was while it was listed: it is then
    counted as that kind with ``(peer gone)``, else as ``socket (other)``."""
    sockets: dict[str, str] = {}
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                cols = row.split()
                local, remote = int(cols[1].split(":")[1], 16), int(cols[2].split(":")[1], 16)
                state = _TCP_STATES.get(cols[3], cols[3])
                peer = ports.get(remote) or ports.get(local) or "other"
                sockets[cols[9]] = f"tcp {peer} {state}"
    with contextlib.suppress(OSError):
        for row in Path(f"/proc/{pid}/net/udp").read_text().splitlines()[1:]:
            cols = row.split()
            sockets[cols[9]] = f"udp {int(cols[1].split(':')[1], 16)}"
    with contextlib.suppress(OSError):
        for row in Path(f"/proc/{pid}/net/unix").read_text().splitlines()[1:]:
            cols = row.split()
            kind = {"0001": "stream", "0002": "dgram"}.get(cols[4], cols[4])
            sockets[cols[6]] = f"unix {kind} {cols[7] if len(cols) > 7 else '(unnamed)'}"
    if seen is not None:
        seen.update(
            (inode, kind.rsplit(" ", 1)[0]) for inode, kind in sockets.items() if kind.startswith("tcp")
        )
    kinds: dict[str, int] = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inode = target[8:-1]
            kind = sockets.get(inode) or (
                f"{seen[inode]} (peer gone)" if seen and inode in seen else "socket (other)"
            )
        elif target.startswith(("pipe:", "anon_inode:")):
            kind = target.split("[")[0].rstrip(":")
        else:
            kind = "file"
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:] if log.exists() else ""


async def _until(
    check: Callable[[], Awaitable[bool]], what: str, timeout: float, proc: subprocess.Popen[bytes], log: Path
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            tail = await asyncio.to_thread(_tail, log)
            raise RuntimeError(f"{what} exited with {proc.returncode} while starting:\n{tail}")
        if await check():
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not become ready within {timeout} s")
        await asyncio.sleep(0.05)


@dataclass
class RedisProcess:
    """A ``redis-server`` of the soak's own on ``port`` (AOF, ``appendfsync always``)."""

    port: int
    dir: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def ping(self) -> bool:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port), 1.0)
        except (OSError, TimeoutError):
            return False
        try:
            writer.write(b"PING\r\n")
            await writer.drain()
            return (await asyncio.wait_for(reader.readline(), 1.0)).startswith(b"+PONG")
        except (OSError, TimeoutError):
            return False
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def start(self, timeout: float = 15.0) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (the soak needs one of its own)")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        cmd = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir)]
        cmd += ["--save", "", "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no"]
        log = self.dir / f"redis-{self.starts}.log"
        with log.open("wb") as out:
            self.proc = subprocess.Popen(  # noqa: ASYNC220 - started once, returns at once
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        await _until(self.ping, "redis-server", timeout, self.proc, log)

    async def kill(self) -> None:
        """SIGKILL, and wait until it is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            await asyncio.to_thread(self.proc.wait, 10)


@dataclass
class WorkerProcess:
    """One ``mcpkit run soak/server.py --transport http`` process in ``slot``, on a fixed port."""

    slot: int
    port: int
    env: dict[str, str]
    logdir: Path
    proc: subprocess.Popen[bytes] | None = None
    #: pid of every incarnation, in order.
    pids: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def log(self) -> Path:
        return self.logdir / f"worker{self.slot}-{len(self.pids)}.log"

    async def ready(self) -> bool:
        try:
            async with httpx.AsyncClient(timeout=1.0, trust_env=False) as client:
                return (await client.get(f"{self.url}/readyz")).status_code == 200
        except httpx.HTTPError:
            return False

    async def until_ready(self, timeout: float = 30.0) -> None:
        """Until ``/readyz`` answers 200 (Redis reachable, not draining)."""
        assert self.proc is not None
        await _until(self.ready, f"worker {self.slot}", timeout, self.proc, self.log)

    async def start(self, timeout: float = 30.0) -> None:
        cmd = [sys.executable, "-m", "mcpkit", "run", str(SERVER), "--transport", "http"]
        cmd += ["--host", "127.0.0.1", "--port", str(self.port)]
        self.pids.append(0)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(  # noqa: ASYNC220 - started once, returns at once
                cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        self.pids[-1] = self.proc.pid
        await _until(self.ready, f"worker {self.slot}", timeout, self.proc, self.log)

    async def signal_and_wait(self, sig: signal.Signals, timeout: float) -> int | None:
        """Send ``sig``; the exit code, or None when it did not exit within ``timeout``."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(sig)
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(0.02)
        return self.proc.returncode

    async def stop(self) -> None:
        if await self.signal_and_wait(signal.SIGTERM, 10.0) is None and self.alive:
            await self.signal_and_wait(signal.SIGKILL, 10.0)

    def problems(self) -> list[str]:
        """Lines of every incarnation's log that say something went wrong inside the worker."""
        found: list[str] = []
        for log in sorted(self.logdir.glob(f"worker{self.slot}-*.log")):
            for line in log.read_text(errors="replace").splitlines():
                if line.startswith(("Traceback", "ERROR", "CRITICAL")):
                    found.append(f"{log.name}: {line}")
        return found
