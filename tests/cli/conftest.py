"""Fixtures for the ``mcpkit`` command line tests: every command runs as a real subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from cli_helpers import (
    EVERYTHING_PACKAGE,
    EVERYTHING_PREFIX,
    KITCHEN_SINK,
    MCPKIT,
    NODE22,
    OFFICIAL,
    ROOT,
    Result,
    Run,
    base_env,
)


@pytest.fixture
def mcpkit(tmp_path: Path) -> Run:
    """``mcpkit(*args, env=..., cwd=..., stdin=..., timeout=...)`` runs the CLI and returns a Result."""

    def run(
        *args: str,
        env: Mapping[str, str] | None = None,
        cwd: Path | str | None = None,
        stdin: str | None = None,
        timeout: float = 30,
    ) -> Result:
        proc = subprocess.run(
            [*MCPKIT, *args],
            capture_output=True,
            text=True,
            input=stdin,
            env=base_env(env),
            cwd=cwd or tmp_path,
            timeout=timeout,
        )
        return Result(list(args), proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def kitchen_sink() -> str:
    return str(KITCHEN_SINK)


@pytest.fixture
def official() -> list[str]:
    """The official-SDK server as a stdio command."""
    return [sys.executable, str(OFFICIAL)]


# -- the npm reference server ------------------------------------------------------------


def _node_version(binary: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        return tuple(int(p) for p in out.stdout.strip().lstrip("v").split("."))
    except ValueError:
        return None


def _find_node() -> str:
    candidates = [c for c in (shutil.which("node"), str(NODE22)) if c and Path(c).exists()]
    for candidate in candidates:
        version = _node_version(candidate)
        if version is not None and version >= (20,):
            return candidate
    pytest.fail(
        "the CLI tests need Node 20+ for @modelcontextprotocol/server-everything: none on PATH and no "
        f"{NODE22.relative_to(ROOT)} (install Node, or run `scripts/conformance.py --setup-only`)"
    )


@pytest.fixture(scope="session")
def everything() -> list[str]:
    """``[node, .../server-everything/dist/index.js, "stdio"]``, installed under .cache/ when absent."""
    node = _find_node()
    package_dir = EVERYTHING_PREFIX / "node_modules" / EVERYTHING_PACKAGE
    manifest = package_dir / "package.json"
    if not manifest.is_file():
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail(f"npm is needed to install {EVERYTHING_PACKAGE} into {EVERYTHING_PREFIX}")
        EVERYTHING_PREFIX.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env["PATH"] = f"{Path(node).parent}{os.pathsep}{env.get('PATH', '')}"
        flags = ["--no-audit", "--no-fund", "--no-update-notifier"]
        proc = subprocess.run(
            [npm, "install", "--prefix", str(EVERYTHING_PREFIX), *flags, EVERYTHING_PACKAGE],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        if proc.returncode != 0 or not manifest.is_file():
            pytest.fail(f"npm install {EVERYTHING_PACKAGE} failed:\n{proc.stdout}\n{proc.stderr}")
    bin_entry = json.loads(manifest.read_text())["bin"]
    script = bin_entry if isinstance(bin_entry, str) else next(iter(bin_entry.values()))
    return [node, str(package_dir / script), "stdio"]
