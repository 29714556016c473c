#!/usr/bin/env python3
"""Run the official MCP conformance suite against mcpkit, from nothing.

    python scripts/conformance.py                 # set up (cached) and run the server leg
    python scripts/conformance.py --setup-only    # only install Node 22 and the suite
    python scripts/conformance.py --only tools-list --keep-server

Setup needs only npm and the npm registry: Node 22 (the suite cannot run on
older Node) comes from the ``node-<os>-<arch>@22`` package and the suite from
``@modelcontextprotocol/conformance@<pinned>``, both installed under ``.cache/``
and reused while they are at the right version.

The server leg starts ``examples/everything_server.py`` on a free loopback port
and runs ``conformance server`` for each requirement set (2025-11-25 and
2026-07-28) plus a few unscored scenarios we hold ourselves to (EXTRA_SCENARIOS).
It fails on any FAILURE in a scored scenario, on any FAILURE or WARNING in an
extra scenario, and on any ``wire-schema-valid`` failure anywhere. Results
(``checks.json`` per scenario, the harness and server logs) go to
``build/conformance/``.

The scaled server leg (``--leg server-scaled``, part of ``--leg all``) runs the
same requirement sets and extra scenarios against one endpoint served by
SCALED_WORKERS separate ``everything_server.py`` worker processes sharing Redis
(``--redis-url``, default redis://127.0.0.1:6379/0, with a key prefix of this
run's own) behind ``python -m mcpkit.testing.proxy``, a round-robin proxy that
sends every request to the next worker. Its runs are named ``scaled-...``; its
failures are judged and reported exactly like the server leg's.

The mounted server leg (``--leg server-mounted``, part of ``--leg all``) runs them all
once more against ``tests/conformance/mounted_server.py``: the same server mounted (no
namespace) in an empty one, so every request goes through ``MCPServer.mount``. Its runs
are named ``mounted-...``. The proxied server leg (``--leg server-proxied``, part of ``--leg all``) runs them
against ``tests/conformance/proxied_server.py``: everything_server.py spawned over stdio
behind ``MCPServer.proxy``; its runs are named ``proxied-...``.

Standard library only (the scaled leg starts mcpkit's proxy as a process).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
NODE_PREFIX = CACHE / "node22"
SUITE_PREFIX = CACHE / "conformance"
DEFAULT_OUT = ROOT / "build" / "conformance"
SERVER_FILE = ROOT / "examples" / "everything_server.py"
#: The same server served another way, by run target (``Run.target``): the file to run.
VARIANT_FILES = {
    "mounted": ROOT / "tests" / "conformance" / "mounted_server.py",
    # everything_server.py behind MCPServer.proxy (over stdio): --leg server-proxied
    "proxied": ROOT / "tests" / "conformance" / "proxied_server.py",
}
#: The variants --leg all runs too.
ALL_VARIANTS = {"mounted": ("all",), "proxied": ("all",)}

SUITE_PACKAGE = "@modelcontextprotocol/conformance"
SUITE_VERSION = "0.2.0-alpha.12"
NODE_MAJOR = 22

REQUIREMENTS = ("2025-11-25", "2026-07-28")
#: Not scored by the suite, but they must pass without FAILURE or WARNING.
#: Client-leg scenarios outside the scored sets that must pass all the same.
CLIENT_EXTRA_SCENARIOS = (
    ("json-schema-2020-12-preservation", "2025-11-25"),
    ("json-schema-2020-12-preservation", "2026-07-28"),
    ("auth/client-credentials-jwt", "2026-07-28"),
    ("auth/client-credentials-basic", "2026-07-28"),
    # The skills extension (io.modelcontextprotocol/skills, SEP-2640), client side: no file
    # fetched before a skill is loaded, and tampered content (digest, size, frontmatter) refused.
    ("sep-2640-client-no-prefetch", "2026-07-28"),
    ("sep-2640-client-verify-digest", "2026-07-28"),
    ("sep-2640-client-verify-size", "2026-07-28"),
    ("sep-2640-client-verify-frontmatter", "2026-07-28"),
)
CLIENT_SCRIPT = ROOT / "tests" / "conformance" / "client.py"
EXTRA_SCENARIOS = (
    ("json-schema-2020-12", "2025-11-25"),
    ("json-schema-2020-12", "2026-07-28"),
    ("http-header-validation", "2026-07-28"),
    ("http-custom-header-server-validation", "2026-07-28"),
    ("server-session-lifecycle", "2025-11-25"),
    ("server-sse-polling", "2025-11-25"),
    # The tasks extension (io.modelcontextprotocol/tasks, SEP-2663), which the suite scores
    # as an extension: every one of its server scenarios, on one process and scaled out.
    ("tasks-lifecycle", "2026-07-28"),
    ("tasks-capability-negotiation", "2026-07-28"),
    ("tasks-wire-fields", "2026-07-28"),
    ("tasks-request-state-removal", "2026-07-28"),
    ("tasks-mrtr-input", "2026-07-28"),
    ("tasks-request-headers", "2026-07-28"),
    ("tasks-dispatch-and-envelope", "2026-07-28"),
    ("tasks-required-task-error", "2026-07-28"),
    ("tasks-mrtr-composition", "2026-07-28"),
    ("tasks-status-notifications", "2026-07-28"),
    # The skills extension (io.modelcontextprotocol/skills, SEP-2640), server side, in both
    # eras (the cache fields are checked, and exist, from 2026-07-28 only).
    ("sep-2640-skills-enumeration", "2026-07-28"),
    ("sep-2640-skills-manifest", "2026-07-28"),
    ("sep-2640-skills-directory", "2026-07-28"),
    ("sep-2640-skills-enumeration", "2025-11-25"),
    ("sep-2640-skills-manifest", "2025-11-25"),
    ("sep-2640-skills-directory", "2025-11-25"),
)
WIRE_CHECK = "wire-schema-valid"
#: In an extra scenario a SKIPPED check fails the run (a scenario that silently skips
#: its checks proves nothing), except these (scenario, revision or "*", check): why, in the log.
ALLOWED_SKIPS = {
    ("tasks-status-notifications", "*", "tasks-status-notifications"): (
        "the suite skips it itself: SEP-2663 moved notifications/tasks to subscriptions/listen"
    ),
    ("sep-2640-skills-enumeration", "2025-11-25", "sep-2640-skills-list-cache-attributes"): (
        "ttlMs and cacheScope exist from 2026-07-28 on"
    ),
    ("sep-2640-skills-enumeration", "2025-11-25", "sep-2640-skills-get-cache-attributes"): (
        "ttlMs and cacheScope exist from 2026-07-28 on"
    ),
}
SCALED_WORKERS = 2
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
NPM_FLAGS = ["--no-audit", "--no-fund", "--no-update-notifier", "--loglevel=error", "--prefer-offline"]


class SetupError(Exception):
    pass


def log(message: str) -> None:
    print(message, flush=True)


# -- setup ------------------------------------------------------------------------------


def node_package() -> str:
    system = {"Linux": "linux", "Darwin": "darwin"}.get(platform.system())
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    if system is None or arch is None:
        raise SetupError(f"no npm Node package for {platform.system()} {platform.machine()}")
    return f"node-{system}-{arch}"


def node_version(binary: Path | str) -> str | None:
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def npm_install(prefix: Path, spec: str, env: dict[str, str] | None = None) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise SetupError("npm is needed to install Node 22 and the conformance suite")
    prefix.mkdir(parents=True, exist_ok=True)
    cmd = [npm, "install", "--prefix", str(prefix), *NPM_FLAGS, spec]
    log(f"  $ {' '.join(cmd[1:])}")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SetupError(f"npm install {spec} failed:\n{proc.stdout}{proc.stderr}")


def ensure_node() -> Path:
    """A Node 22 binary: $CONFORMANCE_NODE, else one installed from npm under .cache/."""
    override = os.environ.get("CONFORMANCE_NODE")
    if override:
        version = node_version(override)
        if version is None or not version.startswith(f"v{NODE_MAJOR}."):
            raise SetupError(f"CONFORMANCE_NODE={override} is not Node {NODE_MAJOR} ({version})")
        return Path(override)
    package = node_package()
    binary = NODE_PREFIX / "node_modules" / package / "bin" / "node"
    version = node_version(binary) if binary.exists() else None
    if version is None or not version.startswith(f"v{NODE_MAJOR}."):
        log(f"installing Node {NODE_MAJOR} ({package}) into {NODE_PREFIX.relative_to(ROOT)}")
        npm_install(NODE_PREFIX, f"{package}@{NODE_MAJOR}")
        version = node_version(binary)
        if version is None or not version.startswith(f"v{NODE_MAJOR}."):
            raise SetupError(f"{binary} did not install as Node {NODE_MAJOR} (got {version})")
    log(f"node: {binary.relative_to(ROOT) if binary.is_relative_to(ROOT) else binary} {version}")
    return binary


def node_env(node: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{node.parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("NO_COLOR", "1")
    return env


def suite_dir() -> Path:
    return SUITE_PREFIX / "node_modules" / SUITE_PACKAGE


def ensure_suite(node: Path) -> Path:
    """The suite's CLI entry point, installed (pinned) under .cache/conformance."""
    manifest = suite_dir() / "package.json"

    def installed() -> str | None:
        try:
            return str(json.loads(manifest.read_text())["version"])
        except (OSError, ValueError, KeyError):
            return None

    if installed() != SUITE_VERSION:
        log(f"installing {SUITE_PACKAGE}@{SUITE_VERSION} into {SUITE_PREFIX.relative_to(ROOT)}")
        npm_install(SUITE_PREFIX, f"{SUITE_PACKAGE}@{SUITE_VERSION}", env=node_env(node))
        if installed() != SUITE_VERSION:
            raise SetupError(f"{SUITE_PACKAGE} installed as {installed()}, wanted {SUITE_VERSION}")
    bin_entry = json.loads(manifest.read_text())["bin"]
    entry: Path = suite_dir() / str(bin_entry["conformance"] if isinstance(bin_entry, dict) else bin_entry)
    log(f"suite: {SUITE_PACKAGE}@{SUITE_VERSION}")
    return entry


def requirement_sets(leg: str = "server") -> dict[str, tuple[list[str], list[str]]]:
    """{revision: (scored scenarios, not-scored scenarios)} of one leg, from the suite's YAML."""
    sets: dict[str, tuple[list[str], list[str]]] = {}
    for rev in REQUIREMENTS:
        scored: list[str] = []
        not_scored: list[str] = []
        section = None
        pending: dict[str, str] = {}
        for raw in (suite_dir() / "requirements" / f"{rev}.yaml").read_text().splitlines():
            line = raw.split("#", 1)[0].rstrip()
            if not line:
                continue
            if not line.startswith(" "):
                section = line.rstrip(":")
                continue
            item = line.strip()
            if section == leg and item.startswith("- "):
                scored.append(item[2:].strip())
            elif section == "not_scored":
                if item.startswith("- "):
                    pending = {}
                    item = item[2:]
                key, _, value = item.partition(":")
                pending[key.strip()] = value.strip()
                if pending.get("leg") == leg and "scenario" in pending:
                    not_scored.append(pending["scenario"])
                    pending = {}
        sets[rev] = (scored, not_scored)
    return sets


# -- the server under test ---------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(
    port: int, logfile: Path, env: dict[str, str] | None = None, server_file: Path = SERVER_FILE
) -> subprocess.Popen[bytes]:
    script = Path(sys.executable).parent / "mcpkit"
    launcher = [str(script)] if script.exists() else [sys.executable, "-m", "mcpkit.cli.main"]
    cmd = [*launcher, "run", str(server_file.relative_to(ROOT)), "--transport", "http"]
    cmd += ["--port", str(port)]
    return start_process(cmd, port, logfile, "server", env)


def start_process(
    cmd: list[str], port: int, logfile: Path, what: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` and wait until HTTP answers on ``port``."""
    log(f"{what}: {' '.join([Path(cmd[0]).name, *cmd[1:]])}")
    out = logfile.open("wb")
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SetupError(f"the {what} exited with {proc.returncode}; see {logfile}")
        if server_answers(port):
            return proc
        time.sleep(0.1)
    stop_server(proc)
    raise SetupError(f"the {what} did not answer on port {port} within 30 s; see {logfile}")


def server_answers(port: int) -> bool:
    """True once anything HTTP answers at /mcp (a bare GET gets 405/4xx, which is fine)."""
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/mcp", timeout=1).close()
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def redis_answers(url: str) -> bool:
    """True when a Redis server answers PING at ``url`` (redis://host:port/db)."""
    parts = urllib.parse.urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), timeout=2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class Scaled:
    """SCALED_WORKERS worker processes on Redis behind the round-robin proxy."""

    workers: list[subprocess.Popen[bytes]]
    proxy: subprocess.Popen[bytes]
    port: int
    prefix: str
    redis_url: str

    def processes(self) -> list[subprocess.Popen[bytes]]:
        return [*self.workers, self.proxy]

    def dead(self) -> list[str]:
        named = [(f"worker {i}", p) for i, p in enumerate(self.workers)] + [("proxy", self.proxy)]
        return [f"{name} (rc {p.returncode})" for name, p in named if p.poll() is not None]


def start_scaled(out: Path, redis_url: str, port: int = 0) -> Scaled:
    """Workers of everything_server.py sharing ``redis_url``, and the proxy before them."""
    if not redis_answers(redis_url):
        raise SetupError(f"Redis does not answer at {redis_url} (make redis starts one)")
    prefix = f"conformance-{secrets.token_hex(8)}"
    env = dict(os.environ)
    env.update(
        MCPKIT_REDIS_URL=redis_url, MCPKIT_REDIS_PREFIX=prefix, MCPKIT_STATE_SECRET=secrets.token_hex(32)
    )
    workers: list[subprocess.Popen[bytes]] = []
    ports = [free_port() for _ in range(SCALED_WORKERS)]
    try:
        for i, worker_port in enumerate(ports):
            workers.append(start_server(worker_port, out / f"scaled-worker{i}.log", env))
        port = port or free_port()
        cmd = [sys.executable, "-m", "mcpkit.testing.proxy", "--access-log", "--port", str(port)]
        cmd += [f"http://127.0.0.1:{p}" for p in ports]
        proxy = start_process(cmd, port, out / "scaled-proxy.log", "proxy")
    except BaseException:
        for worker in workers:
            stop_server(worker)
        raise
    log(f"scaled: {SCALED_WORKERS} workers on Redis {redis_url} (prefix {prefix}) behind the proxy")
    return Scaled(workers, proxy, port, prefix, redis_url)


def stop_scaled(scaled: Scaled, out: Path) -> None:
    for proc in scaled.processes():
        stop_server(proc)
    try:
        lines = (out / "scaled-proxy.log").read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    served = [line.split(" -> ", 1)[1].split(" ", 1)[0] for line in lines if " refused=" in line]
    spread = ", ".join(f"worker {i}: {served.count(str(i))}" for i in range(len(scaled.workers)))
    log(f"scaled: the proxy forwarded {len(served)} requests ({spread}; no backend: {served.count('None')})")
    # Best effort: the run's keys go (the worker's Python has redis-py when it has the extra).
    code = (
        "import sys, redis\n"
        "r = redis.Redis.from_url(sys.argv[1], socket_timeout=5)\n"
        "keys = list(r.scan_iter(match=sys.argv[2] + '*', count=1000))\n"
        "[r.delete(*keys[i:i + 1000]) for i in range(0, len(keys), 1000)]\n"
    )
    try:
        subprocess.run([sys.executable, "-c", code, scaled.redis_url, scaled.prefix], timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        pass


# -- running and judging -----------------------------------------------------------------


@dataclass
class Run:
    """One invocation of ``conformance server``."""

    name: str
    args: list[str]
    leg: str = "server"
    #: Scenarios whose FAILUREs count; None: all of them.
    scored: set[str] | None = None
    #: WARNINGs count as failures too.
    strict: bool = False
    expected: list[str] = field(default_factory=list)
    #: Which server: "single" (one process) or "scaled" (workers behind the proxy).
    target: str = "single"
    #: The revision of a one-scenario run (extra scenarios), else "".
    rev: str = ""
    returncode: int | None = None
    seconds: float = 0.0
    results: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


_DIR = re.compile(r"^(?P<scenario>.+?)-(?P<stamp>\d{4}-\d{2}-\d{2}T[0-9:.\-]+Z?)$")


def run_harness(node: Path, entry: Path, url: str, run: Run, out: Path, timeout: float) -> None:
    run_dir = out / run.name
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    if run.leg == "client":
        client = f"{sys.executable} {CLIENT_SCRIPT}"
        # Client scenarios run in parallel, each spawning a Python client: allow time.
        cmd = [str(node), str(entry), "client", "--command", client, "--timeout", "60000", *run.args]
    else:
        cmd = [str(node), str(entry), "server", "--url", url, *run.args]
    cmd += ["-o", str(run_dir)]
    started = time.monotonic()
    with (out / f"{run.name}.log").open("w") as logf:
        logf.write("$ " + " ".join(cmd) + "\n")
        logf.flush()
        try:
            proc = subprocess.run(
                cmd, cwd=ROOT, env=node_env(node), stdout=logf, stderr=subprocess.STDOUT, timeout=timeout
            )
            run.returncode = proc.returncode
        except subprocess.TimeoutExpired:
            run.returncode = None
    run.seconds = time.monotonic() - started
    for checks in sorted(run_dir.rglob("checks.json")):
        relative = checks.parent.relative_to(run_dir)
        match = _DIR.match(relative.name)
        name = match["scenario"] if match else relative.name
        if run.leg == "server":
            name = name.removeprefix("server-")
        scenario = "/".join([*relative.parent.parts, name])
        try:
            data = json.loads(checks.read_text())
        except ValueError as exc:
            data = [{"id": "checks-json-unreadable", "status": "FAILURE", "errorMessage": str(exc)}]
        run.results.setdefault(scenario, []).extend(data if isinstance(data, list) else [])


@dataclass
class Verdict:
    failing: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (scenario, check)
    notes: list[str] = field(default_factory=list)
    scenarios_passed: int = 0
    scenarios_failed: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    unscored_failed: list[str] = field(default_factory=list)


def judge(run: Run) -> Verdict:
    verdict = Verdict()
    bad_statuses = {"FAILURE", "WARNING"} if run.strict else {"FAILURE"}
    for scenario in run.expected:
        if scenario not in run.results and (run.scored is None or scenario in run.scored):
            missing = {"id": "no-results", "status": "FAILURE", "errorMessage": "no checks.json written"}
            run.results[scenario] = [missing]
    for scenario, checks in sorted(run.results.items()):
        counted = run.scored is None or scenario in run.scored
        scenario_bad = False
        for check in checks:
            status = str(check.get("status"))
            if counted:
                verdict.counts[status] = verdict.counts.get(status, 0) + 1
            wire_failure = check.get("id") == WIRE_CHECK and status == "FAILURE"
            skipped = run.strict and status == "SKIPPED"
            if skipped:
                key = (scenario, run.rev, check.get("id"))
                reason = ALLOWED_SKIPS.get(key) or ALLOWED_SKIPS.get((scenario, "*", check.get("id")))
                if reason is not None:
                    verdict.notes.append(f"{scenario}: {check.get('id')} skipped ({reason})")
                    skipped = False
            if (counted and (status in bad_statuses or skipped)) or wire_failure:
                verdict.failing.append((scenario, check))
                scenario_bad = True
            elif check.get("id") == "wire-schema-harness-error":
                verdict.notes.append(f"{scenario}: wire-schema-harness-error (a harness problem)")
        if counted:
            if scenario_bad:
                verdict.scenarios_failed += 1
            else:
                verdict.scenarios_passed += 1
        elif any(c.get("status") == "FAILURE" for c in checks) and not scenario_bad:
            verdict.unscored_failed.append(scenario)
    if run.returncode is None:
        verdict.failing.append(("(harness)", {"id": "timeout", "status": "FAILURE"}))
    elif run.returncode != 0 and not verdict.failing:
        verdict.failing.append(
            ("(harness)", {"id": "exit-code", "status": "FAILURE", "errorMessage": f"rc {run.returncode}"})
        )
    return verdict


def describe(scenario: str, check: dict[str, Any]) -> str:
    head = f"  {check.get('status')}: {scenario} [{check.get('id')}]"
    if check.get("description"):
        head += f" {check['description']}"
    lines = [head]
    if check.get("errorMessage"):
        lines.append(f"      error: {check['errorMessage']}")
    if check.get("details"):
        details = json.dumps(check["details"], ensure_ascii=False)
        lines.append(f"      details: {details[:1500]}{'…' if len(details) > 1500 else ''}")
    return "\n".join(lines)


def scenario_run(name: str, rev: str, leg: str, *, strict: bool) -> Run:
    """One scenario at one wire; ``--force`` so extension scenarios run there too."""
    prefix = "client-" if leg == "client" else ""
    run = Run(
        f"{prefix}{name}@{rev}".replace("/", "_"),
        ["--scenario", name, "--spec-version", rev, "--force"],
        leg=leg,
        strict=strict,
        rev=rev,
    )
    run.expected = [name]  # a scenario that writes no checks.json fails, never passes
    return run


def variant_runs(args: argparse.Namespace, target: str) -> list[Run]:
    """The server leg again, against a variant of the server (runs named ``<target>-...``)."""
    runs = leg_runs(args, "server")
    for run in runs:
        run.name = f"{target}-{run.name}"
        run.target = target
    return runs


def scaled_runs(args: argparse.Namespace) -> list[Run]:
    """The server leg again, against the scaled deployment (runs named ``scaled-...``)."""
    runs = leg_runs(args, "server")
    for run in runs:
        run.name = f"scaled-{run.name}"
        run.target = "scaled"
    return runs


def leg_runs(args: argparse.Namespace, leg: str) -> list[Run]:
    sets = requirement_sets(leg)
    extras = CLIENT_EXTRA_SCENARIOS if leg == "client" else EXTRA_SCENARIOS
    versions = [args.spec_version] if args.spec_version else list(REQUIREMENTS)
    if args.only:
        strict = any(name == args.only for name, _ in extras)
        return [scenario_run(args.only, v, leg, strict=strict) for v in versions]
    runs: list[Run] = []
    prefix = "client-" if leg == "client" else ""
    for rev in versions:
        scored, not_scored = sets[rev]
        run = Run(f"{prefix}requirements-{rev}", ["--requirements", rev], leg=leg, scored=set(scored))
        run.expected = scored + (not_scored if leg == "server" else [])
        runs.append(run)
    runs += [scenario_run(name, rev, leg, strict=True) for name, rev in extras if rev in versions]
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--leg",
        choices=["server", "server-scaled", *(f"server-{v}" for v in VARIANT_FILES), "client", "all"],
        default="server",
    )
    parser.add_argument(
        "--redis-url", default=DEFAULT_REDIS_URL, help="Redis of the scaled leg (default: %(default)s)"
    )
    parser.add_argument("--only", metavar="SCENARIO", help="run just this scenario (at each spec version)")
    parser.add_argument("--spec-version", choices=REQUIREMENTS, help="limit the runs to one revision")
    parser.add_argument("--port", type=int, default=0, help="port for the server (default: a free one)")
    parser.add_argument("--url", help="test an already running server at this URL instead")
    parser.add_argument("--keep-server", action="store_true", help="leave the server running afterwards")
    parser.add_argument("--setup-only", action="store_true", help="install Node 22 and the suite, then stop")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results directory")
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed per harness run")
    args = parser.parse_args()

    started = time.monotonic()
    try:
        node = ensure_node()
        entry = ensure_suite(node)
    except SetupError as exc:
        log(f"setup failed: {exc}")
        return 2
    log(f"setup: {time.monotonic() - started:.1f} s")
    if args.setup_only:
        return 0
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    runs = (
        (leg_runs(args, "server") if args.leg in ("server", "all") else [])
        + (scaled_runs(args) if args.leg in ("server-scaled", "all") else [])
        + [
            r
            for v in VARIANT_FILES
            if args.leg in (f"server-{v}", *ALL_VARIANTS.get(v, ()))
            for r in variant_runs(args, v)
        ]
        + (leg_runs(args, "client") if args.leg in ("client", "all") else [])
    )
    variants: dict[str, subprocess.Popen[bytes]] = {}
    variant_urls: dict[str, str] = {}
    proc = None
    scaled = None
    url = args.url
    scaled_url = args.url
    try:
        if url is None and any(run.leg == "server" and run.target == "single" for run in runs):
            port = args.port or free_port()
            proc = start_server(port, out / "server.log")
            url = f"http://localhost:{port}/mcp"
        if scaled_url is None and any(run.target == "scaled" for run in runs):
            scaled = start_scaled(out, args.redis_url, args.port if args.leg == "server-scaled" else 0)
            scaled_url = f"http://localhost:{scaled.port}/mcp"
        for variant, server_file in VARIANT_FILES.items():
            if any(run.target == variant for run in runs):
                if args.url is not None:
                    variant_urls[variant] = args.url
                    continue
                port = free_port()
                variants[variant] = start_server(port, out / f"{variant}-server.log", server_file=server_file)
                variant_urls[variant] = f"http://localhost:{port}/mcp"
    except SetupError as exc:
        log(f"setup failed: {exc}")
        for started in (
            ([proc] if proc else []) + (scaled.processes() if scaled else []) + [*variants.values()]
        ):
            stop_server(started)
        return 2
    if url is not None:
        log(f"url: {url}")
    if scaled is not None:
        log(f"scaled url: {scaled_url}")
    for variant, variant_url in variant_urls.items():
        log(f"{variant} url: {variant_url}")

    failed = False
    try:
        for run in runs:
            target_url = scaled_url if run.target == "scaled" else variant_urls.get(run.target, url)
            run_harness(node, entry, target_url, run, out, args.timeout)
            verdict = judge(run)
            c = verdict.counts
            log(
                f"{run.name:<48} scenarios {verdict.scenarios_passed} passed, "
                f"{verdict.scenarios_failed} failed; checks {c.get('SUCCESS', 0)} passed, "
                f"{c.get('FAILURE', 0)} failed, {c.get('WARNING', 0)} warnings "
                f"({run.seconds:.1f} s, rc {run.returncode})"
            )
            if verdict.unscored_failed:
                log(f"    not scored, failing (ignored): {', '.join(verdict.unscored_failed)}")
            for note in verdict.notes:
                log(f"    note: {note}")
            for scenario, check in verdict.failing:
                log(describe(scenario, check))
            failed = failed or bool(verdict.failing)
            if proc is not None and proc.poll() is not None:
                log(f"the server died (rc {proc.returncode}); see {out / 'server.log'}")
                return 1
            dead = [v for v, p in variants.items() if p.poll() is not None]
            if dead:
                log(f"the {dead[0]} server died; see {out / (dead[0] + '-server.log')}")
                return 1
            if scaled is not None and scaled.dead():
                log(f"the scaled deployment lost {', '.join(scaled.dead())}; see {out}/scaled-*.log")
                return 1
    finally:
        if args.keep_server:
            if proc is not None:
                log(f"server left running at {url} (pid {proc.pid})")
            if scaled is not None:
                pids = ", ".join(str(p.pid) for p in scaled.processes())
                log(f"scaled deployment left running at {scaled_url} (pids {pids})")
        else:
            if proc is not None:
                stop_server(proc)
            if scaled is not None:
                stop_scaled(scaled, out)
            for variant_proc in variants.values():
                stop_server(variant_proc)
    log(f"results: {out}")
    log(f"total: {time.monotonic() - started:.1f} s -> {'FAILED' if failed else 'PASSED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
