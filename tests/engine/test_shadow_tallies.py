"""A shadow candidate's tallies are exact when many threads decide at once: each
thread counts its comparisons in a cell of its own (no lock per decision) and the
verdict on a pair of shared decisions is worked out once, yet every comparison and
every disagreement is counted under the right key, for a candidate loaded later too."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from support.serve_process import NO_WEB_POLICY
from support.sidecar import BUNDLED_POLICIES

THREADS, ROUNDS = 6, 40
USERS = [f"u{i}" for i in range(10)]
WEB = [f"w{i}" for i in range(5)]  # tool:web_fetch: the candidate denies their reads


def _engine(tmp_path: Path) -> Engine:
    candidate = tmp_path / "candidate"
    shutil.copytree(BUNDLED_POLICIES, candidate)
    (candidate / "zz_no_web.mlp").write_text(NO_WEB_POLICY)
    engine = Engine(EmbeddedStore(), PolicyHolder(BUNDLED_POLICIES), reuse_decisions=False)
    engine.shadow_dir = str(candidate)
    for mid in USERS:
        engine.record(
            MemoryRecord(mid, "default", creator_id="user:alice"), Creator("user", "user:alice")
        )
    for mid in WEB:
        engine.record(
            MemoryRecord(mid, "default", type="tool_result", creator_id="tool:web_fetch"),
            Creator("tool", "tool:web_fetch"),
        )
    return engine


def _decide_in_threads(engine: Engine) -> None:
    actor = Creator("agent", "agent:planner")
    start = threading.Barrier(THREADS)

    def work() -> None:
        start.wait()
        for _ in range(ROUNDS):
            for mid in (*USERS, *WEB):
                engine.check("default", "read", (mid,), actor)

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)


def test_many_threads_count_every_comparison_and_disagreement(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    status, problems = engine.shadow_load()
    assert status.active, problems
    _decide_in_threads(engine)
    status = engine.shadow.status()
    per_memory = THREADS * ROUNDS
    assert status.compared == per_memory * (len(USERS) + len(WEB))
    assert status.disagreed == per_memory * len(WEB)
    assert [(d.policy, d.candidate, d.count) for d in status.diffs] == [
        ("no_web_at_all", "deny", per_memory * len(WEB))
    ]
    (diff,) = status.diffs
    assert len(diff.examples) == 3 and all(x.split()[1] in WEB for x in diff.examples)

    # A candidate loaded again starts from zero, its threads counting afresh.
    status, problems = engine.shadow_load()
    assert status.active and (status.compared, status.disagreed) == (0, 0), problems
    _decide_in_threads(engine)
    status = engine.shadow.status()
    assert (status.compared, status.disagreed) == (
        per_memory * (len(USERS) + len(WEB)),
        per_memory * len(WEB),
    )
