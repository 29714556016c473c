"""Resources: static URIs and RFC 6570 templates, found by their literal prefix and matched in order."""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from msgspec import UNSET

from ..protocol import _binary as binary
from ..protocol import types as t
from ._memo import AnalysisMemo
from .context import Context
from .results import json_text
from .signature import split_docstring
from .sync import SyncRunner
from .textargs import RawArgs, TextArgs, TextArgumentError

__all__ = ["CacheScope", "ResourceNotFound", "ResourceOptions", "ResourceRegistry", "UriTemplate"]

CacheScope: TypeAlias = Literal["public", "private"]


@dataclass(frozen=True, slots=True)
class ResourceOptions:
    """How a function is published as a resource: the options of :meth:`MCPServer.resource`.

    Built once by the decorator and handed to :meth:`ResourceRegistry.add`; a
    new per-resource option is a field here plus a keyword of the decorator.
    """

    #: The resource's name; the function's ``__name__`` (else the URI) when not given.
    name: str | None = None
    title: str | None = None
    #: The description; the docstring's summary when not given.
    description: str | None = None
    #: The contents' type; otherwise guessed from the value read (text, bytes, JSON).
    mime_type: str | None = None
    #: Size in bytes, published for static resources only.
    size: int | None = None
    annotations: t.Annotations | None = None
    icons: list[t.Icon] | None = None
    meta: dict[str, Any] | None = None
    #: ``(ttlMs, cacheScope)`` for its reads; otherwise the server's policy applies.
    cache: tuple[int, CacheScope] | None = None
    #: OAuth scopes a caller needs (HTTP with an authenticator).
    scopes: frozenset[str] = frozenset()


class ResourceNotFound(LookupError):
    """No resource or template matches the URI."""


_EXPR = re.compile(r"\{([+#]?)([A-Za-z0-9_]+)\}")


class UriTemplate:
    """An RFC 6570 level-2 template (``{var}``, ``{+var}``, ``{#var}``) and its matcher.

    Matching walks the URI once, left to right: each variable runs up to the
    next literal's first occurrence, so a crafted URI cannot make it backtrack
    (a regex with adjacent groups can go exponential). ``{var}`` never spans a
    ``/``; ``{+var}`` and ``{#var}`` may, and ``{#var}`` starts with ``#``.
    A variable named more than once must match the same text at each place.
    Values are the URI's text as it stands (not percent-decoded).
    """

    def __init__(self, template: str) -> None:
        self.template = template
        self.literals: list[str] = []
        self.variables: list[tuple[str, bool]] = []  # (name, may contain "/")
        pos = 0
        for m in _EXPR.finditer(template):
            # RFC 6570 3.2.4: fragment expansion writes "#" before the value; as the matcher
            # requires every variable, that "#" is always there: part of the literal before it.
            self.literals.append(template[pos : m.start()] + ("#" if m.group(1) == "#" else ""))
            self.variables.append((m.group(2), m.group(1) != ""))
            pos = m.end()
        self.literals.append(template[pos:])
        if "{" in "".join(self.literals) or "}" in "".join(self.literals):
            raise ValueError(f"unsupported URI template expression in {template!r}")
        for i in range(1, len(self.variables)):
            if self.literals[i] == "":
                raise ValueError(f"adjacent variables need a literal between them in {template!r}")

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.variables]

    def match(self, uri: str) -> dict[str, str] | None:
        first = self.literals[0]
        if not uri.startswith(first):
            return None
        pos = len(first)
        values: dict[str, str] = {}
        for i, (name, reserved) in enumerate(self.variables):
            literal = self.literals[i + 1]
            last = i == len(self.variables) - 1
            if last and literal == "":
                end = len(uri)
            elif last:
                if not uri.endswith(literal) or len(uri) - len(literal) < pos:
                    return None
                end = len(uri) - len(literal)
            else:
                end = uri.find(literal, pos)
                if end < 0:
                    return None
            value = uri[pos:end]
            if not value or (not reserved and "/" in value):
                return None
            # RFC 6570 expands a template from one value per variable, so every place a name
            # appears holds the same value: a URI whose places differ is not the expansion of
            # any values (keeping one would read a resource for a URI that says otherwise).
            # Each comparison reads its own stretch of the URI: matching stays linear.
            if values.setdefault(name, value) != value:
                return None
            pos = end + len(literal)
        if not self.variables and uri != first:
            return None
        return values


@dataclass(slots=True)
class _Entry:
    fn: Callable[..., Any]
    args: TextArgs
    mime_type: str | None
    runner: SyncRunner | None
    #: (ttlMs, cacheScope) for reads of this resource, else the server's policy.
    cache: tuple[int, CacheScope] | None = None
    scopes: frozenset[str] = frozenset()


_Template: TypeAlias = tuple[t.ResourceTemplate, UriTemplate, _Entry]


class _PrefixIndex:
    """Positions in a template list by each template's leading literal (``tmpl://`` of
    ``tmpl://{id}``; ``""`` for a template that starts with a variable).

    A template can only match a URI that starts with its leading literal, so the candidates
    for a URI are the buckets of the URI's prefixes of the few lengths leading literals have:
    a handful of dictionary look-ups instead of trying every template. Candidates are visited
    in list order, so the first template that matches is the one a scan of the list finds.
    """

    def __init__(self, templates: list[_Template]) -> None:
        self.templates = templates  # the list indexed (held: compared by identity)
        self.size = 0
        self.buckets: dict[str, list[int]] = {}
        self.lengths: list[int] = []
        self.extend()

    def extend(self) -> None:
        """Index what was appended to the list since."""
        for position in range(self.size, len(self.templates)):
            prefix = self.templates[position][1].literals[0]
            bucket = self.buckets.get(prefix)
            if bucket is None:
                self.buckets[prefix] = [position]
                self.lengths = sorted({*self.lengths, len(prefix)})
            else:
                bucket.append(position)
        self.size = len(self.templates)

    def candidates(self, uri: str) -> Iterator[_Template]:
        found = [b for n in self.lengths if (b := self.buckets.get(uri[:n])) is not None]
        positions = found[0] if len(found) == 1 else heapq.merge(*found)
        templates = self.templates
        return (templates[i] for i in positions)


class ResourceRegistry:
    def __init__(self) -> None:
        self.resources: dict[str, tuple[t.Resource, _Entry]] = {}
        #: In matching order. Replace the list or append to it; the index follows both.
        self.templates: list[_Template] = []
        self.on_change: Callable[[], None] | None = None
        self._index: _PrefixIndex | None = None
        self._analysed: AnalysisMemo[tuple[TextArgs, str | None]] = AnalysisMemo()

    def add(self, fn: Callable[..., Any], uri: str, options: ResourceOptions = ResourceOptions()) -> None:
        """Publish ``fn`` at ``uri``: a template when the URI has ``{variables}``."""
        # TextArgs is read-only once made: entries of one function can share it.
        args, summary = self._analysed.get(
            fn, None, lambda: (TextArgs(fn, (Context,)), split_docstring(fn)[0])
        )
        runner = None if args.is_async else SyncRunner(fn)
        entry = _Entry(fn, args, options.mime_type, runner, options.cache, options.scopes)
        desc = options.description if options.description is not None else summary
        common: dict[str, Any] = {
            "name": options.name or getattr(fn, "__name__", uri),
            "title": _u(options.title),
            "description": _u(desc),
            "mime_type": _u(options.mime_type),
            "annotations": _u(options.annotations),
            "icons": _u(options.icons),
            "meta": _u(options.meta),
        }
        template = UriTemplate(uri)
        if template.variables:
            if set(template.names) != set(args.names):
                raise TypeError(
                    f"resource template {uri!r} has variables {template.names} "
                    f"but {getattr(fn, '__qualname__', fn)} takes {args.names}"
                )
            self.templates.append((t.ResourceTemplate(uri_template=uri, **common), template, entry))
        else:
            if any(p.required for p in args.params):
                raise TypeError(f"static resource {uri!r}: the function may only take a Context")
            self.resources[uri] = (t.Resource(uri=uri, size=_u(options.size), **common), entry)
        self._changed()

    def add_raw(
        self,
        definition: t.Resource | t.ResourceTemplate,
        reader: Callable[..., Any],
        *,
        scopes: frozenset[str] = frozenset(),
    ) -> None:
        """Publish ``definition`` verbatim; ``reader(uri=..., ctx=...)`` returns its contents."""
        entry = _Entry(reader, RawArgs([], wants_uri=True), None, None, None, scopes)  # type: ignore[arg-type]
        if isinstance(definition, t.ResourceTemplate):
            matcher = UriTemplate(definition.uri_template)
            self.templates = [x for x in self.templates if x[0].uri_template != definition.uri_template]
            self.templates.append((definition, matcher, entry))
        else:
            self.resources[definition.uri] = (definition, entry)
        self._changed()

    def remove(self, uri: str) -> None:
        if self.resources.pop(uri, None) is None:
            before = len(self.templates)
            self.templates = [x for x in self.templates if x[0].uri_template != uri]
            if len(self.templates) == before:
                raise KeyError(uri)
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def match_template(self, uri: str) -> tuple[_Entry, dict[str, str]] | None:
        """The first template (in :attr:`templates` order) that matches ``uri``, with its values."""
        index = self._index
        if index is None or index.templates is not self.templates or index.size > len(self.templates):
            index = self._index = _PrefixIndex(self.templates)
        elif index.size < len(self.templates):
            index.extend()
        for _, matcher, entry in index.candidates(uri):
            values = matcher.match(uri)
            if values is not None:
                return entry, values
        return None

    def scopes_for(self, uri: str) -> frozenset[str]:
        found = self.resources.get(uri)
        if found is not None:
            return found[1].scopes
        matched = self.match_template(uri)
        return matched[0].scopes if matched is not None else frozenset()

    def cache_for(self, uri: str) -> tuple[int, CacheScope] | None:
        """The resource's own ``(ttlMs, cacheScope)`` for reads of ``uri``, if it declares one."""
        found = self.resources.get(uri)
        if found is not None:
            return found[1].cache
        matched = self.match_template(uri)
        return matched[0].cache if matched is not None else None

    def exists(self, uri: str) -> bool:
        return uri in self.resources or self.match_template(uri) is not None

    async def read(
        self, uri: str, ctx: Context | None
    ) -> tuple[list[t.ResourceContents], tuple[int, CacheScope] | None]:
        """The contents of ``uri``, and the resource's own cache policy if it has one."""
        found = self.resources.get(uri)
        values: dict[str, str] = {}
        if found is not None:
            entry = found[1]
        else:
            matched = self.match_template(uri)
            if matched is None:
                raise ResourceNotFound(uri)
            entry, values = matched
        try:
            kwargs = entry.args.bind(values)
        except TextArgumentError as exc:
            raise ResourceNotFound(f"{uri}: {exc}") from None
        if entry.args.context_param is not None:
            kwargs[entry.args.context_param] = ctx
        if entry.args.wants_uri:
            kwargs["uri"] = uri
        # (passed on without a local name: _contents can then let go of a large blob early)
        return _contents(
            uri, await (entry.fn(**kwargs) if entry.runner is None else entry.runner(kwargs)), entry.mime_type
        ), entry.cache


def _contents(uri: str, value: Any, mime: str | None) -> list[t.ResourceContents]:
    if isinstance(value, t.ResourceContents):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, t.ResourceContents) for v in value):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        # Kept as bytes until the answer is encoded (base64 written straight into the JSON: no
        # base64 text beside it; bench/RESULTS.md, issue 18).
        return [binary.blob(uri, value, mime or "application/octet-stream")]
    if isinstance(value, str):
        return [t.ResourceContents(uri=uri, text=value, mime_type=mime or "text/plain")]
    return [t.ResourceContents(uri=uri, text=json_text(value), mime_type=mime or "application/json")]


def _u(value: Any) -> Any:
    return UNSET if value is None else value
