"""Terminal output for the CLI: exit codes, errors, JSON, colour, tables, a spinner.

Colour and aligned tables only when the stream is a terminal and ``NO_COLOR``
is unset (https://no-color.org); piped output is plain, tab-separated lines.
The spinner draws on stderr, and only when stderr is a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Any

from ..host._safe_text import escape_json_text, safe_text

__all__ = [
    "EXIT_CONNECT",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PROTOCOL",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "CLIError",
    "Console",
    "Spinner",
]

EXIT_OK = 0
EXIT_ERROR = 1  # anything else: bad config file, file system, missing extra
EXIT_USAGE = 2  # bad command line, unknown target
EXIT_CONNECT = 3  # could not connect / connection lost
EXIT_PROTOCOL = 4  # the server answered with an error, or a tool reported isError
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # SIGTERM during a task call (after cancelling the task)

_KINDS = {
    EXIT_ERROR: "error",
    EXIT_USAGE: "usage",
    EXIT_CONNECT: "connection",
    EXIT_PROTOCOL: "protocol",
}


class CLIError(Exception):
    """A failure to report on stderr, ending the command with ``code``."""

    #: The word before the hint on stderr.
    hint_label = "hint"

    def __init__(self, message: str, code: int = EXIT_ERROR, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.hint = hint
        self.prog: str | None = None
        #: The command already wrote its JSON result (``--json``): no error object then.
        self.result_written = False

    @property
    def kind(self) -> str:
        return _KINDS.get(self.code, "error")


def _is_tty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def colour_allowed(stream: IO[str], environ: Mapping[str, str]) -> bool:
    """True for a terminal without ``NO_COLOR`` (any non-empty value) and not ``TERM=dumb``."""
    return _is_tty(stream) and not environ.get("NO_COLOR") and environ.get("TERM") != "dumb"


_STYLES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}


class Console:
    """Where a command writes: stdout for results, stderr for everything else."""

    def __init__(
        self,
        *,
        json_mode: bool = False,
        prog: str = "mcpkit",
        stdout: IO[str] | None = None,
        stderr: IO[str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.out = stdout if stdout is not None else sys.stdout
        self.err = stderr if stderr is not None else sys.stderr
        env = os.environ if environ is None else environ
        self.json_mode = json_mode
        self.prog = prog
        self.tty = _is_tty(self.out)
        self.err_tty = _is_tty(self.err)
        self.colour = colour_allowed(self.out, env)
        self.err_colour = colour_allowed(self.err, env)
        #: The spinner drawing on stderr now, if any (paused while the user is asked something).
        self.spinner: Spinner | None = None

    # -- styling ---------------------------------------------------------------

    def style(self, text: str, *names: str, stream: str = "out") -> str:
        on = self.colour if stream == "out" else self.err_colour
        if not on or not names or not text:
            return text
        codes = ";".join(_STYLES[n] for n in names)
        return f"\x1b[{codes}m{text}\x1b[0m"

    # -- writing ---------------------------------------------------------------

    # Every line goes through safe_text (cli/_safe_text.py): server text in it (tool
    # descriptions, results, log messages, errors) can never drive the terminal.

    def print(self, text: str = "") -> None:
        self.out.write(safe_text(text, keep_sgr=self.colour) + "\n")

    def info(self, text: str) -> None:
        """A status line for humans (stderr, so stdout stays the result)."""
        self.err.write(safe_text(text, keep_sgr=self.err_colour) + "\n")
        self.err.flush()

    def warn(self, text: str) -> None:
        line = f"{self.prog}: {self.style('warning:', 'yellow', stream='err')} {text}"
        self.err.write(safe_text(line, keep_sgr=self.err_colour) + "\n")
        self.err.flush()

    def emit_json(self, value: Any) -> None:
        # json.dumps escapes C0 controls (ESC included); C1 and bidi controls it leaves raw.
        dumped = json.dumps(value, indent=2, ensure_ascii=False, default=str)
        self.out.write(escape_json_text(dumped) + "\n")
        self.out.flush()

    def error(self, err: CLIError) -> None:
        """The error on stderr; with ``--json`` also an error object on stdout."""
        label = self.style("error:", "red", "bold", stream="err")
        line = f"{err.prog or self.prog}: {label} {err.message}"
        self.err.write(safe_text(line, keep_sgr=self.err_colour) + "\n")
        if err.hint:
            hint = f"  {self.style(err.hint_label + ':', 'dim', stream='err')} {err.hint}"
            self.err.write(safe_text(hint, keep_sgr=self.err_colour) + "\n")
        self.err.flush()
        if self.json_mode and not err.result_written:
            payload: dict[str, Any] = {"code": err.code, "kind": err.kind, "message": err.message}
            if err.hint:
                payload["hint"] = err.hint
            self.emit_json({"error": payload})

    @contextlib.contextmanager
    def spinner_paused(self) -> Iterator[None]:
        """No spinner on stderr inside (a question to the user is written there)."""
        spinner = self.spinner
        if spinner is not None:
            spinner.pause()
        try:
            yield
        finally:
            if spinner is not None:
                spinner.resume()

    # -- tables ----------------------------------------------------------------

    def table(
        self,
        rows: Sequence[Sequence[str]],
        *,
        header: Sequence[str] | None = None,
        styles: Sequence[Sequence[str] | Callable[[str], Sequence[str]]] = (),
        indent: int = 2,
    ) -> None:
        """Rows of plain cells: aligned (last column cut to the terminal width) on
        a terminal, tab-separated otherwise. ``styles[i]`` styles column ``i``: style
        names, or a function of the cell's text giving them."""
        if not rows:
            return
        if not self.tty:
            for row in rows:
                self.print("\t".join(_one_line(c) for c in row))
            return
        cells = [[_one_line(c) for c in row] for row in rows]
        ncols = max(len(r) for r in cells)
        head = [str(h) for h in header] if header else None
        widths = [0] * ncols
        for row in [*cells, *([head] if head else [])]:
            for i, cell in enumerate(row):
                widths[i] = max(widths[i], len(cell))
        total = shutil.get_terminal_size((100, 24)).columns
        pad = " " * indent
        if head:
            self.print(pad + self._row(head, widths, [("dim",)] * ncols, total - indent))
        for row in cells:
            self.print(pad + self._row(row, widths, styles, total - indent))

    def _row(
        self,
        row: Sequence[str],
        widths: list[int],
        styles: Sequence[Sequence[str] | Callable[[str], Sequence[str]]],
        room: int,
    ) -> str:
        parts: list[str] = []
        used = 0
        for i, cell in enumerate(row):
            last = i == len(row) - 1
            space = max(room - used, 10) if last else widths[i]
            text = cell if len(cell) <= space else cell[: space - 1] + "…"
            style = styles[i] if i < len(styles) else ()
            names = style(cell) if callable(style) else style
            padding = "" if last else " " * (widths[i] - len(text))
            parts.append((self.style(text, *names) if text else text) + padding)
            used += widths[i] + 2
        return "  ".join(parts).rstrip()


def _one_line(text: str) -> str:
    """The first line of ``text`` (tables hold one line per cell)."""
    first = text.strip().split("\n", 1)[0]
    return first.replace("\t", " ")


_FRAMES_UNICODE = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_FRAMES_ASCII = "|/-\\"


class Spinner:
    """``async with Spinner(console, "connecting"):`` draws on a terminal's stderr."""

    def __init__(self, console: Console, message: str, *, interval: float = 0.08) -> None:
        self.console = console
        self.message = message
        self.interval = interval
        self.enabled = console.err_tty
        encoding = (getattr(console.err, "encoding", None) or "").lower().replace("-", "")
        self.frames = _FRAMES_UNICODE if encoding in ("utf8", "utf_8") else _FRAMES_ASCII
        self._task: asyncio.Task[None] | None = None
        self._outer: Spinner | None = None

    def update(self, message: str) -> None:
        self.message = message

    async def _spin(self) -> None:
        i = 0
        err = self.console.err
        while True:
            frame = self.frames[i % len(self.frames)]
            width = shutil.get_terminal_size((100, 24)).columns - 4
            message = safe_text(self.message).replace("\n", " ")
            text = message if len(message) <= width else message[: width - 1] + "…"
            err.write(f"\r\x1b[K{self.console.style(frame, 'cyan', stream='err')} {text}")
            err.flush()
            i += 1
            await asyncio.sleep(self.interval)

    def pause(self) -> None:
        """Stop drawing and clear the line (:meth:`resume` draws again)."""
        if self._task is not None:
            # Cancelled before its next frame: the task writes nothing more.
            self._task.cancel()
            self._task = None
            self.console.err.write("\r\x1b[K")
            self.console.err.flush()

    def resume(self) -> None:
        if self.enabled and self._task is None and self.console.spinner is self:
            self._task = asyncio.create_task(self._spin())

    async def __aenter__(self) -> Spinner:
        self._outer = self.console.spinner
        self.console.spinner = self
        if self.enabled:
            self._task = asyncio.create_task(self._spin())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.console.spinner = self._outer
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
            self.console.err.write("\r\x1b[K")
            self.console.err.flush()
