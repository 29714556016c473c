"""robots.txt as RFC 9309 reads it: groups by user agent, the longest matching rule wins.

Pure parsing and matching; fetching the file (through the SSRF guard) is the server's job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["RobotsTxt", "product_token"]

_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")


def product_token(user_agent: str) -> str:
    """The product token robots.txt groups are matched against: the user agent's first
    word, without its version (``ModelContextProtocol/1.0 (...)`` -> ``modelcontextprotocol``)."""
    first = user_agent.strip().split(None, 1)[0] if user_agent.strip() else ""
    return first.split("/", 1)[0].lower()


def _normalize(path: str) -> str:
    # RFC 9309 section 2.2.2: compare octets, non-ASCII percent-encoded (as UTF-8); %xx
    # escapes compare case-insensitively.
    encoded = "".join(ch if ord(ch) < 128 else "".join(f"%{b:02X}" for b in ch.encode()) for ch in path)
    return _PERCENT.sub(lambda m: m.group(0).upper(), encoded)


@dataclass(frozen=True)
class _Rule:
    allow: bool
    pattern: str
    regex: re.Pattern[str]

    @classmethod
    def make(cls, allow: bool, pattern: str) -> _Rule:
        pattern = _normalize(pattern)
        body, anchored = (pattern[:-1], True) if pattern.endswith("$") else (pattern, False)
        regex = ".*".join(re.escape(part) for part in body.split("*")) + (r"\Z" if anchored else "")
        return cls(allow, pattern, re.compile(regex, re.DOTALL))


@dataclass
class _Group:
    agents: list[str] = field(default_factory=list)
    rules: list[_Rule] = field(default_factory=list)


class RobotsTxt:
    """A parsed robots.txt. ``RobotsTxt.parse(text).allowed("/path?q", "mybot")``."""

    def __init__(self, groups: list[_Group]) -> None:
        self._groups = groups

    @classmethod
    def parse(cls, text: str) -> RobotsTxt:
        """Parse robots.txt text; lines it does not understand are ignored, as the RFC asks."""
        groups: list[_Group] = []
        current: _Group | None = None
        in_agents = False  # consecutive user-agent lines share one group
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            key, sep, value = line.partition(":")
            if not sep:
                continue
            key, value = key.strip().lower(), value.strip()
            if key == "user-agent":
                if current is None or not in_agents:
                    current = _Group()
                    groups.append(current)
                current.agents.append(value.split("/", 1)[0].strip().lower())
                in_agents = True
            elif key in ("allow", "disallow"):
                in_agents = False
                if current is not None and value:  # an empty rule matches nothing
                    current.rules.append(_Rule.make(key == "allow", value))
            # Other records (sitemap, crawl-delay...) are not rules: ignored.
        return cls(groups)

    def rules_for(self, product: str) -> list[_Rule]:
        """The rules of every group naming ``product``; those of ``*`` when none does."""
        product = product.lower()
        named = [rule for group in self._groups if product in group.agents for rule in group.rules]
        if named or any(product in group.agents for group in self._groups):
            return named
        return [rule for group in self._groups if "*" in group.agents for rule in group.rules]

    def allowed(self, path: str, product: str) -> bool:
        """Whether ``product`` may fetch ``path`` (the URL's path and query): the most specific
        (longest) matching rule decides, ``allow`` winning a tie; no match allows."""
        if path.split("?", 1)[0] == "/robots.txt":
            return True
        path = _normalize(path or "/")
        best: _Rule | None = None
        for rule in self.rules_for(product):
            if rule.regex.match(path) is None:
                continue
            longer = best is None or len(rule.pattern) > len(best.pattern)
            if longer or (rule.allow and len(rule.pattern) == len(best.pattern)):  # type: ignore[union-attr]
                best = rule
        return best is None or best.allow
