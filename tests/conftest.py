from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVERS = Path(__file__).resolve().parent / "servers"


@pytest.fixture(autouse=True, scope="session")
def _state_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """mcpkit's state (the gateway's pins files) goes to a temporary folder, never the user's home."""
    os.environ.setdefault("MCPKIT_STATE_DIR", str(tmp_path_factory.mktemp("mcpkit-state")))


@pytest.fixture
def server_path() -> Path:
    return SERVERS / "kitchen_sink.py"


@pytest.fixture
def python() -> str:
    return sys.executable


@pytest.fixture
def subprocess_env() -> dict[str, str]:
    """Environment for spawned servers: this venv first on PATH (for `python`)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env
