"""The reference servers from the CLI (issue 14): ``mcpkit serve NAME ARGS...`` and
``mcpkit install HOST --server NAME ARGS...``, through the ``mcpkit`` console script."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_helpers import ROOT, Result, base_env
from test_cli_findings import MCPKIT_BIN
from test_cli_findings import mcpkit as run

from mcpkit.servers import SERVERS

#: The interpreter the console script runs with: the one an installed entry names.
PYTHON = MCPKIT_BIN.read_text().splitlines()[0].removeprefix("#!").strip()


@pytest.fixture(scope="module", autouse=True)
def _entry_point() -> None:
    if not MCPKIT_BIN.is_file():
        pytest.fail(f"no mcpkit entry point at {MCPKIT_BIN}: install the project (make .venv/.installed)")


# -- mcpkit serve ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_serve_help_of_every_reference_server(name: str) -> None:
    """Everything after NAME is the server's: its own --help, exit 0, nothing of mcpkit's."""
    r = run("serve", name, "--help")
    assert r.code == 0, r
    assert r.stdout.startswith("usage: "), r
    assert r.stdout.startswith(f"usage: mcpkit serve {name} "), r  # the command as the user typed it
    assert "mcpkit serve NAME" not in r.stdout, r  # not mcpkit's own help


def test_serve_help_lists_the_servers() -> None:
    r = run("serve", "--help")
    assert r.code == 0, r
    assert "usage: mcpkit serve NAME [ARGS...]" in r.stdout, r
    for name in SERVERS:
        assert name in r.stdout, r
    r = run("--help")
    flowed = " ".join(r.stdout.split())  # (argparse wraps the help line as the list grows)
    assert r.code == 0 and f"run a reference server: {', '.join(SERVERS)}" in flowed, r


def test_serve_unknown_or_missing_name() -> None:
    r = run("serve", "filesys", "/tmp")
    assert r.code == 2, r
    assert "no reference server named 'filesys'" in r.stderr, r
    assert "did you mean filesystem?" in r.stderr and ", ".join(SERVERS) in r.stderr, r
    r = run("serve")
    assert r.code == 2 and "NAME" in r.stderr, r


def _serve_with_registry(tmp_path: Path, name: str, module: str, source: str | None = None) -> Result:
    """``mcpkit serve NAME`` with one more entry in the registry (a server whose module is
    missing, or imports a package that is not installed), in a process of its own."""
    if source is not None:
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    script = (
        "import sys\n"
        "import mcpkit.servers\n"
        f"mcpkit.servers.SERVERS[{name!r}] = {module!r}\n"
        "from mcpkit.cli.main import main\n"
        f"sys.exit(main(['serve', {name!r}]))\n"
    )
    env = base_env()
    env["PYTHONPATH"] = f"{tmp_path}:{env['PYTHONPATH']}"
    proc = subprocess.run(
        [PYTHON, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
    )
    return Result(["serve", name], proc.returncode, proc.stdout, proc.stderr)


def test_serve_a_server_whose_package_is_missing(tmp_path: Path) -> None:
    r = _serve_with_registry(
        tmp_path, "needy", "needy_server", "import not_installed_anywhere\n\ndef main(argv): return 0\n"
    )
    assert r.code == 1, r
    assert "the needy server needs a package that is not installed" in r.stderr, r
    assert "not_installed_anywhere" in r.stderr and "pip install not_installed_anywhere" in r.stderr, r
    assert "Traceback" not in r.stderr, r
    r = _serve_with_registry(tmp_path, "ghost", "mcpkit.servers.ghost")
    assert r.code == 1, r
    assert "the ghost server is not part of this mcpkit installation" in r.stderr, r


def test_list_through_mcpkit_serve_filesystem(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("remember the milk\n")
    if "filesystem" not in SERVERS:
        pytest.fail("the filesystem server is not registered")
    r = run("list", "tools", "--json", "--", str(MCPKIT_BIN), "serve", "filesystem", str(tmp_path))
    assert r.code == 0, r
    names = {tool["name"] for tool in r.json()["tools"]}
    assert {"read_text_file", "list_directory", "list_allowed_directories", "write_file"} <= names, r
    # (Run from the directory: the CLI offers its working directory as the client's roots, and
    # the server narrows its directories to them.)
    r = run("call", "read_text_file", "path=notes.txt", "--", str(MCPKIT_BIN), "serve", "filesystem",
            str(tmp_path), "--read-only", cwd=tmp_path)  # fmt: skip
    assert r.code == 0 and r.stdout.strip() == "remember the milk", r


# -- mcpkit install --server ------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["claude-desktop", "claude-code", "cursor", "vscode"])
def test_install_a_reference_server(tmp_path: Path, host: str) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n")
    config = tmp_path / "conf" / "config.json"
    # Install's options first; everything after the server's name is its own (--read-only too);
    # a relative directory is written absolute, hosts starting servers where they please.
    r = run("install", host, "--path", str(config), "--server", "filesystem", "docs", "--read-only",
            cwd=tmp_path)  # fmt: skip
    assert r.code == 0, r
    data = json.loads(config.read_text())
    key = "servers" if host == "vscode" else "mcpServers"
    expected: dict[str, object] = {
        "command": PYTHON,
        "args": ["-m", "mcpkit", "serve", "filesystem", str(docs.resolve()), "--read-only"],
    }
    if host in ("claude-code", "vscode"):
        expected = {"type": "stdio", **expected}
    assert data[key] == {"filesystem": expected}, data  # named after the server by default
    assert "added filesystem" in r.stdout, r

    # The entry runs: the host's command, started from elsewhere, serves that directory.
    if host == "claude-code":
        r = run("call", "filesystem", "list_allowed_directories", "--config", str(config), cwd=Path("/"))
        assert r.code == 0 and str(docs.resolve()) in r.stdout, r
        r = run("list", "filesystem", "tools", "--json", "--config", str(config), cwd=Path("/"))
        assert r.code == 0, r
        assert "write_file" not in {t["name"] for t in r.json()["tools"]}, r  # --read-only reached it


def test_install_server_with_a_name_json_env_and_errors(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    r = run("install", "cursor", "--path", str(config), "--name", "web", "-e", "HTTP_PROXY=", "--json",
            "--server", "fetch", "--allow-host", "localhost")  # fmt: skip
    assert r.code == 0, r
    entry = r.json()["entry"]
    assert entry == {
        "command": PYTHON,
        "args": ["-m", "mcpkit", "serve", "fetch", "--allow-host", "localhost"],
        "env": {"HTTP_PROXY": ""},
    }, r
    assert json.loads(config.read_text())["mcpServers"]["web"] == entry

    # The server's own parser checks ARGS before anything is written: an option of install's
    # put after --server NAME is the server's, and refused as such.
    before = config.read_text()
    r = run(
        "install", "cursor", "--path", str(config), "--server", "filesystem", str(tmp_path), "--name", "d"
    )
    assert r.code == 2, r
    assert "the filesystem server's arguments: unrecognized arguments: --name d" in r.stderr, r
    assert "go before --server" in r.stderr, r
    r = run("install", "cursor", "--path", str(config), "--server", "filesystem", ".", "--max-depth", "lots")
    assert r.code == 2 and "--max-depth: not a number: 'lots'" in r.stderr, r
    assert config.read_text() == before
    r = run("install", "cursor", "--path", str(config), "--server", "filesys", str(tmp_path))
    assert r.code == 2 and "no reference server named 'filesys'" in r.stderr, r
    r = run("install", "cursor", str(ROOT / "examples" / "everything_server.py"), "--path", str(config),
            "--server", "filesystem")  # fmt: skip
    assert r.code == 2 and "not several" in r.stderr, r
    r = run("install", "cursor", "--path", str(config), str(tmp_path))
    assert r.code == 2 and "--name is required" in r.stderr, r
    # With `--` the command is a command (not --server): `--server` after it is its argument.
    r = run("install", "cursor", "--path", str(config), "--name", "x", "--", "tool", "--server", "y")
    assert r.code == 0, r
    assert json.loads(config.read_text())["mcpServers"]["x"] == {"command": "tool", "args": ["--server", "y"]}


def test_install_the_sql_server_with_a_relative_sqlite_url(tmp_path: Path) -> None:
    db = tmp_path / "data" / "shop.db"
    db.parent.mkdir()
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE products (name TEXT)")
        conn.execute("INSERT INTO products VALUES ('tea')")
    conn.close()
    config = tmp_path / "claude.json"
    r = run("install", "claude-code", "--path", str(config), "--server", "sql", "sqlite:data/shop.db",
            cwd=tmp_path)  # fmt: skip
    assert r.code == 0, r
    entry = json.loads(config.read_text())["mcpServers"]["sql"]
    assert entry["args"] == ["-m", "mcpkit", "serve", "sql", f"sqlite://{db.resolve()}"], entry
    # The host starts it elsewhere; the URL still names the file (read-only: no write tool).
    r = run("call", "sql", "read_query", "query=SELECT name FROM products", "--config", str(config),
            cwd=Path("/"))  # fmt: skip
    assert r.code == 0 and json.loads(r.stdout) == [{"name": "tea"}], r
    r = run("list", "sql", "tools", "--json", "--config", str(config), cwd=Path("/"))
    assert r.code == 0 and "execute" not in {t["name"] for t in r.json()["tools"]}, r


def test_serve_runs_as_python_dash_m_too(tmp_path: Path) -> None:
    """The two spellings the issue names start the same server."""
    for argv in ([str(MCPKIT_BIN), "serve"], [PYTHON, "-m", "mcpkit.servers.filesystem"]):
        command = [*argv, "filesystem", str(tmp_path)] if argv[-1] == "serve" else [*argv, str(tmp_path)]
        proc = subprocess.run(
            [str(MCPKIT_BIN), "list", "tools", "--json", "--", *command],
            capture_output=True,
            text=True,
            env=base_env(),
            cwd=ROOT,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert "read_text_file" in {t["name"] for t in json.loads(proc.stdout)["tools"]}
    assert sys.executable  # (the tests' own interpreter is not assumed to be the entry's)


def test_sql_and_fetch_serve_through_both_spellings(tmp_path: Path) -> None:
    """``mcpkit serve sql|fetch ARGS`` and ``python -m mcpkit.servers.sql|fetch ARGS``, each a
    real server answering tools/list; an error names the command the user typed."""
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT)")
    conn.close()
    servers = {
        "sql": ([f"sqlite://{db}"], {"query", "read_query", "describe_table"}),
        "fetch": ([], {"fetch"}),
    }
    for name, (args, tools) in servers.items():
        for command in ([str(MCPKIT_BIN), "serve", name], [PYTHON, "-m", f"mcpkit.servers.{name}"]):
            r = run("list", "tools", "--json", "--", *command, *args)
            assert r.code == 0, r
            assert tools <= {t["name"] for t in r.json()["tools"]}, (command, r)
    r = run("list", "tools", "--", str(MCPKIT_BIN), "serve", "sql", f"sqlite://{tmp_path / 'absent.db'}")
    assert r.code != 0 and "mcpkit serve sql: cannot open the database: no SQLite database at" in r.stderr, r
