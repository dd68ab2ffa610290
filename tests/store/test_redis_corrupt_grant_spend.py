"""The grant spend script on a real Redis (standalone and Cluster) meeting a damaged
value (written with redis-py after the grant was stored, as damage between an act's
read of its grants and its spend would be): ``use_grants`` raises
``StoreCorruptError`` naming the key and the field (DATA_LOSS to a caller), never the
Lua error as a raw ``redis.ResponseError``; nothing is spent, and the namespace's
other grants and the other namespaces spend as before."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from memlineage.lineage.errors import StoreCorruptError
from memlineage.lineage.grants import GrantRecord
from memlineage.store import LineageStore
from support.corrupt_redis import const, json_edit

NS, OTHER_NS = "spend", "spend-healthy"


def grant(ns: str, gid: str) -> GrantRecord:
    return GrantRecord(
        id=gid,
        namespace=ns,
        issuer="user:alice",
        actions=("send_money",),
        arguments=("amount",),
        source="",
        memory_id="bill",
        uses=3,
    )


# name: (the hash, the new value from the old, a piece of the problem); each one makes
# the Lua script fail (cjson.decode, a comparison with nil or with a string). An issuer
# that is a number does not: Lua makes it a string, not a user's, and the spend is
# refused (False, nothing spent).
DAMAGE: dict[str, tuple[str, Callable[[bytes], bytes], str]] = {
    "not-json": ("g", const(b'["g-1",'), "is not valid JSON"),
    "nested-past-the-parser": ("g", const(b"[" * 5000), "is not valid JSON"),
    "uses-a-string": ("g", json_edit(7, "many"), "field 7 (uses)"),
    "created-a-string": ("g", json_edit(10, "now"), "field 10 (created_at)"),
    "used-a-word": ("gu", const(b"lots"), "is not a count of uses"),
}


@pytest.mark.parametrize("backend", ["redis", "cluster"])
@pytest.mark.parametrize("name", list(DAMAGE))
def test_a_damaged_grant_met_by_the_spend_script_is_store_corrupt(
    store: LineageStore, name: str
) -> None:
    raw = store.client  # type: ignore[attr-defined]
    for ns in (NS, OTHER_NS):
        store.put_grant(grant(ns, "g-1"))
        store.put_grant(grant(ns, "g-2"))
        assert store.use_grants(ns, ["g-1"])
    suffix, damage, problem = DAMAGE[name]
    key = f"ml:{{{NS}}}:{suffix}"
    raw.hset(key, "g-1", damage(raw.execute_command("HGET", key, "g-1", NEVER_DECODE=True)))
    uses_key = f"ml:{{{NS}}}:gu"
    before = raw.hgetall(uses_key)

    with pytest.raises(StoreCorruptError) as err:
        store.use_grants(NS, ["g-2", "g-1"])
    message = str(err.value)
    assert err.value.grpc_status == "DATA_LOSS"
    assert message.startswith(f"redis {key} cannot be read: "), message
    assert "field 'g-1'" in message and problem in message, message
    assert raw.hgetall(uses_key) == before  # nothing spent, g-2 neither

    assert store.use_grants(OTHER_NS, ["g-1", "g-2"])
    assert [g.used for g in store.grants(OTHER_NS)] == [2, 1]
