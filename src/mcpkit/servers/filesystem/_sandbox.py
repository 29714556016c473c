"""Where the filesystem server may reach, and how it gets there without leaving.

Every path a client sends goes through two steps:

1. **Check.** :meth:`Sandbox.resolve` makes it absolute, resolves it *once* with every
   symbolic link followed (``os.path.realpath``) and checks that the result lies inside an
   allowed directory. What comes out has no ``..`` and, at that moment, no symlinks: an
   allowed directory plus the names below it.
2. **Open.** Each operation then walks those names from a descriptor of the allowed
   directory, one ``openat`` per name with ``O_NOFOLLOW`` (``os.open(..., dir_fd=...)``),
   and acts on the last one relative to its parent's descriptor. A symbolic link that
   appears anywhere on the path between the check and the open (someone swapped a
   directory for a link) makes that step fail with ``ELOOP``: it is refused, never
   followed. The allowed directory itself is opened with ``O_NOFOLLOW`` and must still be
   the same directory (device and inode) that was allowed.

Regular files with more than one hard link are refused for reading (a hard link made
inside an allowed directory to a file outside it shares that file's content) unless
``allow_hardlinks`` is set. Writes never go through an existing inode: they write a new
file next to the target and rename it over the name, so a hard link or a symlink at the
target is replaced, and the file it pointed to is untouched.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator, Sequence

from ._fdops import (
    CHUNK,
    DIR_FLAGS,
    READ_FLAGS,
    entry,
    explain,
    open_dir,
    read_upto,
    rename_noreplace,
    replace,
    too_big,
)
from ._paths import MAX_PATH_BYTES, AllowedDir, Entry, FsError, LimitReached, Resolved, expand_home, within

__all__ = [
    "MAX_PATH_BYTES",
    "AllowedDir",
    "Entry",
    "FsError",
    "LimitReached",
    "Resolved",
    "Sandbox",
    "expand_home",
    "within",
]


def _between_check_and_open(real: str) -> None:
    """Runs after a path was checked and before it is opened: nothing, except in tests,
    which swap a directory for a symlink here to prove the swap is not followed."""


class Sandbox:
    """The allowed directories of one call, and every filesystem operation the tools use.

    Methods block: the tools call them in a worker thread.
    """

    def __init__(
        self,
        dirs: Sequence[AllowedDir],
        *,
        max_read_bytes: int,
        max_write_bytes: int,
        max_entries: int,
        max_depth: int,
        allow_hardlinks: bool,
        empty_reason: str = "no allowed directories",
    ) -> None:
        self.dirs = tuple(dirs)
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes
        self.max_entries = max_entries
        self.max_depth = max_depth
        self.allow_hardlinks = allow_hardlinks
        self.empty_reason = empty_reason

    # -- check -----------------------------------------------------------------

    def resolve(self, path: str) -> Resolved:
        """Check ``path`` (see the module's docstring); FsError when it is not allowed."""
        if not self.dirs:
            raise FsError(f"Access denied: {self.empty_reason}")
        if not path:
            raise FsError("The path is empty")
        if "\x00" in path:
            raise FsError("Access denied: the path contains a NUL byte")
        if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
            raise FsError(f"The path is longer than {MAX_PATH_BYTES} bytes")
        expanded = expand_home(path)
        # A relative path is taken from the first allowed directory, as the community server does.
        absolute = expanded if os.path.isabs(expanded) else os.path.join(self.dirs[0].path, expanded)
        lexical = os.path.normpath(absolute)
        # Lexically outside every allowed directory: refused before the system is asked
        # anything about it (realpath would look at what is there).
        if not any(within(lexical, d.path) or within(lexical, d.given) for d in self.dirs):
            raise FsError(f"Access denied: {path} is outside the allowed directories ({self._listing()})")
        try:
            real = os.path.realpath(absolute)
        except OSError:
            # A name turned from a symlink into something else while it was being resolved.
            raise FsError(f"{path} changed while it was being checked; nothing was done") from None
        root = max((d for d in self.dirs if within(real, d.path)), key=lambda d: len(d.path), default=None)
        if root is None:
            # Don't say where the link leads: that is outside, and none of the client's business.
            raise FsError(
                f"Access denied: {path} resolves (through a symbolic link) to a place outside the "
                f"allowed directories ({self._listing()})"
            )
        rest = real[len(root.path) :]
        parts = tuple(p for p in rest.split("/") if p)
        return Resolved(path, real, root, parts)

    def _listing(self) -> str:
        return ", ".join(d.path for d in self.dirs)

    # -- open ------------------------------------------------------------------

    def _open_root(self, root: AllowedDir) -> int:
        try:
            fd = os.open(root.path, DIR_FLAGS)
        except OSError as exc:
            raise FsError(f"The allowed directory {root.path} cannot be opened: {exc.strerror}") from None
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (root.dev, root.ino):
            os.close(fd)
            raise FsError(
                f"Access denied: the allowed directory {root.path} was replaced since it was allowed"
            )
        return fd

    def _walk(self, r: Resolved, parts: Sequence[str], *, create: bool = False) -> int:
        """A descriptor of the directory ``parts`` below ``r.root``, opened one name at a time
        with ``O_NOFOLLOW`` (``create``: making missing ones, as ``mkdir -p``)."""
        _between_check_and_open(r.real)
        fd = self._open_root(r.root)
        try:
            for name in parts:
                try:
                    nxt = open_dir(name, fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o777, dir_fd=fd)
                    nxt = open_dir(name, fd)
                os.close(fd)
                fd = nxt
        except OSError as exc:
            os.close(fd)
            raise explain(exc, r) from None
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def directory(self, r: Resolved, *, create: bool = False) -> Iterator[int]:
        """A descriptor of directory ``r`` (closed on exit)."""
        fd = self._walk(r, r.parts, create=create)
        try:
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def parent(self, r: Resolved, what: str = "use") -> Iterator[int]:
        """A descriptor of the directory holding ``r`` (closed on exit)."""
        if not r.parts:
            raise FsError(f"Cannot {what} {r.given}: it is an allowed directory itself")
        fd = self._walk(r, r.parts[:-1])
        try:
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def regular_file(self, r: Resolved, parent: int | None = None) -> Iterator[tuple[int, os.stat_result]]:
        """A read-only descriptor of regular file ``r`` and its status (closed on exit).

        Refuses directories, FIFOs, devices, sockets, a symlink swapped in at the last name
        and (unless ``allow_hardlinks``) files with more than one hard link.
        """
        if parent is None:
            with self.parent(r, "read") as pfd, self.regular_file(r, pfd) as opened:
                yield opened
            return
        try:
            fd = os.open(r.name, READ_FLAGS, dir_fd=parent)
        except OSError as exc:
            raise explain(exc, r) from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise FsError(f"{r.given} is a directory, not a file")
            if not stat.S_ISREG(st.st_mode):
                raise FsError(f"{r.given} is not a regular file (a device, FIFO or socket)")
            if st.st_nlink > 1 and not self.allow_hardlinks:
                raise FsError(
                    f"Access denied: {r.given} has {st.st_nlink} hard links, and a hard link may share "
                    "the content of a file outside the allowed directories (the server's "
                    "--allow-hardlinks option allows such files)"
                )
            yield fd, st
        finally:
            os.close(fd)

    # -- reading ---------------------------------------------------------------

    def read_bytes(self, r: Resolved, limit: int | None = None) -> bytes:
        """The content of regular file ``r``: FsError when it is larger than ``limit``
        (default ``max_read_bytes``)."""
        limit = self.max_read_bytes if limit is None else limit
        with self.regular_file(r) as (fd, st):
            if st.st_size > limit:
                raise too_big(r, st.st_size, limit)
            data = read_upto(fd, limit + 1)
        if len(data) > limit:  # it grew since fstat
            raise too_big(r, len(data), limit)
        return data

    def read_head(self, r: Resolved, lines: int) -> bytes:
        """The bytes of the first ``lines`` lines (at most ``max_read_bytes`` read)."""
        limit = self.max_read_bytes
        with self.regular_file(r) as (fd, _):
            buf = bytearray()
            while buf.count(b"\n") < lines:
                chunk = os.read(fd, min(CHUNK, limit + 1 - len(buf)))
                if not chunk:
                    return bytes(buf)
                buf += chunk
                if len(buf) > limit and buf.count(b"\n") < lines:
                    raise FsError(
                        f"The first {lines} lines of {r.given} are longer than the limit of {limit} "
                        "bytes (--max-read-bytes)"
                    )
        cut = -1
        for _ in range(lines):
            cut = buf.index(b"\n", cut + 1)
        return bytes(buf[: cut + 1])

    def read_tail(self, r: Resolved, lines: int) -> bytes:
        """The bytes of the last ``lines`` lines (at most ``max_read_bytes`` read)."""
        limit = self.max_read_bytes
        with self.regular_file(r) as (fd, st):
            end = st.st_size
            buf = b""
            # A final newline ends the last line; it does not start an empty one.
            while end > 0:
                size = min(CHUNK, end)
                end -= size
                buf = os.pread(fd, size, end) + buf
                body = buf[:-1] if buf.endswith(b"\n") else buf
                if body.count(b"\n") >= lines:
                    break
                if len(buf) > limit:
                    raise FsError(
                        f"The last {lines} lines of {r.given} are longer than the limit of {limit} "
                        "bytes (--max-read-bytes)"
                    )
        body = buf[:-1] if buf.endswith(b"\n") else buf
        cut = len(body)
        for _ in range(lines):
            cut = body.rfind(b"\n", 0, cut)
            if cut < 0:
                break
        if cut >= 0:
            buf = buf[cut + 1 :]
        if len(buf) > limit:
            raise too_big(r, len(buf), limit)
        return buf

    def status(self, r: Resolved) -> os.stat_result:
        """The status of ``r`` itself (a symlink swapped in at the last name is not followed)."""
        if not r.parts:
            with self.directory(r) as fd:
                return os.fstat(fd)
        with self.parent(r) as pfd:
            try:
                return os.stat(r.name, dir_fd=pfd, follow_symlinks=False)
            except OSError as exc:
                raise explain(exc, r) from None

    def listdir(self, r: Resolved) -> list[Entry]:
        """The entries of directory ``r``, sorted by name."""
        with self.directory(r) as fd:
            return [found for name in sorted(os.listdir(fd)) if (found := entry(fd, name)) is not None]

    def walk(self, r: Resolved, skip: Callable[[str, bool], bool]) -> Iterator[tuple[str, bool]]:
        """Every entry below directory ``r``, depth first in name order: ``(relative path,
        is a directory)``. Symlinked directories are listed, not entered; entries for which
        ``skip(path, is_dir)`` holds are left out with everything below them. LimitReached
        after ``max_entries`` entries or below ``max_depth`` levels."""
        count = [0]
        with self.directory(r) as fd:
            yield from self._walk_below(fd, "", 1, skip, count)

    def _walk_below(
        self, fd: int, prefix: str, depth: int, skip: Callable[[str, bool], bool], count: list[int]
    ) -> Iterator[tuple[str, bool]]:
        if depth > self.max_depth:
            raise LimitReached(f"the tree is deeper than {self.max_depth} levels (--max-depth)")
        for name in sorted(os.listdir(fd)):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue  # gone since it was listed
            is_dir = stat.S_ISDIR(st.st_mode)
            rel = f"{prefix}{name}"
            if skip(rel, is_dir):
                continue
            count[0] += 1
            if count[0] > self.max_entries:
                raise LimitReached(f"there are more than {self.max_entries} entries (--max-entries)")
            yield rel, is_dir
            if is_dir:
                try:
                    child = open_dir(name, fd)
                except OSError:
                    continue  # unreadable, or swapped for a symlink: not entered
                try:
                    yield from self._walk_below(child, f"{rel}/", depth + 1, skip, count)
                finally:
                    os.close(child)

    # -- writing ---------------------------------------------------------------

    def write_bytes(self, r: Resolved, data: bytes) -> None:
        """Create or replace file ``r`` with ``data`` (atomically: a new file renamed over it)."""
        self._check_write_size(r, len(data))
        with self.parent(r, "write") as pfd:
            try:
                st: os.stat_result | None = os.stat(r.name, dir_fd=pfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            except OSError as exc:
                raise explain(exc, r) from None
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise FsError(f"{r.given} is a directory, not a file")
            mode = stat.S_IMODE(st.st_mode) if st is not None and stat.S_ISREG(st.st_mode) else None
            replace(pfd, r, data, mode)

    def update(self, r: Resolved, change: Callable[[bytes], bytes | None]) -> None:
        """Read file ``r``, and when ``change(content)`` returns new content, replace the file
        with it (refused if the file was replaced in the meantime)."""
        with self.parent(r, "edit") as pfd:
            with self.regular_file(r, pfd) as (fd, st):
                if st.st_size > self.max_read_bytes:
                    raise too_big(r, st.st_size, self.max_read_bytes)
                data = read_upto(fd, self.max_read_bytes + 1)
                if len(data) > self.max_read_bytes:
                    raise too_big(r, len(data), self.max_read_bytes)
            new = change(data)
            if new is None:
                return
            self._check_write_size(r, len(new))
            try:
                now = os.stat(r.name, dir_fd=pfd, follow_symlinks=False)
            except OSError as exc:
                raise explain(exc, r) from None
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                raise FsError(f"{r.given} was replaced while it was being edited; nothing was written")
            replace(pfd, r, new, stat.S_IMODE(st.st_mode))

    def make_directory(self, r: Resolved) -> None:
        """Create directory ``r`` and any missing parents (nothing if it exists)."""
        with self.directory(r, create=True):
            pass

    def move(self, source: Resolved, destination: Resolved) -> None:
        """Rename ``source`` to ``destination``; refused when the destination exists."""
        if not source.parts:
            raise FsError(f"Cannot move {source.given}: it is an allowed directory itself")
        with self.parent(source, "move") as sfd, self.parent(destination, "replace") as dfd:
            try:
                rename_noreplace(sfd, source.name, dfd, destination.name)
            except FileExistsError:
                raise FsError(f"Cannot move to {destination.given}: it already exists") from None
            except OSError as exc:
                if exc.errno == errno.EINVAL:
                    raise FsError(f"Cannot move {source.given} into itself") from None
                raise explain(exc, source if exc.errno == errno.ENOENT else destination) from None

    def _check_write_size(self, r: Resolved, size: int) -> None:
        if size > self.max_write_bytes:
            raise FsError(
                f"Refused to write {size} bytes to {r.given}: the limit is {self.max_write_bytes} "
                "bytes (--max-write-bytes)"
            )
