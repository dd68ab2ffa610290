"""Two owners objecting to one proposal at once: one objection is kept and answered,
the other is decided on what is there then (nothing waits any more: refused), as
if the two had come one after the other. Before, both read the pending proposal,
both were answered OK, one objection was lost and the memory credited twice (an
outside audit, 2 trials in 150 through a sidecar)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.errors import NothingLoadedError
from memlineage.lineage.proposals import Proposal
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from support.memories import T0, memory
from support.proposals import OWNER, pending_for_an_hour
from support.sidecar import BUNDLED_POLICIES

NS = "voice"


class _SlowRead(EmbeddedStore):
    """A real embedded store whose proposal reads take 50 ms: both objections read the
    pending proposal before either saves (the audit's race, every time)."""

    def proposal(self, namespace: str, memory_id: str) -> Proposal | None:
        found = super().proposal(namespace, memory_id)
        time.sleep(0.05)
        return found


def test_of_two_objections_at_once_one_is_kept_and_the_other_refused() -> None:
    clock = ManualClock(T0)
    store = _SlowRead(clock=clock)
    engine = Engine(store, PolicyHolder(BUNDLED_POLICIES), clock=clock)
    store.record(memory("m", ns=NS, creator_id=OWNER, creator_kind="agent"))
    store.save_proposal(
        replace(pending_for_an_hour(NS, "m", clock()), owners=(OWNER, "agent:other")),
        "proposed",
        now=clock(),
    )
    answers: dict[str, object] = {}
    start = threading.Barrier(2)

    def objects(who: str) -> None:
        start.wait()
        try:
            answers[who] = engine.object_to(NS, "m", Creator("agent", who), f"{who} needs it")
        except NothingLoadedError as exc:
            answers[who] = exc

    threads = [threading.Thread(target=objects, args=(w,)) for w in (OWNER, "agent:other")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    kept = [w for w, a in answers.items() if not isinstance(a, Exception)]
    refused = [w for w, a in answers.items() if isinstance(a, NothingLoadedError)]
    assert len(kept) == 1 and len(refused) == 1, answers
    stored = store.proposal(NS, "m")
    assert stored is not None and [o.by for o in stored.objections] == kept
    assert store.get(NS, "m").uses_ok == 1  # credited once
