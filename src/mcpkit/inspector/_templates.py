"""RFC 6570 URI template expansion (levels 1-4), for filling resource templates.

Values are strings (an empty or absent value is undefined and left out) or
lists of strings. Linear time; no regular expression runs on the values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from urllib.parse import quote

__all__ = ["expand", "variables"]

_EXPRESSION = re.compile(r"\{([^{}]{1,1024})\}")
_VARSPEC = re.compile(r"^([A-Za-z0-9_.%]+)(\*|:[0-9]{1,4})?$")

# operator -> (first, separator, named, if-empty, allow reserved)
_OPERATORS: dict[str, tuple[str, str, bool, str, bool]] = {
    "": ("", ",", False, "", False),
    "+": ("", ",", False, "", True),
    "#": ("#", ",", False, "", True),
    ".": (".", ".", False, "", False),
    "/": ("/", "/", False, "", False),
    ";": (";", ";", True, "", False),
    "?": ("?", "&", True, "=", False),
    "&": ("&", "&", True, "=", False),
}
_RESERVED = ":/?#[]@!$&'()*+,;=%"

Value = str | Sequence[str] | None


def _split(expression: str) -> tuple[str, list[tuple[str, str | None]]]:
    op = expression[0] if expression and expression[0] in "+#./;?&" else ""
    specs: list[tuple[str, str | None]] = []
    for part in expression[len(op) :].split(","):
        match = _VARSPEC.match(part.strip())
        if match is not None:
            specs.append((match.group(1), match.group(2)))
    return op, specs


def variables(template: str) -> list[str]:
    """The variable names in ``template``, in order of first appearance."""
    seen: dict[str, None] = {}
    for match in _EXPRESSION.finditer(template):
        for name, _ in _split(match.group(1))[1]:
            seen.setdefault(name, None)
    return list(seen)


def _encode(value: str, reserved: bool) -> str:
    return quote(value, safe=_RESERVED if reserved else "")


def _expand_one(expression: str, values: Mapping[str, Value]) -> str:
    op, specs = _split(expression)
    first, sep, named, if_empty, reserved = _OPERATORS[op]
    parts: list[str] = []
    for name, modifier in specs:
        value = values.get(name)
        if value is None or value == "":  # an empty form field means "undefined"
            continue
        if isinstance(value, str):
            if modifier and modifier.startswith(":"):
                value = value[: int(modifier[1:])]
            text = _encode(value, reserved)
            if named:
                parts.append(f"{name}={text}" if text else f"{name}{if_empty}")
            else:
                parts.append(text)
            continue
        items = [str(v) for v in value]
        if not items:
            continue
        if modifier == "*":
            if named:
                parts.extend(f"{name}={_encode(v, reserved)}" if v else f"{name}{if_empty}" for v in items)
            else:
                parts.extend(_encode(v, reserved) for v in items)
        else:
            joined = ",".join(_encode(v, reserved) for v in items)
            parts.append(f"{name}={joined}" if named else joined)
    return first + sep.join(parts) if parts else ""


def expand(template: str, values: Mapping[str, Value]) -> str:
    """``template`` with every expression replaced from ``values``."""
    return _EXPRESSION.sub(lambda m: _expand_one(m.group(1), values), template)
