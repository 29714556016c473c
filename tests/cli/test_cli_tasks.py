"""Tasks through the CLI, as a user runs it (issue 13, item 3).

Every command is the ``mcpkit`` console script of the virtualenv, in a process of its
own, against ``examples/everything_server.py`` served over HTTP by ``mcpkit run``
(its task tools: ``slow_compute``, ``failing_job``, ``protocol_error_job``,
``confirm_delete``, ``multi_input``, ``test_tool_with_task``). A task lives in that
server, so a second CLI process can look at it, wait for it or cancel it by id.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import ROOT, Result, base_env, run_in_pty
from test_cli_findings import MCPKIT_BIN, Served, Terminal
from test_cli_findings import mcpkit as run

EVERYTHING = ROOT / "examples" / "everything_server.py"
_STARTED = r"task (\S+) started"


@pytest.fixture(scope="module", autouse=True)
def _entry_point() -> None:
    if not MCPKIT_BIN.is_file():
        pytest.fail(f"no mcpkit entry point at {MCPKIT_BIN}: install the project (make .venv/.installed)")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """The everything server over HTTP, as ``mcpkit run ... --transport http --port 0`` serves it."""
    served = Served([str(EVERYTHING), "--transport", "http", "--port", "0"])
    try:
        yield served.wait_for(r"Streamable HTTP +(http://\S+)")[1]
    finally:
        assert served.stop() == 0, served.text
        assert "Traceback" not in served.text, served.text


class Background:
    """A CLI command running in the background, its stderr read as it comes."""

    def __init__(self, *args: str) -> None:
        self.args = list(args)
        self.proc = subprocess.Popen(
            [str(MCPKIT_BIN), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=base_env(),
            cwd=ROOT,
        )
        self.err = b""

    @property
    def stderr(self) -> str:
        return self.err.decode("utf-8", "replace")

    def wait_for(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """The first match of ``pattern`` on its stderr, waiting for it."""
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.stderr)
            if found:
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} on stderr within {timeout}s:\n{self.stderr}")
            ready, _, _ = select.select([fd], [], [], min(left, 0.2))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AssertionError(f"stderr closed before {pattern!r}:\n{self.stderr}")
                self.err += chunk

    def finish(self, timeout: float = 30) -> Result:
        out, err = self.proc.communicate(timeout=timeout)
        self.err += err
        return Result(self.args, self.proc.returncode, out.decode(), self.stderr)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=10)


@pytest.fixture
def background() -> Iterator[type[Background]]:
    started: list[Background] = []

    class Tracked(Background):
        def __init__(self, *args: str) -> None:
            super().__init__(*args)
            started.append(self)

    yield Tracked
    for command in started:
        command.kill()


def task_json(url: str, task_id: str) -> dict[str, object]:
    r = run("task", "get", url, task_id, "--json")
    assert r.code == 0, r
    task: dict[str, object] = r.json()
    assert task["taskId"] == task_id
    return task


def wait_status(url: str, task_id: str, status: str, timeout: float = 20) -> dict[str, object]:
    """Poll ``mcpkit task get`` until the task has ``status`` (cancellation is cooperative)."""
    deadline = time.monotonic() + timeout
    while True:
        task = task_json(url, task_id)
        if task["status"] == status or time.monotonic() > deadline:
            assert task["status"] == status, task
            return task
        time.sleep(0.1)


# -- mcpkit call of a task tool ----------------------------------------------------------------


def test_call_prints_the_task_id_its_status_and_the_result(url: str) -> None:
    r = run("call", url, "slow_compute", "seconds=0.3", "label=report")
    assert r.code == 0, r
    assert r.stdout == "computed report after 0.3s\n", r
    task_id = re.search(_STARTED, r.stderr)[1]  # type: ignore[index]
    # Off a terminal: one line per change, the id first, with how to come back to it.
    lines = r.stderr.splitlines()
    assert lines[0] == (
        f"task {task_id} started; Ctrl+C cancels it; from another shell: mcpkit task get {url} {task_id}"
    ), r
    assert f"task {task_id}: completed" in lines, r
    # The task is still there for its TTL, with its result.
    task = task_json(url, task_id)
    assert task["status"] == "completed"
    assert task["result"]["content"] == [{"type": "text", "text": "computed report after 0.3s"}], task  # type: ignore[index]


def test_call_on_a_terminal_updates_the_status_in_place(url: str) -> None:
    screen = run_in_pty(["call", url, "slow_compute", "seconds=1.5", "label=x"])
    task_id = re.search(_STARTED, screen)[1]  # type: ignore[index]
    lines = screen.split("\n")
    # The id on a line of its own; the status on the spinner's line, redrawn (\r, erase line).
    assert sum(f"task {task_id} started; Ctrl+C cancels it" in line for line in lines) == 1, screen
    assert "\r\x1b[K" in screen and f"calling slow_compute: task {task_id}: working" in screen, screen
    assert not any(line.startswith(f"task {task_id}: ") for line in lines), screen
    assert screen.endswith("computed x after 1.5s\r\n"), screen


def test_call_of_a_task_over_stdio(tmp_path: Path) -> None:
    """A stdio server's task ends with the process: no pointer to mcpkit task get."""
    r = run("call", str(EVERYTHING), "slow_compute", "seconds=0", "label=here", cwd=tmp_path)
    assert (r.code, r.stdout) == (0, "computed here after 0s\n"), r
    assert re.fullmatch(r"task \S+ started; Ctrl\+C cancels it", r.stderr.splitlines()[0]), r


def test_call_json_prints_the_result_only_on_stdout(url: str) -> None:
    r = run("call", url, "slow_compute", "seconds=0", "--json")
    assert r.code == 0, r
    assert r.json()["content"][0]["text"] == "computed  after 0s", r
    assert re.search(_STARTED, r.stderr), r


def test_call_of_a_plain_tool_shows_no_task(url: str) -> None:
    r = run("call", url, "greet", "name=Ada")
    assert (r.code, r.stdout, r.stderr) == (0, "Hello, Ada!\n", ""), r


def test_call_of_a_failing_task(url: str) -> None:
    r = run("call", url, "failing_job")
    assert r.code == 4, r
    assert "tool failing_job reported an error: the job failed" in r.stderr, r
    r = run("call", url, "protocol_error_job")
    assert r.code == 4, r
    task_id = re.search(_STARTED, r.stderr)[1]  # type: ignore[index]
    assert f"task {task_id}: failed — the job hit a protocol error" in r.stderr, r
    assert "tool protocol_error_job: [-32603] the job hit a protocol error" in r.stderr, r


def test_call_of_a_task_that_asks_without_a_terminal_says_why(url: str) -> None:
    """No terminal: elicitation is not declared, the task fails at its question and says why."""
    r = run("call", url, "confirm_delete", "filename=notes.txt")
    assert r.code == 4, r
    assert "-32021" in r.stderr and "terminal" in r.stderr, r


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "term"]
)
def test_interrupting_a_task_call_cancels_the_task(
    url: str, background: type[Background], sig: signal.Signals, code: int
) -> None:
    call = background("call", url, "slow_compute", "seconds=600")
    task_id = call.wait_for(_STARTED)[1]
    assert task_json(url, task_id)["status"] == "working"
    call.proc.send_signal(sig)
    r = call.finish()
    assert r.code == code, r
    assert f"cancelled task {task_id}" in r.stderr, r
    assert "Traceback" not in r.stderr, r
    task = wait_status(url, task_id, "cancelled")
    assert task["statusMessage"] == "Cancelled at the client's request", task


# -- mcpkit task get | cancel | wait from another process ---------------------------------------


def test_task_get_wait_and_cancel_by_id_from_other_processes(url: str, background: type[Background]) -> None:
    # Started by a call that goes away without cancelling it (killed): the task goes on.
    call = background("call", url, "slow_compute", "seconds=5", "label=late")
    task_id = call.wait_for(_STARTED)[1]
    call.kill()

    r = run("task", "get", url, task_id)
    assert r.code == 0, r
    rows = dict(line.split("\t", 1) for line in r.stdout.splitlines() if "\t" in line)
    assert rows["task"] == task_id and rows["status"] == "working" and rows["ttl"] == "3600s", r
    assert f"mcpkit task wait {url} {task_id} follows it to its end" in r.stderr, r

    r = run("task", "wait", url, task_id)
    assert (r.code, r.stdout) == (0, "computed late after 5s\n"), r
    assert f"task {task_id}: completed" in r.stderr, r

    r = run("task", "get", url, task_id)
    assert r.code == 0, r
    assert "status\tcompleted" in r.stdout and r.stdout.endswith("\ncomputed late after 5s\n"), r
    r = run("task", "wait", url, task_id, "--json")  # an ended task: its result at once
    assert r.code == 0 and r.json()["content"][0]["text"] == "computed late after 5s", r

    # Cancelled from another process, while its call waits: the call ends with the cancellation.
    call = background("call", url, "slow_compute", "seconds=600")
    task_id = call.wait_for(_STARTED)[1]
    r = run("task", "cancel", url, task_id)
    assert r.code == 0, r
    assert r.stdout in (
        f"task {task_id} cancelled\n",
        f"task {task_id}: cancellation asked; now working\n",
    ), r
    ended = call.finish()
    assert ended.code == 4 and f"task {task_id} was cancelled" in ended.stderr, ended
    wait_status(url, task_id, "cancelled")
    r = run("task", "cancel", url, task_id, "--json")
    assert r.code == 0 and r.json()["status"] == "cancelled", r
    r = run("task", "cancel", url, task_id)
    assert (r.code, r.stdout) == (0, f"task {task_id} had already ended: cancelled\n"), r
    r = run("task", "wait", url, task_id)
    assert r.code == 4 and f"task {task_id} was cancelled" in r.stderr, r


def test_task_get_of_failed_and_error_tasks(url: str) -> None:
    r = run("call", url, "protocol_error_job")
    task_id = re.search(_STARTED, r.stderr)[1]  # type: ignore[index]
    r = run("task", "get", url, task_id)
    assert r.code == 0, r
    assert "status\tfailed" in r.stdout and "error\t[-32603] the job hit a protocol error" in r.stdout, r
    task = task_json(url, task_id)
    assert task["error"] == {"code": -32603, "message": "the job hit a protocol error"}, task
    r = run("task", "wait", url, task_id)
    assert r.code == 4 and "[-32603] the job hit a protocol error" in r.stderr, r

    r = run("call", url, "failing_job")
    task_id = re.search(_STARTED, r.stderr)[1]  # type: ignore[index]
    r = run("task", "get", url, task_id)
    assert r.code == 0, r
    assert "status\tcompleted" in r.stdout and "result\tthe tool reported an error" in r.stdout, r
    r = run("task", "wait", url, task_id)
    assert r.code == 4 and f"task {task_id} reported an error: the job failed" in r.stderr, r


def test_task_wait_interrupted_leaves_the_task_running(url: str, background: type[Background]) -> None:
    call = background("call", url, "slow_compute", "seconds=600")
    task_id = call.wait_for(_STARTED)[1]
    call.kill()
    wait = background("task", "wait", url, task_id)
    wait.wait_for(f"task {task_id}: working")
    wait.proc.send_signal(signal.SIGINT)
    r = wait.finish()
    assert r.code == 130, r
    assert (
        f"stopped waiting; task {task_id} goes on (mcpkit task cancel {url} {task_id} stops it)" in r.stderr
    ), r
    assert task_json(url, task_id)["status"] == "working"
    assert run("task", "cancel", url, task_id).code == 0
    wait_status(url, task_id, "cancelled")


def test_task_commands_need_a_url(url: str, tmp_path: Path) -> None:
    r = run("task", "get", str(EVERYTHING), "some-id")
    assert r.code == 2, r
    assert "a task lives in the server process that made it" in r.stderr, r
    assert "http(s):// URL" in r.stderr, r
    r = run("task", "cancel", "some-id", "--", "python", str(EVERYTHING))
    assert r.code == 2 and "a task lives in the server process" in r.stderr, r
    # A config entry of an HTTP server will do.
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"everything": {"type": "http", "url": url}}}))
    r = run("task", "get", "everything", "no-such-task", "--config", str(config))
    assert r.code == 4, r
    assert "Task not found" in r.stderr and "the process that made it" in r.stderr, r
    r = run("task", "get", url)
    assert r.code == 2 and "missing TASK_ID" in r.stderr, r
    r = run("task", "get", url, "some-id", "--protocol", "2025-06-18")
    assert r.code == 4 and "a revision without tasks" in r.stderr, r


DASHED_SERVER = """
import asyncio
import itertools
import secrets

from mcpkit import MCPServer
from mcpkit.server import tasks
from mcpkit.server.tasks import TaskSettings

# Another server's ids may start with '-' (mcpkit's never do): this one's always do.
_made = itertools.count(1)
tasks.new_task_id = lambda: f"-dash{next(_made)}-{secrets.token_hex(8)}"

server = MCPServer("dashed", tasks=TaskSettings(poll_interval=0.05))


@server.tool(task="optional")
async def nap(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds:g}"
"""


@pytest.fixture(scope="module")
def dashed_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose task ids start with '-', over HTTP."""
    path = tmp_path_factory.mktemp("dashed") / "dashed_server.py"
    path.write_text(DASHED_SERVER)
    served = Served([str(path), "--transport", "http", "--port", "0"])
    try:
        yield served.wait_for(r"Streamable HTTP +(http://\S+)")[1]
    finally:
        assert served.stop() == 0, served.text
        assert "Traceback" not in served.text, served.text


def test_task_ids_that_start_with_a_dash(dashed_url: str, background: type[Background]) -> None:
    url = dashed_url
    r = run("call", url, "nap", "seconds=0.2")
    assert (r.code, r.stdout) == (0, "slept 0.2\n"), r
    task_id = re.search(_STARTED, r.stderr)[1]  # type: ignore[index]
    assert task_id.startswith("-dash"), r
    # The way back it prints puts the id where no option is read: after --.
    assert f"from another shell: mcpkit task get {url} -- {task_id}" in r.stderr, r

    # Right after TARGET (options before or after it): the id, not an unknown option.
    r = run("task", "get", url, task_id, "--json")
    assert r.code == 0 and r.json()["taskId"] == task_id and r.json()["status"] == "completed", r
    r = run("task", "get", "--json", url, "-v", task_id)
    assert r.code == 0 and r.json()["taskId"] == task_id, r
    # After --, as printed.
    r = run("task", "wait", url, "--", task_id)
    assert (r.code, r.stdout) == (0, "slept 0.2\n"), r

    call = background("call", url, "nap", "seconds=600")
    running = call.wait_for(_STARTED)[1]
    r = run("task", "get", url, "--", running)
    assert r.code == 0 and "status\tworking" in r.stdout, r
    assert f"mcpkit task wait {url} -- {running} follows it to its end" in r.stderr, r
    r = run("task", "cancel", url, running, "--timeout", "20")
    assert r.code == 0 and running in r.stdout, r
    ended = call.finish()
    assert ended.code == 4 and f"task {running} was cancelled" in ended.stderr, ended


def test_a_2025_11_25_call_of_a_required_task_tool_shows_its_task(url: str) -> None:
    """At 2025-11-25 the client asks for a task for a tool whose tasks are required (plain calls
    otherwise), and follows it as a 2026-07-28 task: id, status, the way back (at that revision:
    each era sees only its own tasks)."""
    r = run("call", url, "slow_compute", "seconds=0", "--protocol", "2025-11-25")
    assert (r.code, r.stdout, r.stderr) == (0, "computed  after 0s\n", ""), r
    r = run("call", url, "failing_job", "--protocol", "2025-11-25")
    assert r.code == 4 and "tool failing_job reported an error: the job failed" in r.stderr, r
    task_id = re.search(_STARTED, r.stderr)[1]  # type: ignore[index]
    again = f"mcpkit task get {url} --protocol 2025-11-25 {task_id}"
    assert f"task {task_id} started; Ctrl+C cancels it; from another shell: {again}" in r.stderr, r
    assert f"task {task_id}: failed" in r.stderr, r  # (a tool's own failure fails the task there)
    r = run(*again.split()[1:], "--json")
    assert r.code == 0 and r.json()["status"] == "failed" and r.json()["result"]["isError"] is True, r


# -- a task's questions, answered on a terminal ---------------------------------------------------


def test_call_answers_a_task_question_on_a_terminal(url: str) -> None:
    term = Terminal(["call", url, "confirm_delete", "filename=notes.txt"])
    term.expect("task ")
    term.expect(" started; Ctrl+C cancels it")
    term.expect(f"mcpkit-everything-server ({url}) asks: Delete notes.txt?")
    term.expect("fill in the form (f), decline (d) or cancel (c)? [f]: ")
    term.type("")
    term.expect("confirm * (y/n): ")
    term.type("y")
    term.expect('{"confirm": true}')
    term.expect("send (s), edit (e), decline (d) or cancel (c)? [s]: ")
    term.type("")
    code, tail = term.finish()
    assert code == 0, tail
    assert "deleted notes.txt" in tail, tail


def test_call_asks_then_runs_as_a_task_on_a_terminal(url: str) -> None:
    """test_tool_with_task asks in the call itself (multi round-trip), then becomes a task."""
    term = Terminal(["call", url, "test_tool_with_task"])
    term.expect("asks: What is your name?")
    term.expect("[f]: ")
    term.type("")
    term.expect("name * (text): ")
    term.type("Ada")
    term.expect("[s]: ")
    term.type("s")
    term.expect(" started; Ctrl+C cancels it")
    code, tail = term.finish()
    assert code == 0, tail
    assert "Hello, Ada, from a task!" in tail, tail


def test_task_wait_answers_the_questions_of_a_task_left_waiting(url: str) -> None:
    """A call asked, and was killed before the user answered: ``task wait`` on a terminal
    asks the same questions (both of them) and gets the result."""
    first = Terminal(["call", url, "multi_input"])
    first.expect("task ")
    first.expect(" started")
    first.expect("asks: ")
    task_id = re.search(_STARTED, first.screen)[1]  # type: ignore[index]
    first.proc.kill()
    first.finish()
    assert task_json(url, task_id)["status"] == "input_required"

    r = run("task", "get", url, task_id)
    assert r.code == 0, r
    assert "status\tinput_required" in r.stdout, r
    asks = sorted(line.split("\t", 1)[1] for line in r.stdout.splitlines() if line.startswith("asks\t"))
    assert [a.split(": ", 1)[1] for a in asks] == sorted(
        ["elicitation/create: What is your name?", "elicitation/create: Go ahead?"]
    ), r
    assert "answering its questions on a terminal" in r.stderr, r

    term = Terminal(["task", "wait", url, task_id])
    answers = {"What is your name?": ("name * (text): ", "Grace"), "Go ahead?": ("confirm * (y/n): ", "y")}
    for _ in range(2):
        term.expect("asks: ")
        question = next_question(term, list(answers))
        prompt, value = answers.pop(question)
        term.expect("[f]: ")
        term.type("")
        term.expect(prompt)
        term.type(value)
        term.expect("[s]: ")
        term.type("")
    code, tail = term.finish()
    assert code == 0, tail
    assert "name=Grace confirm=True" in tail, tail


def next_question(term: Terminal, questions: list[str], timeout: float = 30) -> str:
    """Which of ``questions`` the terminal shows next (they may come in either order)."""
    deadline = time.monotonic() + timeout
    while True:
        shown = {q: term.screen.find(q, term.seen) for q in questions}
        found = [q for q, at in shown.items() if at >= 0]
        if found:
            return min(found, key=lambda q: shown[q])
        if time.monotonic() > deadline or not term._read(0.2):
            raise AssertionError(f"none of {questions} on the terminal:\n{term.screen[term.seen :]}")
