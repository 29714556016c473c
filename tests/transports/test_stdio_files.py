"""stdin that the event loop cannot watch: /dev/null and regular files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def _serve(server_path: Path, env: dict[str, str], stdin: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, str(server_path)], stdin=stdin, capture_output=True, env=env, timeout=30
    )


def test_stdin_from_dev_null_ends_the_server_cleanly(
    server_path: Path, subprocess_env: dict[str, str]
) -> None:
    done = _serve(server_path, subprocess_env, subprocess.DEVNULL)
    assert done.returncode == 0
    assert done.stdout == b""
    assert b"Traceback" not in done.stderr, done.stderr.decode()


def test_stdin_from_a_file_is_read_to_the_end(
    server_path: Path, subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    # More than one read's worth, so the whole file must be read, not its first chunk.
    lines = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(1, 3001)]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert requests.stat().st_size > 64 * 1024
    with requests.open("rb") as stdin:
        done = _serve(server_path, subprocess_env, stdin)
    assert done.returncode == 0, done.stderr.decode()
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(a["id"] for a in answers) == list(range(1, 3001))
    assert all(a["result"] == {} for a in answers)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("where", ["dev-null", "file"])
def test_stdout_to_dev_null_or_a_file_on_either_loop(
    server_path: Path, subprocess_env: dict[str, str], tmp_path: Path, loop: str, where: str
) -> None:
    # uvloop aborted the process (SIGABRT) on a stdout it could not watch, /dev/null.
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + "\n")
    out = tmp_path / "out.jsonl"
    env = {**subprocess_env, "MCPKIT_LOOP": loop}
    with (
        requests.open("rb") as stdin,
        open(os.devnull, "wb") if where == "dev-null" else out.open("wb") as sink,
    ):
        done = subprocess.run(
            [sys.executable, str(server_path)],
            stdin=stdin,
            stdout=sink,
            stderr=subprocess.PIPE,
            env=env,
            timeout=30,
        )
    assert done.returncode == 0, done.stderr.decode()
    if where == "file":
        assert json.loads(out.read_text()) == {"jsonrpc": "2.0", "id": 1, "result": {}}
