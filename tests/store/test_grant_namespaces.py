"""Grants (and proposals) of two namespaces under the same id are two, on every
backend: spending, reading back (strictly decoded) and dropping one leaves the
other as it was. On disk too: when one namespace is full and drops its oldest inert
grant to make room for a new one, the embedded store deletes that namespace's row only.
Checked after a restart from the data directory (what is in memory is not what is
on disk), with the real cap (``MAX_GRANTS_PER_NAMESPACE``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memlineage.lineage import ManualClock
from memlineage.lineage.grants import GrantRecord
from memlineage.store import LineageStore
from memlineage.store.embedded import EmbeddedStore
from memlineage.store.embedded.persistence import DB_NAME
from memlineage.store.grants import MAX_GRANTS_PER_NAMESPACE
from support.memories import NOW
from support.proposals import stale_at_now

KEPT = "tenant:kept"  # holds the shared id and is never full
FULL = "tenant:full"  # holds the shared id first, then fills up and drops its oldest
SHARED = "g-shared"


def _grant(ns: str, gid: str, uses: int = 1) -> GrantRecord:
    return GrantRecord(
        id=gid,
        namespace=ns,
        issuer="user:alice",
        actions=("send_money",),
        source="agent:*",
        uses=uses,
    )


def test_the_same_ids_in_two_namespaces_are_two_grants_and_two_proposals(
    store: LineageStore,
) -> None:
    """On embedded, redis and cluster (the ``store`` fixture): what is stored reads
    back exactly (the strict decoding accepts every field the store writes)."""
    for ns in (KEPT, FULL):
        store.put_grant(_grant(ns, SHARED, uses=3))
    assert store.use_grants(FULL, [SHARED])
    assert store.use_grants(FULL, [SHARED])
    assert store.use_grants(KEPT, [SHARED])
    kept, full = _by_id_of(store, KEPT)[SHARED], _by_id_of(store, FULL)[SHARED]
    assert (kept.namespace, kept.used, full.namespace, full.used) == (KEPT, 1, FULL, 2)
    assert kept == GrantRecord(**{**_fields(full), "namespace": KEPT, "used": 1})

    store.save_proposal(stale_at_now(KEPT, "memo"))
    store.save_proposal(stale_at_now(FULL, "memo", objected=True), "objected")
    assert store.proposal(KEPT, "memo") == stale_at_now(KEPT, "memo")
    assert store.proposal(FULL, "memo") == stale_at_now(FULL, "memo", objected=True)
    store.drop_proposal(FULL, "memo")
    assert store.proposal(FULL, "memo") is None
    assert store.proposal(KEPT, "memo") == stale_at_now(KEPT, "memo")


def _fields(g: GrantRecord) -> dict[str, object]:
    return {name: getattr(g, name) for name in GrantRecord.__dataclass_fields__}


def _by_id_of(store: LineageStore, ns: str) -> dict[str, GrantRecord]:
    return {g.id: g for g in store.grants(ns)}


def _rows(data: Path, gid: str) -> list[tuple[str, str]]:
    con = sqlite3.connect(data / DB_NAME)
    try:
        return con.execute("SELECT ns, id FROM grants WHERE id = ? ORDER BY ns", (gid,)).fetchall()
    finally:
        con.close()


def _by_id(store: EmbeddedStore, ns: str) -> dict[str, GrantRecord]:
    return {g.id: g for g in store.grants(ns)}


def test_a_full_namespace_dropping_its_oldest_keeps_another_namespaces_same_id(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)
    store = EmbeddedStore(tmp_path, clock=clock)
    try:
        store.put_grant(_grant(KEPT, SHARED, uses=3))
        assert store.use_grants(KEPT, [SHARED])
        store.put_grant(_grant(FULL, SHARED))  # FULL's oldest, spent: the one dropped
        assert store.use_grants(FULL, [SHARED])
        clock.advance(1)
        for i in range(1, MAX_GRANTS_PER_NAMESPACE):
            store.put_grant(_grant(FULL, f"g-{i}"))
        assert len(store.grants(FULL)) == MAX_GRANTS_PER_NAMESPACE
        assert _rows(tmp_path, SHARED) == [(FULL, SHARED), (KEPT, SHARED)]
        store.put_grant(_grant(FULL, "g-one-more"))  # full: FULL drops its spent SHARED
        assert SHARED not in _by_id(store, FULL)
        assert _by_id(store, KEPT)[SHARED].used == 1
    finally:
        store.close()

    assert _rows(tmp_path, SHARED) == [(KEPT, SHARED)]
    store = EmbeddedStore(tmp_path, clock=clock)
    try:
        kept = _by_id(store, KEPT)
        assert list(kept) == [SHARED]
        assert (kept[SHARED].uses, kept[SHARED].used) == (3, 1)
        full = _by_id(store, FULL)
        assert len(full) == MAX_GRANTS_PER_NAMESPACE
        assert SHARED not in full and "g-one-more" in full
        assert store.use_grants(KEPT, [SHARED])  # still spendable, with its uses
        assert _by_id(store, KEPT)[SHARED].used == 2
    finally:
        store.close()
