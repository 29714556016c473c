"""Auditing configured servers: what in their tools or their launch commands is risky.

:func:`audit_servers` connects to every server of a host config and reports
:class:`Finding`\\ s, each with a severity and a rule:

===========================  ========  =============================================
rule                         severity  what
===========================  ========  =============================================
``hidden-instructions``      high      ``<IMPORTANT>``-style tags, "ignore previous
                                       instructions", "do not tell the user", paths
                                       of secrets (``~/.ssh``, ``id_rsa``…) in a
                                       name, title, description or schema
``model-directive``          medium    text that tells the model what to do before
                                       or besides the call ("before using this tool",
                                       "you must first call")
``invisible-characters``     high      zero-width, bidi controls, tag characters
                                       (U+E0000–U+E007F), other control characters
``cross-server-reference``   medium    a description that names another server's
                                       tools, or addresses "the other server"
``definition-changed``       high      a tool that differs from its pin
``tool-removed``             low       a pinned tool the server no longer lists
``name-collision``           medium    one tool name on several servers
``unpinned-package``         medium    ``npx -y pkg`` without ``@version``, ``uvx
                                       pkg`` without ``==version``, ``pip install``
                                       unpinned, a docker image without a digest
                                       (``low`` when it has a fixed tag)
``unreachable``              low       a server that could not be audited
===========================  ========  =============================================

The package rule reads the config only; everything else needs the servers'
tool lists. The pins are read, never written (``mcpkit pins accept`` does that).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import PurePath
from typing import Any, Literal

from .config import ServerSpec, load_config
from .pins import PinStore, definition_of, diff_definitions, pin_hash, visible

__all__ = [
    "SEVERITIES",
    "AuditReport",
    "Finding",
    "Severity",
    "audit_servers",
    "audit_tools",
    "check_package",
    "scan_text",
]

_HOST_LOG = logging.getLogger("mcpkit.host")
Severity = Literal["info", "low", "medium", "high"]
SEVERITIES: tuple[Severity, ...] = ("info", "low", "medium", "high")


@dataclass(frozen=True, slots=True)
class Finding:
    """One risky thing: ``where`` is the field (``description``, ``inputSchema.properties.b.description``)."""

    severity: Severity
    rule: str
    server: str
    message: str
    tool: str | None = None
    where: str | None = None
    #: More text (a diff, the characters found); may span lines.
    detail: str | None = None

    def line(self) -> str:
        """``HIGH   hidden-instructions   server/tool description: message`` (hidden characters escaped)."""
        subject = self.server if self.tool is None else f"{self.server}/{self.tool}"
        where = f" {self.where}:" if self.where else ""
        return visible(f"{self.severity.upper():<6} {self.rule:<24} {subject}{where} {self.message}")

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(slots=True)
class AuditReport:
    """Everything :func:`audit_servers` found, and how each server went."""

    findings: list[Finding] = field(default_factory=list)
    #: Server name -> ``"ok"``, ``"disabled"`` or why it could not be reached.
    servers: dict[str, str] = field(default_factory=dict)
    tools: int = 0

    def at_least(self, severity: Severity) -> list[Finding]:
        """The findings of ``severity`` or worse."""
        floor = SEVERITIES.index(severity)
        return [f for f in self.findings if SEVERITIES.index(f.severity) >= floor]

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITIES}

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.to_dict() for f in self.findings],
            "servers": dict(self.servers),
            "tools": self.tools,
            "counts": self.counts(),
        }


# -- text rules ----------------------------------------------------------------------

_HIGH_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"<\s*/?\s*(important|system|instructions?|secret|hidden|admin|critical)\b[^>]*>", re.I),
        "an <IMPORTANT>-style tag addressed to the model",
    ),
    (
        re.compile(
            r"\b(ignore|disregard|forget|override)\s+(all\s+|any\s+)?(the\s+|your\s+)?"
            r"(previous|prior|above|earlier|preceding|other|system)\s+(instructions|rules|prompts?|directions)",
            re.I,
        ),
        "asks the model to ignore its instructions",
    ),
    (
        re.compile(
            r"\b(do\s+not|don'?t|never|without)\s+(tell|telling|inform|informing|mention|mentioning|"
            r"reveal|revealing|notify|notifying|alert|alerting|show|showing)\b[^.\n]{0,60}\buser",
            re.I,
        ),
        "asks the model to keep something from the user",
    ),
    (
        re.compile(
            r"(\.ssh\b|\bid_rsa\b|\bid_ed25519\b|\bid_ecdsa\b|\.aws/credentials|\.netrc\b|/etc/shadow|"
            r"/etc/passwd|\.gnupg\b|\.git-credentials|\.npmrc\b|\.pypirc\b|\.kube/config|"
            r"claude_desktop_config\.json|\bmcp\.json\b|\.cursor/)",
            re.I,
        ),
        "names a file that holds secrets or other servers' settings",
    ),
]
_MEDIUM_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            r"\b(before|after|instead\s+of)\s+(using|calling|running|invoking)\s+(this|any|the)\b", re.I
        ),
        "tells the model what to do around the call",
    ),
    (
        re.compile(
            r"\byou\s+(must|should|need\s+to|have\s+to)\s+(always\s+)?(first\s+)?"
            r"(call|use|invoke|run|read|send|pass|include|upload)\b",
            re.I,
        ),
        "gives the model orders",
    ),
]
_OTHER_SERVER = re.compile(
    r"\b(other|another|different)\s+(mcp\s+)?(servers?|tools?)\b|\bmcp__\w+?__\w+", re.I
)


def _hidden(char: str) -> bool:
    if char in "\n\t\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf", "Co", "Cn", "Zl", "Zp") or (
        0xE0000 <= ord(char) <= 0xE007F
    )


def scan_text(text: str) -> list[tuple[Severity, str, str, str | None]]:
    """``(severity, rule, message, detail)`` for the text rules that ``text`` breaks."""
    found: list[tuple[Severity, str, str, str | None]] = []
    hidden = [c for c in text if _hidden(c)]
    if hidden:
        codes = ", ".join(dict.fromkeys(f"U+{ord(c):04X}" for c in hidden))
        tags = "".join(chr(ord(c) - 0xE0000) for c in hidden if 0xE0020 <= ord(c) <= 0xE007E)
        shown = visible(text if len(text) <= 300 else text[:300] + "...")
        detail = (f"hidden text in tag characters: {tags!r}; " if tags else "") + f"as written: {shown}"
        found.append(
            ("high", "invisible-characters", f"{len(hidden)} invisible character(s): {codes}", detail)
        )
    plain = "".join(c for c in text if not _hidden(c))  # so zero-width joins do not hide a phrase
    for rules, severity, rule in (
        (_HIGH_PATTERNS, "high", "hidden-instructions"),
        (_MEDIUM_PATTERNS, "medium", "model-directive"),
    ):
        for pattern, message in rules:
            match = pattern.search(plain)
            if match:
                found.append((severity, rule, message, _excerpt(plain, match)))  # type: ignore[arg-type]
    return found


def _excerpt(text: str, match: re.Match[str]) -> str:
    start, end = max(0, match.start() - 30), min(len(text), match.end() + 30)
    return ("..." if start else "") + " ".join(text[start:end].split()) + ("..." if end < len(text) else "")


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string in a definition (keys too), with where it is."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            yield sub + "(key)", str(key)
            yield from _strings(item, sub)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]")


def _distinctive(name: str) -> bool:
    # Bare words ("add", "search") would match ordinary prose; names like
    # send_email, sendEmail or get-weather do not occur in it by chance.
    return len(name) >= 4 and (bool(re.search(r"[_\-.\d]", name)) or bool(re.search(r"[a-z][A-Z]", name)))


def audit_tools(tools: Mapping[str, Sequence[Any]], *, pins: PinStore | None = None) -> list[Finding]:
    """Findings for tool lists by server (``t.Tool`` or wire dicts): text, references, pins, collisions."""
    defs = {server: [definition_of(tool) for tool in items] for server, items in tools.items()}
    findings: list[Finding] = []
    owners: dict[str, list[str]] = {}
    for server, items in defs.items():
        for name in dict.fromkeys(str(d.get("name", "")) for d in items):
            owners.setdefault(name, []).append(server)
    for server, items in defs.items():
        others = {n for n, who in owners.items() if any(s != server for s in who) and server not in who}
        others_named = [n for n in sorted(others) if _distinctive(n)]
        for definition in items:
            name = str(definition.get("name", ""))
            for where, text in _strings(definition, ""):
                where = where.removesuffix("(key)") + (" (a key)" if where.endswith("(key)") else "")
                for severity, rule, message, detail in scan_text(text):
                    findings.append(Finding(severity, rule, server, message, name, where, detail))
            findings.extend(_references(server, name, definition, others_named))
        if pins is not None:
            findings.extend(_pin_findings(server, items, pins))
    for name, servers in sorted(owners.items()):
        if len(servers) > 1:
            for server in servers:
                findings.append(
                    Finding(
                        "medium",
                        "name-collision",
                        server,
                        f"the tool name {name!r} is also offered by "
                        + ", ".join(repr(s) for s in servers if s != server)
                        + f" (the host lists each as mcp__<server>__{name}; a model told to use "
                        f"{name!r} may pick either)",
                        name,
                    )
                )
    return findings


def _references(server: str, tool: str, definition: Mapping[str, Any], others: list[str]) -> list[Finding]:
    texts = [(where, text) for where, text in _strings(definition, "") if not where.endswith("(key)")]
    texts = [(w, s) for w, s in texts if w in ("title", "description") or w.endswith(".description")]
    found: list[Finding] = []
    for where, text in texts:
        named = [n for n in others if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)]
        if named:
            found.append(
                Finding(
                    "medium",
                    "cross-server-reference",
                    server,
                    "addresses the model about another server's tool(s): " + ", ".join(named),
                    tool,
                    where,
                )
            )
            continue
        match = _OTHER_SERVER.search(text)
        if match and not match.group(0).lower().startswith(f"mcp__{server.lower()}__"):
            found.append(
                Finding(
                    "medium",
                    "cross-server-reference",
                    server,
                    "addresses the model about other servers or tools",
                    tool,
                    where,
                    _excerpt(text, match),
                )
            )
    return found


def _pin_findings(server: str, items: list[dict[str, Any]], pins: PinStore) -> list[Finding]:
    found: list[Finding] = []
    listed = set()
    for definition in items:
        name = str(definition.get("name", ""))
        listed.add(name)
        pin = pins.get(server, name)
        if pin is not None and pin.hash != pin_hash(definition):
            found.append(
                Finding(
                    "high",
                    "definition-changed",
                    server,
                    f"differs from the approved definition ({pin.hash[:19]} -> {pin_hash(definition)[:19]}); "
                    f"review, then: mcpkit pins accept CONFIG {server} {name}",
                    name,
                    None,
                    diff_definitions(pin.definition, definition),
                )
            )
    for pin in pins.pins(server):
        if pin.tool not in listed:
            found.append(Finding("low", "tool-removed", server, "pinned, but no longer listed", pin.tool))
    return found


# -- launch commands -------------------------------------------------------------------

_NODE_RUNNERS = {"npx", "bunx"}
_DLX = {"pnpm": "dlx", "yarn": "dlx", "bun": "x", "npm": "exec"}
_PY_RUNNERS = {"uvx", "pipx"}
_CONTAINERS = {"docker", "podman"}
_EXACT_NPM = re.compile(r"^\d+\.\d+\.\d+(?:[-+][\w.\-+]*)?\Z")
_DOCKER_VALUED = {
    "-e", "--env", "-v", "--volume", "--name", "-p", "--publish", "--network", "--net", "--env-file",
    "-w", "--workdir", "--mount", "-u", "--user", "--entrypoint", "-l", "--label", "--platform",
    "--cpus", "-m", "--memory", "--add-host", "--cap-add", "--cap-drop", "--device", "--hostname",
    "-h", "--ulimit", "--security-opt", "--pull", "--restart", "--tmpfs", "--gpus", "--dns",
}  # fmt: skip


def _base(command: str) -> str:
    name = PurePath(command).name.lower()
    return name.removesuffix(".cmd").removesuffix(".exe")


def _first_positional(args: Sequence[str], valued: set[str] = frozenset()) -> tuple[int, str] | None:  # type: ignore[assignment]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return (i + 1, args[i + 1]) if i + 1 < len(args) else None
        if arg.startswith("-"):
            i += 2 if (arg in valued and "=" not in arg) else 1
            continue
        return i, arg
    return None


def _npm_version(spec: str) -> str | None:
    body = spec[1:] if spec.startswith("@") else spec
    return body.split("@", 1)[1] if "@" in body else None


def check_package(spec: ServerSpec) -> list[Finding]:
    """``unpinned-package`` findings for a stdio server's launch command."""
    if spec.transport != "stdio" or not spec.command:
        return []
    command, args = _base(spec.command), list(spec.args)
    if command in _DLX and args and args[0] == _DLX[command]:
        command, args = "npx", args[1:]
    found: list[Finding] = []
    if command in _NODE_RUNNERS:
        package = _package_option(args) or _pick(_first_positional(args, {"-p", "--package", "-c", "--call"}))
        if package and not package.startswith((".", "/", "file:", "git+", "http")):
            version = _npm_version(package)
            if version is None or not _EXACT_NPM.match(version):
                found.append(_unpinned(spec, f"{spec.command} runs {package!r}", "an exact @version"))
    elif command in _PY_RUNNERS:
        rest = args[1:] if command == "pipx" and args[:1] == ["run"] else args
        if command == "pipx" and args[:1] != ["run"]:
            rest = []
        package = _from_option(rest) or _pick(
            _first_positional(rest, {"--python", "-p", "--with", "--index-url"})
        )
        if (
            package
            and not package.startswith((".", "/", "git+", "http"))
            and not re.search(r"(==|@)\d", package)
        ):
            found.append(_unpinned(spec, f"{spec.command} runs {package!r}", "an exact ==version"))
    elif command in _CONTAINERS:
        found.extend(_docker(spec, args))
    found.extend(_pip_installs(spec))
    return found


def _pick(hit: tuple[int, str] | None) -> str | None:
    return hit[1] if hit else None


def _package_option(args: Sequence[str]) -> str | None:
    for i, arg in enumerate(args):
        if arg in ("-p", "--package") and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--package="):
            return arg.split("=", 1)[1]
    return None


def _from_option(args: Sequence[str]) -> str | None:
    for i, arg in enumerate(args):
        if arg in ("--from", "--spec") and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(("--from=", "--spec=")):
            return arg.split("=", 1)[1]
    return None


def _docker(spec: ServerSpec, args: list[str]) -> list[Finding]:
    if not args or args[0] not in ("run", "create"):
        if args[:2] in (["container", "run"], ["container", "create"]):
            args = args[1:]
        else:
            return []
    hit = _first_positional(args[1:], _DOCKER_VALUED)
    if hit is None:
        return []
    image = hit[1]
    if "@sha256:" in image:
        return []
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else None
    if tag is None or tag == "latest":
        return [_unpinned(spec, f"the image {image!r}", "a digest (image@sha256:...)")]
    return [
        Finding(
            "low",
            "unpinned-package",
            spec.name,
            f"the image {image!r} has a tag but no digest (a tag can be moved to another image); "
            "pin it as image@sha256:...",
        )
    ]


_PIP_INSTALL = re.compile(r"\bpip3?\s+install\s+([^;&|\n]+)")


def _pip_installs(spec: ServerSpec) -> list[Finding]:
    found: list[Finding] = []
    line = " ".join([spec.command or "", *spec.args])
    for match in _PIP_INSTALL.finditer(line):
        words = [w.strip("'\"") for w in match.group(1).split()]
        loose = [
            w for w in words if w and not w.startswith("-") and "==" not in w and not w.startswith((".", "/"))
        ]
        if loose:
            found.append(_unpinned(spec, f"pip install {' '.join(loose)}", "exact ==versions"))
    return found


def _unpinned(spec: ServerSpec, what: str, wanted: str) -> Finding:
    return Finding(
        "medium",
        "unpinned-package",
        spec.name,
        f"{what} without {wanted}: each start may run a different (possibly compromised) release",
    )


# -- putting it together ---------------------------------------------------------------


def _other_text(server: str, backend: Any) -> list[Finding]:
    """The text rules over what else reaches the model: the server's instructions, its
    prompts, resources and resource templates (``where`` says which)."""
    found: list[Finding] = []
    client = backend.client
    items: list[tuple[str, Any]] = []
    if client is not None and client.instructions:
        items.append(("instructions", client.instructions))
    for kind, listed in (
        ("prompt", backend.prompts),
        ("resource", backend.resources),
        ("template", backend.templates),
    ):
        for item in listed:
            data = definition_of(item)
            label = data.get("name") or data.get("uri") or data.get("uriTemplate")
            items.append((f"{kind} {label}", data))
    for subject, value in items:
        for where, text in _strings(value, ""):
            where = f"{subject} {where}".strip() if where else subject
            for severity, rule, message, detail in scan_text(text):
                found.append(Finding(severity, rule, server, message, None, visible(where), detail))
    return found


async def audit_servers(
    servers: Mapping[str, ServerSpec] | str | os.PathLike[str],
    *,
    pins: PinStore | None = None,
    connect_timeout: float = 30.0,
    connect: bool = True,
    stderr: Any = None,
) -> AuditReport:
    """Connect to every enabled server, list its tools, and run every rule.

    ``connect=False`` runs the rules that need no connection (launch commands).
    """
    from .backend import State
    from .manager import Host

    specs = load_config(servers) if isinstance(servers, str | os.PathLike) else dict(servers)
    report = AuditReport()
    for name, spec in specs.items():
        report.findings.extend(check_package(spec))
        report.servers[name] = "disabled" if spec.disabled else "not connected"
    if not connect:
        return report
    host = Host(specs, pins=None, connect_timeout=connect_timeout, stderr=stderr)
    tools: dict[str, list[Any]] = {}
    # The host's own warnings (collisions, failed starts) would repeat the report's findings.
    quiet, _HOST_LOG.disabled = _HOST_LOG.disabled, True
    try:
        await host.start()
        for name, status in host.servers.items():
            if status.state is State.DISABLED:
                continue
            if status.state is State.READY:
                report.servers[name] = "ok"
                backend = host.backend(name)
                tools[name] = list(backend.tools)
                report.findings.extend(_other_text(name, backend))
            else:
                reason = status.error or str(status.state)
                report.servers[name] = reason
                report.findings.append(Finding("low", "unreachable", name, f"could not be audited: {reason}"))
    finally:
        await asyncio.shield(host.close())
        _HOST_LOG.disabled = quiet
    report.tools = sum(len(items) for items in tools.values())
    report.findings.extend(audit_tools(tools, pins=pins))
    order = {s: i for i, s in enumerate(reversed(SEVERITIES))}
    report.findings.sort(key=lambda f: (order[f.severity], f.server, f.tool or "", f.rule))
    return report
