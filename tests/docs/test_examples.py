"""Every example in the documentation runs (docs/**/*.md, README.md, README.zh-CN.md).

One test per page; its fenced blocks run in order in one temporary directory (a copy
of ``examples/`` is there too), so a block can use files written by the blocks above it.

What runs, by the fence's language:

* ``python``: run as a script (``python block.py``, this venv's interpreter first on
  PATH, so ``Client(["python", "server.py"])`` works); it must exit 0 within
  ``TIMEOUT`` seconds.
* ``sh`` / ``bash`` / ``console``: every line that starts with ``mcpkit`` (or
  ``$ mcpkit``) runs in bash and must exit 0; other lines (``pip install``,
  ``make``…) are shown, not run. A line ending in `` &`` starts in the background
  (a server) and is stopped at the end of the block; the runner waits until the
  port it names accepts connections. In a ``console`` block the lines after a
  ``$ mcpkit ...`` line, up to the next ``$`` line, are its expected output: each
  must appear in what the command printed (stdout and stderr, whitespace-trimmed;
  ``...`` lines are ignored).
* ``json``: a host config (``mcpServers`` or VS Code ``servers``) is parsed by
  :func:`mcpkit.host.parse_config` and must yield exactly the servers it names;
  anything else must be valid JSON (JSON-RPC message shapes).
* anything else (``toml``, ``nginx``, ``ini``, ``dockerfile``, ``text``): shown, not run.

Directives, as HTML comments on the lines just above a fence (invisible on the site):

* ``<!-- example: file NAME -->``: write the block to NAME (not run by itself; a
  Python file is compiled, a JSON config is parsed as above). Later blocks use it.
* ``<!-- example: expect TEXT -->``: the block's output must contain TEXT (repeatable).
* ``<!-- example: exit N -->``: the block's commands must exit with N (default 0).
* ``<!-- example: background COMMAND -->``: start COMMAND (bash, in the page's
  directory) before the block and stop it after; as for `` &`` lines, the runner
  waits for the port it names.
* ``<!-- example: env NAME=VALUE -->``: environment for the block's commands.
* ``<!-- example: skip REASON -->``: not run, only where running is impossible here
  (the network beyond 127.0.0.1, a GUI, another operating system); REASON is required.

The ports 8000 to 8009 in a page (``--port 8000``, ``port=8000``, ``127.0.0.1:8000``)
become free ports for the run (the same number, the same port throughout the page), so
examples can use the usual numbers and never collide.
Nothing reaches beyond 127.0.0.1; ``HOME`` and ``XDG_CONFIG_HOME`` point into the
temporary directory, so ``mcpkit install`` writes there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0
PAGES = sorted(
    [p for p in (ROOT / "docs").rglob("*.md") if "_hooks" not in p.parts]
    + [p for p in (ROOT / "README.md", ROOT / "README.zh-CN.md") if p.exists()]
)
SHELL_LANGS = {"sh", "bash", "console", "shell"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)[ \t]*(?P<lang>[\w+-]*)[^\n]*$")
DIRECTIVE = re.compile(r"^\s*<!--\s*example:\s*(?P<body>.*?)\s*-->\s*$")
PORT_RE = re.compile(r"\b800[0-9]\b")
COMMENT_RE = re.compile(r"\s+#[^'\"]*$")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    text: str
    directives: list[tuple[str, str]] = field(default_factory=list)

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def values(self, key: str) -> list[str]:
        return [v for k, v in self.directives if k == key]


def parse_blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page with the directives just above each."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m["indent"], m["fence"], m["lang"].lower()
        directives: list[tuple[str, str]] = []
        j = i - 1
        while j >= 0 and (d := DIRECTIVE.match(lines[j])):
            key, _, value = d["body"].partition(" ")
            directives.insert(0, (key, value.strip()))
            j -= 1
        body: list[str] = []
        k = i + 1
        while k < len(lines) and not lines[k].strip().startswith(fence[:3]):
            line = lines[k]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            k += 1
        blocks.append(Block(page, i + 1, lang, "\n".join(body) + "\n", directives))
        i = k + 1
    return blocks


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[str], deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"background command exited with {proc.returncode}:\n{_drain(proc)}")
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listened on 127.0.0.1:{port} within the time limit")


def _drain(proc: subprocess.Popen[str]) -> str:
    try:
        out, _ = proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        return ""
    return out or ""


class PageRun:
    """Runs one page's blocks in order in one directory."""

    def __init__(self, page: Path, workdir: Path) -> None:
        self.page = page
        self.dir = workdir
        self.ports: dict[str, str] = {}
        shutil.copytree(ROOT / "examples", workdir / "examples")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("MCPKIT_")}
        self.env.update(
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            HOME=str(workdir / "home"),
            XDG_CONFIG_HOME=str(workdir / "home" / ".config"),
            PYTHONUNBUFFERED="1",
            NO_COLOR="1",
        )
        (workdir / "home").mkdir()
        self.background: list[subprocess.Popen[str]] = []

    def sub(self, text: str) -> str:
        """Ports 8000-8009 of the page become free ports (the same one each time)."""

        def port(m: re.Match[str]) -> str:
            if m[0] not in self.ports:
                self.ports[m[0]] = str(free_port())
            return self.ports[m[0]]

        return PORT_RE.sub(port, text)

    # -- blocks --------------------------------------------------------------

    def run(self, block: Block) -> None:
        if block.values("skip"):
            assert all(block.values("skip")), f"{block.where()}: a skip needs its reason"
            return
        env = dict(self.env)
        for item in block.values("env"):
            key, _, value = item.partition("=")
            env[key] = value
        names = block.values("file")
        try:
            for command in block.values("background"):
                self.start(command, env)
            if names:
                self.write(block, names[0])
            elif block.lang in ("python", "py"):
                self.python(block, env)
            elif block.lang in SHELL_LANGS:
                self.shell(block, env)
            elif block.lang in ("json", "jsonc"):
                check_json(block, block.text)
        finally:
            self.stop_background()

    def write(self, block: Block, name: str) -> None:
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = self.sub(block.text)
        path.write_text(text, encoding="utf-8")
        if block.lang in ("python", "py"):
            compile(text, f"{block.where()} ({name})", "exec")
        elif block.lang == "json":
            check_json(block, text)

    def python(self, block: Block, env: dict[str, str]) -> None:
        script = self.dir / f"_block_{block.line}.py"
        script.write_text(self.sub(block.text), encoding="utf-8")
        out = self.exec([sys.executable, str(script)], block, env)
        self.expect(block, out)

    def shell(self, block: Block, env: dict[str, str]) -> None:
        commands = shell_commands(block)
        assert commands or not block.values("expect"), f"{block.where()}: nothing to run"
        printed = ""
        for command, expected in commands:
            command = COMMENT_RE.sub("", command)
            if command.endswith("&"):
                self.start(command[:-1].strip(), env)
                continue
            out = self.exec(["bash", "-c", self.sub(command)], block, env)
            for line in expected:
                want = " ".join(line.split())
                assert want in " ".join(out.split()), (
                    f"{block.where()}: `{command}` did not print {want!r}; it printed:\n{out}"
                )
            printed += out
        self.expect(block, printed)

    # -- processes -----------------------------------------------------------

    def exec(self, argv: list[str], block: Block, env: dict[str, str]) -> str:
        want = int((block.values("exit") or ["0"])[0])
        try:
            proc = subprocess.run(
                argv,
                cwd=self.dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"{block.where()}: {argv[-1]!r} did not finish in {TIMEOUT}s") from exc
        assert proc.returncode == want, (
            f"{block.where()}: {argv[-1]!r} exited with {proc.returncode} (expected {want}):\n{proc.stdout}"
        )
        return proc.stdout

    def start(self, command: str, env: dict[str, str]) -> None:
        command = self.sub(command)
        proc = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=self.dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.background.append(proc)
        ports = [p for p in self.ports.values() if re.search(rf"\b{p}\b", command)]
        if ports:
            wait_for_port(int(ports[0]), proc, time.monotonic() + 30)
        else:
            time.sleep(1.0)

    def stop_background(self) -> None:
        while self.background:
            proc = self.background.pop()
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            if proc.stdout:
                proc.stdout.close()

    def expect(self, block: Block, out: str) -> None:
        for text in block.values("expect"):
            assert text in out, f"{block.where()}: expected {text!r} in the output:\n{out}"


def shell_commands(block: Block) -> list[tuple[str, list[str]]]:
    """``(command, expected output lines)`` for every ``mcpkit`` line of a shell block."""
    console = block.lang == "console"
    commands: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        raw = lines[i]
        line = raw.strip()
        is_prompt = line.startswith("$ ")
        if is_prompt:
            line = line[2:].strip()
        # continuation lines
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1].rstrip() + " " + lines[i].strip()
        i += 1
        if console and not is_prompt:
            if current is not None and line and line != "...":
                current.append(line)
            continue
        if line.startswith("mcpkit ") or line == "mcpkit":
            current = []
            commands.append((line, current))
        else:
            current = None
    return commands


def check_json(block: Block, text: str) -> None:
    from mcpkit.host import ConfigError, parse_config

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"{block.where()}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        return
    servers = data.get("mcpServers")
    if servers is None:
        servers = data.get("servers")
    if not isinstance(servers, dict):
        return
    names = set(re.findall(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}", text))
    environ = {name: f"<{name}>" for name in names}
    try:
        specs = parse_config(data, source=block.where(), environ=environ, base_dir=ROOT)
    except ConfigError as exc:
        raise AssertionError(f"{block.where()}: mcpkit.host rejects this config: {exc}") from exc
    assert set(specs) == set(servers), f"{block.where()}: parsed {sorted(specs)}, wrote {sorted(servers)}"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_examples(page: Path, tmp_path: Path) -> None:
    blocks = parse_blocks(page)
    run = PageRun(page, tmp_path)
    for block in blocks:
        run.run(block)


def test_runner_sees_the_pages() -> None:
    assert ROOT / "README.md" in PAGES
    assert any(p.parent.name == "docs" for p in PAGES)


TRANSLATIONS = [
    ("docs/zh/getting-started.md", "docs/getting-started.md"),
    ("docs/zh/migration.md", "docs/migration.md"),
    ("README.zh-CN.md", "README.md"),
]


@pytest.mark.parametrize(("translated", "original"), TRANSLATIONS)
def test_translations_keep_the_same_examples(translated: str, original: str) -> None:
    """The Chinese pages carry exactly the examples of their English pages, in order."""

    def examples(path: str) -> list[tuple[str, str, list[tuple[str, str]]]]:
        return [(b.lang, b.text, b.directives) for b in parse_blocks(ROOT / path)]

    assert examples(translated) == examples(original), f"{translated} is out of step with {original}"
