"""Typed MCP messages for every revision (a superset; see :mod:`mcpkit.protocol.wire`)."""

from .base import *  # noqa: F403
from .client_features import *  # noqa: F403
from .features import *  # noqa: F403
from .params import *  # noqa: F403
