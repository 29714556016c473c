"""Fixtures for host tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def record(tmp_path: Path) -> Path:
    """The file backends append each call they receive to."""
    return tmp_path / "calls.jsonl"
