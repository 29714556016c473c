"""The CLI's first steps, as a newcomer takes them (issue 15, part 4), each through ``mcpkit``
run as a subprocess:

- a ``FILE.py`` written with mcpkit is served like ``mcpkit run FILE.py`` (the MCPServer found in
  it, with or without a ``__main__`` block) by list / call / read / prompt / install; a file
  written with another SDK still runs as a script;
- a stdio server that exits before answering is reported with its exit code, the last lines of
  its stderr and the likely fix, by every command that connects (list, call, read, prompt,
  config check);
- serving HTTP without the ``http`` extra names the extra instead of a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_helpers import OFFICIAL, Run, base_env

NO_RUN_BLOCK = '''
from mcpkit import MCPServer

server = MCPServer("newcomer")

@server.tool()
def greet(name: str) -> str:
    """Say hello."""
    return f"hello {name}"

@server.resource("config://app")
def config() -> str:
    return '{"theme": "dark"}'

@server.prompt()
def review(code: str) -> str:
    return f"Please review: {code}"
'''


def write(path: Path, text: str) -> str:
    path.write_text(textwrap.dedent(text).lstrip())
    return str(path)


# -- FILE.py is served like `mcpkit run` -----------------------------------------------------------


def test_a_file_without_run_block_works_with_every_command(mcpkit: Run, tmp_path: Path) -> None:
    file = write(tmp_path / "server.py", NO_RUN_BLOCK)
    r = mcpkit("list", file)
    assert r.code == 0, r
    assert r.stdout.startswith("newcomer ") and "greet" in r.stdout and "config://app" in r.stdout
    r = mcpkit("call", file, "greet", "name=Ada")
    assert (r.code, r.stdout.strip()) == (0, "hello Ada"), r
    r = mcpkit("read", file, "config://app")
    assert r.code == 0 and '"theme": "dark"' in r.stdout, r
    r = mcpkit("prompt", file, "review", "code=x")
    assert r.code == 0 and "Please review: x" in r.stdout, r
    # a relative path from another directory, and after --
    r = mcpkit("call", "greet", "name=Bo", "--", "server.py", cwd=tmp_path)
    assert (r.code, r.stdout.strip()) == (0, "hello Bo"), r


def test_the_main_block_does_not_run(mcpkit: Run, tmp_path: Path) -> None:
    """Loaded like `mcpkit run`: a run block serving HTTP does not start (it would never answer
    on stdio); the server object is served on stdio instead."""
    file = write(
        tmp_path / "server.py",
        NO_RUN_BLOCK + '\nif __name__ == "__main__":\n    raise SystemExit("the __main__ block ran")\n',
    )
    r = mcpkit("call", file, "greet", "name=Ada", "--json")
    assert r.code == 0, r
    assert r.json()["content"][0]["text"] == "hello Ada"


def test_a_file_written_with_another_sdk_runs_as_a_script(mcpkit: Run, tmp_path: Path) -> None:
    copy = tmp_path / "official.py"
    copy.write_text(OFFICIAL.read_text())
    r = mcpkit("list", str(copy), "tools", "--json")
    assert r.code == 0, r
    assert r.json()["serverInfo"]["name"] == "official-server"


def test_install_writes_what_the_other_commands_run(mcpkit: Run, tmp_path: Path) -> None:
    ours = write(tmp_path / "server.py", NO_RUN_BLOCK)
    theirs = tmp_path / "official.py"
    theirs.write_text(OFFICIAL.read_text())
    config = tmp_path / "mcp.json"
    for name, file in (("ours", ours), ("theirs", str(theirs))):
        r = mcpkit("install", "cursor", file, "--name", name, "--path", str(config))
        assert r.code == 0, r
    servers = json.loads(config.read_text())["mcpServers"]
    assert servers["ours"] == {"command": sys.executable, "args": ["-m", "mcpkit", "run", ours]}
    assert servers["theirs"] == {"command": sys.executable, "args": [str(theirs)]}
    r = mcpkit("config", "check", str(config), "--json")
    assert r.code == 0, r


# -- a server that exits before answering ---------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["list", "{file}"],
        ["call", "{file}", "greet", "name=x"],
        ["read", "{file}", "config://app"],
        ["prompt", "{file}", "review", "code=x"],
    ],
)
def test_missing_dependency_is_named_by_every_command(
    mcpkit: Run, tmp_path: Path, command: list[str]
) -> None:
    file = write(tmp_path / "broken.py", "import missing_dependency\n" + NO_RUN_BLOCK)
    r = mcpkit(*[word.format(file=file) for word in command])
    assert r.code == 3, r
    assert "cannot connect to" in r.stderr and "exited with code" in r.stderr, r
    assert "the server closed the connection" not in r.stderr
    assert "ModuleNotFoundError: No module named 'missing_dependency'" in r.stderr, r
    assert f'File "{file}", line 1' in r.stderr  # the server's own traceback, from its file on
    assert "hint:" in r.stderr and "-m pip install missing_dependency" in r.stderr, r


def test_missing_dependency_in_a_script_server(mcpkit: Run, tmp_path: Path) -> None:
    file = write(tmp_path / "script.py", "import missing_dependency\n")
    r = mcpkit("list", file, "--json")
    assert r.code == 3, r
    error = r.json()["error"]
    assert "exited with code 1 before answering" in error["message"]
    assert "No module named 'missing_dependency'" in error["message"]
    assert "pip install missing_dependency" in error["hint"]


def test_a_script_without_run_block(mcpkit: Run, tmp_path: Path) -> None:
    file = write(tmp_path / "script.py", "import json\nserver = object()\n")
    r = mcpkit("list", file)
    assert r.code == 3, r
    assert "exited with code 0 before answering (it wrote nothing on stderr)" in r.stderr, r
    assert 'if __name__ == "__main__"' in r.stderr, r


def test_an_mcpkit_file_without_a_server(mcpkit: Run, tmp_path: Path) -> None:
    file = write(tmp_path / "client.py", "from mcpkit import Client\n")
    r = mcpkit("list", file)
    assert r.code == 3, r
    assert "no MCPServer found" in r.stderr and "FILE.py:OBJECT" in r.stderr, r


def test_a_syntax_error(mcpkit: Run, tmp_path: Path) -> None:
    file = write(tmp_path / "server.py", 'from mcpkit import MCPServer\nserver = MCPServer("x"\n')
    r = mcpkit("list", file)
    assert r.code == 3, r
    assert "SyntaxError" in r.stderr and "fix the error shown above" in r.stderr, r
    assert "Traceback" not in r.stderr  # the error, not the loader's frames


def test_a_wrong_path_and_a_missing_command(mcpkit: Run, tmp_path: Path) -> None:
    r = mcpkit("list", "--", sys.executable, "nothere.py")
    assert r.code == 3, r
    assert "exited with code 2" in r.stderr and "can't open file" in r.stderr, r
    assert "use absolute paths" in r.stderr, r
    r = mcpkit("list", "--", "no-such-command-mcpkit")
    assert r.code == 3, r
    assert "command not found: no-such-command-mcpkit" in r.stderr and "absolute path" in r.stderr, r


def test_config_check_gives_the_exit_code_and_the_fix(mcpkit: Run, tmp_path: Path) -> None:
    write(tmp_path / "broken.py", "import missing_dependency\n" + NO_RUN_BLOCK)
    config = tmp_path / ".mcp.json"
    config.write_text(json.dumps({"mcpServers": {"broken": {"command": "python", "args": ["broken.py"]}}}))
    r = mcpkit("config", "check", str(config))
    assert r.code == 3, r
    assert "exited with code 1 before answering" in r.stdout, r
    assert "No module named 'missing_dependency'" in r.stdout
    assert "broken: hint:" in r.stdout and "pip install missing_dependency" in r.stdout, r
    r = mcpkit("config", "check", str(config), "--json")
    server = r.json()["files"][0]["servers"][0]
    assert "pip install missing_dependency" in server["hint"], r
    # the same entry as a target by name
    r = mcpkit("list", "broken", cwd=tmp_path)
    assert r.code == 3 and "exited with code 1" in r.stderr and "hint:" in r.stderr, r


# -- HTTP without the http extra ------------------------------------------------------------------


@pytest.fixture
def without_uvicorn(tmp_path: Path) -> dict[str, str]:
    """An environment where ``import uvicorn`` fails, as without the http extra."""
    shim = tmp_path / "shim" / "uvicorn"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'uvicorn'\", name='uvicorn')\n"
    )
    env = base_env()
    env["PYTHONPATH"] = f"{shim.parent}:{env['PYTHONPATH']}"
    return env


@pytest.mark.parametrize("extra", [[], ["--workers", "2", "--stateless"]])
def test_mcpkit_run_http_without_the_extra(
    mcpkit: Run, tmp_path: Path, without_uvicorn: dict[str, str], extra: list[str]
) -> None:
    file = write(tmp_path / "server.py", NO_RUN_BLOCK)
    r = mcpkit("run", file, "--transport", "http", "--port", "0", *extra, env=without_uvicorn)
    assert r.code == 1, r
    assert "serving HTTP needs the http extra" in r.stderr, r
    assert "pip install 'mcpkit[http]'" in r.stderr
    assert "Traceback" not in r.stderr


def test_server_run_http_without_the_extra(tmp_path: Path, without_uvicorn: dict[str, str]) -> None:
    file = write(tmp_path / "server.py", NO_RUN_BLOCK + '\nserver.run("http", port=0)\n')
    proc = subprocess.run(
        [sys.executable, file], capture_output=True, text=True, env=without_uvicorn, timeout=30
    )
    assert proc.returncode == 1, proc
    assert "newcomer: serving HTTP needs the http extra" in proc.stderr, proc.stderr
    assert "pip install 'mcpkit[http]'" in proc.stderr
    assert "Traceback" not in proc.stderr
