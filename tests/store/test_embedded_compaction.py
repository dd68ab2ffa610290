"""The embedded log is compacted into a snapshot once it grows past a size, and a
restart from the data directory still finds everything."""

from __future__ import annotations

from pathlib import Path

from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore


def log_bytes(data: Path) -> int:
    return sum(p.stat().st_size for p in data.iterdir() if p.name.startswith("log"))


def test_log_compacts_past_the_threshold_and_survives_restart(tmp_path: Path) -> None:
    clock = ManualClock(1000.0)
    store = EmbeddedStore(tmp_path, clock=clock)
    for i in range(50):
        store.record(MemoryRecord(id=f"m{i}", namespace="n", creator_id="user:u",
                                  dependencies=(f"m{i - 1}",) if i else ()))
    store.record_access("n", ["m1", "m2"])
    assert not store.maybe_compact(10_000_000)  # under the threshold: nothing happens
    grown = log_bytes(tmp_path)
    assert store.maybe_compact(1_000)
    assert log_bytes(tmp_path) < grown and (tmp_path / "snapshot.json").exists()
    store.revoke("n", "m0")
    store.close()

    again = EmbeddedStore(tmp_path, clock=clock)
    assert again.get("n", "m1").access_count == 1
    assert again.get("n", "m49").status == "pending_verification"  # the cascade after it
    assert again.get("n", "m0").status == "revoked"


def test_the_servers_periodic_flush_compacts(tmp_path: Path) -> None:
    from memlineage.engine.core import Engine
    from memlineage.engine.policies import PolicyHolder
    from memlineage.sidecar import flush
    from support.sidecar import BUNDLED_POLICIES

    store = EmbeddedStore(tmp_path, clock=ManualClock(1000.0))
    store.record(MemoryRecord(id="m", namespace="n", creator_id="user:u"))
    engine = Engine(store, PolicyHolder(BUNDLED_POLICIES), clock=ManualClock(1000.0))
    engine.access.add("n", ["m"], 1000.0)  # type: ignore[union-attr]
    flush(engine, 1)
    assert (tmp_path / "snapshot.json").exists()
    assert store.get("n", "m").access_count == 1
    store.close()
