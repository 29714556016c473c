"""Issue 19, items 2, 3, 5 and 7: what outside testers hit with the ``mcpkit`` command line.

Every test runs the ``mcpkit`` entry point of this virtualenv as a user does, against
real server processes: ``asking_server.py`` (mcpkit, either era or both), the
official-SDK server and the npm reference server.

2. ``-v`` shows the server's log messages in the modern era too (the client asks for a
   log level in each request's ``_meta``), not only in the legacy one.
3. ``mcpkit run --transport http`` says where it serves (endpoints, bind address,
   eras); a taken port is a one-line error; with ``--workers`` too.
5. On a terminal, ``mcpkit call`` asks the user what the server asks (a form from the
   requested schema) in both eras, and offers the current directory as its roots;
   ``--no-input`` keeps the old behaviour.
7. ``--protocol modern`` against a legacy-only server (and ``legacy`` against a
   modern-only one) says so, and points to ``--protocol auto``.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import termios
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from cli_helpers import ROOT, Result, base_env

ASKING = ROOT / "tests" / "cli" / "asking_server.py"
#: The ``mcpkit`` console script of the virtualenv running the tests.
MCPKIT_BIN = Path(sys.executable).with_name("mcpkit")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module", autouse=True)
def _entry_point() -> None:
    if not MCPKIT_BIN.is_file():
        pytest.fail(f"no mcpkit entry point at {MCPKIT_BIN}: install the project (make .venv/.installed)")


def mcpkit(
    *args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None, timeout: float = 60
) -> Result:
    proc = subprocess.run(
        [str(MCPKIT_BIN), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=base_env(env),
        cwd=cwd or ROOT,
        timeout=timeout,
    )
    return Result(list(args), proc.returncode, proc.stdout, proc.stderr)


# -- 2. -v shows the server's log messages in both eras ------------------------------------------


@pytest.mark.parametrize("protocol", ["auto", "modern", "legacy"])
def test_verbose_shows_log_messages_in_both_eras(protocol: str) -> None:
    r = mcpkit("call", str(ASKING), "chatty", "-v", "--protocol", protocol)
    assert r.code == 0 and r.stdout == "chatted\n", r
    # -v asks for every level: debug too.
    assert "[server debug] chatty debug line" in r.stderr, r
    assert "[server info] chatty info line" in r.stderr, r


def test_verbose_shows_official_sdk_server_logs_in_the_modern_era(official: list[str]) -> None:
    r = mcpkit("call", "work", "steps=1", "-v", "--json", "--", *official)
    assert r.code == 0, r
    assert json.loads(r.stdout)["content"][0]["text"] == "worked 1"
    assert "[server info] working 1 steps" in r.stderr, r
    assert "[server debug] debug detail" in r.stderr, r


def test_without_verbose_no_log_messages() -> None:
    r = mcpkit("call", str(ASKING), "chatty")
    assert r.code == 0 and "[server" not in r.stderr, r


# -- 3. mcpkit run --transport http says where it serves -----------------------------------------


class Served:
    """A ``mcpkit run ... --transport http`` process and the lines it printed on stderr."""

    def __init__(self, args: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [str(MCPKIT_BIN), "run", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=base_env(env),
            cwd=ROOT,
        )
        self.err = b""

    def wait_for(self, pattern: str, timeout: float = 20) -> re.Match[str]:
        """The first match of ``pattern`` in what it wrote on stderr, waiting for it."""
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.text)
            if found:
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} on stderr within {timeout}s:\n{self.text}")
            ready, _, _ = select.select([fd], [], [], min(left, 0.2))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk and self.proc.poll() is not None:
                    raise AssertionError(f"exited with {self.proc.returncode} first:\n{self.text}")
                self.err += chunk

    @property
    def text(self) -> str:
        return self.err.decode("utf-8", "replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        assert self.proc.stderr is not None
        if not self.proc.stderr.closed:
            self.err += self.proc.stderr.read()
            self.proc.stderr.close()
        return self.proc.returncode


@pytest.fixture
def serve() -> Iterator[type[Served]]:
    started: list[Served] = []

    class Tracked(Served):
        def __init__(self, args: Sequence[str], env: Mapping[str, str] | None = None) -> None:
            super().__init__(args, env)
            started.append(self)

    yield Tracked
    for served in started:
        served.stop()


def test_run_http_prints_endpoints_bind_address_and_eras(serve: type[Served]) -> None:
    served = serve([str(ASKING), "--transport", "http", "--port", "0"])
    head = served.wait_for(r"serving asking-server 0\.3\.0 over HTTP on 127\.0\.0\.1:(\d+)")
    port = head[1]
    mcp = served.wait_for(r"Streamable HTTP +(http://\S+)")[1]
    sse = served.wait_for(r"HTTP\+SSE \(legacy\) +(http://\S+)")[1]
    eras = served.wait_for(r"eras +(.+)")[1]
    assert mcp == f"http://127.0.0.1:{port}/mcp"
    assert sse == f"http://127.0.0.1:{port}/sse"
    assert "modern 2026-07-28" in eras and "legacy 2025-11-25" in eras and "2024-11-05" in eras
    assert f"http://127.0.0.1:{port}/healthz" in served.text
    # The URLs printed are the ones that answer.
    r = mcpkit("call", mcp, "chatty", "-v")
    assert (r.code, r.stdout) == (0, "chatted\n"), r
    assert "[server info] chatty info line" in r.stderr  # item 2 over HTTP, modern era
    r = mcpkit("list", sse, "tools", "--transport", "sse", "--protocol", "legacy", "--json")
    assert r.code == 0 and r.json()["era"] == "legacy", r
    assert served.stop() == 0
    assert "Traceback" not in served.text, served.text


def test_run_http_legacy_only_server_prints_its_one_era(serve: type[Served]) -> None:
    served = serve([str(ASKING), "--transport", "http", "--port", "0"], env={"ASKING_SERVER_ERA": "legacy"})
    eras = served.wait_for(r"eras +(.+)")[1]
    assert "legacy 2025-11-25" in eras and "modern" not in eras, served.text


def test_run_workers_prints_where_it_serves(serve: type[Served]) -> None:
    served = serve([str(ASKING), "--transport", "http", "--port", "0", "--workers", "2", "--stateless"])
    served.wait_for(r"over HTTP on 127\.0\.0\.1:\d+ \(2 worker processes\)")
    mcp = served.wait_for(r"Streamable HTTP +(http://\S+)")[1]
    eras = served.wait_for(r"eras +(.+)")[1]
    assert "modern 2026-07-28" in eras and "stateless" in eras, served.text
    # Workers without Redis serve no HTTP+SSE (a session would live in one worker only).
    assert "HTTP+SSE" not in served.text
    r = mcpkit("call", mcp, "chatty")
    assert (r.code, r.stdout) == (0, "chatted\n"), r


@pytest.mark.parametrize("workers", [[], ["--workers", "2", "--stateless"]], ids=["one", "workers"])
def test_run_http_port_in_use_is_one_line(workers: list[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = mcpkit("run", str(ASKING), "--transport", "http", "--port", str(port), *workers, timeout=30)
    assert r.code == 1, r
    assert r.stderr.count("\n") == 1, r  # one line, no traceback
    assert f"cannot listen on 127.0.0.1:{port}: the port is already in use" in r.stderr, r
    assert "serving" not in r.stderr


# -- 5. asking the user on a terminal; roots -------------------------------------------------------


class Terminal:
    """``mcpkit ARGS`` with stdin, stdout and stderr on a pseudo-terminal, as in a shell."""

    def __init__(self, args: Sequence[str], cwd: Path = ROOT, *, stderr_to: int | None = None) -> None:
        master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [str(MCPKIT_BIN), *args],
            stdin=slave,
            stdout=slave,
            stderr=slave if stderr_to is None else stderr_to,
            env=base_env({"NO_COLOR": "1", "COLUMNS": "200", "LINES": "40"}),
            cwd=cwd,
            start_new_session=True,
            # The pseudo-terminal becomes the command's controlling terminal (/dev/tty), as a
            # shell's terminal is.
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        self.master = master
        self.raw = b""
        self.seen = 0  # what expect() has consumed of the screen text

    @property
    def screen(self) -> str:
        return _ANSI.sub("", self.raw.decode("utf-8", "replace")).replace("\r", "")

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # the other side closed (EIO)
            return False
        self.raw += chunk
        return bool(chunk)

    def expect(self, text: str, timeout: float = 30) -> None:
        """Wait for ``text`` after what earlier expects matched."""
        deadline = time.monotonic() + timeout
        while True:
            at = self.screen.find(text, self.seen)
            if at >= 0:
                self.seen = at + len(text)
                return
            if time.monotonic() > deadline or not self._read(0.2):
                raise AssertionError(f"no {text!r} on the terminal:\n{self.screen[self.seen :]}")

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def end_input(self) -> None:
        os.write(self.master, b"\x04")  # Ctrl+D

    def finish(self, timeout: float = 30) -> tuple[int, str]:
        """Its exit code, and what it wrote after the last expect."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None or self._read(0):
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError(f"still running after {timeout}s:\n{self.screen}")
            if not self._read(0.1) and self.proc.poll() is not None:
                break
        os.close(self.master)
        return self.proc.wait(5), self.screen[self.seen :]


def _result(tail: str) -> dict[str, object]:
    """The tool's JSON answer, the last JSON line on the terminal."""
    lines = [line[line.find("{") :] for line in tail.splitlines() if '{"action"' in line]
    assert lines, tail
    parsed: dict[str, object] = json.loads(lines[-1])
    return parsed


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_call_asks_the_user_for_a_form_on_a_terminal(protocol: str) -> None:
    term = Terminal(["call", str(ASKING), "signup", "--protocol", protocol])
    term.expect("asking-server (")  # which server asks
    term.expect("asks: Sign up for the newsletter")
    term.expect("fill in the form (f), decline (d) or cancel (c)? [f]: ")
    term.type("")
    term.expect("Name * (text, at least 2 characters) — What to call you: ")
    term.type("A")  # too short: asked again
    term.expect("at least 2 characters")
    term.expect("What to call you: ")
    term.type("Ada")
    term.expect("age (integer, 0 to 150): ")
    term.type("old")
    term.expect("type a whole number")
    term.expect("age (integer, 0 to 150): ")
    term.type("36")
    term.expect("color (1 red, 2 green, 3 blue) [green]: ")
    term.type("")  # the default
    term.expect("plan (1 Free, 2 Pro): ")
    term.type("pro")  # a title, any case
    term.expect("subscribe (y/n) [n]: ")
    term.type("y")
    term.expect('{"name": "Ada", "age": 36, "color": "green", "plan": "p2", "subscribe": true}')
    term.expect("send (s), edit (e), decline (d) or cancel (c)? [s]: ")
    term.type("e")  # review, then change one answer
    term.expect("What to call you [Ada]: ")
    term.type("")
    term.expect("age (integer, 0 to 150) [36]: ")
    term.type("37")
    for prompt in ("[green]: ", "plan (1 Free, 2 Pro) [Pro]: ", "subscribe (y/n) [y]: "):
        term.expect(prompt)
        term.type("")
    term.expect("[s]: ")
    term.type("s")
    code, tail = term.finish()
    assert code == 0, tail
    assert _result(tail) == {
        "action": "accept",
        "content": {"name": "Ada", "age": 37, "color": "green", "plan": "p2", "subscribe": True},
    }


@pytest.mark.parametrize(
    ("protocol", "answer", "action"),
    [("modern", "d", "decline"), ("legacy", "decline", "decline"), ("modern", None, "cancel")],
)
def test_call_user_declines_or_cancels(protocol: str, answer: str | None, action: str) -> None:
    term = Terminal(["call", str(ASKING), "signup", "--protocol", protocol])
    term.expect("decline (d) or cancel (c)? [f]: ")
    if answer is None:
        term.end_input()
    else:
        term.type(answer)
    code, tail = term.finish()
    assert code == 0, tail
    assert _result(tail) == {"action": action, "content": None}


def test_call_asks_on_the_terminal_when_stderr_is_redirected(tmp_path: Path) -> None:
    """``mcpkit call ... 2>log`` from a shell: the form still reaches the user (on /dev/tty)."""
    with (tmp_path / "log").open("wb") as log:
        term = Terminal(["call", str(ASKING), "signup"], stderr_to=log.fileno())
        term.expect("fill in the form (f), decline (d) or cancel (c)? [f]: ")
        term.type("")
        term.expect("What to call you: ")
        term.type("Bob")
        for prompt in ("age (integer, 0 to 150): ", "[green]: ", "plan (1 Free, 2 Pro): ", "[n]: ", "[s]: "):
            term.expect(prompt)
            term.type("")
        code, tail = term.finish()
    assert code == 0, tail
    assert _result(tail) == {
        "action": "accept",
        "content": {"name": "Bob", "color": "green", "subscribe": False},
    }
    assert "asks:" not in (tmp_path / "log").read_text()


def test_call_no_input_on_a_terminal_asks_nothing() -> None:
    term = Terminal(["call", str(ASKING), "signup", "--no-input"])
    code, tail = term.finish()
    assert code == 4, tail
    assert "-32021" in tail and "elicitation" in tail, tail
    assert "asks:" not in tail


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_call_offers_the_current_directory_as_roots(protocol: str, tmp_path: Path) -> None:
    r = mcpkit("call", str(ASKING), "where", "--protocol", protocol, cwd=tmp_path)
    assert (r.code, r.stdout) == (0, tmp_path.resolve().as_uri() + "\n"), r
    r = mcpkit("call", str(ASKING), "where", "--protocol", protocol, "--no-input", cwd=tmp_path)
    assert r.code == 4 and "-32021" in r.stderr and "roots" in r.stderr, r


def test_call_without_a_terminal_says_why_it_cannot_answer() -> None:
    r = mcpkit("call", str(ASKING), "signup")
    assert r.code == 4 and "-32021" in r.stderr, r
    assert "terminal" in r.stderr, r  # the hint: run it where it can ask


# -- 7. an era the server does not speak ------------------------------------------------------------


def test_protocol_modern_against_a_legacy_only_server() -> None:
    r = mcpkit("list", str(ASKING), "--protocol", "modern", "-e", "ASKING_SERVER_ERA=legacy")
    assert r.code == 3, r
    assert "speaks only the legacy era" in r.stderr and "--protocol auto" in r.stderr, r
    assert "exited with code" not in r.stderr  # not the misleading "exited before answering"
    r = mcpkit("list", str(ASKING), "tools", "-e", "ASKING_SERVER_ERA=legacy", "--json")
    assert r.code == 0 and r.json()["era"] == "legacy", r  # what the hint says works


def test_protocol_modern_against_the_npm_reference_server(everything: list[str]) -> None:
    """A third-party legacy-only server: it answers server/discover with Method not found."""
    r = mcpkit("list", "--protocol", "modern", "--", *everything)
    assert r.code == 3, r
    assert "speaks only the legacy era" in r.stderr and "-32601" in r.stderr, r
    assert "--protocol auto (the default)" in r.stderr, r


def test_protocol_legacy_against_a_modern_only_server() -> None:
    r = mcpkit("list", str(ASKING), "--protocol", "legacy", "-e", "ASKING_SERVER_ERA=modern")
    assert r.code == 3, r
    assert "speaks only the modern era (2026-07-28)" in r.stderr and "--protocol auto" in r.stderr, r


def test_protocol_mismatch_over_http(serve: type[Served]) -> None:
    served = serve([str(ASKING), "--transport", "http", "--port", "0"], env={"ASKING_SERVER_ERA": "legacy"})
    url = served.wait_for(r"Streamable HTTP +(http://\S+)")[1]
    r = mcpkit("list", url, "--protocol", "2026-07-28")
    assert r.code == 3 and "speaks only the legacy era" in r.stderr, r
    modern = serve([str(ASKING), "--transport", "http", "--port", "0"], env={"ASKING_SERVER_ERA": "modern"})
    url = modern.wait_for(r"Streamable HTTP +(http://\S+)")[1]
    r = mcpkit("list", url, "--protocol", "legacy")
    assert r.code == 3 and "speaks only the modern era" in r.stderr, r


def test_protocol_legacy_against_a_dual_era_server_still_works() -> None:
    r = mcpkit("list", str(ASKING), "tools", "--protocol", "legacy", "--json")
    assert r.code == 0 and r.json()["era"] == "legacy", r
