"""The WAL is copied into the store file off the writers' path, and never grows unbounded."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from memlineage.lineage import ManualClock, MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage.store.embedded.checkpointer import CHECKPOINT_WRITES
from memlineage.store.embedded.persistence import DB_NAME
from support.memories import T0


def _wait(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_writes_are_checkpointed_into_the_file_while_the_store_is_open(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, clock=ManualClock(T0))
    try:
        db, wal = tmp_path / DB_NAME, tmp_path / f"{DB_NAME}-wal"
        before = db.stat().st_size
        for i in range(CHECKPOINT_WRITES + 100):
            store.record(MemoryRecord(id=f"m{i}", namespace="ns", creator_id="user:a"))
        # no writer checkpoints in its commit (wal_autocheckpoint = 0): the file grows
        # only because the checkpointer's thread copied the WAL in
        assert _wait(lambda: db.stat().st_size > before + 100_000), "never checkpointed"
        assert wal.exists()
    finally:
        store.close()
    reopened = EmbeddedStore(tmp_path, clock=ManualClock(T0))
    try:
        assert len(reopened.get_many("ns", [f"m{CHECKPOINT_WRITES + 99}", "m0"])) == 2
    finally:
        reopened.close()


def test_close_stops_the_checkpointer_thread(tmp_path: Path) -> None:
    import threading

    def running() -> int:
        return sum(t.name == "ml-wal-checkpoint" for t in threading.enumerate())

    before = running()  # other tests' stores left open keep theirs
    store = EmbeddedStore(tmp_path, clock=ManualClock(T0))
    store.record(MemoryRecord(id="m", namespace="ns", creator_id="user:a"))
    assert running() == before + 1
    store.close()
    assert _wait(lambda: running() == before)
