"""The faults a soak injects, each with a probe: a request known to be in flight when it hits.

The load alone may or may not have a request on the victim at the moment of a
fault; a probe makes sure one is, and states what must become of it:

- **SIGKILL of worker 1**: an acknowledged 2025-11-25 request running there (its
  POST sent straight to worker 1, two progress events read). Resuming it through
  the proxy must give the progress sent before the kill exactly once, in order,
  then the documented error "the worker serving this request stopped before
  answering" (``orphaned``). Worker 1 is restarted on its port.
- **Redis restart** (SIGKILL of the private redis-server, restarted on its port and
  append-only file): an acknowledged request running through the proxy must end
  ``ok``: every progress event exactly once and the result, resuming as needed.
- **SIGTERM of worker 1**: it drains; a request running there must end ``ok``
  (drain lets in-flight requests finish); it must exit 0. Then it is restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import time
from dataclasses import dataclass, field
from functools import partial

import httpx

from ..proxy import RoundRobinProxy
from .ops import LegacySession, run_op
from .procs import RedisProcess, WorkerProcess, describe_fds, proc_fds, proc_rss_kib
from .record import Recorder

__all__ = ["FAULTS", "Deployment", "inject_faults"]

FAULTS = ("SIGKILL worker", "Redis restart", "SIGTERM drain")
#: What each fault's probe request must end as.
PROBE_OUTCOME = {"SIGKILL worker": "orphaned", "Redis restart": "ok", "SIGTERM drain": "ok"}


@dataclass
class Deployment:
    redis: RedisProcess
    workers: list[WorkerProcess]
    proxy: RoundRobinProxy
    #: Worker 0's TCP sockets seen so far: inode -> kind.
    seen: dict[str, str] = field(default_factory=dict)

    def usage(self) -> tuple[int, int]:
        """Worker 0's (RSS KiB, open descriptors)."""
        pid = self.workers[0].pid
        return proc_rss_kib(pid), proc_fds(pid)

    def fds(self) -> dict[str, int]:
        """Worker 0's descriptors by kind (see :func:`describe_fds`)."""
        ports = {self.redis.port: "redis", self.workers[0].port: "client"}
        return describe_fds(self.workers[0].pid, ports, self.seen)

    async def watch_fds(self, stop: asyncio.Event) -> None:
        """Look at worker 0's sockets twice a second until ``stop``, so that one whose peer
        is gone can still be told apart (a Redis connection from a client's) at the end."""
        while not stop.is_set():
            with contextlib.suppress(OSError):
                self.fds()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    await stop.wait()


async def _hurt(d: Deployment, rec: Recorder, kind: str) -> None:
    victim = d.workers[1]
    if kind == "SIGKILL worker":
        window = rec.fault(kind, f"worker 1 pid {victim.pid}")
        code = await victim.signal_and_wait(signal.SIGKILL, 10)
        window.detail += f" exited {code}"
        await victim.start()
    elif kind == "Redis restart":
        window = rec.fault(kind, f"SIGKILL redis-server pid {d.redis.proc.pid if d.redis.proc else '?'}")
        await d.redis.kill()
        await d.redis.start()
        for worker in d.workers:
            await worker.until_ready()
    else:
        window = rec.fault(kind, f"worker 1 pid {victim.pid}")
        code = await victim.signal_and_wait(signal.SIGTERM, 45)
        window.detail += f" drained, exited {code}"
        if code != 0:
            rec.violation("SIGTERM drain", window.start, f"worker 1 exited {code} after SIGTERM")
        if code is None:
            await victim.signal_and_wait(signal.SIGKILL, 10)
        await victim.start()
    window.end = time.monotonic()


async def inject_faults(d: Deployment, rec: Recorder, duration: float, gap: float) -> None:
    """The faults in turn, ``gap`` seconds of load between one's recovery and the next,
    until ``duration`` is over, but at least one of each (a loaded machine restarts slowly)."""
    end = time.monotonic() + duration
    ids = itertools.count(1_000_000_000)
    async with httpx.AsyncClient(base_url=d.proxy.url, timeout=20.0, trust_env=False) as client:
        session = LegacySession(client, rec)
        try:
            for done, kind in enumerate(itertools.cycle(FAULTS)):
                await asyncio.sleep(gap / 2)
                if done >= len(FAULTS) and time.monotonic() + gap / 2 > end:
                    return
                while session.id is None:
                    await run_op(rec, "legacy initialize", session.open)
                await _probed(d, rec, session, kind, next(ids))
                await asyncio.sleep(gap / 2)
        finally:
            await session.close()


async def _probed(d: Deployment, rec: Recorder, session: LegacySession, kind: str, rid: int) -> None:
    """``kind`` injected while a probe request is in flight; the probe's end checked."""
    started = asyncio.Event()
    # Long enough to still run when the fault hits (the kill must find it unfinished).
    n, delay = (80, 0.1) if kind == "SIGKILL worker" else (30, 0.1)
    url = "/mcp" if kind == "Redis restart" else f"{d.workers[1].url}/mcp"
    op = f"probe: in flight during {kind}"
    probe = asyncio.create_task(
        run_op(rec, op, partial(session.steps, rid, n, delay=delay, url=url, started=started))
    )
    since = time.monotonic()
    try:
        async with asyncio.timeout(20):
            await asyncio.wait(
                [probe, asyncio.ensure_future(started.wait())], return_when=asyncio.FIRST_COMPLETED
            )
    except TimeoutError:
        pass
    if not started.is_set():
        probe.cancel()
        rec.violation(
            op, since, f"the probe did not start ({'ended' if probe.done() else 'no progress in 20 s'})"
        )
        await _hurt(d, rec, kind)
        return
    await _hurt(d, rec, kind)
    outcome = await probe
    if outcome != PROBE_OUTCOME[kind]:
        rec.violation(op, since, f"ended {outcome or 'in a violation'}, not {PROBE_OUTCOME[kind]}")
