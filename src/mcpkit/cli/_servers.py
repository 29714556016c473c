"""The reference servers from the command line: ``mcpkit serve NAME ARGS...`` and the
host entry ``mcpkit install HOST --server NAME ARGS...`` writes.

The servers live in :mod:`mcpkit.servers` (the registry ``SERVERS`` names them),
each a module with ``main(argv) -> int``. They are imported only when asked for:
``mcpkit serve`` stays as light as the server it runs, and a server whose extra is
not installed fails with the extra to install, not a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import importlib.metadata
import importlib.util
import io
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Protocol

from ._output import EXIT_ERROR, EXIT_USAGE, CLIError, Console

__all__ = ["check_args", "cmd_serve", "server_command"]

_DIST = "mcpkit"


def _servers() -> dict[str, str]:
    from ..servers import SERVERS

    return dict(SERVERS)


def check_name(name: str) -> str:
    """The module of the reference server ``name``; a usage error naming the servers otherwise."""
    servers = _servers()
    if name in servers:
        return servers[name]
    close = difflib.get_close_matches(name, list(servers), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise CLIError(
        f"no reference server named {name!r}", EXIT_USAGE, hint=f"{hint}mcpkit serves {', '.join(servers)}"
    )


def extra_for(name: str) -> str | None:
    """``servers-NAME`` when mcpkit declares that extra (the server needs more than mcpkit)."""
    try:
        extras = importlib.metadata.metadata(_DIST).get_all("Provides-Extra") or []
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return f"servers-{name}"
    return f"servers-{name}" if f"servers-{name}" in extras else None


def missing_packages(name: str) -> list[str]:
    """The packages of the ``servers-NAME`` extra that are not installed (none when mcpkit's
    own metadata cannot be read, e.g. run from a source tree)."""
    extra = extra_for(name)
    try:
        requires = importlib.metadata.requires(_DIST) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    missing: list[str] = []
    for requirement in requires:
        spec, _, marker = requirement.partition(";")
        if extra is None or f'extra == "{extra}"' not in marker.replace("'", '"'):
            continue
        package = spec.strip().split("[")[0]
        for sep in "<>=!~ (":
            package = package.split(sep)[0]
        try:
            importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            missing.append(package)
    return missing


def _install_hint(name: str, module: str | None) -> str:
    extra = extra_for(name)
    if extra is not None:
        return f"pip install 'mcpkit[{extra}]'"
    return f"pip install {module}" if module else "reinstall mcpkit"


class ServerMain(Protocol):
    """A reference server's entry point: its command line in, its exit status out."""

    def __call__(self, argv: list[str], *, prog: str | None = None) -> int: ...


def load_server(name: str) -> ServerMain:
    """The ``main`` of the reference server ``name``, imported now."""
    module_name = check_name(name)
    try:
        module: ModuleType = importlib.import_module(module_name)
    except ImportError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise CLIError(
                f"the {name} server is not part of this mcpkit installation ({exc})",
                EXIT_ERROR,
                hint="upgrade mcpkit: pip install -U mcpkit",
            ) from None
        raise CLIError(
            f"the {name} server needs a package that is not installed ({exc})",
            EXIT_ERROR,
            hint=_install_hint(name, missing.split(".")[0] or None),
        ) from None
    main = getattr(module, "main", None)
    if not callable(main):
        raise CLIError(f"{module_name} has no main(argv): it cannot be served", EXIT_ERROR)
    return main  # type: ignore[no-any-return]


def cmd_serve(args: argparse.Namespace, console: Console) -> int:
    """``mcpkit serve NAME ARGS...``: the server's ``main(ARGS)``, its exit status ours.

    Nothing is written on stdout before the server starts: over stdio it is the
    protocol's channel.
    """
    main = load_server(args.name)
    argv = list(args.server_args)
    try:
        return int(main(argv, prog=f"mcpkit serve {args.name}") or 0)
    except ImportError as exc:
        # A package the server imports only when it needs it (its extra is not installed).
        raise CLIError(
            f"the {args.name} server needs a package that is not installed ({exc})",
            EXIT_ERROR,
            hint=_install_hint(args.name, (exc.name or "").split(".")[0] or None),
        ) from None


def server_command(name: str, server_args: Sequence[str], cwd: Path | None = None) -> list[str]:
    """The command a host runs for ``mcpkit serve NAME ARGS...``: this interpreter (the one that
    has mcpkit, and its extras) with ``-m mcpkit serve``, as ``mcpkit install`` writes ``FILE.py``
    entries. Hosts start servers in a directory of their own choosing, so an argument naming an
    existing file or directory relative to ``cwd`` (or a ``sqlite:`` URL naming a file relative to
    it) is written as an absolute path."""
    check_name(name)
    here = cwd or Path.cwd()
    out: list[str] = []
    for arg in server_args:
        path = Path(arg).expanduser()
        relative_db = arg[len("sqlite:") :] if arg.lower().startswith("sqlite:") else ""
        if relative_db and not relative_db.startswith("/") and (here / relative_db).is_file():
            # The sql server's sqlite:relative/path.db: the same file, wherever the host starts it.
            out.append("sqlite://" + str((here / relative_db).resolve()))
        elif arg and not arg.startswith("-") and not path.is_absolute() and (here / path).exists():
            out.append(str((here / path).resolve()))
        elif arg.startswith("~") and path.exists():
            out.append(str(path.resolve()))
        else:
            out.append(arg)
    return [sys.executable, "-m", "mcpkit", "serve", name, *out]


def check_args(name: str, server_args: Sequence[str]) -> None:
    """Refuse ARGS the server's own parser refuses, before they go into a host's file (where
    the mistake would show only when the host starts the server). A server module without a
    ``build_parser()``, or one that cannot be imported here, is not checked."""
    try:
        module = importlib.import_module(check_name(name))
    except ImportError:
        return
    build = getattr(module, "build_parser", None)
    if not callable(build):
        return
    parser = build()
    if not isinstance(parser, argparse.ArgumentParser):
        return
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(list(server_args))
    except SystemExit as exc:
        lines = [line for line in said.getvalue().splitlines() if line.strip()]
        problem = lines[-1].split(": error: ", 1)[-1] if lines else "it only prints its help"
        if exc.code == 0:
            problem = "it only prints its help (--help)"
        raise CLIError(
            f"the {name} server's arguments: {problem}",
            EXIT_USAGE,
            hint=f"mcpkit serve {name} --help shows them; install's own options (--name, --path, --scope, "
            "--force, --json, -e) go before --server",
        ) from None


def server_available(name: str) -> bool:
    """Whether the module of the reference server ``name`` is installed."""
    module = check_name(name)
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
