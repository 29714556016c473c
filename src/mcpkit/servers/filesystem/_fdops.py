"""The descriptor-relative steps of :class:`~._sandbox.Sandbox`: each acts on a name inside a
directory descriptor, with ``O_NOFOLLOW``, so nothing here follows a symbolic link."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import stat
from collections.abc import Callable

from ._paths import Entry, FsError, Resolved

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; the file is
# then refused for not being a regular file.
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
CHUNK = 64 * 1024


def entry(fd: int, name: str) -> Entry | None:
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return None  # gone since it was listed
    mode = st.st_mode
    kind = (
        "directory"
        if stat.S_ISDIR(mode)
        else "file"
        if stat.S_ISREG(mode)
        else "symlink"
        if stat.S_ISLNK(mode)
        else "other"
    )
    return Entry(name, kind, st.st_size, st.st_mtime)


def open_dir(name: str, dir_fd: int) -> int:
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except NotADirectoryError:
        # Linux answers ENOTDIR, not ELOOP, for a symlink opened with O_DIRECTORY|O_NOFOLLOW;
        # a directory there now means it was something else an instant ago (swapped).
        if is_link_or_dir(dir_fd, name):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP)) from None
        raise


def is_link_or_dir(dir_fd: int, name: str) -> bool:
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return False
    return stat.S_ISLNK(mode) or stat.S_ISDIR(mode)


def read_upto(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < limit:
        chunk = os.read(fd, min(CHUNK * 16, limit - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def too_big(r: Resolved, size: int, limit: int) -> FsError:
    return FsError(
        f"{r.given} is {size} bytes, more than the limit of {limit} bytes (--max-read-bytes); "
        "read part of it with head or tail"
    )


def replace(pfd: int, r: Resolved, data: bytes, mode: int | None) -> None:
    """Write ``data`` to a new file in directory ``pfd`` and rename it to ``r.name``.

    The rename replaces whatever the name is (a file, a hard link, a symlink) without
    following it, so nothing outside is written even if the name changed since the check.
    """
    temp = f".mcpkit-{secrets.token_hex(8)}.tmp"
    try:
        fd = os.open(temp, TEMP_FLAGS, 0o666, dir_fd=pfd)
    except OSError as exc:
        raise explain(exc, r) from None
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if mode is not None:
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, r.name, src_dir_fd=pfd, dst_dir_fd=pfd)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=pfd)
        if isinstance(exc, OSError):
            raise explain(exc, r) from None
        raise


_RENAME_NOREPLACE = 1
_renameat2: Callable[..., int] | None = None
with contextlib.suppress(OSError, AttributeError):
    _renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]


def rename_noreplace(src_dir: int, src: str, dst_dir: int, dst: str) -> None:
    """``renameat2(..., RENAME_NOREPLACE)``: the kernel refuses an existing destination, so
    nothing there is replaced even if it appears after a check. Without it (not Linux, or a
    filesystem that does not support the flag): check, then rename."""
    if _renameat2 is not None:
        if _renameat2(src_dir, os.fsencode(src), dst_dir, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        # EINVAL may mean "flag not supported here": then the fallback decides (and a
        # directory moved into itself fails there with EINVAL again).
        if code not in (errno.ENOSYS, errno.EINVAL):
            raise OSError(code, os.strerror(code))
    if exists(dst_dir, dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST))
    os.rename(src, dst, src_dir_fd=src_dir, dst_dir_fd=dst_dir)


def exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def explain(exc: OSError, r: Resolved) -> FsError:
    """An OSError as a message about the path the client gave."""
    code = exc.errno
    if code == errno.ELOOP:
        return FsError(
            f"Access denied: {r.given} leads through a symbolic link that was not there when the "
            "path was checked (a symbolic link appeared, or one loops); it was not followed"
        )
    messages = {
        errno.ENOENT: f"No such file or directory: {r.given}",
        errno.ENOTDIR: f"Not a directory: a part of {r.given} is a file",
        errno.EISDIR: f"{r.given} is a directory",
        errno.EACCES: f"Permission denied: {r.given}",
        errno.EPERM: f"Operation not permitted: {r.given}",
        errno.ENAMETOOLONG: f"A name in {r.given} is too long",
        errno.EEXIST: f"{r.given} already exists",
        errno.ENOSPC: f"No space left on the device for {r.given}",
        errno.EXDEV: f"Cannot move across filesystems: {r.given}",
        errno.ENOTEMPTY: f"Directory not empty: {r.given}",
    }
    message = messages.get(code or 0)
    return FsError(message or f"{exc.strerror or exc}: {r.given}")
