"""Calling functions whose arguments arrive as strings (URI template variables,
prompt arguments), converting each to its annotated type."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

__all__ = ["RawArgs", "TextArgs", "TextArgumentError"]


class TextArgumentError(ValueError):
    """An argument string could not be converted, or a required one is missing."""


@dataclass(frozen=True, slots=True)
class TextParam:
    name: str
    annotation: Any
    required: bool
    description: str | None


class TextArgs:
    """Inspects ``fn`` once; :meth:`bind` converts string arguments for it."""

    def __init__(self, fn: Callable[..., Any], context_types: tuple[type, ...]) -> None:
        hints = typing.get_type_hints(fn, include_extras=True)
        self.context_param: str | None = None
        self.params: list[TextParam] = []
        self.wants_uri = False
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004
        )
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"{fn.__qualname__}: *args and **kwargs are not supported")
            ann = hints.get(p.name, str)
            base = _strip_annotated(ann)
            if isinstance(base, type) and issubclass(base, context_types):
                self.context_param = p.name
                continue
            self.params.append(TextParam(p.name, base, p.default is p.empty, _description(ann)))

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def bind(self, values: dict[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for p in self.params:
            if p.name not in values:
                if p.required:
                    raise TextArgumentError(f"Missing required argument '{p.name}'")
                continue
            raw = values[p.name]
            if p.annotation is str or p.annotation is Any:
                out[p.name] = raw
                continue
            try:
                out[p.name] = msgspec.convert(raw, p.annotation, strict=False)
            except (msgspec.ValidationError, TypeError) as exc:
                raise TextArgumentError(f"Invalid argument '{p.name}': {exc}") from None
        return out


def _strip_annotated(tp: Any) -> Any:
    if typing.get_origin(tp) is typing.Annotated:
        return typing.get_args(tp)[0]
    return tp


def _description(tp: Any) -> str | None:
    if typing.get_origin(tp) is typing.Annotated:
        for extra in typing.get_args(tp)[1:]:
            if isinstance(extra, str):
                return extra
            desc = getattr(extra, "description", None)
            if isinstance(desc, str):
                return desc
    return None


class RawArgs:
    """Arguments passed through unconverted, for handlers registered with a
    ready-made definition (proxies, gateways): the handler receives
    ``arguments`` (a dict) or ``uri``, and ``ctx``."""

    context_param = "ctx"
    is_async = True

    def __init__(self, required: list[str], *, wants_uri: bool = False) -> None:
        self.params = [TextParam(name, str, True, None) for name in required]
        self.wants_uri = wants_uri

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def bind(self, values: dict[str, str]) -> dict[str, Any]:
        missing = [p.name for p in self.params if p.name not in values]
        if missing:
            raise TextArgumentError(f"Missing required argument '{missing[0]}'")
        return {} if self.wants_uri else {"arguments": dict(values)}
