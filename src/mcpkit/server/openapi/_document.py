"""Loading an OpenAPI 3.0/3.1 document and turning its schemas into plain JSON Schema.

Hosts differ in what JSON Schema they understand: several drop ``$defs`` and
``$ref`` entirely, so every local ``$ref`` is inlined where it is used. Only a
recursive schema keeps a ``$ref`` (to a ``$defs`` entry carried beside it), since
inlining it would never end.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._schema_refs import RefInliner

__all__ = ["OpenAPIError", "Resolver", "load_document"]

#: OpenAPI 3.0 keywords that are not JSON Schema (dropped from the published schemas).
_OAS30_ONLY = frozenset({"nullable", "discriminator", "xml", "externalDocs", "example"})


class OpenAPIError(ValueError):
    """The OpenAPI document cannot be turned into an MCP server (what and where is in the message)."""


def load_document(source: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """Parse ``source``: a mapping, a path to a JSON or YAML file, or JSON/YAML text."""
    if isinstance(source, Mapping):
        document = dict(source)
    else:
        if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and _is_file(source)):
            text = Path(source).read_text(encoding="utf-8")
        else:
            text = str(source)
        document = _parse(text)
    version = document.get("openapi")
    if not isinstance(version, str) or not version.startswith(("3.0", "3.1")):
        found = document.get("swagger") or version
        raise OpenAPIError(
            f"only OpenAPI 3.0 and 3.1 documents are supported (this one says {found!r}); "
            "convert a Swagger 2.0 document first"
        )
    if not isinstance(document.get("paths"), Mapping):
        raise OpenAPIError("the document has no 'paths' object")
    return document


def _is_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except OSError:
        return False


def _parse(text: str) -> dict[str, Any]:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise OpenAPIError(f"the document is not valid JSON: {exc}") from None
    else:
        try:
            import yaml
        except ImportError:  # pragma: no cover - PyYAML is in the openapi extra
            raise OpenAPIError("a YAML document needs PyYAML: pip install 'mcpkit[openapi]'") from None
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise OpenAPIError(f"the document is neither JSON nor valid YAML: {exc}") from None
    if not isinstance(value, dict):
        raise OpenAPIError("the document is not an object")
    return value


class Resolver:
    """Inlines the local ``$ref`` s of one document (``#/components/...``)."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document
        self.oas30 = str(document.get("openapi", "")).startswith("3.0")

    def lookup(self, ref: str) -> Any:
        """The value ``ref`` (a local JSON pointer, RFC 6901) points at."""
        if not ref.startswith("#/"):
            raise OpenAPIError(f"only local $refs are supported, not {ref!r}")
        node: Any = self.document
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                raise OpenAPIError(f"$ref {ref!r} points at nothing")
            node = node[part]
        return node

    def deref(self, value: Any) -> Any:
        """``value`` with a top-level ``$ref`` followed (for parameters, bodies, responses)."""
        seen: set[str] = set()
        while isinstance(value, Mapping) and isinstance(value.get("$ref"), str):
            ref = value["$ref"]
            if ref in seen:
                raise OpenAPIError(f"$ref {ref!r} refers to itself")
            seen.add(ref)
            value = self.lookup(ref)
        return value

    def schema(self, schema: Any) -> dict[str, Any]:
        """``schema`` as self-contained JSON Schema: refs inlined, 3.0 keywords translated."""
        if self.oas30:
            inliner = RefInliner(self.lookup, drop=_OAS30_ONLY, rewrite=_translate_30)
        else:
            inliner = RefInliner(self.lookup)
        out = inliner.schema(schema)
        return out if isinstance(out, dict) else {}


def _translate_30(node: Mapping[str, Any], out: dict[str, Any]) -> None:
    """OpenAPI 3.0's dialect to JSON Schema: ``nullable`` and ``example``."""
    if "example" in node:
        out["examples"] = [node["example"]]
    if node.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
        elif "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        elif kind is None:
            inner = dict(out)
            out.clear()
            out["anyOf"] = [inner, {"type": "null"}]
    # 3.0's boolean exclusiveMinimum/Maximum modify minimum/maximum; 2020-12's are numbers.
    for flag, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(node.get(flag), bool):
            if node[flag] and bound in out:
                out[flag] = out.pop(bound)
            else:
                out.pop(flag, None)
