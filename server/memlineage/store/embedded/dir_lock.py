"""One data directory, one store: an exclusive lock held while a store has it open.

Two sidecars started on the same `--data-dir` would each load the database and then
serve from their own copy in memory: the second one's writes fail (the op log's
sequence belongs to the first) while its reads answer from a state the first one
keeps changing. The lock (`flock`, released by the kernel when the process ends,
however it ends) makes the second refuse to open. It is taken on the directory
itself and on the file ``lock`` in it (which holds the holder's pid, and is what
earlier versions locked): a lock on ``lock`` alone was lost when the file was
removed, and a second sidecar then opened the directory and spent grant uses a
second time (an outside audit). A directory cannot be removed and made again
unnoticed by the store that holds it (`file_watch`). Read-only tools (`memlineage
store check`, `backup`) do not take it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from memlineage.lineage.errors import StoreUnavailableError

LOCK_NAME = "lock"
ATTEMPTS = 5  # opens of ``lock`` that found it replaced before it was locked


class DirLock:
    """Held from `acquire` to `release`."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_NAME
        self._fds: list[int] = []

    def acquire(self) -> None:
        try:
            self._take(os.open(self.path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)))
            for _ in range(ATTEMPTS):
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                self._take(fd)
                if _same_file(fd, self.path):
                    break
                # removed or replaced between our open and our lock: the lock is on a
                # file no other opener will find; lock the one at the path now
                self._fds.remove(fd)
                os.close(fd)
            else:
                raise StoreUnavailableError(
                    f"embedded store {self.path.parent}: its lock file {LOCK_NAME} is "
                    f"replaced as fast as it is locked ({ATTEMPTS} times)"
                )
        except BaseException:
            self.release()
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)

    def _take(self, fd: int) -> None:
        """Lock `fd` (kept, closed by `release`), or refuse: another store holds it."""
        self._fds.append(fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreUnavailableError(
                f"embedded store {self.path.parent}: the data directory is in use by "
                f"another store ({self._holder()}); one data directory serves one store"
            ) from None

    def _holder(self) -> str:
        try:
            pid = self.path.read_text(errors="replace").strip()[:32]
        except OSError:
            pid = ""
        return f"pid {pid}" if pid else f"pid unknown: its {LOCK_NAME} file was removed"

    def release(self) -> None:
        while self._fds:
            os.close(self._fds.pop())  # the lock goes with the descriptor


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open file `fd` is the file at `path` now."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino)


__all__ = ["LOCK_NAME", "DirLock"]
