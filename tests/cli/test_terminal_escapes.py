"""Server text cannot drive the user's terminal (issue 17, item 4).

A real ``mcpkit list`` / ``mcpkit call`` process against a malicious stdio server
(tests/client/hostile/server.py) whose tool descriptions, results, log messages,
errors and stderr are full of escape sequences: CSI (colour, clear screen, cursor
home), OSC 0 (window title), OSC 8 (a hyperlink), OSC 52 (a clipboard write), the
8-bit CSI, BEL, backspace, carriage return and a bidi override. None of those
characters may reach stdout or stderr raw; they are shown as visible escapes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_helpers import Run, run_in_pty

from mcpkit.host._safe_text import escape_json_text, safe_text

HOSTILE = Path(__file__).resolve().parents[1] / "client" / "hostile" / "server.py"
SERVER = ["--", sys.executable, str(HOSTILE), "stdio"]
EVIL = (
    "plain \x1b[31mred\x1b[0m \x1b[2J\x1b[H"
    "\x1b]0;pwned title\x07"
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
    "\x1b]52;c;ZWNobyBwd25lZA==\x07"
    "\x9b31m c1 \x07\x08\r\u202eevil\u202c end"
)
# What a terminal acts on: none of these may be written raw.
RAW = ("\x1b", "\x9b", "\x07", "\x08", "\r", "\u202e", "\u202c")


def assert_inert(text: str) -> None:
    for char in RAW:
        assert char not in text, f"{char!r} reached the terminal:\n{text!r}"


def test_the_tool_list_shows_escapes_instead_of_sending_them(mcpkit: Run) -> None:
    result = mcpkit("list", *SERVER)
    assert result.code == 0, result
    assert_inert(result.stdout)
    assert_inert(result.stderr)
    # Visible, so the user sees something was hidden there.
    assert "evil tool plain \\x1b[31mred\\x1b[0m" in result.stdout
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in result.stdout
    assert "\\u202eevil" in result.stdout


def test_a_call_result_log_messages_and_server_stderr_are_inert(mcpkit: Run) -> None:
    result = mcpkit("call", "-v", "evil", *SERVER)
    assert result.code == 0, result
    assert_inert(result.stdout)
    assert_inert(result.stderr)
    assert "result plain \\x1b[31mred" in result.stdout
    assert "[server warning] log plain \\x1b[31mred" in result.stderr  # the log message
    assert "starting plain \\x1b[31mred" in result.stderr  # the server's own stderr, with -v


def test_a_server_error_message_is_inert(mcpkit: Run) -> None:
    result = mcpkit("call", "evil_error", *SERVER)
    assert result.code == 4, result
    assert_inert(result.stdout)
    assert_inert(result.stderr)
    assert "failed plain \\x1b[31mred" in result.stderr


def test_json_output_keeps_the_exact_text_escaped(mcpkit: Run) -> None:
    result = mcpkit("call", "--json", "evil", *SERVER)
    assert result.code == 0, result
    assert_inert(result.stdout)
    # Nothing is lost: the JSON value is the server's text, byte for byte.
    assert result.json()["content"][0]["text"] == f"result {EVIL}"


def test_on_a_terminal_the_cli_colours_survive_and_the_servers_sequences_do_not() -> None:
    output = run_in_pty(["list", *SERVER])
    assert "evil tool" in output
    assert "\x1b[36m" in output or "\x1b[1m" in output  # the CLI's own styling is still there
    for sequence in ("\x1b[2J", "\x1b[H", "\x1b]", "\x9b", "\x07", "\u202e"):
        assert sequence not in output, f"{sequence!r} reached the terminal"
    assert "\\x1b]8;;https://evil.example/" in output


# -- the sanitizer itself ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("\x1b]8;;http://x/\x1b\\y", "\\x1b]8;;http://x/\\x1b\\y"),
        ("\x9b1m", "\\x9b1m"),
        ("tab\tand\nnewline", "tab\tand\nnewline"),
        ("crlf\r\nline", "crlf\nline"),
        ("over\rwrite", "over\\x0dwrite"),
        ("\u202edesrever", "\\u202edesrever"),
        ("nul\x00del\x7f", "nul\\x00del\\x7f"),
        ("emoji 🙂 and ünïcode", "emoji 🙂 and ünïcode"),
    ],
)
def test_safe_text_shows_every_control_character(text: str, shown: str) -> None:
    assert safe_text(text) == shown


def test_keep_sgr_keeps_only_the_clis_own_colours() -> None:
    assert safe_text("\x1b[1;36mname\x1b[0m", keep_sgr=True) == "\x1b[1;36mname\x1b[0m"
    # Conceal (8), reverse (7), 256-colour and cursor sequences are not the CLI's: shown.
    assert safe_text("\x1b[8mhidden\x1b[0m", keep_sgr=True) == "\\x1b[8mhidden\x1b[0m"
    assert safe_text("\x1b[38;5;1mx", keep_sgr=True) == "\\x1b[38;5;1mx"
    assert safe_text("\x1b[2J", keep_sgr=True) == "\\x1b[2J"
    assert safe_text("\x1b[1;36mname", keep_sgr=False) == "\\x1b[1;36mname"


def test_json_escaping_is_the_same_value() -> None:
    value = {"t": "c1\x9b bidi\u202e ls\u2028 del\x7f"}
    dumped = escape_json_text(json.dumps(value, ensure_ascii=False))
    assert json.loads(dumped) == value
    for char in ("\x9b", "\u202e", "\u2028", "\x7f"):
        assert char not in dumped

