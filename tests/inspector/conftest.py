"""Fixtures for the inspector tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from inspector_helpers import RunningInspector


@pytest.fixture
def inspector() -> Iterator[RunningInspector]:
    running = RunningInspector().start()
    try:
        yield running
    finally:
        running.stop()
