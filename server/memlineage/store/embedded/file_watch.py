"""Whether the database file a store opened is still the one at its path.

SQLite keeps writing to a file that was removed (``rm -rf`` of the data directory
while serving): every commit succeeded into an unlinked inode, the sidecar went on
answering recorded=True and health SERVING, and everything was gone at the next
start (an outside audit). Each commit now compares the path's device and inode with
the ones the store opened (one ``stat``, about a microsecond beside a commit's tens),
and from the first difference every write is refused: StoreUnavailableError, said
once in the log."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from memlineage.lineage.errors import StoreUnavailableError

log = logging.getLogger("memlineage.store")


class FileWatch:
    """The file at `path` as it was when `opened` ran."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._id: tuple[int, int] | None = None
        self.gone = False

    def opened(self) -> None:
        """Take the file now at the path as the store's (right after it opened it)."""
        st = os.stat(self.path)
        self._id = (st.st_dev, st.st_ino)

    def there(self) -> bool:
        """Whether the store's file is still at its path (said in the log the first
        time it is not); a ``stat`` that fails otherwise than by the file or its
        directory being gone proves nothing: the write itself says what is wrong."""
        if self.gone:
            return False
        if self._id is None:
            return True
        try:
            st = os.stat(self.path)
            now: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except (FileNotFoundError, NotADirectoryError):
            now = None
        except OSError:
            return True
        if now == self._id:
            return True
        self.gone = True
        log.error(
            "embedded store: its database %s is no longer the file it opened (removed "
            "or replaced while serving); every write is refused from now on, since none "
            "could be kept: restore the data directory and restart the sidecar",
            self.path,
        )
        return False

    def check(self) -> None:
        """Raise ``StoreUnavailableError`` once the store's file is not at its path."""
        if not self.there():
            raise StoreUnavailableError(
                f"embedded store {self.path}: the database is no longer at its path "
                "(removed or replaced while serving); writes are refused, as they could "
                "not be kept"
            )


__all__ = ["FileWatch"]
