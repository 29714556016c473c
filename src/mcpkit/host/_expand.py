"""Variable expansion and JSON-with-comments reading for host config files.

One expander covers the forms the hosts use (landscape §5): Claude Code's
``${VAR}`` and ``${VAR:-default}``, VS Code's and Cursor's ``${env:VAR}``,
``${input:id}``, ``${workspaceFolder}``, ``${workspaceFolderBasename}``,
``${userHome}`` and ``${pathSeparator}`` (also spelled ``${/}``). A bare ``$VAR``
is left alone, as Claude Code leaves it.

Errors name the variable, never a value: the values are usually credentials.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ExpansionError", "Variables", "expand", "parse_dotenv", "strip_jsonc"]

_REFERENCE = re.compile(r"\$\{([^{}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class ExpansionError(ValueError):
    """A reference could not be resolved; ``variable`` is its name as written."""

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(message)
        self.variable = variable


@dataclass(frozen=True, slots=True)
class Variables:
    """Where references get their values."""

    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    #: Values for VS Code ``${input:id}`` references (VS Code prompts for them).
    inputs: Mapping[str, str] = field(default_factory=dict)
    #: ``inputs`` declarations from the file, by id: shown in "missing input" errors.
    input_descriptions: Mapping[str, str] = field(default_factory=dict)
    workspace: str | None = None
    user_home: str = field(default_factory=lambda: str(Path.home()))


def expand(text: str, variables: Variables) -> str:
    """Replace every ``${...}`` reference in ``text``; raises :class:`ExpansionError`."""
    if "${" not in text:
        return text
    return _REFERENCE.sub(lambda m: _resolve(m.group(1), variables), text)


def _resolve(body: str, v: Variables) -> str:
    if body.startswith("env:"):
        return _from_environ(body[4:], v, shown=body)
    if body.startswith("input:"):
        return _from_inputs(body[6:], v)
    if body in ("workspaceFolder", "workspaceRoot"):
        return _workspace(body, v)
    if body == "workspaceFolderBasename":
        return Path(_workspace(body, v)).name
    if body == "userHome":
        return v.user_home
    if body in ("pathSeparator", "/"):
        return os.sep
    return _from_environ(body, v, shown=body)


def _from_environ(body: str, v: Variables, *, shown: str) -> str:
    name, sep, default = body.partition(":-")
    if not _NAME.match(name):
        raise ExpansionError(shown, f"unsupported variable reference ${{{shown}}}")
    value = v.environ.get(name)
    # ``:-`` as in the shell: the default also replaces an empty value.
    if sep and not value:
        return default
    if value is None:
        ref = "${" + shown.partition(":-")[0] + "}"
        raise ExpansionError(
            name,
            f"{ref} is not set and has no default (set it, or write ${{{name}:-default}})",
        )
    return value


def _from_inputs(input_id: str, v: Variables) -> str:
    if input_id in v.inputs:
        return v.inputs[input_id]
    described = v.input_descriptions.get(input_id)
    hint = f" ({described})" if described else ""
    raise ExpansionError(
        f"input:{input_id}",
        f"${{input:{input_id}}}{hint} has no value: pass it as inputs={{{input_id!r}: ...}}",
    )


def _workspace(body: str, v: Variables) -> str:
    if v.workspace is None:
        raise ExpansionError(body, f"${{{body}}} needs a workspace folder (pass workspace=...)")
    return v.workspace


def parse_dotenv(text: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (``envFile``): comments, ``export`` and simple quotes."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not _NAME.match(key):
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        values[key] = value
    return values


def strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas (VS Code's ``mcp.json``) -> plain JSON.

    Comments and dropped commas become spaces, so the line and column of a
    later syntax error still point at the right place in the file.
    """
    return _drop_trailing_commas(_blank_comments(text))


def _blank_comments(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == '"':
            end = _string_end(text, i)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
        else:
            out.append(text[i])
            i += 1
            continue
        chunk = text[i:end]
        out.append(chunk if text[i] == '"' else "".join(c if c == "\n" else " " for c in chunk))
        i = end
    return "".join(out)


def _drop_trailing_commas(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            end = _string_end(text, i)
            out.append(text[i:end])
            i = end
            continue
        if ch == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "}]":
                ch = " "
        out.append(ch)
        i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    return len(text)
