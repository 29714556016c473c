"""A soak under faults: two workers on Redis, mixed load in both eras, real faults.

``python -m mcpkit.testing.soak --duration 10m`` (``make soak DURATION=10m``)
starts a private ``redis-server``, two worker processes of ``server.py`` in this
package and a :class:`~mcpkit.testing.proxy.RoundRobinProxy`, loads them with
2026-07-28 and 2025-11-25 requests, streams and resumptions and a 2024-11-05
HTTP+SSE client, while it SIGKILLs a worker, restarts Redis and drains a worker
with SIGTERM; then checks that nothing acknowledged was lost or repeated, no
request was left pending, and the surviving worker's memory and descriptors are
back to their baseline. The report is a markdown table (see ``docs/soak.md``).
"""

from __future__ import annotations

from .run import SoakConfig, SoakReport, run_soak

__all__ = ["SoakConfig", "SoakReport", "run_soak"]
