"""What a tenant holding one token can do to another tenant of the same sidecar: its
per-caller bounds are its own, whatever the tokens are called."""

from __future__ import annotations

import time

import grpc
import pytest
from memlineage.config import Config, TokenGrant
from memlineage.grpc_api.servicer import WATCH_STREAMS_PER_CALLER
from memlineage.v1 import memlineage_pb2 as pb
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

ML = "/memlineage.v1.MemLineage/"


def test_unnamed_tokens_sharing_a_prefix_are_two_callers() -> None:
    """Two tokens given without a name (the Python API's TokenGrant) were both named
    `token:tena…` (the first 4 characters of each secret), so one tenant's Watch
    streams counted against the other's: tenant one holding its share left tenant two
    RESOURCE_EXHAUSTED on its first Watch."""
    config = Config(
        policy_dir=BUNDLED_POLICIES,
        decision_log="off",
        tokens=(TokenGrant("tenant-one-secret", ("a",)), TokenGrant("tenant-two-secret", ("b",))),
    )
    one = (("authorization", "Bearer tenant-one-secret"),)
    two = (("authorization", "Bearer tenant-two-secret"),)
    with RunningSidecar(config) as running, grpc.insecure_channel(running.address) as channel:
        assert running.sidecar is not None
        service = running.sidecar.service
        watch = channel.unary_stream(ML + "Watch")
        mine = pb.WatchRequest(namespace="a").SerializeToString()
        held = [watch(mine, timeout=60, metadata=one) for _ in range(WATCH_STREAMS_PER_CALLER)]
        try:
            deadline = time.monotonic() + 30
            while sum(service._watching.values()) < WATCH_STREAMS_PER_CALLER:
                assert time.monotonic() < deadline, service._watching
                time.sleep(0.05)
            record = channel.unary_unary(ML + "Record")
            creator = pb.Creator(kind=pb.CREATOR_KIND_USER, id="user:b")
            memory = pb.Memory(id="m", creator=creator)
            record(pb.RecordRequest(memory=memory).SerializeToString(), timeout=10, metadata=two)
            theirs = watch(
                pb.WatchRequest(from_oldest=True).SerializeToString(), timeout=10, metadata=two
            )
            try:
                first = pb.LineageEvent.FromString(next(theirs))
            except grpc.RpcError as exc:  # before: RESOURCE_EXHAUSTED, tenant one's share
                pytest.fail(f"tenant two's Watch: {exc.code()} {exc.details()}")
            assert first.memory_id == "m"
            theirs.cancel()
            # nor is a caller named by a piece of its secret
            assert not any("tena" in name for name in service._watching), service._watching
        finally:
            for call in held:
                call.cancel()
