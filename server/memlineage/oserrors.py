"""How an OSError about a file is said to a person: the path and the system's reason
(``data.log: No such file or directory``, as ``cat`` says it), not Python's
``[Errno 2] No such file or directory: 'data.log'``."""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["check_kind", "read_regular", "reason", "said"]


def reason(exc: OSError) -> str:
    """The system's reason (``No such file or directory``); the whole text when the
    error carries none (one raised with a message of our own)."""
    return exc.strerror or str(exc)


def said(exc: OSError) -> str:
    """``PATH: reason`` (``PATH -> OTHER: reason`` for a rename or link), or the text
    alone when the error names no file."""
    if exc.filename is None or exc.strerror is None:
        return str(exc)
    where = str(exc.filename)
    if exc.filename2 is not None:
        where += f" -> {exc.filename2}"
    return f"{where}: {exc.strerror}"


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes; anything else is an
    OSError whose reason says what it is. Opened without blocking and checked before
    reading, so a mistyped /dev/zero, /dev/urandom or FIFO is refused, not read without
    end (before: `--config /dev/zero` hung, growing)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or socket)", path)
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit:,} bytes", path)
    return data


def check_kind(path: str, *, pipe: bool = False) -> None:
    """Refuse `path` unless it is a regular file (or, with `pipe`, a FIFO such as a
    shell's `<(zcat log.gz)`, read once as a stream): a directory, a device (/dev/zero
    never ends) or a socket is an OSError saying which."""
    mode = os.stat(path).st_mode
    if stat.S_ISREG(mode) or (pipe and stat.S_ISFIFO(mode)):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    kinds = "a device or socket" if pipe else "a FIFO, device or socket"
    hint = "" if pipe else "; write it to a file first, e.g. zcat log.gz > log"
    raise OSError(errno.EINVAL, f"not a regular file ({kinds}{hint})", path)
