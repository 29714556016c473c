"""Permission rules and the audit log, without servers."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from mcpkit.host import ApprovalRequest, AuditLog, PermissionDenied, Policy


def request(server: str = "my-db-tool", tool: str = "query_database", key: str = "") -> ApprovalRequest:
    return ApprovalRequest(f"mcp__{key or server}__{tool}", server, tool, {"sql": "SELECT 1"}, key or server)


def test_seed_allow_and_deny_lists() -> None:
    # The seed document's .claude/settings.json permissions.
    policy = Policy(allow=["mcp__my-db-tool__query_database"], deny=["mcp__my-db-tool__drop_table"])
    assert policy.decide(request()) == ("allow", "mcp__my-db-tool__query_database")
    assert policy.decide(request(tool="drop_table")) == ("deny", "mcp__my-db-tool__drop_table")
    assert policy.decide(request(tool="other")) == ("ask", None)


@pytest.mark.parametrize("rule", ["mcp__db", "mcp__db__*", "mcp__db__drop", "mcp__*__drop", "mcp__d*"])
def test_rule_forms_match(rule: str) -> None:
    assert Policy(deny=[rule], default="allow").decide(request("db", "drop"))[0] == "deny"


@pytest.mark.parametrize("rule", ["mcp__db2", "mcp__d", "mcp__db__drop_all", "mcp__other__*", "mcp__db__dro"])
def test_rule_forms_do_not_overreach(rule: str) -> None:
    assert Policy(deny=[rule], default="allow").decide(request("db", "drop"))[0] == "allow"


def test_deny_wins_over_ask_wins_over_allow() -> None:
    policy = Policy(allow=["mcp__db"], ask=["mcp__db__drop"], deny=["mcp__db__*"], default="allow")
    assert policy.decide(request("db", "drop"))[0] == "deny"
    policy = Policy(allow=["mcp__db__drop"], ask=["mcp__db"], default="allow")
    assert policy.decide(request("db", "drop"))[0] == "ask"


def test_rules_match_raw_and_sanitized_server_names() -> None:
    req = request("my.db", "q", key="my_db")
    assert Policy(deny=["mcp__my.db__q"], default="allow").decide(req)[0] == "deny"
    assert Policy(deny=["mcp__my_db"], default="allow").decide(req)[0] == "deny"


def test_invalid_rules_and_default() -> None:
    with pytest.raises(ValueError, match="mcp__server"):
        Policy(allow=["Bash(ls)"])
    with pytest.raises(ValueError, match="default"):
        Policy(default="maybe")  # type: ignore[arg-type]


def test_from_claude_settings_ignores_other_rules(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "permissions": {
                    "allow": ["Bash(npm test)", "mcp__a"],
                    "ask": ["mcp__b"],
                    "deny": ["Read(.env)"],
                }
            }
        )
    )
    policy = Policy.from_settings(path, default="deny")
    assert (policy.allow, policy.ask, policy.deny, policy.default) == (("mcp__a",), ("mcp__b",), (), "deny")


async def test_authorize_paths() -> None:
    seen: list[ApprovalRequest] = []

    async def approve(req: ApprovalRequest) -> bool:
        seen.append(req)
        return req.tool == "query_database"

    policy = Policy(deny=["mcp__my-db-tool__drop_table"], approver=approve)
    verdict = await policy.authorize(request())
    assert (verdict.decision, verdict.approved_by) == ("ask", "callback")
    with pytest.raises(PermissionDenied, match="refused by the approval callback"):
        await policy.authorize(request(tool="other"))
    with pytest.raises(PermissionDenied, match="denied by rule 'mcp__my-db-tool__drop_table'"):
        await policy.authorize(request(tool="drop_table"))
    assert [r.tool for r in seen] == ["query_database", "other"]  # deny never asks
    # A per-call approver overrides; a sync one works too.
    assert (await policy.authorize(request(tool="other"), approver=lambda r: True)).decision == "ask"


async def test_ask_fails_closed() -> None:
    with pytest.raises(PermissionDenied, match="no approval callback"):
        await Policy().authorize(request())

    def broken(req: ApprovalRequest) -> bool:
        raise RuntimeError("ui went away")

    with pytest.raises(PermissionDenied, match="approval failed: RuntimeError"):
        await Policy(approver=broken).authorize(request())
    with pytest.raises(PermissionDenied, match="refused"):  # only True approves
        await Policy(approver=lambda r: "yes").authorize(request())  # type: ignore[arg-type,return-value]


def test_audit_log_lines_are_redacted_by_default() -> None:
    sink = io.StringIO()
    log = AuditLog(sink)
    log.record(
        outcome="ok",
        server="db",
        tool="login",
        name="mcp__db__login",
        arguments={"user": "ann", "password": "hunter2"},
        duration_ms=1.23456,
        call=7,
    )
    line = json.loads(sink.getvalue())
    assert line["arguments"] == {"user": "<redacted>", "password": "<redacted>"}
    assert (line["server"], line["tool"], line["outcome"], line["duration_ms"], line["call"]) == (
        "db",
        "login",
        "ok",
        1.235,
        7,
    )
    assert line["time"].endswith("+00:00") and "T" in line["time"]
    assert "hunter2" not in sink.getvalue()


def test_audit_log_full_arguments_file_and_binary_sinks(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, full_arguments=True)
    for outcome in ("allowed", "denied"):
        log.record(outcome=outcome, server="s", tool="t", name="mcp__s__t", arguments={"a": 1}, duration_ms=0)
    log.close()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["outcome"] for x in lines] == ["allowed", "denied"] and lines[0]["arguments"] == {"a": 1}
    assert path.stat().st_mode & 0o777 == 0o600
    raw = io.BytesIO()
    AuditLog(raw).record(
        outcome="error", server="s", tool="t", name="n", arguments={}, duration_ms=0, reason="x"
    )
    assert json.loads(raw.getvalue())["reason"] == "x"
