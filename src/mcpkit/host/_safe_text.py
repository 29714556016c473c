"""Server text made safe for a terminal: the one place control characters are neutralised
(the CLI, the host and the gateway all print through it).

A server's tool descriptions, results, log messages, errors, name and instructions
are untrusted text. Printed raw, escape sequences in them act on the user's
terminal: CSI moves the cursor and clears the screen (hiding what came before),
OSC 0/2 set the window title, OSC 8 makes a link whose text hides its target,
OSC 52 writes the clipboard (the next paste runs the server's command), and
DCS/APC reach terminal-specific features. A carriage return or backspaces
overwrite what was printed; bidi overrides reorder it (CVE-2021-42574, "Trojan
Source").

Every control character is therefore shown as a visible escape (``\\x1b``,
``\\u202e``) instead of being sent: the sequence that follows it is plain
text, inert, and the user can see that something was there. Newline and tab
are kept. The CLI's own colours survive only when colour is on and only as the
exact SGR sequences :class:`~mcpkit.cli._output.Console` emits.
"""

from __future__ import annotations

import re

__all__ = ["escape_json_text", "safe_text"]

# C0 controls but tab and newline, DEL, C1 controls (U+0080-U+009F: U+009B is an
# 8-bit CSI), and the bidi controls (embeddings, overrides, isolates, marks).
_UNSAFE = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
_UNSAFE_RE = re.compile(_UNSAFE)
# The only escape sequences the CLI writes itself: SGR with the codes Console uses.
_OWN_SGR = r"\x1b\[(?:[012]|3[1-6])(?:;(?:[012]|3[1-6]))*m"
_UNSAFE_KEEPING_SGR_RE = re.compile(f"({_OWN_SGR})|{_UNSAFE}")
# What JSON output must still escape: json.dumps(ensure_ascii=False) escapes C0 only.
_JSON_UNSAFE_RE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _visible(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _replace(match: re.Match[str]) -> str:
    return match.group(1) or _visible(match.group(0))


def safe_text(text: str, *, keep_sgr: bool = False) -> str:
    """``text`` with every control character but newline and tab shown as an escape.

    ``keep_sgr`` keeps the colour sequences the CLI itself writes (``ESC [ 1;31 m``
    and the like); everything else, a server's OSC, CSI cursor moves, C1 and bidi
    controls included, is made visible and inert.
    """
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")  # a Windows line end is a line end, not an overwrite
    if keep_sgr:
        return _UNSAFE_KEEPING_SGR_RE.sub(_replace, text)
    return _UNSAFE_RE.sub(lambda m: _visible(m.group(0)), text)


def escape_json_text(dumped: str) -> str:
    """JSON text (from ``json.dumps(..., ensure_ascii=False)``) with the C1, DEL, bidi and
    line-separator characters that ``json.dumps`` leaves raw written as ``\\uXXXX``
    escapes instead: the same JSON value, nothing a terminal acts on."""
    return _JSON_UNSAFE_RE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", dumped)
