"""Helpers shared by the benchmark scripts in ``bench/``: /proc readers, statistics, machine facts, the
mcpkit source snapshot and the marked sections of ``bench/RESULTS.md``.

Every script under ``bench/`` is run as ``python bench/NAME.py`` (so ``bench/`` is on ``sys.path``)
and imports this module as ``common``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import importlib.util
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
SERVERS_DIR = BENCH_DIR / "servers"
RESULTS_PATH = BENCH_DIR / "RESULTS.md"
CLK_TCK = os.sysconf("SC_CLK_TCK")
TEXT = "hello, world"


class BenchFailure(Exception):
    """A server did not answer correctly (wrong answer, error response, EOF, crash or timeout)."""


# ---------------------------------------------------------------------------------------------- /proc


def proc_cpu_ticks(pid: int) -> int:
    """utime + stime of the whole process (all threads), in clock ticks."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return int(fields[11]) + int(fields[12])


def proc_status_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM in KiB."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


# ------------------------------------------------------------------------------------------ statistics


def median(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.median(values) if values else None


def fmt(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def ratio(num: float | None, den: float | None, digits: int = 2) -> str:
    return f"{num / den:.{digits}f}x" if num is not None and den else "n/a"


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def load_1min() -> float:
    return os.getloadavg()[0]


# --------------------------------------------------------------------------------------------- machine


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or "unknown"


def memory_total() -> str:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB RAM"
    return "RAM unknown"


def git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def machine_lines() -> list[str]:
    return [
        f"date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"command: `{shlex.join(sys.orig_argv)}` (cwd `{Path.cwd()}`)",
        f"machine: nproc {os.cpu_count()}, CPU {cpu_model()}, {memory_total()}, "
        f"{platform.system()} {platform.release()}",
        f"python: {platform.python_version()} ({sys.executable})",
        mcpkit_loop_line(),
    ]


# ------------------------------------------------------------------------------------ mcpkit's event loop


def mcpkit_loop() -> str:
    """The event loop mcpkit's processes pick (``mcpkit.transports.loop``): ``uvloop`` or ``asyncio``.

    Worked out here rather than imported: the parent may not import the mcpkit being measured.
    """
    setting = os.environ.get("MCPKIT_LOOP", "").strip().lower() or "auto"
    if setting == "asyncio":
        return "asyncio"
    return "uvloop" if setting == "uvloop" or importlib.util.find_spec("uvloop") else "asyncio"


def mcpkit_loop_line() -> str:
    setting = os.environ.get("MCPKIT_LOOP") or "auto"
    return f"mcpkit event loop: {mcpkit_loop()} (MCPKIT_LOOP={setting}; `--mcpkit-loop` to choose)"


class _SetMcpkitLoop(argparse.Action):
    """``--mcpkit-loop NAME``: sets ``MCPKIT_LOOP``, which every mcpkit process of the run inherits."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        os.environ["MCPKIT_LOOP"] = str(values)
        setattr(namespace, self.dest, values)


def add_loop_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mcpkit-loop",
        choices=("auto", "uvloop", "asyncio"),
        action=_SetMcpkitLoop,
        default=None,
        help="event loop of the mcpkit processes (sets MCPKIT_LOOP; default: the environment's, else auto)",
    )


# ---------------------------------------------------------------------------------- mcpkit source copy


@dataclass(frozen=True)
class McpkitSource:
    """Where the benchmark's mcpkit processes import mcpkit from."""

    env: dict[str, str]  # extra environment for every process that imports mcpkit
    note: str
    path: Path | None  # the snapshot directory (None: the live install)

    def cleanup(self) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)


def _with_pythonpath(path: str) -> dict[str, str]:
    existing = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": path if not existing else f"{path}{os.pathsep}{existing}"}


def mcpkit_source(snapshot: bool = True) -> McpkitSource:
    """A byte-compiled copy of ``src/mcpkit`` (default), or the live install.

    Other people edit ``src/`` while a benchmark runs, so by default every mcpkit process in one run imports
    the same copy, taken at the start. The copy is byte-compiled (``compileall``) because this environment
    sets ``PYTHONDONTWRITEBYTECODE=1``: without ``.pyc`` files every fresh process would compile mcpkit from
    source, which costs ~100 ms of start-up the installed peers (``mcp``, ``fastmcp``: byte-compiled by pip)
    do not pay.
    """
    if not snapshot:
        if importlib.util.find_spec("mcpkit") is not None:
            return McpkitSource(
                {}, "the live install in the venv (as it was when each process started)", None
            )
        src = str(ROOT / "src")
        return McpkitSource(_with_pythonpath(src), f"PYTHONPATH={src} (live)", None)
    dest = Path(tempfile.mkdtemp(prefix="mcpkit_bench_src_"))
    shutil.copytree(ROOT / "src" / "mcpkit", dest / "mcpkit", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(dest / "mcpkit")], check=True, capture_output=True
    )
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "src/mcpkit").splitlines()
    note = (
        f"a byte-compiled copy of `src/mcpkit` taken when the run started (git HEAD {head}"
        f"{f', plus {len(dirty)} uncommitted changes in src/mcpkit' if dirty else ', clean'})"
    )
    return McpkitSource(_with_pythonpath(str(dest)), note, dest)


# ------------------------------------------------------------------------------------------ RESULTS.md


def section_markers(name: str) -> tuple[str, str]:
    return (
        f"<!-- {name}: begin (generated by bench/{name}.py; replaced on every full run) -->",
        f"<!-- {name}: end -->",
    )


def wrap_section(name: str, body: str) -> str:
    start, end = section_markers(name)
    return f"{start}\n{body.rstrip()}\n{end}\n"


def write_section(name: str, body: str, path: Path = RESULTS_PATH) -> None:
    """Put one generated section into RESULTS.md: replace an earlier one, keep everything else."""
    section = wrap_section(name, body)
    text = path.read_text() if path.exists() else ""
    _, end_marker = section_markers(name)
    # Older files used a slightly different begin marker: match on the name only.
    match = re.search(
        rf"<!-- {re.escape(name)}: begin[^>]*-->.*?{re.escape(end_marker)}\n?", text, flags=re.S
    )
    if match:
        new = text[: match.start()] + section + text[match.end() :]
    else:
        new = (text.rstrip("\n") + "\n\n" if text.strip() else "") + section
    path.write_text(new)


def report_head(title: str, machine: Iterable[str], title_level: str = "#") -> list[str]:
    """A report's first lines: ``title`` as a heading of ``title_level``, then the machine facts as a list."""
    return [f"{title_level} {title}", "", *(f"- {item}" for item in machine), ""]


def failures_and_notes(
    h2: str, failures: Sequence[tuple[str, str]], notes: Sequence[tuple[str, str]]
) -> list[str]:
    """The "Failures and notes" section of a report (no lines when there is neither): ``(what, text)``
    pairs, each failure by its first line, each note once per ``what``."""
    if not failures and not notes:
        return []
    lines = [f"{h2} Failures and notes", ""]
    for what, failure in failures:
        lines.append(f"- **{what} FAILED** {failure.splitlines()[0]}")
    seen: set[tuple[str, str]] = set()
    for what, note in notes:
        if (what, note) not in seen:
            seen.add((what, note))
            lines.append(f"- {what}: {note}")
    lines.append("")
    return lines


def versions_line(names: Iterable[str], versions: Mapping[str, str] | None = None) -> str:
    got = versions or {}
    return ", ".join(f"{n} {got.get(n) or package_version(n)}" for n in names)


def finish(report: str, failed: bool, *, write: bool, section: str, label: str) -> int:
    """Print a phase's report; write its RESULTS.md section unless it failed. Returns the exit code."""
    print(report)
    if failed:
        print("\nFAILED; RESULTS.md not written.", file=sys.stderr)
        return 1
    if write:
        write_section(section, report)
        print(f"\nwrote the {label} section of {RESULTS_PATH}", file=sys.stderr)
    return 0


def add_run_options(parser: argparse.ArgumentParser, *, install: bool = False) -> None:
    """The options every phase script takes: --seed, --no-write, --live-source (and --no-install)."""
    parser.add_argument("--seed", type=int, default=None, help="shuffle seed (default: random)")
    if install:
        parser.add_argument("--no-install", action="store_true", help="do not install missing peers")
    parser.add_argument("--no-write", action="store_true", help="do not write bench/RESULTS.md")
    parser.add_argument(
        "--live-source", action="store_true", help="import mcpkit as installed, not from a snapshot of src/"
    )
    add_loop_option(parser)
