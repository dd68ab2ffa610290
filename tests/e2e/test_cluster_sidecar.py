"""The sidecar on a real three-master Redis Cluster, and two sidecars sharing one
Redis: sidecars are stateless over the store."""

from __future__ import annotations

from memlineage.client import MemLineageClient
from memlineage.config import Config
from memlineage.lineage.clock import ManualClock
from memlineage.v1 import memlineage_pb2 as pb
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES, RunningSidecar


def test_sidecar_on_redis_cluster(redis_cluster) -> None:
    config = Config(policy_dir=BUNDLED_POLICIES, store=redis_cluster.emptied())
    with RunningSidecar(config) as s, MemLineageClient(s.address) as ml:
        ml.record("city", creator="user:alice", claim=("user:alice", "city", "Shanghai"))
        ml.record("hotel", creator="agent:planner", dependencies=["city"])
        ml.record("guess", creator="reasoning:planner", confidence=0.3)
        assert list(ml.filter_rank([("hotel", 0.9), ("guess", 0.99)]).ranked_ids) == ["hotel"]
        fix = ml.record("city-2", creator="user:alice", claim=("user:alice", "city", "Beijing"))
        assert fix.superseded_id == "city" and list(fix.affected_ids) == ["hotel"]
        assert ml.check("read", "hotel").effect == pb.EFFECT_DEGRADE
        assert ml.explain("city").memory.successor == "city-2"


def test_two_sidecars_share_one_redis(redis_server) -> None:
    redis_server.emptied()
    clock = ManualClock(T0)
    config = Config(policy_dir=BUNDLED_POLICIES, store=redis_server.url)
    with (
        RunningSidecar(config, clock) as a,
        RunningSidecar(config, clock) as b,
        MemLineageClient(a.address) as ca,
        MemLineageClient(b.address) as cb,
    ):
        ca.record("city", creator="user:alice")
        cb.record("hotel", creator="agent:planner", dependencies=["city"])
        revoke = cb.revoke("city", actor="user:alice")
        assert list(revoke.affected_ids) == ["hotel"]
        assert ca.check("read", "hotel").effect == pb.EFFECT_DEGRADE
        assert ca.explain("hotel").memory.status == pb.STATUS_PENDING_VERIFICATION
