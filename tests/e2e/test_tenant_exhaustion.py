"""What one token holder can make the sidecar hold: the memory a structure costs per
namespace or per decision must stay bounded whatever the number of namespaces."""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc
from typing import Any

import grpc
from memlineage.config import Config, TokenGrant
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage.v1 import memlineage_pb2 as pb
from support.memories import NOW, memory
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

ML = "/memlineage.v1.MemLineage/"
PARENT = "exhaustion-parent-of-many"
"""The memory of many children: a name no other test gives a memory, as the test counts
every live record of it in this process (a test run before it in the same worker may
keep a "root" of its own alive)."""


def test_a_namespace_of_one_memory_costs_little() -> None:
    """Each namespace's score columns were 16 numpy arrays of 64 rows (~11 KB) from its
    first memory on: a token writing one small memory into each of 100,000 namespaces
    grew the sidecar by 1.8 GB (18 KB a namespace). They now start at a few rows."""
    store = EmbeddedStore()
    namespaces = 500
    for i in range(20):  # warm: interned names, first allocations
        store.record(memory("m", ns=f"warm{i}"), now=NOW)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(namespaces):
            store.record(memory("m", ns=f"n{i}"), now=NOW)
        gc.collect()
        per_namespace = (tracemalloc.get_traced_memory()[0] - before) / namespaces
    finally:
        tracemalloc.stop()
    assert per_namespace < 8_000, per_namespace
    for i in range(0, namespaces, 97):  # still one memory each, readable
        assert store.get(f"n{i}", "m").id == "m"


def test_decisions_kept_in_many_namespaces_are_bounded_in_all() -> None:
    """The decisions kept for Explain and Feedback were bounded per namespace only
    (10,000 each by default, ~5.5 MB): a token of many namespaces filling each with
    FilterRanks grew the sidecar by that much per namespace. Past the journal's total
    the namespaces holding the most lose their oldest; one holding few keeps them."""
    spaces = [f"n{i}" for i in range(30)]
    config = Config(
        policy_dir=BUNDLED_POLICIES,
        decision_log="off",
        tokens=(
            TokenGrant("attacker-secret", tuple(spaces), name="attacker"),
            TokenGrant("victim-secret", ("v",), name="victim"),
        ),
    )
    attacker = (("authorization", "Bearer attacker-secret"),)
    victim = (("authorization", "Bearer victim-secret"),)
    creator = pb.Creator(kind=pb.CREATOR_KIND_AGENT, id="agent:x")
    with RunningSidecar(config) as running, grpc.insecure_channel(running.address) as channel:
        assert running.sidecar is not None
        journal = running.sidecar.engine.journal
        journal.limit, journal.total = 200, 1_000  # the defaults (10,000, 200,000) scaled down
        record = channel.unary_unary(ML + "Record")
        check = channel.unary_unary(ML + "Check")
        rank = channel.unary_unary(ML + "FilterRank")
        explain = channel.unary_unary(ML + "Explain")
        memory_v = pb.Memory(id="mine", creator=creator)
        record(
            pb.RecordRequest(namespace="v", memory=memory_v).SerializeToString(),
            metadata=victim,
            timeout=10,
        )
        for i in range(5):  # five decisions on the victim's memory (distinct: no reuse)
            ask = pb.CheckRequest(
                namespace="v",
                operation=pb.OPERATION_READ,
                memory_id="mine",
                actor=pb.Actor(kind=pb.CREATOR_KIND_AGENT, id=f"agent:{i}"),
            )
            check(ask.SerializeToString(), metadata=victim, timeout=10)
        ids = [f"m{k}" for k in range(50)]
        for ns in spaces:
            for k in ids:
                mem = pb.Memory(id=k, creator=creator)
                record(
                    pb.RecordRequest(namespace=ns, memory=mem).SerializeToString(),
                    metadata=attacker,
                    timeout=10,
                )
            for round_ in range(2):
                candidates = [pb.Candidate(memory_id=k, similarity=0.5 + round_ / 10) for k in ids]
                ask_rank = pb.FilterRankRequest(namespace=ns, candidates=candidates)
                rank(ask_rank.SerializeToString(), metadata=attacker, timeout=30)
        # 30 namespaces x 100 decisions: 3,000 without a bound in all
        held = sum(len(ring.slots) for ring in journal._rings.values())
        assert held <= 1_000, held
        ask_v = pb.ExplainRequest(namespace="v", memory_id="mine")
        seen = pb.ExplainResponse.FromString(
            explain(ask_v.SerializeToString(), metadata=victim, timeout=10)
        )
        assert len(seen.decisions) == 6, seen.decisions  # its Record's and five reads


def test_a_memory_with_many_children_is_held_once() -> None:
    """The decision caches (facts, scores, ancestry heights) were keyed by the record
    object and held it: each child recorded on one memory made that memory a new record
    (one more derivation) and pinned the old one with all its derivations, until 100,000
    were held: 20,000 children of one memory grew the sidecar by ~1.7 GB. They are keyed
    by memory id now: a memory's earlier versions are let go."""
    config = Config(
        policy_dir=BUNDLED_POLICIES,
        decision_log="off",
        tokens=(TokenGrant("attacker-secret", ("a",), name="attacker"),),
    )
    attacker = (("authorization", "Bearer attacker-secret"),)
    creator = pb.Creator(kind=pb.CREATOR_KIND_AGENT, id="agent:x")
    with RunningSidecar(config) as running, grpc.insecure_channel(running.address) as channel:
        record = channel.unary_unary(ML + "Record")
        rank = channel.unary_unary(ML + "FilterRank")

        def add(memory_id: str, *deps: str) -> None:
            mem = pb.Memory(id=memory_id, creator=creator, dependencies=deps)
            ask = pb.RecordRequest(namespace="a", memory=mem)
            record(ask.SerializeToString(), metadata=attacker, timeout=10)

        add(PARENT)
        children = 600
        for i in range(children):
            add(f"c{i}", PARENT)
            if i % 50 == 0:  # rankings too (the ancestry heights of their candidates)
                cands = [pb.Candidate(memory_id=f"c{k}", similarity=0.5) for k in range(i + 1)]
                root = pb.Candidate(memory_id=PARENT, similarity=0.5)
                ask = pb.FilterRankRequest(namespace="a", candidates=[root, *cands])
                rank(ask.SerializeToString(), metadata=attacker, timeout=10)
        gc.collect()
        versions = sum(1 for o in gc.get_objects() if type(o) is MemoryRecord and o.id == PARENT)
    # the store's one (and a request's in flight); before: one per child
    assert versions <= 3, versions


def test_a_write_wakes_only_the_readers_of_its_namespace() -> None:
    """Every event woke every reader waiting in the embedded store, whatever namespace
    it watched, each to take the store's lock and look again: one token's 64 idle Watch
    streams slowed another tenant's writes by half. A reader of one namespace now wakes
    for that namespace's events only (its looks are counted here)."""
    store = EmbeddedStore()
    looks: list[str] = []
    read = store._events_locked

    def counted(namespace: str, after: str | None, limit: int) -> Any:
        looks.append(namespace)
        return read(namespace, after, limit)

    store._events_locked = counted  # type: ignore[method-assign]
    cursor = store.latest_cursor("a")
    got: list[Any] = []
    reader = threading.Thread(
        target=lambda: got.append(store.wait_events("a", after=cursor, timeout=20)), daemon=True
    )
    reader.start()
    deadline = time.monotonic() + 10
    while not looks:  # the reader is waiting
        assert time.monotonic() < deadline
        time.sleep(0.01)
    for i in range(100):  # another namespace's writes, paced as requests come
        store.record(memory(f"v{i}", ns="v"), now=NOW)
        time.sleep(0.002)
    store.record(memory("mine", ns="a"), now=NOW)
    reader.join(timeout=10)
    assert not reader.is_alive()
    events, _ = got[0]
    assert [e.memory_id for e in events] == ["mine"]
    # its first look, the one its own event woke (and a spurious wake-up or two)
    assert looks.count("a") <= 5, looks.count("a")
