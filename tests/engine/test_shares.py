"""Caches shared by tenants (engine/shares.py): a tenant filling the whole evicts its
own entries, never a smaller tenant's; the count stays exact and bounded; one tenant
too many drops the one whose last put is the oldest."""

from __future__ import annotations

import random
import threading

from memlineage.engine.shares import Shares


def test_a_tenant_filling_the_whole_evicts_only_its_own() -> None:
    shares: Shares[int, str] = Shares(total=10)
    for k in range(3):
        shares.put("b", k, "kept")
    for k in range(1000):
        shares.put("a", k, "flood")
        assert len(shares) <= 10
    assert {k: shares.get("b", k) for k in range(3)} == {0: "kept", 1: "kept", 2: "kept"}
    assert 1 <= shares.held("a") <= 7
    assert len(shares) == shares.held("a") + shares.held("b")


def test_the_tenant_holding_the_most_gives_way() -> None:
    shares: Shares[int, int] = Shares(total=10)
    for k in range(7):
        shares.put("big", k, k)
    for k in range(3):
        shares.put("small", k, k)
    shares.put("small", 3, 3)  # the whole is full: the largest tenant loses its entries
    assert shares.held("big") == 0 and shares.held("small") == 4
    assert len(shares) == 4
    shares.put("small", 3, 30)  # a key it holds: replaced, nothing evicted
    assert shares.get("small", 3) == 30 and len(shares) == 4


def test_one_tenant_too_many_drops_the_least_recently_put() -> None:
    shares: Shares[int, int] = Shares(total=100, tenants=3)
    for t in ("x", "y", "z"):
        shares.put(t, 0, 0)
    shares.put("x", 1, 1)  # x is now the most recent
    shares.put("w", 0, 0)
    assert shares.held("y") == 0
    assert [shares.held(t) for t in ("x", "z", "w")] == [2, 1, 1]
    assert len(shares) == 4


def test_discard_and_drop_keep_the_count() -> None:
    shares: Shares[int, int] = Shares(total=5)
    shares.put_many("a", [(k, k) for k in range(4)])
    shares.discard("a", 2)
    shares.discard("a", 2)
    shares.discard("nobody", 0)
    assert len(shares) == 3 and shares.get("a", 2) is None
    shares.drop("a")
    assert len(shares) == 0 and shares.get("a", 0) is None


def test_the_count_is_exact_under_threads() -> None:
    shares: Shares[int, int] = Shares(total=50, tenants=4)

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(3000):
            t, k = rng.randrange(6), rng.randrange(40)
            if rng.random() < 0.2:
                shares.discard(t, k)
            else:
                shares.put(t, k, k)
            table = shares.tables.get(t)  # read without the lock, as the request path does
            if table is not None:
                table.get(k)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(shares) == sum(len(t) for t in shares.tables.values()) <= 50
    assert len(shares.tables) <= 4
