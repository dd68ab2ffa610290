"""A sidecar told to stop tells its open Watch streams to end at once (UNAVAILABLE,
"resume from your last cursor"), within a poll, not at the end of the grace period,
on both gRPC runtimes."""

from __future__ import annotations

import asyncio
import threading
import time

import grpc
import pytest
from memlineage.config import Config
from memlineage.v1 import memlineage_pb2 as pb
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

ML = "/memlineage.v1.MemLineage/"


@pytest.mark.parametrize("runtime", ["sync", "aio"])
def test_watch_streams_end_when_the_sidecar_stops(runtime: str) -> None:
    config = Config(policy_dir=BUNDLED_POLICIES, decision_log="off", grpc_runtime=runtime)
    with RunningSidecar(config, pinned=True) as s:
        assert s.sidecar is not None
        service = s.sidecar.service
        channel = grpc.insecure_channel(s.address)
        stream = channel.unary_stream(ML + "Watch")(
            pb.WatchRequest(namespace="default").SerializeToString(), timeout=30
        )
        ended: list[grpc.RpcError] = []

        def follow() -> None:
            try:
                for _ in stream:
                    pass
            except grpc.RpcError as err:
                ended.append(err)

        follower = threading.Thread(target=follow)
        follower.start()
        deadline = time.monotonic() + 10
        while not service._watching:  # the stream has started on the server
            assert time.monotonic() < deadline, "the Watch never started"
            time.sleep(0.02)
        started = time.monotonic()
        stopping = asyncio.run_coroutine_threadsafe(s.sidecar.stop(20), s.loop)
        follower.join(10)
        assert ended, "the Watch was not ended"
        assert time.monotonic() - started < 5  # a poll (0.5 s), not the 20 s grace
        assert ended[0].code() == grpc.StatusCode.UNAVAILABLE
        assert "resume from your last cursor" in (ended[0].details() or "")
        stopping.result(30)
        s.sidecar = None  # stopped here, not again on the way out
        channel.close()
