"""What each adapter op costs in sidecar calls (and, for Mem0, in Mem0 calls), pinned
together with what the op decides: bench/integrations_bench.py's figures rest on these
counts, so a change that adds a round trip fails here, and so does one that saves a
round trip by dropping a decision (a denied put must still be refused, a degraded get
must still carry its obligations).

A real sidecar with the bundled policies plus one (a scraper may not write at all,
so the provisional write check of a Mem0 add is denied for it); real LangGraph and
Mem0 stores (Mem0 offline, as in test_mem0_memory.py). The clients only count.
"""

from __future__ import annotations

import itertools
import shutil
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import support.mem0_offline  # noqa: F401  (before mem0: no telemetry, its home a temp dir)
from langgraph.store.memory import InMemoryStore
from mem0 import Memory
from memlineage.client import MemLineageClient, NotFound, PolicyDenied
from memlineage.config import Config
from memlineage.integrations.langgraph_store import DECISION_KEY, GuardedLangGraphStore, memory_id
from memlineage.integrations.mem0_memory import LINEAGE_KEY, GuardedMem0Memory
from support.mem0_offline import mem0_config
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

NO_SCRAPER_WRITES = """policy no_scraper_writes priority 100 {
  on write
  when request.actor.id == "tool:scraper_y"
  deny "the scraper may not write"
}
"""
UNTRUSTED = "from a tool that is not on the trusted list"


class CountingClient(MemLineageClient):
    """The real client; ``calls`` counts its sidecar calls, a Check by operation (from
    any thread: a step's calls run at once)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def taken(self) -> dict[str, int]:
        """The calls counted since the last `taken`."""
        with self._lock:
            out = dict(self.calls)
            self.calls.clear()
        return out

    def count(self, name: str) -> None:
        with self._lock:
            self.calls[name] += 1

    def record(self, *args: Any, **kwargs: Any) -> Any:
        self.count("record")
        return super().record(*args, **kwargs)

    def check(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        self.count(f"check:{operation}")
        return super().check(operation, *args, **kwargs)

    def filter_rank(self, *args: Any, **kwargs: Any) -> Any:
        self.count("filter_rank")
        return super().filter_rank(*args, **kwargs)

    def explain(self, *args: Any, **kwargs: Any) -> Any:
        self.count("explain")
        return super().explain(*args, **kwargs)

    def revise(self, *args: Any, **kwargs: Any) -> Any:
        self.count("revise")
        return super().revise(*args, **kwargs)


class CountingMemory:
    """A real `mem0.Memory`, each method called through it counted (and its kwargs kept)."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.calls: Counter[str] = Counter()
        self.kwargs: dict[str, dict[str, Any]] = {}

    def taken(self) -> dict[str, int]:
        out = dict(self.calls)
        self.calls.clear()
        return out

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.memory, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            self.kwargs[name] = kwargs
            return method(*args, **kwargs)

        return counted


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSidecar]:
    policies = tmp_path_factory.mktemp("policies")
    for f in Path(BUNDLED_POLICIES).glob("*.mlp"):
        shutil.copy(f, policies / f.name)
    (policies / "no_scraper_writes.mlp").write_text(NO_SCRAPER_WRITES, encoding="utf-8")
    with RunningSidecar(Config(policy_dir=str(policies))) as s:
        yield s


@pytest.fixture
def ml(sidecar: RunningSidecar) -> Iterator[CountingClient]:
    client = CountingClient(sidecar.address, timeout=10)
    with client:
        yield client


_users = itertools.count()


@pytest.fixture
def user() -> str:
    """A user of this test's own (the sidecar is shared by the module)."""
    return f"rt-user-{next(_users)}"


# ---------------------------------------------------------------- LangGraph


def test_an_adapter_given_another_client_reads_the_version_there(
    ml: CountingClient, user: str
) -> None:
    """The versions an adapter remembers are its client's sidecar's: given another
    client (here another sidecar, an in-memory store of its own, which holds no
    record of the key), a put over the key reads there first, finds none, records."""
    inner, ns, me = InMemoryStore(), (user, "trip"), {"creator": f"user:{user}"}
    store = GuardedLangGraphStore(inner, ml)
    store.put(ns, "city", {"text": "Shanghai", "_lineage": me})
    with RunningSidecar() as fresh, CountingClient(fresh.address, timeout=10) as other:
        store.client = other
        store.put(ns, "city", {"text": "Lyon", "_lineage": me})
        assert other.taken() == {"check:update": 1, "explain": 1, "record": 1}
        recorded = MemLineageClient.explain(other, memory_id(ns, "city")).memory
        assert (recorded.version, recorded.creator.id) == (1, f"user:{user}")
    assert inner.get(ns, "city").value == {"text": "Lyon"}  # type: ignore[union-attr]


class LostOnce(CountingClient):
    """The next Revise is answered NOT_FOUND, as by a sidecar that lost the record
    (one on an in-memory store, restarted) before it was recorded again."""

    lose = False

    def revise(self, *args: Any, **kwargs: Any) -> Any:
        if self.lose:
            self.lose = False
            self.count("revise")
            raise NotFound(grpc.StatusCode.NOT_FOUND, "memory_id: no such memory")
        return super().revise(*args, **kwargs)


def test_a_remembered_record_the_sidecar_no_longer_holds_is_read_again(
    ml: CountingClient, user: str
) -> None:
    """A Revise over a remembered version answered NOT_FOUND: the wrapper forgets it
    and reads the record (here held again), then revises over what it read."""
    inner, ns, me = InMemoryStore(), (user, "trip"), {"creator": f"user:{user}"}
    with LostOnce(ml.target, timeout=10) as client:
        store = GuardedLangGraphStore(inner, client)
        store.put(ns, "city", {"text": "Shanghai", "_lineage": me})
        client.taken()
        client.lose = True
        store.put(ns, "city", {"text": "Lyon", "_lineage": me})
        assert client.taken() == {"check:update": 1, "revise": 2, "explain": 1}
        assert MemLineageClient.explain(client, memory_id(ns, "city")).memory.version == 2
    assert inner.get(ns, "city").value == {"text": "Lyon"}  # type: ignore[union-attr]


class Meeting(CountingClient):
    """Its Checks and Explains wait for each other (a barrier of two): they return only
    when made at once, and break the barrier after 5 s when made one after the other."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.barrier = threading.Barrier(2, timeout=5)

    def check(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        self.barrier.wait()
        return super().check(operation, *args, **kwargs)

    def explain(self, *args: Any, **kwargs: Any) -> Any:
        self.barrier.wait()
        return super().explain(*args, **kwargs)


def test_an_update_reads_the_unknown_version_at_once_with_its_decision(
    ml: CountingClient, user: str
) -> None:
    """A put over a key another wrapper wrote: its update check and the read of the
    version it revises over are one step, made at once on the sync client too (one
    round trip for both, not two)."""
    inner, ns, me = InMemoryStore(), (user, "trip"), {"creator": f"user:{user}"}
    GuardedLangGraphStore(inner, ml).put(ns, "city", {"text": "Shanghai", "_lineage": me})
    with Meeting(ml.target, timeout=10) as meeting:
        GuardedLangGraphStore(inner, meeting).put(ns, "city", {"text": "Lyon", "_lineage": me})
        assert meeting.taken() == {"check:update": 1, "explain": 1, "revise": 1}
        assert not meeting.barrier.broken
    assert inner.get(ns, "city").value == {"text": "Lyon"}  # type: ignore[union-attr]


class MovedAfterRead(CountingClient):
    """Another writer revises the record right after each of the next `moves` Explains."""

    moves = 0

    def explain(self, memory_id: str, **kwargs: Any) -> Any:
        out = super().explain(memory_id, **kwargs)
        if self.moves > 0:
            self.moves -= 1
            m = out.memory
            MemLineageClient.revise(
                self, memory_id, creator=m.creator.id, expected_version=m.version
            )
        return out


def test_a_stale_remembered_version_costs_no_attempt(ml: CountingClient, user: str) -> None:
    """A put over a version this wrapper remembers but another writer moved: that
    Revise is refused and costs none of the four reads an update may make. Here the
    record moves again after each of the first three reads: the fourth revises."""
    inner, ns, me = InMemoryStore(), (user, "trip"), {"creator": f"user:{user}"}
    with MovedAfterRead(ml.target, timeout=10) as moved:
        store = GuardedLangGraphStore(inner, moved)
        store.put(ns, "city", {"text": "Shanghai", "_lineage": me})
        MemLineageClient.revise(moved, memory_id(ns, "city"), expected_version=1, **me)
        moved.taken()
        moved.moves = 3
        store.put(ns, "city", {"text": "Lyon", "_lineage": me})
        assert moved.taken() == {"check:update": 1, "explain": 4, "revise": 5}  # its own only
        kept = MemLineageClient.explain(moved, memory_id(ns, "city")).memory
        assert kept.version == 6
    assert inner.get(ns, "city").value == {"text": "Lyon"}  # type: ignore[union-attr]


def test_each_langgraph_op_makes_its_sidecar_calls_and_decides_as_documented(
    ml: CountingClient, user: str
) -> None:
    inner = InMemoryStore()
    store = GuardedLangGraphStore(inner, ml)
    ns = (user, "trip")
    me = f"user:{user}"
    claim = [me, "destination_city", "Shanghai"]
    kept_as = {"creator": me}

    # a new item: its Record is its write decision, nothing else is asked
    store.put(ns, "city", {"text": "Shanghai", "_lineage": {"creator": me, "claim": claim}})
    assert ml.taken() == {"record": 1}
    # a refused Record still refuses the put, the wrapped store untouched
    other = {"creator": "tool:web_search", "claim": [me, "destination_city", "Paris"]}
    with pytest.raises(PolicyDenied, match="cannot supersede what the user stated"):
        store.put(ns, "web-city", {"text": "Paris", "_lineage": other})
    assert ml.taken() == {"record": 1}
    assert inner.get(ns, "web-city") is None

    # an item the wrapped store holds: the update decided first (denied: nothing is
    # written, nothing revised); allowed, written, then a Revise (the new version's
    # lineage) over the version this wrapper recorded, no Record and no Explain
    with pytest.raises(PolicyDenied, match="only the user can change what the user stated"):
        store.put(ns, "city", {"text": "Lyon", "_lineage": {"creator": "agent:planner"}})
    assert ml.taken() == {"check:update": 1}
    assert inner.get(ns, "city").value == {"text": "Shanghai"}  # type: ignore[union-attr]
    store.put(ns, "city", {"text": "Shanghai!", "_lineage": {"creator": me}})
    assert ml.taken() == {"check:update": 1, "revise": 1}
    assert inner.get(ns, "city").value == {"text": "Shanghai!"}  # type: ignore[union-attr]
    kept = MemLineageClient.explain(ml, memory_id(ns, "city"))  # not counted: the test's
    assert kept.memory.claim.value == "Shanghai"  # a put naming no claim keeps it
    # another wrapper knows no version of it: it reads the version first
    GuardedLangGraphStore(inner, ml).put(ns, "city", {"text": "Shanghai!!", "_lineage": kept_as})
    assert ml.taken() == {"check:update": 1, "explain": 1, "revise": 1}
    # the first one's is stale now: its Revise is refused, it reads and revises again
    store.put(ns, "city", {"text": "Shanghai!!!", "_lineage": kept_as})
    assert ml.taken() == {"check:update": 1, "revise": 2, "explain": 1}
    kept = MemLineageClient.explain(ml, memory_id(ns, "city"))
    assert (kept.memory.version, kept.memory.claim.value) == (4, "Shanghai")
    assert inner.get(ns, "city").value == {"text": "Shanghai!!!"}  # type: ignore[union-attr]

    # get: one read check; degraded, the copy carries the decision's obligations
    store.put(ns, "tip", {"text": "the Bund", "_lineage": {"creator": "tool:web_search"}})
    ml.taken()
    tip = store.get(ns, "tip")
    assert ml.taken() == {"check:read": 1}
    assert tip is not None and tip.value["text"] == "the Bund"
    seen = tip.value[DECISION_KEY]
    assert seen["effect"] == "degrade" and seen["decision_id"]
    assert {(o["kind"], o["text"] or o["factor"]) for o in seen["obligations"]} == {
        ("annotate", UNTRUSTED),
        ("downrank", 0.5),
    }
    city = store.get(ns, "city")
    assert ml.taken() == {"check:read": 1}
    assert city is not None and DECISION_KEY not in city.value
    assert store.get(ns, "absent") is None
    assert ml.taken() == {}  # a missing item costs no check

    # search: one FilterRank for every hit; delete: one delete check, denied here
    assert [i.key for i in store.search(ns, limit=10)] == ["city", "tip"]
    assert ml.taken() == {"filter_rank": 1}
    with pytest.raises(PolicyDenied):
        GuardedLangGraphStore(inner, ml, actor="agent:planner").delete(ns, "city")
    assert ml.taken() == {"check:delete": 1}
    assert inner.get(ns, "city") is not None
    assert store.list_namespaces(prefix=(user,)) == [ns]
    assert ml.taken() == {}


def test_search_windows_are_slices_of_one_ranking_without_unmappable_hits(
    ml: CountingClient, user: str
) -> None:
    """Only the window's items are built; each window is the slice of the same ranking
    (overfetch wide enough that every hit is a candidate), and hits written around
    the wrapper that cannot be mapped (a key, a whole namespace) are never among them,
    while their mappable neighbours are."""
    inner = InMemoryStore()
    store = GuardedLangGraphStore(inner, ml, overfetch=50)
    trip, bad_ns = (user, "trip"), (user, "bad label")
    confidences = [1.0, 0.9, 0.8, 0.75, 0.95, 0.85]
    for i, c in enumerate(confidences):
        lineage = {"creator": "agent:planner", "confidence": c}
        store.put(trip, f"k{i}", {"text": f"hotel {i}", "_lineage": lineage})
    inner.put(trip, "bad key", {"text": "around the wrapper"})
    inner.put(bad_ns, "k0", {"text": "around the wrapper"})
    ml.taken()

    ranking = store.search((user,), limit=100)
    keys = [(i.namespace, i.key) for i in ranking]
    assert sorted(keys) == sorted((trip, f"k{i}") for i in range(len(confidences)))
    scores = [i.score for i in ranking]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    for offset in range(len(keys) + 1):
        window = store.search((user,), limit=2, offset=offset)
        assert [(i.namespace, i.key) for i in window] == keys[offset : offset + 2]
        assert [i.score for i in window] == scores[offset : offset + 2]
    assert ml.taken() == {"filter_rank": len(keys) + 2}


# ---------------------------------------------------------------- Mem0


@pytest.fixture
def memory(tmp_path: Path, embedder_url: str) -> Iterator[CountingMemory]:
    m = Memory.from_config(mem0_config(tmp_path, embedder_url))
    yield CountingMemory(m)
    m.close()


def test_a_mem0_add_is_one_mem0_add_a_write_check_per_creator_and_a_record_per_memory(
    memory: CountingMemory, ml: CountingClient, user: str
) -> None:
    guarded = GuardedMem0Memory(memory, ml)
    (one,) = guarded.add("I am vegetarian", user_id=user, infer=False)["results"]
    assert memory.taken() == {"add": 1}  # no get, history or search of what was added
    assert ml.taken() == {"check:write": 1, "record": 1}
    assert MemLineageClient.explain(ml, one["id"]).memory.creator.id == f"user:{user}"

    messages = [
        {"role": "system", "content": "you are a travel agent"},
        {"role": "user", "content": "I fly to Shanghai"},
        {"role": "assistant", "content": "Noted: Shanghai"},
    ]
    added = guarded.add(messages, user_id=user, infer=False)["results"]
    assert len(added) == 2
    assert memory.taken() == {"add": 1}
    assert ml.taken() == {"check:write": 2, "record": 2}  # user:<id> and agent:mem0


def test_a_mem0_update_by_a_writer_revises_over_the_version_this_wrapper_recorded(
    memory: CountingMemory, ml: CountingClient, user: str
) -> None:
    """An update naming its writer is a Revise over the record's version: the one this
    wrapper recorded (no Explain); another wrapper, which knows none, reads it first;
    a version moved since is refused and read again."""
    me = f"user:{user}"
    guarded = GuardedMem0Memory(memory, ml, actor=me)
    (one,) = guarded.add("I am vegetarian", user_id=user, infer=False)["results"]
    ml.taken()
    guarded.update(one["id"], "I am vegan")
    assert ml.taken() == {"check:update": 1, "revise": 1}
    GuardedMem0Memory(memory, ml, actor=me).update(one["id"], "I eat fish")
    assert ml.taken() == {"check:update": 1, "explain": 1, "revise": 1}
    guarded.update(one["id"], "I am vegetarian again")  # its version is stale now
    assert ml.taken() == {"check:update": 1, "revise": 2, "explain": 1}
    stored = MemLineageClient.explain(ml, one["id"]).memory
    assert (stored.version, stored.creator.id) == (4, me)
    assert memory.memory.get(one["id"])["memory"] == "I am vegetarian again"


def test_a_mem0_update_reads_the_unknown_version_at_once_with_its_decision(
    memory: CountingMemory, ml: CountingClient, user: str
) -> None:
    """An update naming its writer, through a wrapper that knows no version of the
    record: its decision and the read of the version are made at once (one round trip
    before Mem0's update, not two), then the Revise over what was read."""
    me = f"user:{user}"
    writer = GuardedMem0Memory(memory, ml, actor=me)
    (one,) = writer.add("I am vegetarian", user_id=user, infer=False)["results"]
    with Meeting(ml.target, timeout=10) as meeting:
        memory.taken()
        GuardedMem0Memory(memory, meeting, actor=me).update(one["id"], "I am vegan")
        assert not meeting.barrier.broken
        assert meeting.taken() == {"check:update": 1, "explain": 1, "revise": 1}
        assert memory.taken() == {"get": 1, "update": 1}
    stored = MemLineageClient.explain(ml, one["id"]).memory
    assert (stored.version, stored.creator.id) == (2, me)
    assert memory.memory.get(one["id"])["memory"] == "I am vegan"


def test_a_refused_mem0_update_leaves_mem0_uncalled_though_its_version_was_read(
    memory: CountingMemory, ml: CountingClient, user: str
) -> None:
    """The version read beside the decision is only a read: a denied update still
    leaves Mem0 uncalled and the record unchanged."""
    added = GuardedMem0Memory(memory, ml).add("I am vegetarian", user_id=user, infer=False)
    (one,) = added["results"]
    memory.taken(), ml.taken()
    tool = GuardedMem0Memory(memory, ml, actor="tool:scraper_y")
    with pytest.raises(PolicyDenied, match="only the user can change what the user stated"):
        tool.update(one["id"], "I eat everything")
    assert memory.taken() == {}
    assert ml.taken() == {"check:update": 1, "explain": 1}
    assert memory.memory.get(one["id"])["memory"] == "I am vegetarian"
    assert MemLineageClient.explain(ml, one["id"]).memory.version == 1


def test_a_stale_remembered_version_costs_a_mem0_update_no_attempt(
    memory: CountingMemory, ml: CountingClient, user: str
) -> None:
    """As for LangGraph: the Revise over a remembered version another writer moved is
    refused and costs none of the four reads; the record moves after three of them."""
    me = f"user:{user}"
    with MovedAfterRead(ml.target, timeout=10) as moved:
        guarded = GuardedMem0Memory(memory, moved, actor=me)
        (one,) = guarded.add("I am vegetarian", user_id=user, infer=False)["results"]
        MemLineageClient.revise(moved, one["id"], expected_version=1, creator=me)
        moved.taken()
        moved.moves = 3
        guarded.update(one["id"], "I am vegan")
        assert moved.taken() == {"check:update": 1, "explain": 4, "revise": 5}  # its own only
        assert MemLineageClient.explain(moved, one["id"]).memory.version == 6
    assert memory.memory.get(one["id"])["memory"] == "I am vegan"


def test_a_denied_provisional_write_leaves_mem0_uncalled(
    memory: CountingMemory, ml: CountingClient, user: str
) -> None:
    guarded = GuardedMem0Memory(memory, ml)
    meta = {LINEAGE_KEY: {"creator": "tool:scraper_y"}}
    with pytest.raises(PolicyDenied, match="the scraper may not write"):
        guarded.add("scraped text", user_id=user, metadata=meta, infer=False)
    assert memory.taken() == {}
    assert ml.taken() == {"check:write": 1}
    # with the precheck off, the Record is still the write decision: refused, rolled back
    unchecked = GuardedMem0Memory(memory, ml, precheck=False)
    with pytest.raises(PolicyDenied, match="the scraper may not write"):
        unchecked.add("scraped text", user_id=user, metadata=meta, infer=False)
    assert memory.taken() == {"add": 1, "delete": 1}
    assert ml.taken() == {"record": 1}
    assert memory.memory.get_all(filters={"user_id": user})["results"] == []


def test_mem0_reads_are_one_mem0_call_and_one_sidecar_call(
    memory: CountingMemory, ml: CountingClient, user: str
) -> None:
    guarded = GuardedMem0Memory(memory, ml)
    ids = {}
    for name, creator in (("user", f"user:{user}"), ("tool", "tool:some_tool")):
        meta = {LINEAGE_KEY: {"creator": creator}}
        text = f"hotel in Shanghai from {name}"
        (item,) = guarded.add(text, user_id=user, metadata=meta, infer=False)["results"]
        ids[name] = item["id"]
    memory.taken(), ml.taken()

    tool = guarded.get(ids["tool"])
    assert memory.taken() == {"get": 1} and ml.taken() == {"check:read": 1}
    assert tool is not None and tool[DECISION_KEY]["effect"] == "degrade"
    texts = {o["text"] for o in tool[DECISION_KEY]["obligations"]}
    assert UNTRUSTED in texts

    found = guarded.search("hotel in Shanghai", filters={"user_id": user}, top_k=5)["results"]
    assert memory.taken() == {"search": 1} and ml.taken() == {"filter_rank": 1}
    assert memory.kwargs["search"]["top_k"] == 5 * guarded.overfetch
    assert [r["id"] for r in found] == [ids["user"], ids["tool"]]
    assert DECISION_KEY in found[1] and DECISION_KEY not in found[0]
