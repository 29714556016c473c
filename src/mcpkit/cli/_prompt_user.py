"""Asking the user, on the terminal, what a server asks for (``mcpkit call``, ``read``, ``prompt``).

A server may ask the user for input in the middle of a request (client/elicitation):
in the legacy era with an ``elicitation/create`` request of its own, in the modern
era (2026-07-28) with an ``input_required`` result that the :class:`~mcpkit.Client`
answers and retries (basic/patterns/mrtr). Either way the question reaches
:class:`TerminalAsker`, which turns the requested schema (flat, primitive
properties: client/elicitation "Requested Schema") into a form on stderr, one field
a line, with defaults and enums, and lets the user review, then send, edit, decline
or cancel it, as the spec requires of a client ("Provide UI that makes it clear
which server is requesting information", "clear decline and cancel options",
"review and modify their responses before sending"). A URL-mode request shows the
URL and its host, and asks for consent.

Typed lines are read from standard input without blocking the event loop (so
progress, logs and the server's other messages go on arriving); end of input
(Ctrl+D) cancels.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import re
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeGuard
from urllib.parse import urlsplit

from ..host._safe_text import safe_text
from ._output import Console

if TYPE_CHECKING:
    from ..protocol import types as t

__all__ = [
    "FormField",
    "LineReader",
    "TerminalAsker",
    "cwd_roots",
    "form_fields",
    "question_stream",
    "read_terminal_line",
    "stdin_is_terminal",
]

#: Reads one line the user typed (without its newline), or None at end of input.
LineReader = Callable[[], Awaitable[str | None]]

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_FORMATS = {"date": "date YYYY-MM-DD", "date-time": "date-time, ISO 8601"}
_YES = {"y", "yes", "true", "1", "on"}
_NO = {"n", "no", "false", "0", "off"}


def stdin_is_terminal() -> bool:
    """Whether standard input is a terminal someone can type answers on."""
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def question_stream(console: Console) -> IO[str] | None:
    """Where to ask the user: stderr when it is a terminal, else the controlling terminal
    (``2>log`` must not hide the form from the user typing its answers), else None."""
    if console.err_tty:
        return console.err
    try:
        return open("/dev/tty", "w", encoding="utf-8")  # kept open while the command runs
    except OSError:
        return None


def cwd_roots() -> list[t.Root]:
    """The client's roots, computed when the server asks (``roots/list``): the current directory."""
    from ..protocol import types as t

    here = Path.cwd()
    return [t.Root(uri=here.as_uri(), name=here.name or str(here))]


async def read_terminal_line() -> str | None:
    """One line typed on standard input, or None at end of input.

    On a POSIX event loop the read waits in the loop (``add_reader``): nothing
    blocks, and Ctrl+C still stops the command at once. Elsewhere a thread reads.
    """
    loop = asyncio.get_running_loop()
    fd = sys.stdin.fileno()
    data = bytearray()
    while True:
        ready: asyncio.Future[None] = loop.create_future()

        def wake(ready: asyncio.Future[None] = ready) -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            loop.add_reader(fd, wake)
        except (NotImplementedError, ValueError, OSError):
            line = await asyncio.to_thread(sys.stdin.readline)
            return line.rstrip("\r\n") if line else None
        try:
            await ready
        finally:
            loop.remove_reader(fd)
        chunk = os.read(fd, 4096)
        if not chunk:  # end of input (Ctrl+D on an empty line)
            return data.decode("utf-8", "replace") if data else None
        data += chunk
        if b"\n" in chunk:
            return data.decode("utf-8", "replace").rstrip("\r\n")


# -- the form's fields -----------------------------------------------------------------


@dataclass
class FormField:
    """One property of a requested schema, as a line of the terminal form."""

    name: str
    schema: Mapping[str, Any]
    required: bool = False
    #: (value, title) of a single- or multi-select enum.
    options: list[tuple[Any, str]] = field(default_factory=list)

    @classmethod
    def of(cls, name: str, schema: Any, required: bool) -> FormField:
        prop: Mapping[str, Any] = schema if isinstance(schema, Mapping) else {}
        source = prop.get("items") if prop.get("type") == "array" else prop
        return cls(name, prop, required, _options(source if isinstance(source, Mapping) else {}))

    @property
    def kind(self) -> str:
        """string, integer, number, boolean, enum, multi (a multi-select enum) or json."""
        declared = self.schema.get("type")
        if declared == "array":
            return "multi" if self.options else "json"
        if self.options:
            return "enum"
        if declared in ("string", "integer", "number", "boolean"):
            return str(declared)
        return "json"

    @property
    def label(self) -> str:
        title = self.schema.get("title")
        return title if isinstance(title, str) and title else self.name

    @property
    def has_default(self) -> bool:
        return "default" in self.schema

    def describe(self) -> str:
        """What to type, e.g. ``integer, 0 to 150`` or ``1 red, 2 green, 3 blue``."""
        s = self.schema
        kind = self.kind
        parts: list[str] = []
        if kind in ("enum", "multi"):
            parts.append(", ".join(f"{i} {title}" for i, (_, title) in enumerate(self.options, 1)))
            if kind == "multi":
                parts.append("several: comma-separated")
        elif kind == "boolean":
            parts.append("y/n")
        elif kind == "string":
            fmt = s.get("format")
            parts.append(_FORMATS.get(fmt, fmt) if isinstance(fmt, str) else "text")
            low, high = s.get("minLength"), s.get("maxLength")
            if isinstance(low, int) and isinstance(high, int):
                parts.append(f"{low} to {high} characters")
            elif isinstance(low, int):
                parts.append(f"at least {low} characters")
            elif isinstance(high, int):
                parts.append(f"at most {high} characters")
        elif kind in ("integer", "number"):
            parts.append(kind)
            low, high = s.get("minimum"), s.get("maximum")
            if _is_number(low) and _is_number(high):
                parts.append(f"{low:g} to {high:g}")
            elif _is_number(low):
                parts.append(f"at least {low:g}")
            elif _is_number(high):
                parts.append(f"at most {high:g}")
        else:
            parts.append("JSON")
        return ", ".join(parts)

    def show(self, value: Any) -> str:
        """A value as the user would type it."""
        if self.kind == "boolean":
            return "y" if value is True else "n"
        if self.kind in ("enum", "multi"):
            values = value if isinstance(value, list) else [value]
            titles = {json.dumps(v): title for v, title in self.options}
            return ", ".join(titles.get(json.dumps(v), str(v)) for v in values)
        if isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False)

    def parse(self, text: str) -> Any:
        """The value typed as ``text``; :class:`ValueError` says what is wrong with it."""
        s = self.schema
        kind = self.kind
        if kind == "boolean":
            word = text.strip().lower()
            if word in _YES:
                return True
            if word in _NO:
                return False
            raise ValueError("answer y or n")
        if kind == "enum":
            return self._choice(text)
        if kind == "multi":
            chosen = [self._choice(word) for word in text.split(",") if word.strip()]
            low, high = s.get("minItems"), s.get("maxItems")
            if isinstance(low, int) and len(chosen) < low:
                raise ValueError(f"choose at least {low}")
            if isinstance(high, int) and len(chosen) > high:
                raise ValueError(f"choose at most {high}")
            return chosen
        if kind in ("integer", "number"):
            return self._number(text.strip(), kind)
        if kind == "string":
            return self._string(text)
        try:
            return json.loads(text)
        except ValueError:
            return text

    def _choice(self, text: str) -> Any:
        word = text.strip()
        if word.isdigit() and 1 <= int(word) <= len(self.options):
            return self.options[int(word) - 1][0]
        for value, title in self.options:
            if word == str(value) or word.casefold() == title.casefold():
                return value
        raise ValueError(f"choose 1 to {len(self.options)}, or type one of the values")

    def _number(self, text: str, kind: str) -> int | float:
        value: int | float
        try:
            value = int(text)
        except ValueError:
            if kind == "integer":
                raise ValueError("type a whole number") from None
            try:
                value = float(text)
            except ValueError:
                raise ValueError("type a number") from None
        low, high = self.schema.get("minimum"), self.schema.get("maximum")
        if _is_number(low) and value < low:
            raise ValueError(f"at least {low:g}")
        if _is_number(high) and value > high:
            raise ValueError(f"at most {high:g}")
        return value

    def _string(self, text: str) -> str:
        s = self.schema
        low, high = s.get("minLength"), s.get("maxLength")
        if isinstance(low, int) and len(text) < low:
            raise ValueError(f"at least {low} characters")
        if isinstance(high, int) and len(text) > high:
            raise ValueError(f"at most {high} characters")
        fmt = s.get("format")
        if fmt == "email" and not _EMAIL.match(text):
            raise ValueError("not an email address")
        if fmt == "uri" and not urlsplit(text).scheme:
            raise ValueError("not a URI (it needs a scheme, such as https:)")
        if fmt == "date":
            try:
                dt.date.fromisoformat(text)
            except ValueError:
                raise ValueError("not a date (YYYY-MM-DD)") from None
        if fmt == "date-time":
            try:
                dt.datetime.fromisoformat(text)
            except ValueError:
                raise ValueError("not a date-time (e.g. 2026-07-28T12:00:00Z)") from None
        return text


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _options(schema: Mapping[str, Any]) -> list[tuple[Any, str]]:
    """An enum's (value, title) pairs: ``enum`` (titles from the legacy ``enumNames``), or
    ``oneOf`` / ``anyOf`` of ``{"const", "title"}`` (client/elicitation "Enum Schema")."""
    values = schema.get("enum")
    if isinstance(values, list):
        names = schema.get("enumNames")
        titles = names if isinstance(names, list) and len(names) == len(values) else values
        return [(v, str(title)) for v, title in zip(values, titles, strict=True)]
    for key in ("oneOf", "anyOf"):
        choices = schema.get(key)
        if isinstance(choices, list) and all(isinstance(c, Mapping) and "const" in c for c in choices):
            return [(c["const"], str(c.get("title", c["const"]))) for c in choices]
    return []


def form_fields(schema: Any) -> list[FormField]:
    """The fields of a requested schema (a flat object), in the order it lists them."""
    if not isinstance(schema, Mapping):
        return []
    props = schema.get("properties")
    listed = schema.get("required")
    required = set(listed) if isinstance(listed, list) else set()
    if not isinstance(props, Mapping):
        return []
    return [FormField.of(str(name), prop, name in required) for name, prop in props.items()]


# -- asking -------------------------------------------------------------------------------


_FORM_HELP = "  Enter keeps the [default] or leaves an optional field out; * required; Ctrl+D cancels"


class _Cancelled(Exception):
    """The user ended input (Ctrl+D): the answer is ``cancel``."""


class TerminalAsker:
    """An elicitation handler that asks the user on the terminal.

    ``server`` names who asks (set once connected). While a question is open the
    spinner stops, and ``deadline`` (the command's ``--timeout``, an
    :class:`asyncio.Timeout`) is held: the user's time does not count against it.
    Questions that arrive together are asked one after the other.
    """

    def __init__(
        self, console: Console, reader: LineReader = read_terminal_line, out: IO[str] | None = None
    ) -> None:
        self.console = console
        self.read = reader
        #: Where the questions go: stderr, or the terminal itself when stderr is redirected.
        self.out = out if out is not None else console.err
        self.server = "the server"
        self.deadline: asyncio.Timeout | None = None
        self._lock: asyncio.Lock | None = None

    async def __call__(self, params: t.ElicitParams) -> t.ElicitResult:
        from ..protocol import types as t

        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            with self._user_time():
                try:
                    if params.mode == "url":
                        return await self._url(params)
                    return await self._form(params)
                except _Cancelled:
                    self._say(self._dim("  cancelled"))
                    return t.ElicitResult(action="cancel")

    @contextlib.contextmanager
    def _user_time(self) -> Iterator[None]:
        """Stop the spinner and hold the deadline while the user answers."""
        loop = asyncio.get_running_loop()
        deadline = self.deadline
        when = deadline.when() if deadline is not None else None
        left = when - loop.time() if when is not None else None
        if deadline is not None:
            deadline.reschedule(None)
        try:
            with self.console.spinner_paused():
                yield
        finally:
            if deadline is not None and left is not None:
                deadline.reschedule(loop.time() + left)

    # -- the two modes ----------------------------------------------------------------

    async def _form(self, params: t.ElicitParams) -> t.ElicitResult:
        from ..protocol import types as t

        self._say("")
        self._say(f"{self._bold(self.server)} asks: {params.message}")
        choice = await self._choose("fill in the form (f), decline (d) or cancel (c)?", "fdc", default="f")
        if choice != "f":
            return t.ElicitResult(action="decline" if choice == "d" else "cancel")
        fields = form_fields(params.requested_schema)
        answers: dict[str, Any] = {}
        if fields:
            self._say(self._dim(_FORM_HELP))
        while True:
            for f in fields:
                await self._ask_field(f, answers)
            if answers:
                self._say("  " + json.dumps(answers, ensure_ascii=False))
            edit = "edit (e), " if fields else ""
            choice = await self._choose(
                f"send (s), {edit}decline (d) or cancel (c)?", "sedc" if fields else "sdc", default="s"
            )
            if choice == "s":
                return t.ElicitResult(action="accept", content=answers)
            if choice in "dc":
                return t.ElicitResult(action="decline" if choice == "d" else "cancel")

    async def _url(self, params: t.ElicitParams) -> t.ElicitResult:
        from ..protocol import types as t

        url = params.url if isinstance(params.url, str) else ""
        host = urlsplit(url).hostname or "?"
        self._say("")
        self._say(f"{self._bold(self.server)} asks you to open a page: {params.message}")
        self._say(f"  {url}  {self._dim(f'(on {host})')}")
        choice = await self._choose("open it (o), decline (d) or cancel (c)?", "odc", default=None)
        if choice == "o":
            self._say(f"  open {url} in your browser; the request goes on")
            return t.ElicitResult(action="accept")
        return t.ElicitResult(action="decline" if choice == "d" else "cancel")

    # -- lines ------------------------------------------------------------------------

    async def _ask_field(self, f: FormField, answers: dict[str, Any]) -> None:
        has_previous = f.name in answers or f.has_default
        previous = answers[f.name] if f.name in answers else f.schema.get("default")
        shown = f" [{f.show(previous)}]" if has_previous else ""
        description = f.schema.get("description")
        about = f" — {description}" if isinstance(description, str) and description else ""
        prompt = f"  {self._bold(f.label)}{' *' if f.required else ''} ({f.describe()}){about}{shown}: "
        while True:
            text = await self._line(prompt)
            if text == "":
                if has_previous:
                    answers[f.name] = previous
                    return
                if not f.required:
                    answers.pop(f.name, None)
                    return
                self._say(self._dim("    required"))
                continue
            try:
                answers[f.name] = f.parse(text)
                return
            except ValueError as exc:
                self._say(self._dim(f"    {exc}"))

    async def _choose(self, question: str, letters: str, *, default: str | None) -> str:
        prompt = f"  {question}{f' [{default}]' if default else ''}: "
        while True:
            text = (await self._line(prompt)).strip().lower()
            if not text and default:
                return default
            if text and text[0] in letters:
                return text[0]

    async def _line(self, prompt: str) -> str:
        self.out.write(self._safe(prompt))
        self.out.flush()
        text = await self.read()
        if text is None:
            self._say("")
            raise _Cancelled
        return text

    def _say(self, text: str) -> None:
        self.out.write(self._safe(text) + "\n")
        self.out.flush()

    def _safe(self, text: str) -> str:
        """The server's words (messages, field descriptions) cannot drive the terminal."""
        return safe_text(text, keep_sgr=self.out is self.console.err and self.console.err_colour)

    def _bold(self, text: str) -> str:
        return self.console.style(text, "bold", stream="err") if self.out is self.console.err else text

    def _dim(self, text: str) -> str:
        return self.console.style(text, "dim", stream="err") if self.out is self.console.err else text
