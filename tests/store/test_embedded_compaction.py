"""The embedded store's op log is folded into a snapshot (in the same SQLite database,
one transaction) once the ops since the last one outgrow a size, so a restart
replays little; a restart after it still finds everything."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage.store.embedded.persistence import DB_NAME


def tables(data: Path) -> tuple[int, int]:
    """(ops rows, snapshot parts) in the data directory's database."""
    con = sqlite3.connect(f"{(data / DB_NAME).as_uri()}?mode=ro", uri=True)
    try:
        ops = con.execute("SELECT count(*) FROM ops").fetchone()[0]
        parts = con.execute("SELECT count(*) FROM snapshot").fetchone()[0]
        return ops, parts
    finally:
        con.close()


def test_log_snapshots_past_the_threshold_and_survives_restart(tmp_path: Path) -> None:
    clock = ManualClock(1000.0)
    store = EmbeddedStore(tmp_path, clock=clock)
    for i in range(50):
        store.record(
            MemoryRecord(
                id=f"m{i}",
                namespace="n",
                creator_id="user:u",
                dependencies=(f"m{i - 1}",) if i else (),
            )
        )
    store.record_access("n", ["m1", "m2"])
    assert not store.maybe_compact(10_000_000)  # under the threshold: nothing happens
    assert tables(tmp_path) == (51, 0)
    assert store.maybe_compact(1_000)
    assert tables(tmp_path) == (0, 2)  # the header and one part of rows
    assert not store.maybe_compact(1_000)  # nothing written since
    store.revoke("n", "m0")
    assert tables(tmp_path) == (1, 2)
    store.close()

    again = EmbeddedStore(tmp_path, clock=clock)
    assert again.get("n", "m1").access_count == 1
    assert again.get("n", "m49").status == "pending_verification"  # the cascade after it
    assert again.get("n", "m0").status == "revoked"
    assert [e.cursor for e in again.events("n", limit=1000)[0]][-2:] == ["51", "52"]
    again.close()


def test_the_servers_periodic_flush_snapshots(tmp_path: Path) -> None:
    from memlineage.engine.core import Engine
    from memlineage.engine.policies import PolicyHolder
    from memlineage.sidecar import flush
    from support.sidecar import BUNDLED_POLICIES

    store = EmbeddedStore(tmp_path, clock=ManualClock(1000.0))
    store.record(MemoryRecord(id="m", namespace="n", creator_id="user:u"))
    engine = Engine(store, PolicyHolder(BUNDLED_POLICIES), clock=ManualClock(1000.0))
    engine.access.add("n", ["m"], 1000.0)  # type: ignore[union-attr]
    flush(engine, 1)
    assert tables(tmp_path) == (0, 2)
    assert store.get("n", "m").access_count == 1
    store.close()
    assert EmbeddedStore(tmp_path).get("n", "m").access_count == 1
