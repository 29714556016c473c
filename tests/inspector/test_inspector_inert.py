"""The Inspector renders what a server sends as inert text (issue 17, item 4).

The page's scripts are checked for every DOM API that parses markup or runs code
(a hostile server's text must never reach one), and the function every text node
goes through is run, as written in the page, under Node: bidi controls in server
text are shown as escapes, not obeyed (CVE-2021-42574).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

STATIC = Path(__file__).resolve().parents[2] / "src" / "mcpkit" / "inspector" / "static"
SCRIPTS = sorted(STATIC.glob("*.js"))
# Sinks that parse HTML or evaluate code.
SINKS = re.compile(
    r"\.innerHTML\b|\.outerHTML\b|insertAdjacentHTML|document\.write|DOMParser"
    r"|createContextualFragment|\beval\s*\(|new\s+Function\b|setTimeout\s*\(\s*[\"'`]"
)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_script_of_the_page_uses_an_html_or_code_sink(script: Path) -> None:
    source = script.read_text()
    assert not SINKS.findall(source), f"{script.name} uses {SINKS.findall(source)}"


def test_text_nodes_and_server_fields_go_through_the_bidi_escape() -> None:
    source = (STATIC / "inspector.js").read_text()
    made = re.findall(r"createTextNode\(([^)]*)", source)  # el()/append() and the stderr dock
    assert made and all(arg.startswith("shownBidi(") for arg in made), made
    for field in (
        '$("instructions").textContent = shownBidi(',
        '$("server-title").textContent = info ? shownBidi(',
    ):
        assert field in source


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the page's function")
def test_bidi_controls_are_shown_not_obeyed() -> None:
    source = (STATIC / "inspector.js").read_text()
    start = source.index("const BIDI_CONTROLS")
    end = source.index("function append(")
    snippet = source[start:end]
    cases = ["plain", "evil\u202eexe.txt", "\u2066iso\u2069", "\u200fmark", "שלום"]
    script = snippet + f"\nprocess.stdout.write(JSON.stringify({json.dumps(cases)}.map(shownBidi)));"
    out = subprocess.run(
        ["node", "-e", script], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert json.loads(out) == ["plain", "evil\\u202eexe.txt", "\\u2066iso\\u2069", "\\u200fmark", "שלום"]
