"""The skills reference server (mcpkit.servers.skills) as users run it: a real process,
``python -m mcpkit.servers.skills DIR`` over stdio in both eras and over Streamable HTTP,
``mcpkit serve skills DIR``, read by mcpkit's client, which verifies every file it reads
against the server's manifest; and its command line."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit import Client, MCPError
from mcpkit.protocol.skills import SKILLS_EXTENSION
from mcpkit.servers import SERVERS
from mcpkit.servers.skills import build_parser, main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "skills"


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    (root / "deploy" / "scripts").mkdir(parents=True)
    (root / "deploy" / "SKILL.md").write_text(
        "---\nname: deploy\ndescription: Deploy the service.\nmetadata:\n  owner: ops\n---\n\n"
        "Run `scripts/go.sh`.\n"
    )
    (root / "deploy" / "scripts" / "go.sh").write_text("#!/bin/sh\necho deploying\n")
    (root / "deploy" / ".secrets").write_text("never served\n")
    return root


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcpkit.servers.skills", *args]


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_stdio_both_eras_served_and_verified(skills_dir: Path, protocol: str) -> None:
    async with Client(command(str(skills_dir)), protocol=protocol) as client:
        assert client.is_modern is (protocol == "modern")
        caps = client.server_capabilities
        assert caps is not None and SKILLS_EXTENSION in caps.extensions
        skills = await client.list_skills()
        assert [s.uri for s in skills] == ["skill://deploy/SKILL.md"]
        deploy = skills[0]
        assert deploy.frontmatter == {
            "name": "deploy",
            "description": "Deploy the service.",
            "metadata": {"owner": "ops"},
        }
        assert set(deploy.files) == {"skill://deploy/SKILL.md", "skill://deploy/scripts/go.sh"}
        # Read through the client's verification (size, digest, frontmatter against the entry).
        assert (await deploy.read("scripts/go.sh")) == (
            skills_dir / "deploy" / "scripts" / "go.sh"
        ).read_bytes()
        assert (await deploy.read_text()).endswith("Run `scripts/go.sh`.\n")


async def test_stdio_hidden_files_are_not_found(skills_dir: Path) -> None:
    async with Client(command(str(skills_dir)), protocol="modern") as client:
        with pytest.raises(MCPError) as info:
            await client.read_resource("skill://deploy/.secrets")
        assert info.value.code == -32602
        with pytest.raises(MCPError):
            await client.read_resource("skill://deploy/%2e%2e/%2e%2e/etc/passwd")


async def test_the_example_skills_through_mcpkit_serve() -> None:
    assert SERVERS["skills"] == "mcpkit.servers.skills"
    cmd = [sys.executable, "-m", "mcpkit", "serve", "skills", str(EXAMPLES)]
    async with Client(cmd, protocol="modern") as client:
        skills = {s.name: s for s in await client.list_skills()}
        assert set(skills) == {"code-review", "release-notes"}
        review = skills["code-review"]
        data = await review.read("checklists/security.md")
        assert data == (EXAMPLES / "code-review" / "checklists" / "security.md").read_bytes()
        digest = {f.uri: f for f in review.files.values()}["skill://code-review/checklists/security.md"]
        assert digest.digest == "sha256:" + hashlib.sha256(data).hexdigest()


class HTTPServer:
    """The server as a process serving HTTP on a free port."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            command("--transport", "http", "--port", "0", *args), stderr=subprocess.PIPE, text=True
        )
        self.lines: list[str] = []
        self.found = threading.Event()
        self.url = ""
        threading.Thread(target=self._read, daemon=True).start()
        if not self.found.wait(30):
            self.stop()
            raise AssertionError(f"the server did not say where it serves: {self.lines}")

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            match = re.search(r"serving skills over Streamable HTTP at (http://\S+)", line)
            if match:
                self.url = match.group(1)
                self.found.set()

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(20)


@pytest.fixture
def http_server(skills_dir: Path) -> Iterator[HTTPServer]:
    server = HTTPServer(str(skills_dir))
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_http_both_eras(http_server: HTTPServer, skills_dir: Path, protocol: str) -> None:
    async with Client(http_server.url, protocol=protocol) as client:
        deploy = await client.get_skill("skill://deploy/SKILL.md")
        assert deploy.name == "deploy"
        assert await deploy.read("scripts/go.sh") == b"#!/bin/sh\necho deploying\n"
    # An edit shows in the next entry (the server re-checks files at most every second).
    (skills_dir / "deploy" / "scripts" / "go.sh").write_text("#!/bin/sh\necho v2\n")
    expected = "sha256:" + hashlib.sha256(b"#!/bin/sh\necho v2\n").hexdigest()
    async with Client(http_server.url, protocol=protocol) as client:
        deadline = time.monotonic() + 10
        while True:  # polled with a deadline: the change is observable only in the entry
            skill = await client.get_skill("deploy")
            seen = skill.files["skill://deploy/scripts/go.sh"].digest
            if seen == expected:
                break
            assert time.monotonic() < deadline, seen
            await asyncio.sleep(0.1)
        assert await skill.read("scripts/go.sh") == b"#!/bin/sh\necho v2\n"


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    help_text = build_parser().format_help()
    for option in (
        "--prefix",
        "--no-directory-read",
        "--max-file-bytes",
        "--max-skill-bytes",
        "--max-files",
        "--refresh",
        "--include-hidden",
        "--transport",
        "--host",
        "--port",
        "DIRECTORY",
    ):
        assert option in help_text, option
    args = build_parser().parse_args(["--max-file-bytes", "1M", "--refresh", "never", "/x"])
    assert (args.max_file_bytes, args.refresh, args.directories) == (1 << 20, None, ["/x"])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: Bad Name\ndescription: d\n---\n")
    with pytest.raises(SystemExit) as info:
        main([str(bad)])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "SKILL.md" in err and "naming rules" in err, err


def test_mcpkit_install_writes_a_host_entry_that_serves_the_skills(skills_dir: Path, tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcpkit",
            "install",
            "claude-desktop",
            "--path",
            str(config),
            "--server",
            "skills",
            str(skills_dir),
            "--refresh",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert installed.returncode == 0, installed.stderr
    entry = json.loads(config.read_text())["mcpServers"]["skills"]
    assert entry["args"][-5:] == ["serve", "skills", str(skills_dir), "--refresh", "0"]
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcpkit",
            "install",
            "claude-desktop",
            "--path",
            str(tmp_path / "other.json"),
            "--server",
            "skills",
            str(skills_dir),
            "--max-files",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "--max-files" in refused.stderr, refused.stderr
    assert not (tmp_path / "other.json").exists()
    # The entry, as the host would start it.
    listed = subprocess.run(
        [sys.executable, "-m", "mcpkit", "list", "resources", "--", entry["command"], *entry["args"]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0 and "skill://deploy/SKILL.md" in listed.stdout, listed
