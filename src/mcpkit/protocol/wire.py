"""Per-revision wire rules: what each revision's schema allows us to send.

Results are built once, from the newest types; :func:`downgrade` reshapes them
for an older peer. 2025-11-25 and 2026-07-28 need no reshaping beyond what the
server sets per era (``resultType``, cache hints), so the hot path skips this.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .versions import ProtocolVersion

__all__ = ["downgrade", "needs_downgrade"]

V = ProtocolVersion

# Keys whose values are user data (schemas, arguments, structured output, meta):
# never descend into them, or a property called "title" would vanish.
_OPAQUE = frozenset(
    {
        "inputSchema",
        "outputSchema",
        "structuredContent",
        "arguments",
        "_meta",
        "requestedSchema",
        "data",
        "experimental",
        "metadata",
        "input",
        # A skill's frontmatter is the author's, verbatim (SEP-2640 "Frontmatter").
        "frontmatter",
    }
)

# Keys to drop in a revision older than the one named (the revision that added them).
_ADDED_IN: dict[str, ProtocolVersion] = {
    "resultType": V.V2026_07_28,
    "ttlMs": V.V2026_07_28,
    "cacheScope": V.V2026_07_28,
    "icons": V.V2025_11_25,
    "execution": V.V2025_11_25,
    # ServerCapabilities.tasks (experimental tasks): only ListTasksResult has another
    # "tasks" key, and tasks/list exists in 2025-11-25 alone.
    "tasks": V.V2025_11_25,
    "title": V.V2025_06_18,
    "lastModified": V.V2025_06_18,
    "outputSchema": V.V2025_06_18,
    "structuredContent": V.V2025_06_18,
    "completions": V.V2025_03_26,
}
# Implementation (serverInfo/clientInfo) grew fields of its own.
_IMPLEMENTATION_ADDED: dict[str, ProtocolVersion] = {
    "title": V.V2025_06_18,
    "description": V.V2025_11_25,
    "websiteUrl": V.V2025_11_25,
    "icons": V.V2025_11_25,
}
_CONTENT_ADDED: dict[str, ProtocolVersion] = {"audio": V.V2025_03_26, "resource_link": V.V2025_06_18}


def needs_downgrade(version: ProtocolVersion) -> bool:
    return version < V.V2025_11_25


def downgrade(value: Any, version: ProtocolVersion) -> Any:
    """Return ``value`` (Structs or builtins) reshaped for ``version``."""
    return _walk(msgspec.to_builtins(value), version)


def _walk(value: Any, version: ProtocolVersion) -> Any:
    if isinstance(value, list):
        return [_walk(v, version) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        added = _ADDED_IN.get(key)
        if added is not None and version < added:
            continue
        if key in _OPAQUE and not (key == "arguments" and isinstance(item, list)):
            # (a prompt's argument list is ours to reshape; call arguments are not)
            out[key] = item
        elif key in ("serverInfo", "clientInfo") and isinstance(item, dict):
            out[key] = {
                k: v for k, v in item.items() if version >= _IMPLEMENTATION_ADDED.get(k, V.V2024_11_05)
            }
        elif key == "annotations" and "inputSchema" in value:
            if version < V.V2025_03_26:
                continue  # ToolAnnotations arrived in 2025-03-26, with their title
            out[key] = item
        else:
            out[key] = _walk(item, version)
    kind = out.get("type")
    if isinstance(kind, str) and kind in _CONTENT_ADDED and version < _CONTENT_ADDED[kind]:
        return _older_content(out)
    return out


def _older_content(block: dict[str, Any]) -> dict[str, Any]:
    """A content block the revision lacks, said in words it has."""
    if block["type"] == "resource_link":
        return {"type": "text", "text": f"Resource: {block.get('name', '')} <{block.get('uri', '')}>"}
    return {
        "type": "text",
        "text": f"[{block['type']} content ({block.get('mimeType', 'unknown type')}) omitted]",
    }
