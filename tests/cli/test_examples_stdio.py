"""Every example server runs the way users run it (issue 19, item 6): plainly, ``python
examples/X.py``, it serves stdio (as the seed documents' servers do), so a host's config
and ``mcpkit list`` can start it; HTTP is behind ``--http [--port N]``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import ROOT, Run, base_env, free_port, wait_for_port

EXAMPLES = ROOT / "examples"

#: Each example MCP server and tools it must list.
SERVERS: dict[str, set[str]] = {
    "everything_server.py": {"test_simple_text", "test_tool_with_progress", "test_sampling"},
    "weather/server.py": {"get_weather", "get_forecast"},
    "word_counter/server.py": {"count_words"},
    "rate_limited_api/server.py": {"forecast", "compare"},
    "apps/server.py": {"roll_dice"},
}
#: The example servers that have ``--http [--port N]`` of their own (the seed documents'
#: servers are kept as written: ``mcpkit run FILE --transport http`` serves them over HTTP).
HTTP_FLAG = ["everything_server.py", "rate_limited_api/server.py"]
#: The other Python files under examples/, and what they are instead of servers.
NOT_SERVERS = {
    "demo.py": "the `make demo` client script",
    "weather/client.py": "the seed documents' client (it spawns weather/server.py)",
    "rate_limited_api/upstream.py": "the stand-in HTTP API that rate_limited_api/server.py wraps (not MCP)",
}


def test_every_example_file_is_checked() -> None:
    """A new example has to be added here (and so to the stdio checks below)."""
    found = {str(path.relative_to(EXAMPLES)) for path in EXAMPLES.rglob("*.py")}
    assert found == set(SERVERS) | set(NOT_SERVERS)


@pytest.mark.parametrize("example", list(SERVERS))
def test_example_run_plainly_serves_stdio(mcpkit: Run, example: str, tmp_path: Path) -> None:
    path = EXAMPLES / example
    # The way a host's config starts it: `python FILE`, talking over stdin/stdout.
    r = mcpkit("list", "tools", "--json", "--", sys.executable, str(path), timeout=60)
    assert r.code == 0, r
    assert SERVERS[example] <= {tool["name"] for tool in r.json()["tools"]}, r
    # The way a user lists it.
    r = mcpkit("list", str(path), "tools", "--json", timeout=60)
    assert r.code == 0, r
    assert SERVERS[example] <= {tool["name"] for tool in r.json()["tools"]}, r


def test_a_host_config_starts_every_example(mcpkit: Run, tmp_path: Path) -> None:
    config = tmp_path / ".mcp.json"
    servers = {
        name.split("/")[0].removesuffix(".py"): {"command": sys.executable, "args": [str(EXAMPLES / name)]}
        for name in SERVERS
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    r = mcpkit("config", "check", str(config), timeout=90)
    assert r.code == 0, r
    assert f"{len(servers)}/{len(servers)} server(s) answered" in r.stdout + r.stderr, r


@pytest.mark.parametrize("example", HTTP_FLAG)
def test_example_serves_http_behind_a_flag(mcpkit: Run, example: str, tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / example), "--http", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=base_env(),
        cwd=tmp_path,
        text=True,
    )
    try:
        wait_for_port(port, proc)
        r = mcpkit("list", f"http://127.0.0.1:{port}/mcp", "tools", "--json")
        assert r.code == 0, r
        assert SERVERS[example] <= {tool["name"] for tool in r.json()["tools"]}, r
    finally:
        proc.terminate()
        proc.communicate(timeout=15)


@pytest.mark.parametrize("example", HTTP_FLAG)
def test_port_without_http_is_a_usage_error(example: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / example), "--port", "3001"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=base_env(),
        cwd=tmp_path,
        timeout=30,
    )
    assert proc.returncode == 2 and "--port goes with --http" in proc.stderr, proc.stderr
