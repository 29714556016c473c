"""The soak itself: start the deployment, load it in both eras, hurt it, check the invariants.

The deployment: a private ``redis-server`` (AOF, fsync always), two workers of
``soak/server.py`` sharing it (one key prefix per run, one ``requestState``
secret), and a :class:`~mcpkit.testing.proxy.RoundRobinProxy` in front that sends
every request to the next worker. Phases:

1. *warm-up* (no faults): the same load, so pools, caches and arenas reach their
   working size; then the load stops and worker 0's RSS and open descriptors are
   read once it is idle (the baseline);
2. *soak*: the load, with faults in turn, ``fault_gap`` seconds apart (see faults.py):
   SIGKILL of worker 1 (restarted on its port), SIGKILL of Redis (restarted on its
   port), SIGTERM of worker 1 (it drains; then restarted). Worker 0 is never hurt:
   it is the survivor whose resources are compared with the baseline;
3. *settle*: the load stops, every client closes; once worker 0 is idle again its
   RSS and descriptors are read and compared.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import platform
import random
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import httpx

from ..proxy import RoundRobinProxy
from .faults import FAULTS, Deployment, inject_faults
from .leftovers import describe_leftovers
from .ops import LegacySession, modern_echo, modern_read, modern_steps, run_op
from .procs import RedisProcess, WorkerProcess, free_port, proc_rss_kib
from .record import Recorder
from .streams import LegacyWatcher, ModernListener, OldSSEClient, slow_body

__all__ = ["SoakConfig", "SoakReport", "run_soak"]

#: Worker 0 may end this much above its baseline RSS: CPython's allocator keeps
#: freed arenas and the heap does not shrink to the byte; mcpkit's own growth target
#: is < 5 MiB per 100,000 calls (bench/growth_bench.py). A leak of 1 KiB per request
#: passes it after about 8,000 requests; smaller leaks need a longer soak.
RSS_TOLERANCE_KIB = 8 * 1024
#: Descriptors other than Redis connections (the listening socket, epoll, pipes,
#: files, client connections) must be back to their baseline exactly: once every
#: client has closed, a connection still open is a leak. Redis connections are a
#: pool (redis-py's, unbounded) that keeps as many idle connections as were ever
#: busy at once: each request in flight holds at most two (a command, and its
#: stream's blocking read), so the pool may end up to twice the clients of the mix
#: above its baseline; more than that is a leak. An idle pooled connection whose
#: Redis was restarted stays open, its peer gone, until redis-py next takes it
#: from the pool (and reconnects): it is still one of the pool's.
REDIS_PER_CLIENT = 2
#: The long-lived clients besides the request loops, counted by their connections
#: (watcher: GET + touch; listener: listen + touch; 2024-11-05: stream + POST; slow body).
LONG_LIVED_CONNECTIONS = 7


@dataclass
class SoakConfig:
    """One soak run: ``duration`` seconds of faults, after ``warmup`` seconds without."""

    duration: float = 600.0
    warmup: float = 8.0
    fault_gap: float = 12.0
    out: Path = Path("build/soak")
    modern_clients: int = 3
    legacy_clients: int = 3
    seed: int | None = None


@dataclass
class SoakReport:
    """A soak's verdict: ``ok`` when every invariant held; ``markdown`` is the report."""

    ok: bool
    markdown: str
    violations: list[str] = field(default_factory=list)
    #: (invariant, held, what was measured), as in the report's first table.
    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    #: What the soak phase recorded (outcomes per operation, faults, resumptions).
    recorder: Recorder = field(default_factory=Recorder)


#: Each request loop runs these in a fresh random order, round after round: the mix
#: is exact, and every kind of operation comes at least once per round.
MODERN_MIX = ("echo",) * 4 + ("read",) * 2 + ("progress",) * 2 + ("slow reader", "leaves")
LEGACY_MIX = ("echo",) * 3 + ("read",) * 2 + ("progress",) * 3 + ("slow reader", "leaves")


def _rounds(mix: tuple[str, ...]) -> Iterator[str]:
    while True:
        yield from random.sample(mix, len(mix))


async def _vu_modern(url: str, rec: Recorder, stop: asyncio.Event, ids: itertools.count[int]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=20.0, trust_env=False) as client:
        for kind in _rounds(MODERN_MIX):
            if stop.is_set():
                return
            n = next(ids)
            attempt: Callable[[], Awaitable[str]]
            if kind == "echo":
                op, attempt = "modern echo", partial(modern_echo, client, n)
            elif kind == "read":
                op, attempt = "modern resources/read", partial(modern_read, client, n)
            else:
                leave, slow = kind == "leaves", kind == "slow reader"
                op = "modern progress" + ("" if kind == "progress" else f" ({kind})")
                attempt = partial(modern_steps, client, n, 6, leave=leave, slow=slow)
            await run_op(rec, op, attempt)
            await asyncio.sleep(random.uniform(0, 0.02))


async def _vu_legacy(url: str, rec: Recorder, stop: asyncio.Event, ids: itertools.count[int]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=20.0, trust_env=False) as client:
        session = LegacySession(client, rec)
        try:
            for kind in _rounds(LEGACY_MIX):
                if stop.is_set():
                    return
                while session.id is None and not stop.is_set():
                    if await run_op(rec, "legacy initialize", session.open) != "ok":
                        await asyncio.sleep(0.2)
                n = next(ids)
                attempt: Callable[[], Awaitable[str]]
                if kind == "echo":
                    op, attempt = "legacy echo", partial(session.echo, n)
                elif kind == "read":
                    op, attempt = "legacy resources/read", partial(session.read, n)
                else:
                    leave, slow = kind == "leaves", kind == "slow reader"
                    op = "legacy progress" + (
                        "" if kind == "progress" else f" ({kind}, resumes)" if leave else f" ({kind})"
                    )
                    attempt = partial(session.steps, n, 8, leave=leave, slow=slow)
                await run_op(rec, op, attempt)
                await asyncio.sleep(random.uniform(0, 0.02))
        finally:
            with contextlib.suppress(Exception):
                await session.close()


def _backend_of(proxy: RoundRobinProxy, rid: int) -> int | None:
    """The worker the proxy sent the recent 2024-11-05 POST of request ``rid`` to."""
    for entry in reversed(proxy.log[-500:]):
        if entry.method == "POST" and not entry.path.startswith("/mcp"):
            with contextlib.suppress(ValueError):
                if json.loads(entry.body).get("id") == rid:
                    return entry.backend
    return None


async def _slow_bodies(d: Deployment, rec: Recorder, stop: asyncio.Event, ids: itertools.count[int]) -> None:
    for slot in itertools.cycle(range(len(d.workers))):
        if stop.is_set():
            return
        worker = d.workers[slot]
        if worker.alive:
            await run_op(rec, "slow request body (direct)", partial(slow_body, worker.port, next(ids)))
        await asyncio.sleep(0.3)


async def _load(d: Deployment, rec: Recorder, cfg: SoakConfig, stop: asyncio.Event, run_id: str) -> None:
    """Every client of the mix until ``stop``; then waits (bounded) for all to end."""
    url = d.proxy.url
    ids = itertools.count(1)
    clients = [httpx.AsyncClient(base_url=url, timeout=20.0, trust_env=False) for _ in range(3)]
    tasks = [asyncio.create_task(_vu_modern(url, rec, stop, ids)) for _ in range(cfg.modern_clients)]
    tasks += [asyncio.create_task(_vu_legacy(url, rec, stop, ids)) for _ in range(cfg.legacy_clients)]
    tasks.append(
        asyncio.create_task(
            LegacyWatcher(clients[0], rec, f"soak://watched/legacy-{run_id}").run(stop), name="watcher"
        )
    )
    tasks.append(
        asyncio.create_task(
            ModernListener(clients[1], rec, f"soak://watched/modern-{run_id}").run(stop), name="listener"
        )
    )
    old_sse = OldSSEClient(clients[2], rec, partial(_backend_of, d.proxy))
    tasks.append(asyncio.create_task(old_sse.run(stop), name="2024-11-05 client"))
    tasks.append(asyncio.create_task(_slow_bodies(d, rec, stop, ids)))
    try:
        await stop.wait()
        done, left = await asyncio.wait(tasks, timeout=60)
        for task in left:
            task.cancel()
        if left:
            rec.violation("the load", rec.started, f"{len(left)} clients still busy 60 s after the end")
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                rec.violation("the load", rec.started, f"{task.get_name()} crashed: {task.exception()!r}")
    finally:
        for client in clients:
            await client.aclose()


async def _idle_usage(d: Deployment, started: float) -> tuple[tuple[int, int], dict[str, int], list[str]]:
    """Worker 0 once its descriptors held still for 2 s (at most 30 s): (RSS KiB, descriptors),
    the same descriptors by kind, and its client connections still open with who holds them.

    The count is the sum of the kinds of one reading: a count and a breakdown read apart
    disagree whenever a descriptor comes or goes between them (a pooled Redis connection
    whose Redis was restarted is closed when redis-py next takes it), and the check
    subtracts one from the other."""
    deadline, last, since = time.monotonic() + 30, -1, time.monotonic()
    while True:
        kinds = d.fds()
        fds, now = sum(kinds.values()), time.monotonic()
        if fds != last:
            last, since = fds, now
        elif now - since >= 2.0:
            break
        if now >= deadline:
            break
        await asyncio.sleep(0.1)
    return (proc_rss_kib(d.workers[0].pid), fds), kinds, _leftovers(d, started)


async def _phase(
    d: Deployment, rec: Recorder, cfg: SoakConfig, seconds: float, run_id: str, faults: bool
) -> None:
    stop = asyncio.Event()
    load = asyncio.create_task(_load(d, rec, cfg, stop, run_id))
    watch = asyncio.create_task(d.watch_fds(stop))
    try:
        await asyncio.sleep(seconds)
        if faults:
            await inject_faults(d, rec, cfg.duration, cfg.fault_gap)
    finally:
        stop.set()
        await load
        await watch


async def run_soak(cfg: SoakConfig) -> SoakReport:
    """Run one soak; the report (markdown) is also written to ``cfg.out/soak.md``."""
    if cfg.seed is not None:
        random.seed(cfg.seed)
    cfg.out.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex[:12]
    redis = RedisProcess(free_port(), cfg.out / f"redis-{run_id}")
    await redis.start()
    env = dict(os.environ)
    env.update(
        MCPKIT_REDIS_URL=redis.url,
        MCPKIT_REDIS_PREFIX=f"soak-{run_id}:",
        MCPKIT_STATE_SECRET=secrets.token_hex(32),
        PYTHONUNBUFFERED="1",
    )
    workers = [WorkerProcess(slot, free_port(), env, cfg.out) for slot in range(2)]
    warm, rec = Recorder(), Recorder()
    try:
        await asyncio.gather(*(w.start() for w in workers))
        async with RoundRobinProxy([w.url for w in workers]) as proxy:
            d = Deployment(redis, workers, proxy)
            await _phase(d, warm, cfg, cfg.warmup, f"warm-{run_id}", faults=False)
            base, base_fds, base_open = await _idle_usage(d, warm.started)
            rec.started = time.monotonic()
            await _phase(d, rec, cfg, 0, run_id, faults=True)
            soaked = time.monotonic() - rec.started
            end, end_fds, end_open = await _idle_usage(d, rec.started)
            pending = warm.pending + rec.pending
    finally:
        for worker in workers:
            await worker.stop()
        await redis.kill()
    problems = [line for w in workers for line in w.problems()]
    report = _report(cfg, warm, rec, soaked, (base, base_fds), (end, end_fds), pending, problems)
    if base_open or end_open:
        report.markdown += _leftover_section(base_open, end_open)
    (cfg.out / "soak.md").write_text(report.markdown)
    return report


def _leftovers(d: Deployment, started: float) -> list[str]:
    """Worker 0's client connections still open, each with who holds its other end."""
    others = [w.pid for w in d.workers if w.alive]
    if d.redis.proc is not None:
        others.append(d.redis.proc.pid)
    try:
        return describe_leftovers(d.workers[0].pid, d.workers[0].port, d.proxy, others, started)
    except OSError as exc:
        return [f"(not found: {exc!r})"]


def _leftover_section(base: list[str], end: list[str]) -> str:
    rows = ["", "## Worker 0's client connections still open (once idle)", ""]
    rows += ["At the baseline:", "", *(f"- {line}" for line in base or ["none"]), ""]
    rows += ["At the end:", "", *(f"- {line}" for line in end or ["none"]), ""]
    return "\n".join(rows)


def _fd_table(base: dict[str, int], end: dict[str, int]) -> str:
    rows = ["", "Worker 0's descriptors by kind:", "", "| kind | baseline | end |", "|---|--:|--:|"]
    rows += [f"| {k} | {base.get(k, 0)} | {end.get(k, 0)} |" for k in sorted(set(base) | set(end))]
    return "\n".join(rows) + "\n"


def _report(
    cfg: SoakConfig,
    warm: Recorder,
    rec: Recorder,
    soaked: float,
    base_usage: tuple[tuple[int, int], dict[str, int]],
    end_usage: tuple[tuple[int, int], dict[str, int]],
    pending: int,
    problems: list[str],
) -> SoakReport:
    violations = [f"(warm-up) {v}" for v in warm.violations] + rec.violations
    ops = sum(sum(c.values()) for c in rec.counts.values())
    resumed = rec.resume["streams resumed"]
    kinds = ", ".join(f"{sum(1 for w in rec.faults if w.kind == k)} {k}" for k in FAULTS)
    (base, base_fds), (end, end_fds) = base_usage, end_usage
    rss_ok = end[0] - base[0] <= RSS_TOLERANCE_KIB
    redis_base, redis_end = (
        sum(v for k, v in fds.items() if k.startswith("tcp redis")) for fds in (base_fds, end_fds)
    )
    slack = REDIS_PER_CLIENT * (cfg.modern_clients + cfg.legacy_clients + LONG_LIVED_CONNECTIONS)
    fd_ok = end[1] - redis_end <= base[1] - redis_base and redis_end <= redis_base + slack
    checks = [
        (
            "every request answered exactly once, or its loss explained by a fault in progress",
            not violations,
            f"{ops} operations, {len(violations)} violations",
        ),
        (
            "acknowledged events delivered exactly once, in order, to resuming clients",
            not any("twice" in v or "exactly once" in v or "changes heard" in v for v in violations),
            f"{resumed} request streams resumed ({rec.resume['events on resumed streams']} events), "
            f"GET stream resumed {rec.resume['GET stream reconnects']} times "
            f"({rec.resume['GET stream events']} events)",
        ),
        ("no request left pending at the end", pending == 0, f"{pending} pending"),
        (
            f"worker 0 RSS back to baseline (+{RSS_TOLERANCE_KIB // 1024} MiB)",
            rss_ok,
            f"{base[0] / 1024:.1f} -> {end[0] / 1024:.1f} MiB",
        ),
        (
            f"worker 0 descriptors back to baseline (Redis pool: +{slack} at most)",
            fd_ok,
            f"{base[1] - redis_base} -> {end[1] - redis_end} (+ Redis {redis_base} -> {redis_end})",
        ),
    ]
    lines = [
        f"# mcpkit soak: {soaked:.0f} s under faults (after {cfg.warmup:.0f} s of warm-up)",
        "",
        f"Two workers on a private Redis behind a round-robin proxy; {cfg.modern_clients} 2026-07-28 and "
        f"{cfg.legacy_clients} 2025-11-25 request loops, a legacy GET-stream watcher, a 2026-07-28 listener, "
        f"a 2024-11-05 HTTP+SSE client and slow request bodies. Faults: {kinds}. "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs.",
        "",
        "## Invariants",
        "",
        "| invariant | holds | measured |",
        "|---|---|---|",
        *(f"| {name} | {'yes' if ok else '**NO**'} | {detail} |" for name, ok, detail in checks),
        "",
        "## Operations",
        "",
        *rec.op_table(),
        "",
        "## Faults",
        "",
        *rec.fault_table(),
        "",
        "Resumptions: " + ", ".join(f"{k} {v}" for k, v in sorted(rec.resume.items())) + ".",
        "",
    ]
    if violations:
        lines += ["## Violations", "", *(f"- {v}" for v in violations[:50]), ""]
    if problems:
        lines += ["## Errors in the workers' logs (during faults some are expected)", ""]
        lines += [f"- `{p}`" for p in problems[:20]] + [""]
    lines.append(_fd_table(base_fds, end_fds))
    return SoakReport(all(ok for _, ok, _ in checks), "\n".join(lines), violations, checks, rec)
