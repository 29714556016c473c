"""The filesystem server's paths and refusals: allowed directories, checked paths, entries."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

__all__ = [
    "MAX_PATH_BYTES",
    "AllowedDir",
    "Entry",
    "FsError",
    "LimitReached",
    "Resolved",
    "expand_home",
    "within",
]

#: Longer paths are refused before they reach the system (Linux's PATH_MAX).
MAX_PATH_BYTES = 4096


class FsError(Exception):
    """A refusal or a failure, worded for the model (the text of an ``isError`` result)."""


class LimitReached(FsError):
    """A walk passed ``max_entries`` or ``max_depth``."""


@dataclass(frozen=True, slots=True)
class AllowedDir:
    """A directory the server may use: its resolved path, the spelling it was given in
    (``/tmp`` for ``/private/tmp``), and its identity when it was allowed."""

    path: str
    given: str
    dev: int
    ino: int

    @classmethod
    def from_path(cls, path: str) -> AllowedDir:
        """An allowed directory from a path (``~`` expanded); FsError when it is not one."""
        given = os.path.normpath(os.path.abspath(expand_home(path)))
        real = os.path.realpath(given)
        try:
            st = os.stat(real)
        except OSError as exc:
            raise FsError(f"cannot use {path}: {exc.strerror}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise FsError(f"cannot use {path}: not a directory")
        return cls(real, given, st.st_dev, st.st_ino)


@dataclass(frozen=True, slots=True)
class Resolved:
    """A checked path: an allowed directory and the names below it (no ``..``, no links)."""

    given: str
    real: str
    root: AllowedDir
    parts: tuple[str, ...]

    @property
    def name(self) -> str:
        """The last name (empty for the allowed directory itself)."""
        return self.parts[-1] if self.parts else ""


def expand_home(path: str) -> str:
    """``~`` and ``~/...`` to the user's home directory; other ``~`` forms stay literal."""
    if path == "~" or path.startswith("~/"):
        return os.path.expanduser("~") + path[1:]
    return path


def within(path: str, directory: str) -> bool:
    """Whether absolute, normalised ``path`` is ``directory`` or below it."""
    if directory == "/":
        return path.startswith("/")
    return path == directory or path.startswith(directory + "/")


@dataclass(frozen=True, slots=True)
class Entry:
    """One directory entry, as listed (never following a symlink)."""

    name: str
    kind: str  # "directory", "file", "symlink" or "other"
    size: int
    mtime: float
