"""Host config files: JSONC, the two file formats, and ``${...}`` variable expansion.

Invariants:

* :func:`strip_jsonc` keeps plain JSON as it is (same value), and a comment or trailing comma
  never changes a string's contents;
* :func:`parse_config` on any decoded document returns specs or raises :class:`ConfigError`;
  nothing else escapes (a config file is often someone else's: a cloned repository's
  ``.vscode/mcp.json``);
* :func:`expand` returns text or raises :class:`ExpansionError`; a value is never expanded
  twice (``${env:A}`` whose value is ``${env:B}`` stays ``${env:B}``); text without ``${``
  is returned as is;
* :func:`parse_dotenv` never raises.

Input layout: fields (NUL-separated) = config text, a text to expand, a dotenv text.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

from hypothesis import strategies as st

from mcpkit.host._expand import ExpansionError, Variables, expand, parse_dotenv, strip_jsonc
from mcpkit.host.config import ConfigError, parse_config

from ._harness import Finding, Target, corpus_of, fields, joined, json_values, timed

_BASE = tempfile.mkdtemp(prefix="mcpkit-fuzz-config-")
ENVIRON = {"HOME": "/home/fuzz", "TOKEN": "${env:SECRET}", "EMPTY": "", "SECRET": "s3cr3t"}
VARIABLES = Variables(
    environ=ENVIRON, inputs={"key": "${env:TOKEN}"}, workspace="/ws", user_home="/home/fuzz"
)


def _not_json(constant: str) -> Any:
    raise ValueError(constant)  # NaN is not JSON, and not equal to itself


def _check_config(text: str) -> None:
    try:
        plain = strip_jsonc(text)
    except RecursionError:
        return
    try:
        data: Any = json.loads(plain, parse_constant=_not_json)
    except ValueError:
        return
    except RecursionError:
        return
    try:
        direct = json.loads(text, parse_constant=_not_json)
    except (ValueError, RecursionError):
        pass
    else:
        if direct != data:
            raise Finding(f"strip_jsonc changed plain JSON: {text[:200]!r}")
    if not isinstance(data, dict):
        return
    try:
        specs = parse_config(data, environ=ENVIRON, inputs={"key": "v"}, workspace="/ws", base_dir=_BASE)
    except ConfigError:
        return
    for name, spec in specs.items():
        if spec.name != name or spec.transport not in ("stdio", "http", "sse"):
            raise Finding(f"a spec that does not describe its entry: {spec!r}")
        repr(spec)
        spec.describe()


def _check_expand(text: str) -> None:
    try:
        out = expand(text, VARIABLES)
    except ExpansionError as exc:
        if not isinstance(exc.variable, str):
            raise Finding(f"ExpansionError without a variable name: {exc!r}") from None
        return
    if "${" not in text and out != text:
        raise Finding(f"text without references changed: {text!r} -> {out!r}")
    if text == "${env:TOKEN}" and out != "${env:SECRET}":
        raise Finding("a value was expanded twice")


def one_input(data: bytes) -> None:
    config, text, dotenv = fields(data, 3)
    _check_config(config)
    _check_expand(text)
    parse_dotenv(dotenv)


_entry = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["stdio", "http", "sse", "streamable-http", "x"]),
        "command": st.one_of(st.just("node"), st.text(max_size=6), json_values),
        "args": st.one_of(
            st.lists(st.sampled_from(["${env:HOME}", "${input:key}", "-y", "${workspaceFolder}"])),
            json_values,
        ),
        "url": st.one_of(
            st.sampled_from(["http://127.0.0.1:1/mcp", "http://[", "https://x/${env:NOPE:-d}", "ftp://x"]),
            st.text(max_size=12),
        ),
        "env": st.one_of(
            st.dictionaries(st.text(max_size=4), st.sampled_from(["${env:TOKEN}", "${nope}", "x"])),
            json_values,
        ),
        "envFile": st.one_of(st.sampled_from([".env", "missing/.env", "\x00", ""]), json_values),
        "headers": st.one_of(
            st.dictionaries(
                st.sampled_from(["Authorization", "X"]),
                st.sampled_from(["Bearer ${input:key}", "${env:EMPTY:-z}"]),
            ),
            json_values,
        ),
        "timeout": json_values,
        "disabled": json_values,
        "cwd": st.one_of(st.text(max_size=5), json_values),
        "protocol": st.one_of(st.sampled_from(["legacy", "modern", "2025-11-25", "auto"]), json_values),
    },
)


@st.composite
def _configs(draw: st.DrawFn) -> str:
    servers = draw(st.dictionaries(st.text(max_size=5), st.one_of(_entry, json_values), max_size=3))
    key = draw(st.sampled_from(["mcpServers", "servers", "mcp"]))
    doc: Any = {key: servers} if key != "mcp" else {"mcp": {"servers": servers}}
    text = json.dumps(doc, indent=draw(st.sampled_from([None, 1])))
    if draw(st.booleans()):
        text = text.replace("}", ", }", 1).replace("{", "{ // comment\n", 1)
    if draw(st.booleans()):
        text = "/* head */" + text
    return text


_texts = st.one_of(
    st.text(max_size=30),
    st.lists(
        st.sampled_from(
            [
                "${",
                "}",
                "env:",
                "TOKEN",
                "HOME",
                ":-",
                "input:",
                "key",
                "workspaceFolder",
                "x",
                "$",
                "userHome",
                "/",
            ]
        ),
        max_size=8,
    ).map("".join),
)
strategy: st.SearchStrategy[bytes] = st.one_of(
    st.builds(joined, _configs(), _texts, st.text(max_size=40)),
    st.builds(joined, st.text(max_size=60), _texts, st.text(max_size=20)),
    st.sampled_from(corpus_of("host_config") or [b"{}"]),
)

TARGET = Target("host_config", timed(one_input), strategy, ("mcpkit.host.config", "mcpkit.host._expand"))
