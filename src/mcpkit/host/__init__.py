"""Hosting many MCP servers: config files, a multi-server manager, permissions, a gateway.

- :func:`load_config` / :func:`parse_config` read Claude Desktop, Claude Code,
  Cursor and VS Code server lists into :class:`ServerSpec`\\ s.
- :class:`Host` connects to all of them and aggregates their tools
  (``mcp__server__tool``), resources and prompts.
- :class:`Policy` (allow / ask / deny) and :class:`AuditLog` guard and record
  tool calls.
- :func:`build_gateway` serves a host as one MCP server.
- :class:`PinStore` pins approved tool definitions (a changed tool is asked
  about again); :func:`audit_servers` reports risky tools and launch commands.
"""

from .audit import audit_servers
from .backend import Backend, RestartPolicy, ServerUnavailable, State
from .config import ConfigError, ServerSpec, detect_format, load_config, parse_config
from .gateway import Gateway, build_gateway
from .manager import (
    Host,
    HostEvent,
    HostPrompt,
    HostResource,
    HostTemplate,
    HostTool,
    ServerStatus,
    UnknownName,
)
from .naming import sanitize
from .pins import PinChange, PinStore
from .policy import ApprovalRequest, AuditLog, PermissionDenied, Policy, Verdict

__all__ = [
    "ApprovalRequest",
    "AuditLog",
    "Backend",
    "ConfigError",
    "Gateway",
    "Host",
    "HostEvent",
    "HostPrompt",
    "HostResource",
    "HostTemplate",
    "HostTool",
    "PermissionDenied",
    "PinChange",
    "PinStore",
    "Policy",
    "RestartPolicy",
    "ServerSpec",
    "ServerStatus",
    "ServerUnavailable",
    "State",
    "UnknownName",
    "Verdict",
    "audit_servers",
    "build_gateway",
    "detect_format",
    "load_config",
    "parse_config",
    "sanitize",
]
