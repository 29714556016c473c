"""Who may call which tool, and a record of every call.

Rules use Claude Code's permission syntax (landscape §5, seed 000): ``mcp__server``
and ``mcp__server__*`` cover every tool of a server, ``mcp__server__tool`` one
tool; any other ``*`` is a glob over the full name. ``deny`` wins over ``ask``,
which wins over ``allow``; a tool no rule mentions gets the default (``ask``).

``ask`` goes to an approval callback. A refusal — or no callback, or a callback
that fails — raises :class:`PermissionDenied` before anything reaches the server.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, TypeAlias

from .naming import PREFIX

if TYPE_CHECKING:
    from .pins import PinChange

__all__ = [
    "REDACTED",
    "ApprovalRequest",
    "Approver",
    "AuditLog",
    "Decision",
    "Outcome",
    "PermissionDenied",
    "Policy",
    "Verdict",
]

Decision = Literal["allow", "ask", "deny"]
Outcome = Literal["allowed", "denied", "error", "ok"]
REDACTED = "<redacted>"


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A tool call waiting for a decision."""

    name: str  # exposed name, mcp__server__tool
    server: str  # server name as configured
    tool: str  # tool name as the server knows it
    arguments: Mapping[str, Any]
    #: The sanitized server part of ``name`` (equal to ``server`` for tidy names).
    server_key: str = ""
    #: Set when the tool's definition differs from the one approved before (a
    #: :class:`~mcpkit.host.pins.PinChange`: ``change.diff()`` shows how); approving
    #: the call approves the new definition.
    change: PinChange | None = None

    def candidates(self) -> tuple[set[str], set[str]]:
        """(server-level names, tool-level names) a rule may use for this call."""
        servers = {self.server, self.server_key or self.server}
        prefixes = {PREFIX + s for s in servers}
        full = {self.name} | {f"{p}__{self.tool}" for p in prefixes}
        return prefixes, full


Approver: TypeAlias = Callable[[ApprovalRequest], Awaitable[bool] | bool]


class PermissionDenied(PermissionError):
    """A tool call the policy refused; it never reached the server."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"permission denied for {name}: {reason}")
        self.name = name
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Verdict:
    """How a call was let through: the decision, the rule behind it, and who approved."""

    decision: Decision
    rule: str | None  # None: the default applied
    approved_by: Literal["rule", "default", "callback"]

    def describe(self) -> str:
        """``"allowed by rule 'mcp__x'"``, ``"approved by the callback (default ask)"``…"""
        source = f"rule {self.rule!r}" if self.rule else f"default {self.decision}"
        if self.approved_by == "callback":
            return f"approved by the callback ({source})"
        return f"allowed by {source}"


@dataclass(slots=True)
class Policy:
    """``allow`` / ``ask`` / ``deny`` rules over ``mcp__server[__tool]`` names."""

    allow: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    default: Decision = "ask"
    approver: Approver | None = None

    def __post_init__(self) -> None:
        self.allow, self.ask, self.deny = tuple(self.allow), tuple(self.ask), tuple(self.deny)
        if self.default not in ("allow", "ask", "deny"):
            raise ValueError(f"default must be allow, ask or deny, not {self.default!r}")
        for rule in (*self.allow, *self.ask, *self.deny):
            if not isinstance(rule, str) or not rule.startswith(PREFIX) or len(rule) <= len(PREFIX):
                raise ValueError(f"rule {rule!r}: MCP rules look like mcp__server or mcp__server__tool")

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | str | os.PathLike[str], **options: Any) -> Policy:
        """Rules from a Claude Code ``settings.json`` (its ``permissions`` object).

        Rules for other tools (``Bash(...)``, ``Read``…) are ignored. ``options``
        are the remaining :class:`Policy` fields (``default``, ``approver``).
        """
        if not isinstance(settings, Mapping):
            settings = json.loads(Path(settings).read_text(encoding="utf-8"))
        perms = settings.get("permissions", {}) if isinstance(settings, Mapping) else {}
        return cls(
            allow=_mcp_rules(perms.get("allow")),
            ask=_mcp_rules(perms.get("ask")),
            deny=_mcp_rules(perms.get("deny")),
            **options,
        )

    def decide(self, request: ApprovalRequest) -> tuple[Decision, str | None]:
        """The decision for a call and the rule that made it (None: the default)."""
        for decision, rules in (("deny", self.deny), ("ask", self.ask), ("allow", self.allow)):
            for rule in rules:
                if _matches(rule, request):
                    return decision, rule  # type: ignore[return-value]
        return self.default, None

    async def authorize(
        self, request: ApprovalRequest, *, approver: Approver | None = None, must_ask: str | None = None
    ) -> Verdict:
        """Let the call through or raise :class:`PermissionDenied`.

        ``approver`` overrides the policy's own callback for this call.
        ``must_ask`` turns an ``allow`` into an ``ask`` (a changed tool): it is
        the refusal's reason when there is no callback to ask.
        """
        decision, rule = self.decide(request)
        source = f"rule {rule!r}" if rule else "the default"
        if decision == "deny":
            raise PermissionDenied(request.name, f"denied by {source}")
        if decision == "allow" and must_ask is None:
            return Verdict("allow", rule, "rule" if rule else "default")
        ask = approver or self.approver
        if ask is None:
            raise PermissionDenied(
                request.name, must_ask or f"{source} says ask, and there is no approval callback"
            )
        try:
            answer = ask(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            # Fail closed: an approval that could not be obtained is a refusal.
            raise PermissionDenied(request.name, f"approval failed: {type(exc).__name__}: {exc}") from exc
        if answer is not True:
            raise PermissionDenied(request.name, "refused by the approval callback")
        return Verdict("ask", rule, "callback")


def _mcp_rules(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(r for r in value if isinstance(r, str) and r.startswith(PREFIX) and len(r) > len(PREFIX))


def _matches(rule: str, request: ApprovalRequest) -> bool:
    servers, tools = request.candidates()
    if rule in servers or rule in tools:
        return True
    if rule.endswith("__*") and rule[:-3] in servers:
        return True
    return "*" in rule and any(fnmatchcase(name, rule) for name in tools)


# -- audit ---------------------------------------------------------------------


class AuditLog:
    """Appends one JSON line per tool call event to a file or any writable.

    A permitted call writes ``allowed`` before it is sent (so a call that never
    returns still left a trace) and ``ok`` or ``error`` when it ends; a refused
    one writes ``denied``. ``call`` ties the lines of one call together.
    ``duration_ms`` is the time spent deciding (``allowed``/``denied``, including
    waiting for approval) or calling the server (``ok``/``error``).

    Arguments are redacted by default — keys kept, values replaced by
    ``"<redacted>"``; ``full_arguments=True`` records them as given.
    """

    def __init__(
        self, sink: str | os.PathLike[str] | IO[str] | IO[bytes], *, full_arguments: bool = False
    ) -> None:
        self.full_arguments = full_arguments
        self._own = isinstance(sink, str | os.PathLike)
        if isinstance(sink, str | os.PathLike):
            # Owner-only: even redacted lines say who called what.
            fd = os.open(sink, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            sink = open(fd, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - closed in close()
        self._sink = sink
        self._counter = 0

    def next_call_id(self) -> int:
        """A new id tying a call's records together (one per tool call)."""
        self._counter += 1
        return self._counter

    def record(
        self,
        *,
        outcome: Outcome,
        server: str,
        tool: str,
        name: str,
        arguments: Mapping[str, Any],
        duration_ms: float,
        call: int | None = None,
        reason: str | None = None,
        principal: str | None = None,
    ) -> dict[str, Any]:
        """Write one line (and return it as a dict); ``principal``: the authenticated caller's
        subject (a gateway served with authorization), absent otherwise."""
        entry: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "server": server,
            "tool": tool,
            "name": name,
            "outcome": outcome,
            "duration_ms": round(duration_ms, 3),
            "arguments": dict(arguments) if self.full_arguments else redact(arguments),
        }
        if call is not None:
            entry["call"] = call
        if principal is not None:
            entry["principal"] = principal
        if reason is not None:
            entry["reason"] = reason[:500]
        self._write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
        return entry

    def event(self, event: str, **fields: Any) -> dict[str, Any]:
        """Write one line about something other than a call (``tool_changed``, ``tool_collision``…)."""
        entry: dict[str, Any] = {"time": datetime.now(UTC).isoformat(timespec="milliseconds"), "event": event}
        entry.update(fields)
        self._write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
        return entry

    def _write(self, line: str) -> None:
        # Small synchronous appends: one write per line keeps lines whole when
        # several processes share the file (O_APPEND), and costs microseconds.
        sink: Any = self._sink
        if isinstance(sink, io.TextIOBase) or _accepts_text(sink):
            sink.write(line)
        else:
            sink.write(line.encode("utf-8"))
        flush = getattr(sink, "flush", None)
        if flush is not None:
            flush()

    def close(self) -> None:
        """Close the log file, if this log opened it."""
        if self._own:
            self._sink.close()


def _accepts_text(sink: Any) -> bool:
    mode = getattr(sink, "mode", None)
    if isinstance(mode, str):
        return "b" not in mode
    return not isinstance(sink, io.RawIOBase | io.BufferedIOBase)


def redact(arguments: Mapping[str, Any]) -> dict[str, str]:
    """Keys kept, every value replaced by ``"<redacted>"``."""
    return dict.fromkeys(arguments, REDACTED)


class Stopwatch:
    """Milliseconds since creation (monotonic)."""

    __slots__ = ("start",)

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000.0
