"""``mcpkit.inspector``: a local web app to connect to, browse and exercise MCP servers.

Run it with ``python -m mcpkit.inspector [--port N] [--no-browser] [URL | -- command args...]``
or :func:`run_inspector`. It serves one page (plain HTML, CSS and JavaScript,
shipped in ``static/``) and a JSON API on a loopback address; every API call
needs the random token printed in the URL. See :mod:`mcpkit.inspector.app`
for the security rules.
"""

from __future__ import annotations

from .app import InspectorApp
from .runner import Inspector, main, run_inspector

__all__ = ["Inspector", "InspectorApp", "main", "run_inspector"]
