"""A stored grant becomes policy facts once per stored object: a spend (a new object in
the embedded store) is seen at once, never a stale `used`."""

from __future__ import annotations

import math

from memlineage.engine.acts import _grant_facts, grant_facts
from memlineage.lineage.grants import GrantRecord
from memlineage.store.embedded import EmbeddedStore


def test_grant_facts_follow_every_spend_of_a_shared_grant() -> None:
    store = EmbeddedStore()
    g = GrantRecord(
        id="g1",
        namespace="ns",
        issuer="user:alice",
        actions=("send_*",),
        arguments=("amount",),
        memory_id="bill",
        uses=3,
        expires_at=math.inf,
    )
    store.put_grant(g, now=10.0)
    seen = []
    for spent in range(3):
        (stored,) = store.grants("ns")
        assert store.grants("ns")[0] is stored  # shared until it changes: what the memo keys on
        facts = grant_facts(stored)
        assert grant_facts(stored) is facts  # built once for that object
        assert facts == _grant_facts(stored)
        assert (facts.used, facts.uses, facts.issuer.id) == (spent, 3, "user:alice")
        seen.append(facts.live(11.0))
        assert store.use_grants("ns", ["g1"], now=11.0)
    (stored,) = store.grants("ns")
    assert grant_facts(stored).used == 3 and not grant_facts(stored).live(11.0)
    assert seen == [True, True, True]
