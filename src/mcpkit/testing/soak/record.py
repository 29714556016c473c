"""What a soak saw: every operation's outcome and latency, the faults, the violations.

Outcomes of an operation (one MCP request, or one stream a client holds):

- ``ok``: exactly one answer, and it was the right one;
- ``refused``: a documented refusal (``503`` while a worker drains or Redis is
  down), retried by the client; allowed only inside a fault's window;
- ``cut``: the connection broke before the request was acknowledged (no event id
  of its response reached the client); allowed only inside a fault's window;
- ``orphaned``: an acknowledged request whose worker was SIGKILLed: resuming its
  stream gave every event sent before the kill exactly once, then the
  documented error "the worker serving this request stopped before answering";
- ``left``: the client left mid-stream on purpose (and did not come back);
- a *violation*: anything else (a wrong, missing, repeated or late answer).
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

__all__ = ["FaultWindow", "Recorder", "Unexplained", "percentile"]

OUTCOMES = ("ok", "refused", "cut", "orphaned", "left")
#: How long after a fault recovered its effects may still show: a request on a
#: SIGKILLed worker is ended as orphaned once the worker's heartbeat expired (6 s),
#: plus a client's back-off and timeouts.
AFTERMATH = 10.0


class Unexplained(Exception):
    """An operation ended in a way nothing but a bug explains (a violation)."""


class Refused(Exception):
    """A documented refusal (HTTP 503 with Retry-After, or a 502 from the proxy while every
    worker was away): the client may retry."""


@dataclass
class FaultWindow:
    kind: str
    start: float
    end: float | None = None  # when the system was whole again
    detail: str = ""

    def overlaps(self, start: float, end: float) -> bool:
        stop = (self.end if self.end is not None else time.monotonic()) + AFTERMATH
        return start <= stop and end >= self.start


def percentile(sorted_values: list[float], q: float) -> float:
    """The nearest-rank ``q``-quantile of already sorted values."""
    if not sorted_values:
        return float("nan")
    # The smallest value with at least q of all values at or below it: rank ceil(q * n).
    rank = max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values) - 1e-9) - 1))
    return sorted_values[rank]


@dataclass
class Recorder:
    """Outcomes, latencies (seconds), faults and violations of one soak run."""

    started: float = field(default_factory=time.monotonic)
    counts: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    faults: list[FaultWindow] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    #: Operations started and not yet ended.
    pending: int = 0
    #: Facts about resumptions (streams resumed, events delivered across them, ...).
    resume: Counter[str] = field(default_factory=Counter)

    def fault(self, kind: str, detail: str = "") -> FaultWindow:
        window = FaultWindow(kind, time.monotonic(), detail=detail)
        self.faults.append(window)
        return window

    def explained_by(self, start: float, end: float | None = None) -> str | None:
        """The kind of a fault whose window overlaps ``[start, end]``, or None."""
        end = time.monotonic() if end is None else end
        for window in self.faults:
            if window.overlaps(start, end):
                return window.kind
        return None

    def outcome(self, op: str, outcome: str, start: float, *, latency: bool = True) -> None:
        self.counts[op][outcome] += 1
        if outcome == "ok" and latency:
            self.latencies[op].append(time.monotonic() - start)

    def violation(self, op: str, start: float, what: str) -> None:
        self.counts[op]["VIOLATION"] += 1
        at = time.monotonic() - self.started
        self.violations.append(f"[{at:7.2f}s] {op}: {what}")

    def tolerated(self, op: str, outcome: str, start: float, what: str) -> None:
        """``outcome`` (refused, cut, orphaned) if a fault explains it, else a violation."""
        if self.explained_by(start) is not None:
            self.outcome(op, outcome, start)
        else:
            self.violation(op, start, f"{outcome} with no fault to explain it: {what}")

    # -- the report -----------------------------------------------------------------------

    def op_table(self) -> list[str]:
        head = (
            "| operation | ok | refused | cut | orphaned | left | violations | p50 ms | p99 ms | p99.9 ms |"
        )
        rows = [head, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
        for op in sorted(self.counts):
            c = self.counts[op]
            lat = sorted(self.latencies.get(op, []))
            p = [f"{percentile(lat, q) * 1000:.1f}" if lat else "-" for q in (0.5, 0.99, 0.999)]
            cells = [str(c[o]) for o in OUTCOMES] + [str(c["VIOLATION"])] + p
            rows.append(f"| {op} | " + " | ".join(cells) + " |")
        return rows

    def fault_table(self) -> list[str]:
        rows = ["| at s | fault | recovered after s | detail |", "|--:|---|--:|---|"]
        for w in self.faults:
            took = f"{w.end - w.start:.2f}" if w.end is not None else "not"
            rows.append(f"| {w.start - self.started:.1f} | {w.kind} | {took} | {w.detail} |")
        return rows
