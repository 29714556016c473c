"""``mcpkit list / call / read / prompt`` against an mcpkit server, an official-SDK server
and the npm reference server, each run as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import KITCHEN_SINK, MCPKIT, Run, base_env, free_port, run_in_pty, wait_for_port

KS_TOOLS = ["echo", "add", "forecast", "fail", "sleep", "pixel", "shout"]


# -- an mcpkit server (a .py file target) ------------------------------------------------------


def test_list_all_sections_plain(mcpkit: Run, kitchen_sink: str) -> None:
    r = mcpkit("list", kitchen_sink)
    assert r.code == 0, r
    out = r.stdout
    assert out.startswith("kitchen-sink 1.2.3")
    for heading in ("tools:", "resources:", "templates:", "prompts:"):
        assert f"\n{heading}\n" in out
    assert "echo\ttext:str\tEcho the text back." in out
    assert "add\ta:int, b?:int\tAdd two integers." in out
    assert "config://app\tconfig\tapplication/json" in out
    assert "users://{user_id}/profile\tprofile" in out
    assert "review\tcode, language?\tReview some code." in out
    assert "\x1b" not in out + r.stderr  # not a terminal: no colour, no spinner


def test_list_json(mcpkit: Run, kitchen_sink: str) -> None:
    r = mcpkit("list", kitchen_sink, "--json")
    assert r.code == 0, r
    data = r.json()
    assert data["serverInfo"] == {"name": "kitchen-sink", "version": "1.2.3"}
    assert data["protocolVersion"] == "2026-07-28" and data["era"] == "modern"
    assert [t["name"] for t in data["tools"]] == KS_TOOLS
    assert data["tools"][1]["inputSchema"]["required"] == ["a"]
    assert [r["uri"] for r in data["resources"]] == ["config://app"]
    assert [t["uriTemplate"] for t in data["resourceTemplates"]] == ["users://{user_id}/profile"]
    assert [p["name"] for p in data["prompts"]] == ["review"]
    assert "tools" in data["capabilities"]


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ("tools", "tools"),
        ("resources", "resources"),
        ("templates", "resourceTemplates"),
        ("prompt", "prompts"),
    ],
)
def test_list_one_section(mcpkit: Run, kitchen_sink: str, section: str, key: str) -> None:
    r = mcpkit("list", kitchen_sink, section, "--json")
    assert r.code == 0, r
    data = r.json()
    assert key in data
    assert not {"tools", "resources", "resourceTemplates", "prompts"} - {key} & data.keys()
    plain = mcpkit("list", kitchen_sink, section)
    assert plain.code == 0 and ":\n" not in plain.stdout  # one section: just its rows
    assert len(plain.stdout.splitlines()) == len(data[key])


def test_list_legacy_protocol(mcpkit: Run, kitchen_sink: str) -> None:
    r = mcpkit("list", kitchen_sink, "tools", "--protocol", "legacy", "--json")
    assert r.code == 0, r
    assert r.json()["protocolVersion"] == "2025-11-25" and r.json()["era"] == "legacy"
    r = mcpkit("list", kitchen_sink, "tools", "--protocol", "2025-03-26", "--json")
    assert r.json()["protocolVersion"] == "2025-03-26"


def test_call_key_value_arguments(mcpkit: Run, kitchen_sink: str) -> None:
    r = mcpkit("call", kitchen_sink, "add", "a=2", "b=40")
    assert (r.code, r.stdout) == (0, "42\n"), r
    # A property declared as a string keeps what was typed, even when it parses as JSON.
    r = mcpkit("call", kitchen_sink, "echo", "text=123", "--json")
    assert r.code == 0, r
    result = r.json()
    assert result["content"] == [{"type": "text", "text": "123"}]
    assert result["isError"] is False
    r = mcpkit("call", kitchen_sink, "echo", "text=a=b c")
    assert r.stdout == "a=b c\n"


def test_call_json_args(mcpkit: Run, kitchen_sink: str, tmp_path: Path) -> None:
    r = mcpkit("call", kitchen_sink, "add", "--json-args", '{"a": 1, "b": 2}')
    assert (r.code, r.stdout) == (0, "3\n"), r
    r = mcpkit("call", kitchen_sink, "add", "--json-args", '{"a": 1, "b": 2}', "b=10")  # pairs win
    assert r.stdout == "11\n", r
    args = tmp_path / "args.json"
    args.write_text('{"a": 5}')
    assert mcpkit("call", kitchen_sink, "add", "--json-args", f"@{args}").stdout == "6\n"
    assert mcpkit("call", kitchen_sink, "add", "--json-args", "-", stdin='{"a": 7, "b": 7}').stdout == "14\n"


def test_call_structured_and_image(mcpkit: Run, kitchen_sink: str) -> None:
    r = mcpkit("call", kitchen_sink, "forecast", "city=Paris")
    assert r.code == 0, r
    assert json.loads(r.stdout) == {"city": "Paris", "celsius": 21.5}
    r = mcpkit("call", kitchen_sink, "forecast", "city=Paris", "--json")
    assert r.json()["structuredContent"] == {"city": "Paris", "celsius": 21.5}
    r = mcpkit("call", kitchen_sink, "pixel")
    assert r.code == 0 and r.stdout.startswith("[image: image/png,"), r
    assert mcpkit("call", kitchen_sink, "pixel", "--json").json()["content"][0]["mimeType"] == "image/png"


def test_call_tool_error_exits_4(mcpkit: Run, kitchen_sink: str) -> None:
    r = mcpkit("call", kitchen_sink, "fail", "message=boom")
    assert r.code == 4, r
    assert r.stdout == ""
    assert "tool fail reported an error: boom" in r.stderr
    r = mcpkit("call", kitchen_sink, "fail", "message=boom", "--json")
    assert r.code == 4
    assert r.json()["isError"] is True  # the result itself, for scripts
    assert "boom" in r.stderr


def test_call_unknown_tool_exits_4_with_suggestion(mcpkit: Run, kitchen_sink: str) -> None:
    r = mcpkit("call", kitchen_sink, "ecko", "text=x")
    assert r.code == 4, r
    assert "Unknown tool" in r.stderr and "did you mean echo?" in r.stderr
    r = mcpkit("call", kitchen_sink, "ecko", "--json")
    assert r.json()["error"]["kind"] == "protocol" and r.json()["error"]["code"] == 4


def test_read(mcpkit: Run, kitchen_sink: str) -> None:
    r = mcpkit("read", kitchen_sink, "config://app")
    assert (r.code, r.stdout) == (0, '{"theme": "dark"}\n'), r
    r = mcpkit("read", kitchen_sink, "users://7/profile", "--json")
    assert r.code == 0, r
    (contents,) = r.json()["contents"]
    assert contents["uri"] == "users://7/profile"
    assert json.loads(contents["text"]) == {"id": 7, "name": "user7"}
    r = mcpkit("read", kitchen_sink, "nope://x")
    assert r.code == 4 and "nope://x" in r.stderr, r


def test_prompt(mcpkit: Run, kitchen_sink: str) -> None:
    r = mcpkit("prompt", kitchen_sink, "review", "code=print(1)", "language=go")
    assert r.code == 0, r
    assert "user:\nReview this go:\nprint(1)\n" in r.stdout
    r = mcpkit("prompt", kitchen_sink, "review", "code=x", "--json")
    (message,) = r.json()["messages"]
    assert message["role"] == "user" and message["content"]["text"] == "Review this python:\nx"
    # Prompt arguments are strings: nothing is parsed as JSON.
    r = mcpkit("prompt", kitchen_sink, "review", "code=123", "--json")
    assert r.json()["messages"][0]["content"]["text"].endswith("\n123")
    r = mcpkit("prompt", kitchen_sink, "nope")
    assert r.code == 4, r


def test_file_object_target(mcpkit: Run, kitchen_sink: str) -> None:
    r = mcpkit("call", f"{kitchen_sink}:server", "add", "a=1")
    assert (r.code, r.stdout) == (0, "2\n"), r


def test_command_target_after_dashes(mcpkit: Run, kitchen_sink: str) -> None:
    r = mcpkit("call", "add", "a=1", "b=1", "--json", "--", sys.executable, kitchen_sink)
    assert r.code == 0, r
    assert r.json()["content"][0]["text"] == "2"
    r = mcpkit("list", "prompts", "--", sys.executable, kitchen_sink)
    assert r.stdout.startswith("review\t"), r


def test_verbose_shows_server_stderr(mcpkit: Run, kitchen_sink: str) -> None:
    quiet = mcpkit("call", kitchen_sink, "shout", "text=hello")
    assert quiet.code == 0 and "SHOUT hello" not in quiet.stderr, quiet
    loud = mcpkit("call", kitchen_sink, "shout", "text=hello", "-v")
    assert loud.code == 0 and "SHOUT hello" in loud.stderr, loud


# -- targets from a config file ------------------------------------------------------------------


def test_config_name_target(mcpkit: Run, kitchen_sink: str, tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "ks": {"type": "stdio", "command": sys.executable, "args": [kitchen_sink]},
                    # Another entry's unset variable does not stop this one.
                    "other": {"command": "${CLI_TEST_SURELY_UNSET}"},
                }
            }
        )
    )
    r = mcpkit("call", "ks", "echo", "text=from config", cwd=tmp_path)
    assert (r.code, r.stdout) == (0, "from config\n"), r
    r = mcpkit("call", "other", "echo", cwd=tmp_path)
    assert r.code == 1 and "CLI_TEST_SURELY_UNSET" in r.stderr, r
    r = mcpkit("call", "missing", "echo", cwd=tmp_path)
    assert r.code == 2 and "servers: ks, other" in r.stderr, r
    vscode = tmp_path / "vs" / ".vscode" / "mcp.json"
    vscode.parent.mkdir(parents=True)
    entry = json.dumps({"type": "stdio", "command": sys.executable, "args": [kitchen_sink]})
    vscode.write_text('{\n  // comments are fine\n  "servers": {"k": ' + entry[:-1] + ",},},\n}")
    r = mcpkit("read", "--config", str(vscode), "k", "config://app")
    assert (r.code, r.stdout) == (0, '{"theme": "dark"}\n'), r


# -- errors and exit codes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["call", "x.py"],
        ["call", "nonexistent_file.py", "echo"],
        ["list", "no-such-server"],
        ["list", "KS", "bogus-section"],
        ["call", "KS", "add", "not-a-pair"],
        ["call", "KS", "add", "--json-args", "[1, 2]"],
        ["call", "KS", "add", "--json-args", "{oops"],
        ["list", "KS", "--protocol", "1999-01-01"],
        ["list", "KS", "--header", "X-A: 1"],
        ["list", "http://127.0.0.1:1/mcp", "--env", "A=1"],
        ["list", "KS", "--env", "not a pair"],
        ["list", "KS", "--no-such-option"],
        ["frobnicate"],
        ["config"],
    ],
)
def test_usage_errors_exit_2(mcpkit: Run, args: list[str]) -> None:
    args = [str(KITCHEN_SINK) if a == "KS" else a for a in args]
    r = mcpkit(*args)
    assert r.code == 2, r
    assert r.stdout == ""
    assert "error:" in r.stderr
    r = mcpkit(*args, "--json")
    assert r.code == 2
    assert r.json()["error"]["kind"] == "usage"


def test_connection_errors_exit_3(mcpkit: Run) -> None:
    r = mcpkit("list", "--", "surely-not-a-command-xyz")
    assert r.code == 3 and "command not found: surely-not-a-command-xyz" in r.stderr, r
    crash = "import sys; print('exploded on start', file=sys.stderr); sys.exit(1)"
    r = mcpkit("list", "--", sys.executable, "-c", crash)
    assert r.code == 3, r
    assert "server stderr" in r.stderr and "exploded on start" in r.stderr
    r = mcpkit("list", f"http://127.0.0.1:{free_port()}/mcp", "--json")
    assert r.code == 3, r
    assert r.json()["error"]["kind"] == "connection"


def test_connect_timeout_exits_3(mcpkit: Run) -> None:
    silent = "import time; time.sleep(30)"
    r = mcpkit("list", "--timeout", "1.5", "--", sys.executable, "-c", silent, timeout=15)
    assert r.code == 3, r
    assert "no answer within 1.5s" in r.stderr


# -- over HTTP: `mcpkit run --transport http` as the server ---------------------------------------


@pytest.fixture
def http_server(kitchen_sink: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [*MCPKIT, "run", kitchen_sink, "--transport", "http", "--port", str(port)],
        env=base_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def test_url_targets(mcpkit: Run, http_server: str) -> None:
    r = mcpkit("list", f"{http_server}/mcp", "tools", "--json", "--header", "X-Trace: 1")
    assert r.code == 0, r
    assert [t["name"] for t in r.json()["tools"]] == KS_TOOLS
    r = mcpkit("call", f"{http_server}/mcp", "add", "a=20", "b=22", "--transport", "http")
    assert (r.code, r.stdout) == (0, "42\n"), r
    r = mcpkit("read", f"{http_server}/sse", "config://app", "--transport", "sse")
    assert (r.code, r.stdout) == (0, '{"theme": "dark"}\n'), r


# -- the official Python SDK's server ------------------------------------------------------------


def test_official_server_list_and_call(mcpkit: Run, official: list[str]) -> None:
    r = mcpkit("list", "--json", "--", *official)
    assert r.code == 0, r
    data = r.json()
    assert data["serverInfo"]["name"] == "official-server"
    assert {"echo", "add", "weather", "fail"} <= {t["name"] for t in data["tools"]}
    assert {"config://app", "data://blob"} <= {r["uri"] for r in data["resources"]}
    r = mcpkit("call", "add", "a=3", "b=4", "--", *official)
    assert (r.code, r.stdout) == (0, "7\n"), r
    r = mcpkit("call", "fail", "message=nope", "--", *official)
    assert r.code == 4 and "tool fail reported an error" in r.stderr, r


def test_official_server_read_and_prompt(mcpkit: Run, official: list[str]) -> None:
    r = mcpkit("read", "data://blob", "--", *official)
    assert r.code == 0 and "binary resource data://blob" in r.stdout and "4 bytes" in r.stdout, r
    r = mcpkit("read", "data://blob", "--json", "--", *official)
    assert r.json()["contents"][0]["blob"] == "AAEC/w=="
    r = mcpkit("prompt", "repeat", "word=hi", "times=3", "--", *official)
    assert r.code == 0 and "hi hi hi" in r.stdout, r
    r = mcpkit("list", "tools", "--protocol", "legacy", "--json", "--", *official)
    assert r.json()["protocolVersion"] == "2025-11-25"


# -- the npm reference server --------------------------------------------------------------------


def test_everything_server(mcpkit: Run, everything: list[str]) -> None:
    r = mcpkit("list", "--json", "--", *everything)
    assert r.code == 0, r
    data = r.json()
    assert data["serverInfo"]["name"] == "mcp-servers/everything"
    tools = {t["name"] for t in data["tools"]}
    assert {"echo", "get-sum", "get-env"} <= tools
    assert data["resources"] and data["resourceTemplates"] and data["prompts"]
    r = mcpkit("call", "echo", "message=hello there", "--", *everything)
    assert (r.code, r.stdout) == (0, "Echo: hello there\n"), r
    r = mcpkit("call", "get-sum", "a=2", "b=3", "--", *everything)
    assert r.code == 0 and "5" in r.stdout, r
    r = mcpkit("call", "get-env", "--env", "MCPKIT_CLI_PROBE=visible", "--", *everything)
    assert r.code == 0 and "MCPKIT_CLI_PROBE" in r.stdout and "visible" in r.stdout, r
    r = mcpkit("prompt", "args-prompt", "city=Paris", "--", *everything)
    assert r.code == 0 and "Paris" in r.stdout, r
    uri = data["resources"][0]["uri"]
    r = mcpkit("read", uri, "--json", "--", *everything)
    assert r.code == 0 and r.json()["contents"][0]["uri"] == uri, r


# -- terminals: colour, tables, spinner ----------------------------------------------------------


def test_terminal_output_has_colour_tables_and_spinner(kitchen_sink: str) -> None:
    out = run_in_pty(["list", kitchen_sink])
    assert "\x1b[36m" in out  # coloured names
    assert "Tools (7)" in out and "Resource templates (1)" in out
    assert "connecting to" in out  # the spinner, on the terminal's stderr
    assert "\t" not in out
    plain = run_in_pty(["list", kitchen_sink], env={"NO_COLOR": "1"})
    assert "\x1b[36m" not in plain and "\x1b[1m" not in plain
    assert "Tools (7)" in plain
    # Aligned: the descriptions of echo and forecast start in the same column.
    lines = {line.split()[0]: line for line in plain.replace("\r", "").splitlines() if line.startswith("  ")}
    assert lines["echo"].index("Echo the") == lines["forecast"].index("Structured")


def test_json_on_a_terminal_is_plain_json(kitchen_sink: str) -> None:
    out = run_in_pty(["call", kitchen_sink, "add", "a=1", "--json"], env={"NO_COLOR": "1"})
    body = out[out.index("{") :].replace("\r", "")
    assert json.loads(body)["content"][0]["text"] == "2"
