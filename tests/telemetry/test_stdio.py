"""Over stdio: the client's span (this process) is the parent of the server's (a subprocess that
configured the SDK itself and writes its spans to a file)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanKind

from conftest import Traced
from mcpkit import Client

SERVER = Path(__file__).resolve().parent / "servers" / "traced_stdio.py"
VERSIONS = {"legacy": "2025-11-25", "modern": "2026-07-28"}


def read_spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_call_over_stdio_is_two_spans_of_one_trace(traced: Traced, tmp_path: Path, era: str) -> None:
    spans = tmp_path / "spans.jsonl"
    env = {**os.environ, "MCPKIT_TEST_SPANS": str(spans)}
    async with Client([sys.executable, str(SERVER)], env=env, protocol=era) as client:
        added = await client.call_tool("add", {"a": 2, "b": 3})
        assert added.structured_content == {"result": 5}
        await client.call_tool("inner", {"text": "x"})

    served = read_spans(spans)
    for name in ("tools/call add", "tools/call inner"):
        sent = traced.one(name, SpanKind.CLIENT)
        assert sent.context is not None
        (handled,) = [s for s in served if s["name"] == name]
        assert handled["kind"] == "SERVER"
        assert handled["trace_id"] == f"{sent.context.trace_id:032x}"
        assert handled["parent_id"] == f"{sent.context.span_id:016x}"
        for attributes in (handled["attributes"], dict(sent.attributes or {})):
            assert attributes["network.transport"] == "pipe"
            assert attributes["mcp.protocol.version"] == VERSIONS[era]
            assert attributes["mcp.method.name"] == "tools/call"
            assert attributes["jsonrpc.request.id"] == sent.attributes["jsonrpc.request.id"]  # type: ignore[index]
    (inner,) = [s for s in served if s["name"] == "inner work"]
    (handled_inner,) = [s for s in served if s["name"] == "tools/call inner"]
    assert inner["parent_id"] == handled_inner["span_id"]  # the user's span nests in the server span


def test_the_cli_passes_on_the_context_it_is_given(tmp_path: Path) -> None:
    """``mcpkit call`` run by a traced parent (``TRACEPARENT`` in its environment, no SDK of its
    own) carries that context to the server: the server's span is the parent's child."""
    import subprocess

    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    spans = tmp_path / "spans.jsonl"
    env = {
        **os.environ,
        "MCPKIT_TEST_SPANS": str(spans),
        "TRACEPARENT": f"00-{trace_id}-{parent_id}-01",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "mcpkit", "call", str(SERVER), "add", "a=2", "b=3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "5" in done.stdout
    (handled,) = [s for s in read_spans(spans) if s["name"] == "tools/call add"]
    assert handled["trace_id"] == trace_id
    assert handled["parent_id"] == parent_id
