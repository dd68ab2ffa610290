"""A claim whose live peers come from more sources than Lua's ``unpack`` takes (~8,000):
the next Record of it is recorded (before: "too many results to unpack", INTERNAL, for
every later Record of that claim; found by an outside audit). The group is seeded in
Redis with the hashes the store writes for such Records (one made through the store,
cloned), since 8,200 Records of one claim cost minutes."""

from __future__ import annotations

import pytest
from memlineage.lineage import MemoryRecord
from memlineage.store import LineageStore
from memlineage.store.redis_keys import RedisKeys

NS = "claim:many"
KEYS = RedisKeys()


@pytest.fixture(params=["redis"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


def claim(memory_id: str, creator: str, value: str) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        namespace=NS,
        creator_id=creator,
        subject="user:1",
        attribute="city",
        value=value,
    )


@pytest.mark.parametrize("peers", ["whole", "to rebuild"])
def test_a_record_of_a_claim_with_8200_sources_is_recorded(store: LineageStore, peers: str) -> None:
    """`to rebuild`: the claim's peers hash is not whole (as after a member came back),
    so the Record reads the whole group and writes the 8,200 live members back to it."""
    store.record_claim(claim("seed", "tool:t0", "v0"))
    r = store.client  # type: ignore[attr-defined]  # the store's own redis-py client
    seed = r.hgetall(KEYS.record(NS, "seed"))
    peers_key = KEYS.claim_peers(NS, "user:1", "city")
    pipe = r.pipeline(transaction=False)
    for k in range(1, 8200):
        fields = dict(seed)
        fields["c"], fields["v"] = f"tool:t{k}", f"v{k}"
        pipe.hset(KEYS.record(NS, f"s{k}"), mapping=fields)
        pipe.sadd(KEYS.claim_group(NS, "user:1", "city"), f"s{k}")
        pipe.hset(peers_key, f"s{k}", "1")  # as the store keeps them
    if peers == "to rebuild":
        pipe.hdel(peers_key, "~")
    pipe.execute()
    outcome = store.record_claim(claim("new", "tool:fresh", "other"))
    assert outcome.memory.id == "new"
    assert len(outcome.memory.contradicted_by) == 8200  # every peer's source
    assert store.get(NS, "new").status == "active"
    assert r.hlen(peers_key) == 8200 + 1 + 1  # the members, "new" and "~"
