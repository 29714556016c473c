"""``mcpkit inspect``: starts the inspector (imported lazily) pre-set to the target."""

from __future__ import annotations

import subprocess
import time
import urllib.request

from cli_helpers import KITCHEN_SINK, MCPKIT, Run, base_env


def test_inspect_serves_the_page(tmp_path: object) -> None:
    proc = subprocess.Popen(
        [*MCPKIT, "inspect", str(KITCHEN_SINK), "--no-browser", "--port", "0"],
        env=base_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 15
        line = ""
        while time.monotonic() < deadline and "http://" not in line:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
        assert line.startswith("mcpkit inspector: http://127.0.0.1:"), line
        url = line.split(": ", 1)[1].strip()
        assert "#token=" in url
        with urllib.request.urlopen(url.split("#", 1)[0], timeout=10) as response:
            assert response.status == 200
            assert b"<html" in response.read().lower()
    finally:
        proc.terminate()
        proc.communicate(timeout=15)


def test_inspect_refuses_a_public_address(mcpkit: Run) -> None:
    r = mcpkit("inspect", "--host", "0.0.0.0", "--no-browser")
    assert r.code == 2 and "loopback" in r.stderr, r


def test_inspect_target_errors_are_usage_errors(mcpkit: Run) -> None:
    r = mcpkit("inspect", "missing.py", "--no-browser")
    assert r.code == 2 and "no such file" in r.stderr, r
    r = mcpkit("inspect", "--env", "A=1", "--no-browser")
    assert r.code == 2 and "need a TARGET" in r.stderr, r
