"""A Record counts `calls()` of its creator for good, so it is decided at the server's
clock: a stated time is INVALID_ARGUMENT `time` and records nothing. Before, an agent
back-dating its Records by an hour counted them an hour ago, and a rate rule over the
last hour never saw the burst (every one of them ALLOWed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import pytest
from memlineage.client import MemLineageClient, MemLineageError
from memlineage.config import Config
from memlineage.lineage.clock import ManualClock
from memlineage.v1 import memlineage_pb2 as pb
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

BURST = """
policy scraper_burst priority 90 {
  on write
  when memory.creator.id == "tool:scraper" and calls("tool:scraper", 1h) >= 3
  deny "at most 3 memories an hour from the scraper"
}
"""


def test_a_back_dated_record_is_refused_and_the_rate_rule_holds(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    shutil.copytree(BUNDLED_POLICIES, policies)
    (policies / "zz_burst.mlp").write_text(BURST)
    clock = ManualClock(T0)
    config = Config(policy_dir=str(policies), decision_log="off")
    with RunningSidecar(config, clock) as s, MemLineageClient(s.address, timeout=10) as c:
        for i in range(3):
            assert c.record(f"page-{i}", creator="tool:scraper").recorded
        for at in (clock() - 3600, clock() - 1):
            with pytest.raises(MemLineageError) as err:
                c.record("page-late", creator="tool:scraper", at=at)
            assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
            assert err.value.details.startswith("time: a Record, an act or a grant is decided")
        with pytest.raises(MemLineageError) as missing:
            c.explain("page-late")
        assert missing.value.code == grpc.StatusCode.NOT_FOUND  # nothing recorded
        fourth = c.record("page-3", creator="tool:scraper")
        assert not fourth.recorded
        assert fourth.decision.effect == pb.EFFECT_DENY
        clock.advance(3601)  # the window moved on: the scraper may write again
        assert c.record("page-4", creator="tool:scraper").recorded
        # a memory's own created_at may still lie in the past (an import)
        old = c.record("legacy", creator="user:alice", created_at=clock() - 86400 * 30)
        assert old.recorded
