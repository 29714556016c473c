"""``python -m mcpkit.servers.skills DIRECTORY... [options]``."""

from __future__ import annotations

from . import main

if __name__ == "__main__":
    raise SystemExit(main())
