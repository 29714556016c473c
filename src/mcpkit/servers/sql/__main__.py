"""``python -m mcpkit.servers.sql DATABASE_URL [options]``."""

from __future__ import annotations

from . import main

raise SystemExit(main())
