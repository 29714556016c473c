"""A stdio server's stderr, passed on to the user's terminal by the host and gateway."""

from __future__ import annotations

import pytest

from mcpkit.host._process import StderrTail


def test_a_stdio_servers_stderr_reaches_the_terminal_inert(capsys: pytest.CaptureFixture[str]) -> None:
    tail = StderrTail()
    # OSC 52 (write the clipboard) and a screen clear, as a hostile server would print them.
    tail.sink(b"loading\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J done\n")
    err = capsys.readouterr().err
    assert "\x1b" not in err and err == "loading\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J done\n"
    assert tail.summary() == "; stderr: loading\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J done"
