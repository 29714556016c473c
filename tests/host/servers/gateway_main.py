"""The gateway as a stdio server, the way ``mcpkit gateway CONFIG`` will run it.

Usage: gateway_main.py CONFIG [SETTINGS]. ``SETTINGS`` is a Claude Code
settings.json whose ``permissions`` become the policy (default from
``POLICY_DEFAULT``, else ask); ``AUDIT_FILE`` names the audit log.
"""

from __future__ import annotations

import os
import sys

from mcpkit.host import AuditLog, Host, Policy, build_gateway

if __name__ == "__main__":
    policy = None
    if len(sys.argv) > 2:
        policy = Policy.from_settings(sys.argv[2], default=os.environ.get("POLICY_DEFAULT", "ask"))
    audit = AuditLog(os.environ["AUDIT_FILE"]) if "AUDIT_FILE" in os.environ else None
    build_gateway(Host(sys.argv[1], policy=policy, audit=audit)).run()
