"""Local ``$ref``s in a JSON Schema replaced by the schemas they point at.

Many hosts hand a tool's ``inputSchema`` to the model without resolving ``$ref``, and some
drop ``$defs`` altogether, so a nested parameter arrives as an empty object or as a string.
The schemas mcpkit generates (from Python types, from OpenAPI documents) are therefore
self-contained: every ``$ref`` is inlined, except the ones a recursive type needs, which
point at the one ``$defs`` entry kept for it.

Only real sub-schemas are walked (``properties``, ``items``, ``anyOf``...), so a ``default``,
``const`` or ``enum`` value that happens to hold a ``"$ref"`` key is data and stays as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["RefInliner", "def_name", "inline_defs"]

#: Keywords whose value maps names to sub-schemas.
SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"})
#: Keywords whose value is a list of sub-schemas (``items`` too: a list in drafts before 2020-12).
SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems", "items"})
#: Keywords whose value is one sub-schema.
# fmt: off
SCHEMA_ONE = frozenset({
    "items", "additionalProperties", "not", "contains", "if", "then", "else", "propertyNames",
    "unevaluatedItems", "unevaluatedProperties", "additionalItems", "contentSchema",
})
# fmt: on


def def_name(ref: str) -> str:
    """The ``$defs`` name a ``$ref`` is kept under: its last path segment, made safe."""
    return ref.rsplit("/", 1)[-1].replace("~1", "_").replace("~0", "_") or "schema"


class RefInliner:
    """Inlines the ``$ref``s of schemas, each resolved by ``lookup`` (a ref -> the schema there).

    ``drop``: keywords left out of every sub-schema; ``rewrite(original, out)``: called for
    every sub-schema once its keywords are copied (both for dialects, such as OpenAPI 3.0's).
    """

    def __init__(
        self,
        lookup: Callable[[str], Any],
        *,
        drop: frozenset[str] = frozenset(),
        rewrite: Callable[[Mapping[str, Any], dict[str, Any]], None] | None = None,
    ) -> None:
        self.lookup = lookup
        self.drop = drop
        self.rewrite = rewrite

    def schema(self, schema: Any) -> Any:
        """``schema`` with its refs inlined; the ones recursion needs point into its ``$defs``."""
        defs: dict[str, Any] = {}
        out = self._inline(schema, (), defs)
        if defs and isinstance(out, dict):
            out = {**out, "$defs": {**out.get("$defs", {}), **defs}}
        return out

    def _inline(self, node: Any, stack: tuple[str, ...], defs: dict[str, Any]) -> Any:
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = def_name(ref)
            if ref in stack:  # recursive: the one place a $ref stays
                if name not in defs:
                    defs[name] = {}  # reserve, then fill (the body may refer to itself again)
                    defs[name] = self._inline(self.lookup(ref), (*stack, ref), defs)
                return {"$ref": f"#/$defs/{name}"}
            target = self._inline(self.lookup(ref), (*stack, ref), defs)
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if siblings and isinstance(target, dict):  # 2020-12 allows keywords beside $ref
                return {**target, **self._inline(siblings, stack, defs)}
            return target
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in self.drop:
                continue
            if key in SCHEMA_MAPS and isinstance(value, Mapping):
                value = {k: self._inline(v, stack, defs) for k, v in value.items()}
            elif key in SCHEMA_LISTS and isinstance(value, list):
                value = [self._inline(v, stack, defs) for v in value]
            elif key in SCHEMA_ONE:
                value = self._inline(value, stack, defs)
            out[key] = value
        if self.rewrite is not None:
            self.rewrite(node, out)
        return out


def inline_defs(schema: dict[str, Any], defs: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` (whose refs are ``#/$defs/<name>`` into ``defs``) with them inlined."""

    def lookup(ref: str) -> Any:
        if not ref.startswith("#/$defs/") or ref[len("#/$defs/") :] not in defs:
            raise TypeError(f"unresolvable $ref {ref!r} in a generated schema")
        return defs[ref[len("#/$defs/") :]]

    inlined: dict[str, Any] = RefInliner(lookup).schema(schema)
    return inlined
