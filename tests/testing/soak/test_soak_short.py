"""The short soak ``make test`` runs: every fault once, under the mixed load, real processes.

Two worker processes on a private ``redis-server`` behind the round-robin proxy;
a worker SIGKILLed, Redis SIGKILLed and restarted, a worker drained with SIGTERM,
while clients in both eras leave streams, read slowly, trickle bodies and resume.
``make soak DURATION=10m`` is the long form (docs/soak.md).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mcpkit.testing.soak import SoakConfig, run_soak
from mcpkit.testing.soak.faults import FAULTS, PROBE_OUTCOME

pytestmark = pytest.mark.timeout(360)


async def test_a_short_soak_keeps_every_invariant_under_every_fault(tmp_path: Path) -> None:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed; the soak runs a private one")
    report = await run_soak(SoakConfig(duration=20, warmup=4, fault_gap=5, out=tmp_path, seed=17))
    print(report.markdown)  # shown when it fails
    rec = report.recorder

    assert report.ok, report.markdown
    assert report.violations == []
    assert [name for name, held, _ in report.checks if not held] == []
    # Every fault happened, and its probe request was in flight and ended as documented.
    assert {w.kind for w in rec.faults} == set(FAULTS), rec.faults
    assert all(w.end is not None for w in rec.faults)
    for kind, outcome in PROBE_OUTCOME.items():
        assert rec.counts[f"probe: in flight during {kind}"][outcome] == 1, report.markdown
    # The load really ran in every era and the misbehaving clients misbehaved.
    for op in (
        "modern echo",
        "legacy echo",
        "2024-11-05 echo",
        "legacy touch (GET stream)",
        "modern touch (listen)",
        "slow request body (direct)",
    ):
        assert rec.counts[op]["ok"] > 0, (op, report.markdown)
    assert rec.counts["modern progress (leaves)"]["left"] > 0
    assert rec.counts["legacy progress (leaves, resumes)"]["ok"] > 0
    assert rec.counts["legacy progress (slow reader)"]["ok"] > 0
    assert rec.resume["streams resumed"] > 0 and rec.resume["GET stream reconnects"] > 0
    assert (tmp_path / "soak.md").read_text() == report.markdown
