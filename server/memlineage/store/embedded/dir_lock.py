"""One data directory, one store: an exclusive lock held while a store has it open.

Two sidecars started on the same `--data-dir` would each load the database and then
serve from their own copy in memory: the second one's writes fail (the op log's
sequence belongs to the first) while its reads answer from a state the first one
keeps changing. The lock (`flock` on ``lock`` in the directory, released by the
kernel when the process ends, however it ends) makes the second refuse to open.
Read-only tools (`memlineage store check`, `backup`) do not take it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from memlineage.lineage.errors import StoreUnavailableError

LOCK_NAME = "lock"


class DirLock:
    """Held from `acquire` to `release`; the file holds the holder's pid (for the
    message a second opener gets)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StoreUnavailableError(
                f"embedded store {self.path.parent}: the data directory is in use by "
                f"another store (pid {holder}); one data directory serves one store"
            ) from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # the lock goes with the descriptor
            self._fd = None


__all__ = ["LOCK_NAME", "DirLock"]
