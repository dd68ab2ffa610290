"""A namespace holding its cap of grants (a store's ``max_grants``, here a small one),
on the embedded store (in memory and with a data directory), Redis and Cluster: a new
grant makes room by dropping only grants inert at its time (spent, expired, not yet
valid, issued by no user), oldest first by (created_at, id), as many as it needs, in the
same step as its write; when too few are inert it is refused with ``GrantLimitError``
(RESOURCE_EXHAUSTED) and nothing changes, byte for byte.

Before, the embedded store dropped the oldest live grants when too few were inert (a
user's live delegation vanished), and Redis refused every put at the cap with
ALREADY_EXISTS, never dropping a spent or expired grant."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from memlineage.lineage import GrantLimitError, ManualClock
from memlineage.lineage.errors import StoreCorruptError
from memlineage.lineage.grants import GrantRecord
from memlineage.store import LineageStore
from memlineage.store.embedded import EmbeddedStore
from memlineage.store.embedded.persistence import DB_NAME
from support.memories import NOW

NS = "capped"
CAP = 6
LATER = NOW + 10  # when the new grants are put: "expired" has expired, "future" is not valid
REDIS = ("redis", "cluster")
Opener = Callable[[int], LineageStore]
StoreFactory = Callable[..., LineageStore]  # tests/store/conftest.py's make_store


@pytest.fixture(params=["embedded", "embedded-dir", *REDIS])
def backend(request: pytest.FixtureRequest) -> str:
    """The backends of ``make_store``, and the embedded store on a data directory."""
    return str(request.param)


@pytest.fixture
def open_capped(
    backend: str, make_store: StoreFactory, tmp_path: Path, clock: ManualClock
) -> Iterator[Opener]:
    """Open a store of the backend with that cap; on a data directory, the same one
    (the store opened before is closed first, as a restart does)."""
    if backend != "embedded-dir":
        yield lambda cap: make_store(max_grants=cap)
        return
    opened: list[EmbeddedStore] = []

    def factory(cap: int) -> LineageStore:
        if opened:
            opened.pop().close()
        opened.append(EmbeddedStore(tmp_path, clock=clock, max_grants=cap))
        return opened[-1]

    yield factory
    for s in opened:
        s.close()


def grant(gid: str, *, issuer: str = "user:alice", expires_at: float = math.inf) -> GrantRecord:
    return GrantRecord(
        id=gid,
        namespace=NS,
        issuer=issuer,
        actions=("send_money",),
        source="tool:*",
        expires_at=expires_at,
    )


def fill(store: LineageStore) -> None:
    """CAP grants: one live (the oldest), five inert in the order they are dropped."""
    store.put_grant(grant("live-old"), now=NOW)
    for gid in ("spent-b", "spent-a"):  # the same created_at: "spent-a" goes first
        store.put_grant(grant(gid), now=NOW + 1)
        assert store.use_grants(NS, [gid], now=NOW + 1)
    store.put_grant(grant("expired", expires_at=NOW + 5), now=NOW + 2)
    store.put_grant(grant("agent", issuer="agent:planner"), now=NOW + 3)
    store.put_grant(grant("future"), now=NOW + 50)  # created later than LATER
    assert len(store.grants(NS)) == CAP


DROPS = ["spent-a", "spent-b", "expired", "agent", "future"]


def ids(store: LineageStore) -> set[str]:
    return {g.id for g in store.grants(NS)}


def stored(backend: str, store: LineageStore, tmp_path: Path) -> object:
    """What the backend holds of NS's grants: on Redis both hashes' type and fields
    (bytes), on the embedded store the grants (and the SQLite rows)."""
    if backend in REDIS:
        raw = store.client  # type: ignore[attr-defined]
        keys = [f"ml:{{{NS}}}:g", f"ml:{{{NS}}}:gu"]
        # By content, not DUMP: grant values make the hash a hash table, whose DUMP order
        # a read alone can change (it moves the table's incremental rehash on).
        return [(raw.type(k), raw.execute_command("HGETALL", k, NEVER_DECODE=True)) for k in keys]
    held = sorted(g.to_json() for g in store.grants(NS))
    return (held, rows(tmp_path)) if backend == "embedded-dir" else held


def rows(data: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(data / DB_NAME)
    try:
        return con.execute("SELECT id, data FROM grants WHERE ns = ? ORDER BY id", (NS,)).fetchall()
    finally:
        con.close()


def test_a_full_namespace_of_live_grants_refuses_and_changes_nothing(
    backend: str, open_capped: Opener, tmp_path: Path
) -> None:
    store = open_capped(3)
    for i in range(3):
        store.put_grant(grant(f"live-{i}"), now=NOW + i)
    before = stored(backend, store, tmp_path)

    with pytest.raises(GrantLimitError) as err:
        store.put_grant(grant("one-more"), now=LATER)
    assert err.value.grpc_status == "RESOURCE_EXHAUSTED"
    message = str(err.value)
    assert f"namespace {NS!r} holds 3 grants" in message, message
    assert "let grants expire or spend their uses" in message, message
    assert stored(backend, store, tmp_path) == before
    assert ids(store) == {"live-0", "live-1", "live-2"}
    assert store.use_grants(NS, ["live-0", "live-1", "live-2"], now=LATER)  # all still live


def test_a_full_namespace_drops_exactly_its_oldest_inert_grants(
    backend: str, open_capped: Opener, tmp_path: Path
) -> None:
    store = open_capped(CAP)
    fill(store)
    expected = ids(store)
    for n, dropped in enumerate(DROPS, 1):
        stored_grant = store.put_grant(grant(f"new-{n}"), now=LATER)
        expected = expected - {dropped} | {stored_grant.id}
        assert ids(store) == expected, dropped
    # Every grant left is live: the next one is refused and nothing is dropped.
    assert ids(store) == {"live-old", *(f"new-{n}" for n in range(1, 6))}
    before = stored(backend, store, tmp_path)
    with pytest.raises(GrantLimitError):
        store.put_grant(grant("new-6"), now=LATER)
    assert stored(backend, store, tmp_path) == before
    assert store.use_grants(NS, sorted(expected), now=LATER)

    if backend == "embedded-dir":  # what was dropped is gone from the file too
        reopened = open_capped(CAP)
        assert [gid for gid, _ in rows(tmp_path)] == sorted(expected)
        assert ids(reopened) == expected
        assert all(g.used == 1 for g in reopened.grants(NS))


@pytest.mark.parametrize("backend", ["embedded-dir", *REDIS])
def test_a_namespace_over_a_smaller_cap_drops_as_many_as_one_more_needs(
    backend: str, open_capped: Opener, tmp_path: Path
) -> None:
    """Six grants (five inert) opened again under a cap of 3: one more drops the four
    oldest inert; under a cap of 1 the three left (two live) are too many, and nothing
    is dropped."""
    fill(open_capped(CAP))
    store = open_capped(3)
    store.put_grant(grant("new"), now=LATER)
    assert ids(store) == {"live-old", "future", "new"}

    small = open_capped(1)
    before = stored(backend, small, tmp_path)
    with pytest.raises(GrantLimitError):
        small.put_grant(grant("newer"), now=LATER)
    assert stored(backend, small, tmp_path) == before
    assert ids(small) == {"live-old", "future", "new"}


@pytest.mark.parametrize("backend", REDIS)
@pytest.mark.parametrize(
    ("suffix", "value", "problem"),
    [
        ("gu", b"lots", "is not a count of uses"),
        ("gu", b"9", "over the grant's uses"),
        ("g", b'["spent-a",', "is not valid JSON"),
    ],
)
def test_a_damaged_grant_met_making_room_is_store_corrupt_and_nothing_changes(
    backend: str, open_capped: Opener, tmp_path: Path, suffix: str, value: bytes, problem: str
) -> None:
    """The put script reads every grant and count when the namespace is full: a damaged
    one is ``StoreCorruptError`` naming the key and field (DATA_LOSS), before any drop."""
    store = open_capped(CAP)
    fill(store)
    raw = store.client  # type: ignore[attr-defined]
    key = f"ml:{{{NS}}}:{suffix}"
    raw.hset(key, "spent-a", value)
    before = stored(backend, store, tmp_path)

    with pytest.raises(StoreCorruptError) as err:
        store.put_grant(grant("new"), now=LATER)
    message = str(err.value)
    assert err.value.grpc_status == "DATA_LOSS"
    assert message.startswith(f"redis {key} cannot be read: "), message
    assert "'spent-a'" in message and problem in message, message
    assert "nothing was changed" in message, message
    assert stored(backend, store, tmp_path) == before
