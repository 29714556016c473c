"""The sql server as hosts run it: ``python -m mcpkit.servers.sql URL`` over stdio and over
Streamable HTTP, in both protocol eras, on SQLite and PostgreSQL; every tool, the table
schema resources, the prompt and the structured errors, with the argument names of the
community servers it replaces. And its command line.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_sql_support import SERVER, HTTPServer, pg_url, refused, sqlite_file, subprocess_env, text

from mcpkit import Client, MCPError
from mcpkit.servers.sql import build_parser

__all__ = ["pg_url"]  # the fixture, imported for pytest

ERAS = {"legacy": "2025-11-25", "modern": "2026-07-28"}


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(kind, URL) of a database holding victims, orders and (PostgreSQL) sales.regions."""
    if request.param == "sqlite":
        return "sqlite", f"sqlite://{sqlite_file(tmp_path)}"
    return "postgres", request.getfixturevalue("pg_url")


async def check_every_tool(client: Client, kind: str, era: str) -> None:
    assert client.protocol_version == ERAS[era]
    tools = {tool.name: tool for tool in await client.list_tools()}
    expected = {"query", "list_schemas", "list_tables", "describe_table", "explain"}
    if kind == "sqlite":
        expected.add("read_query")  # mcp-server-sqlite's name for query, its argument "query"
    assert set(tools) == expected
    assert all(tool.annotations.read_only_hint is True for tool in tools.values())
    # @modelcontextprotocol/server-postgres: query(sql); mcp-server-sqlite: describe_table(table_name).
    query_schema = tools["query"].input_schema
    assert query_schema["properties"]["sql"]["type"] == "string"
    assert query_schema["required"] == ["sql"]
    assert tools["describe_table"].input_schema["required"] == ["table_name"]

    placeholder = "$1" if kind == "postgres" else "?"
    rows = await client.call_tool(
        "query", {"sql": f"SELECT name FROM victims WHERE id = {placeholder}", "params": [3]}
    )
    assert json.loads(text(rows)) == [{"name": "carol"}]
    if kind == "sqlite":
        assert tools["read_query"].input_schema["required"] == ["query"]
        rows = await client.call_tool("read_query", {"query": "SELECT name FROM victims WHERE id = 2"})
        assert json.loads(text(rows)) == [{"name": "bob"}]

    schemas = json.loads(text(await client.call_tool("list_schemas", {})))
    assert schemas == (["public", "sales"] if kind == "postgres" else ["main"])

    tables = json.loads(text(await client.call_tool("list_tables", {})))
    names = [table["name"] for table in tables]
    assert {"victims", "orders"} <= set(names)

    described = json.loads(text(await client.call_tool("describe_table", {"table_name": "victims"})))
    assert [(c["name"], c["primary_key"]) for c in described["columns"]] == [("id", True), ("name", False)]

    plan = json.loads(text(await client.call_tool("explain", {"sql": "SELECT * FROM victims"})))
    assert plan  # PostgreSQL's JSON plan, or SQLite's query plan rows

    # Table schemas as resources, as the community server publishes them.
    resources = {resource.name: resource for resource in await client.list_resources()}
    victims = resources['"victims" database schema']
    assert victims.mime_type == "application/json"
    assert victims.uri.endswith("/victims/schema")
    if kind == "postgres":
        assert victims.uri == "postgres://postgres@127.0.0.1:5432/victims/schema"
    read = await client.read_resource(victims.uri)
    columns = json.loads(read.contents[0].text)
    assert [c["column_name"] for c in columns] == ["id", "name"]
    assert set(columns[0]) == {"column_name", "data_type"}
    with pytest.raises(MCPError) as missing:
        await client.read_resource(victims.uri.replace("/victims/", "/nonexistent/"))
    assert missing.value.code == (-32002 if era == "legacy" else -32602)
    assert "victims" in missing.value.data["availableTables"]

    prompt = await client.get_prompt("explain_query", {"sql": "SELECT * FROM victims"})
    assert "SELECT * FROM victims" in prompt.messages[0].content.text

    # The seed's structured errors: -32602, the database's message, the tables there are.
    error = await refused(client.call_tool("query", {"sql": "SELECT * FROM nonexistent"}))
    assert "nonexistent" in error.message
    assert {"victims", "orders"} <= set(error.data["availableTables"])
    error = await refused(client.call_tool("query", {"sql": "COMMIT; DROP TABLE victims"}))
    assert error.data == {"reason": "multiple-statements"}
    # Still serving.
    count = await client.call_tool("query", {"sql": "SELECT count(*) AS n FROM victims"})
    assert json.loads(text(count)) == [{"n": 3}]


@pytest.mark.parametrize("era", ERAS)
async def test_every_tool_over_stdio(database: tuple[str, str], era: str) -> None:
    kind, url = database
    async with Client([*SERVER, url], protocol=era, env=subprocess_env()) as client:  # type: ignore[arg-type]
        await check_every_tool(client, kind, era)


async def test_every_tool_over_http_in_both_eras(database: tuple[str, str], tmp_path: Path) -> None:
    kind, url = database
    server = HTTPServer([url], tmp_path / "server.log", env=subprocess_env())
    try:
        for era in ERAS:
            async with Client(server.url, protocol=era) as client:  # type: ignore[arg-type]
                await check_every_tool(client, kind, era)
    finally:
        server.stop()
    assert "Streamable HTTP at http://127.0.0.1:" in (tmp_path / "server.log").read_text()


async def test_the_url_can_come_from_database_url(tmp_path: Path) -> None:
    env = {**subprocess_env(), "DATABASE_URL": f"sqlite://{sqlite_file(tmp_path)}"}
    async with Client(SERVER, env=env) as client:
        assert json.loads(
            text(await client.call_tool("query", {"sql": "SELECT count(*) AS n FROM victims"}))
        ) == [{"n": 3}]


async def test_allow_write_adds_the_destructive_tool(tmp_path: Path) -> None:
    url = f"sqlite://{sqlite_file(tmp_path)}"
    async with Client([*SERVER, url, "--allow-write"], env=subprocess_env()) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert tools["execute"].annotations.destructive_hint is True
        assert tools["execute"].annotations.read_only_hint is False
        result = await client.call_tool("execute", {"sql": "DELETE FROM victims WHERE id = ?", "params": [1]})
        assert result.content[0].text == "1 row(s) affected"
        assert {"write_query", "create_table"} <= set(tools)  # mcp-server-sqlite's write tools


async def test_a_sqlalchemy_style_absolute_url_opens_the_file(tmp_path: Path) -> None:
    # sqlite:////abs/path.db: it used to become file://abs/path.db, a URI SQLite refused.
    url = f"sqlite:///{sqlite_file(tmp_path)}"
    assert url.startswith("sqlite:////")
    async with Client([*SERVER, url], env=subprocess_env()) as client:
        count = await client.call_tool("query", {"sql": "SELECT count(*) AS n FROM victims"})
        assert json.loads(text(count)) == [{"n": 3}]


async def test_mcp_server_sqlite_db_path_option(tmp_path: Path) -> None:
    # A host config written for mcp-server-sqlite: --db-path, "~" expanded, tools by its names.
    db = sqlite_file(tmp_path)
    env = {**subprocess_env(), "HOME": str(db.parent)}
    async with Client([*SERVER, "--db-path", f"~/{db.name}"], env=env) as client:
        rows = await client.call_tool("read_query", {"query": "SELECT count(*) AS n FROM victims"})
        assert json.loads(text(rows)) == [{"n": 3}]
    both = run(f"sqlite://{db}", "--db-path", str(db))
    assert both.returncode == 2 and "not both" in both.stderr
    absent = run("--db-path", str(tmp_path / "absent.db"))
    assert absent.returncode == 1 and "no SQLite database at" in absent.stderr
    assert not (tmp_path / "absent.db").exists()


# -- the command line ------------------------------------------------------------------------


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SERVER, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env or subprocess_env(),
        stdin=subprocess.DEVNULL,
    )


def test_help_documents_every_option() -> None:
    done = run("--help")
    assert done.returncode == 0
    for action in build_parser()._actions:
        for option in action.option_strings:
            assert option in done.stdout
    for word in (
        "DATABASE_URL",
        "--allow-write",
        "--max-rows",
        "--max-bytes",
        "--statement-timeout",
        "PGPASSWORD",
    ):
        assert word in done.stdout


def test_usage_errors() -> None:
    missing = run()
    assert missing.returncode == 2 and "a database URL is needed" in missing.stderr
    port = run("sqlite:///x.db", "--port", "9")
    assert port.returncode == 2 and "--port goes with --transport http" in port.stderr
    bad = run("sqlite:///x.db", "--max-rows", "0")
    assert bad.returncode == 2 and "must be more than 0" in bad.stderr


def test_a_database_that_cannot_be_opened_is_a_one_line_error_without_the_password(tmp_path: Path) -> None:
    unreachable = run("postgresql://someone:hunter2-secret@127.0.0.1:1/db", "--statement-timeout", "2")
    assert unreachable.returncode == 1
    assert "cannot open the database" in unreachable.stderr
    assert "hunter2-secret" not in unreachable.stderr + unreachable.stdout
    absent = run(f"sqlite://{tmp_path}/absent.db")
    assert absent.returncode == 1 and "no SQLite database at" in absent.stderr
    assert not (tmp_path / "absent.db").exists()  # opening read-only never creates the file
    other = run("mysql://localhost/db")
    assert other.returncode == 1 and "unsupported database URL scheme mysql:" in other.stderr
