"""GuardedStore against a real in-test gRPC server with fixed rules.

Rules: writes of ``blocked*`` are denied; reads of ``secret*`` denied and of
``old*`` degraded; updates of ``locked*`` and deletes of ``keep*`` denied.
FilterRank drops ``secret*`` and scores ``old*`` at similarity x 0.5.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from memlineage.client import DictMemoryStore, GuardedStore, MemLineageClient, PolicyDenied
from memlineage.v1 import memlineage_pb2 as pb
from memlineage.v1 import memlineage_pb2_grpc as pb_grpc

DENY_PREFIX = {
    pb.OPERATION_READ: "secret",
    pb.OPERATION_UPDATE: "locked",
    pb.OPERATION_DELETE: "keep",
    pb.OPERATION_WRITE: "blocked",
}


def decide(op: int, memory_id: str) -> pb.Decision:
    effect, score, reasons = pb.EFFECT_ALLOW, 1.0, []
    if memory_id.startswith(DENY_PREFIX.get(op, "\0")):
        effect, score = pb.EFFECT_DENY, 0.0
        reasons = [pb.Reason(policy="fixed_rule", effect=pb.EFFECT_DENY, message="no")]
    elif op == pb.OPERATION_READ and memory_id.startswith("old"):
        effect, score = pb.EFFECT_DEGRADE, 0.5
    return pb.Decision(
        decision_id=f"d-{memory_id}",
        effect=effect,
        compliance_score=score,
        operation=op,
        memory_ids=[memory_id],
        reasons=reasons,
    )


class FixedRules(pb_grpc.MemLineageServicer):
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.versions: dict[str, int] = {}  # what it recorded, at which version

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def Record(self, request, context):
        self.calls.append(("Record", request))
        d = decide(pb.OPERATION_WRITE, request.memory.id)
        recorded = d.effect != pb.EFFECT_DENY
        if recorded:
            self.versions[request.memory.id] = 1
        return pb.RecordResponse(
            recorded=recorded, decision=d, memory=request.memory if recorded else None
        )

    def Explain(self, request, context):
        self.calls.append(("Explain", request))
        if request.memory_id not in self.versions:
            context.abort(grpc.StatusCode.NOT_FOUND, f"memory_id: no memory {request.memory_id!r}")
        memory = pb.Memory(id=request.memory_id, version=self.versions[request.memory_id])
        return pb.ExplainResponse(memory=memory)

    def Revise(self, request, context):
        self.calls.append(("Revise", request))
        d = decide(pb.OPERATION_UPDATE, request.memory.id)
        applied = d.effect != pb.EFFECT_DENY
        if applied:
            self.versions[request.memory.id] += 1
        return pb.ReviseResponse(applied=applied, decision=d)

    def Check(self, request, context):
        self.calls.append(("Check", request))
        return pb.CheckResponse(decision=decide(request.operation, request.memory_id))

    def FilterRank(self, request, context):
        self.calls.append(("FilterRank", request))
        out = []
        for c in request.candidates:
            d = decide(pb.OPERATION_READ, c.memory_id)
            kept = d.effect != pb.EFFECT_DENY
            out.append(
                pb.RankedCandidate(
                    memory_id=c.memory_id,
                    similarity=c.similarity,
                    rank_score=c.similarity * d.compliance_score,
                    kept=kept,
                    decision=d,
                )
            )
        ranked = sorted((c for c in out if c.kept), key=lambda c: -c.rank_score)
        if request.limit:
            for c in ranked[request.limit :]:
                c.kept = False
            ranked = ranked[: request.limit]
        return pb.FilterRankResponse(candidates=out, ranked_ids=[c.memory_id for c in ranked])


@pytest.fixture
def rules() -> Iterator[tuple[FixedRules, str]]:
    svc = FixedRules()
    srv = grpc.server(ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_MemLineageServicer_to_server(svc, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    yield svc, f"127.0.0.1:{port}"
    srv.stop(0)


@pytest.fixture
def inner() -> DictMemoryStore:
    return DictMemoryStore()


@pytest.fixture
def guarded(rules: tuple[FixedRules, str], inner: DictMemoryStore) -> Iterator[GuardedStore]:
    with MemLineageClient(rules[1], timeout=2.0) as client:
        yield GuardedStore(inner, client, creator="agent:assistant")


def test_put_records_lineage_then_writes(
    rules: tuple[FixedRules, str], inner: DictMemoryStore, guarded: GuardedStore
) -> None:
    guarded.put(
        "city",
        "user 42 flies to Shanghai",
        creator="user:u42",
        tags=["trip"],
        claim=["user:42", "destination_city", "Shanghai"],
        confidence=0.9,
        dependencies=("chat-1",),
        source_row=7,
    )
    assert inner.items["city"] == (
        "user 42 flies to Shanghai",
        {
            "creator": "user:u42",
            "tags": ["trip"],
            "claim": ["user:42", "destination_city", "Shanghai"],
            "confidence": 0.9,
            "dependencies": ("chat-1",),
            "source_row": 7,
        },
    )
    [(name, request)] = rules[0].calls
    assert name == "Record"
    m = request.memory
    assert (m.id, m.creator.id, list(m.tags), m.creator_confidence) == (
        "city",
        "user:u42",
        ["trip"],
        0.9,
    )
    assert m.claim.value == "Shanghai" and list(m.dependencies) == ["chat-1"]
    assert guarded.last_decision is not None and guarded.last_decision.effect == pb.EFFECT_ALLOW


def test_put_uses_the_default_creator(rules: tuple[FixedRules, str], guarded: GuardedStore) -> None:
    guarded.put("note", "x")
    assert rules[0].calls[0][1].memory.creator.id == "agent:assistant"


def test_put_without_any_creator_is_refused_before_calling(
    rules: tuple[FixedRules, str], inner: DictMemoryStore
) -> None:
    with MemLineageClient(rules[1]) as client, pytest.raises(ValueError, match="creator"):
        GuardedStore(inner, client).put("k", "v")
    assert rules[0].calls == [] and len(inner) == 0


def test_denied_put_leaves_the_store_untouched(
    inner: DictMemoryStore, guarded: GuardedStore
) -> None:
    with pytest.raises(PolicyDenied, match="fixed_rule: no") as caught:
        guarded.put("blocked-1", "v")
    assert caught.value.decision.effect == pb.EFFECT_DENY
    assert "blocked-1" not in inner


def test_put_on_an_existing_key_is_a_new_version_decided_as_an_update(
    rules: tuple[FixedRules, str], inner: DictMemoryStore, guarded: GuardedStore
) -> None:
    """Its version read, then Revise with this put's lineage (before: an update check,
    the record keeping its first creator whoever wrote over it)."""
    guarded.put("pref", "aisle seat")
    guarded.put("locked-pref", "window seat")
    guarded.put("pref", "window seat", creator="tool:seat_map")
    assert inner.get("pref") == "window seat"
    with pytest.raises(PolicyDenied):
        guarded.put("locked-pref", "middle seat")
    assert inner.get("locked-pref") == "window seat"
    assert rules[0].names() == ["Record", "Record", "Explain", "Revise", "Explain", "Revise"]
    # the version read asks for the least Explain walks: the lineage graph is not used
    explained = [r for name, r in rules[0].calls if name == "Explain"]
    assert {(r.ancestor_depth, r.descendant_depth, r.decisions) for r in explained} == {  # type: ignore[attr-defined]
        (1, 1, 1)
    }
    revised = [r for name, r in rules[0].calls if name == "Revise"]
    assert [(r.memory.creator.id, r.expected_version) for r in revised] == [  # type: ignore[attr-defined]
        ("tool:seat_map", 1),
        ("agent:assistant", 1),
    ]


def test_a_key_written_around_the_guard_is_recorded_by_a_put(
    rules: tuple[FixedRules, str], inner: DictMemoryStore, guarded: GuardedStore
) -> None:
    inner.put("legacy", "old")
    guarded.put("legacy", "new")
    assert rules[0].names() == ["Explain", "Record"]
    assert rules[0].versions["legacy"] == 1


class NoContains:
    """A store without ``__contains__``: GuardedStore learns existence from get()."""

    def __init__(self) -> None:
        self.inner = DictMemoryStore()

    def put(self, key: str, value: object, **meta: object) -> None:
        self.inner.put(key, value, **meta)

    def get(self, key: str) -> object:
        return self.inner.get(key)  # KeyError (a LookupError) when absent

    def search(self, query: str, k: int) -> list[tuple[str, object, float]]:
        return self.inner.search(query, k)

    def delete(self, key: str) -> None:
        self.inner.delete(key)


def test_existence_without_contains_comes_from_get(rules: tuple[FixedRules, str]) -> None:
    store = NoContains()
    with MemLineageClient(rules[1], timeout=2.0) as client:
        guarded = GuardedStore(store, client, creator="agent:assistant")
        guarded.put("pref", "aisle seat")  # get() raises KeyError: new, so recorded
        guarded.put("pref", "window seat")  # get() answers: existing, so an update
    assert rules[0].names() == ["Record", "Explain", "Revise"]
    assert store.get("pref") == "window seat"


def test_get_allows_degrades_and_denies(inner: DictMemoryStore, guarded: GuardedStore) -> None:
    for key in ("fresh", "old-price", "secret-key"):
        inner.put(key, f"value of {key}")
    assert guarded.get("fresh") == "value of fresh"
    assert guarded.get("old-price") == "value of old-price"
    assert guarded.last_decision is not None
    assert guarded.last_decision.effect == pb.EFFECT_DEGRADE
    with pytest.raises(PolicyDenied):
        guarded.get("secret-key")
    assert guarded.last_decision.effect == pb.EFFECT_DENY


def test_search_filters_reranks_and_returns_at_most_k(
    rules: tuple[FixedRules, str], inner: DictMemoryStore, guarded: GuardedStore
) -> None:
    inner.put("secret-plan", "flight price to shanghai")  # best match, denied
    inner.put("old-price", "flight price to shanghai today")  # second, halved
    inner.put("price", "flight price")  # 0.5, beats the halved 0.8
    inner.put("hotel", "hotel in shanghai")
    inner.put("weather", "weather tomorrow")  # no overlap
    got = guarded.search("flight price to shanghai", 2)
    assert [key for key, *_ in got] == ["price", "old-price"]
    _, value, score, decision = got[1]
    assert value == "flight price to shanghai today"
    assert score == pytest.approx(0.8 * 0.5)
    assert decision.effect == pb.EFFECT_DEGRADE
    [(_, request)] = [c for c in rules[0].calls if c[0] == "FilterRank"]
    assert request.limit == 2 and len(request.candidates) == 4  # asked for up to 3k
    assert request.candidates[0].memory_id == "secret-plan"


def test_search_with_no_candidates_does_not_call(
    rules: tuple[FixedRules, str], guarded: GuardedStore
) -> None:
    assert guarded.search("anything", 3) == []
    assert guarded.search("anything", 0) == []
    assert rules[0].calls == []


def test_delete_checks_first(inner: DictMemoryStore, guarded: GuardedStore) -> None:
    inner.put("keep-me", "a")
    inner.put("drop-me", "b")
    with pytest.raises(PolicyDenied):
        guarded.delete("keep-me")
    guarded.delete("drop-me")
    assert "keep-me" in inner and "drop-me" not in inner


def test_other_attributes_pass_through(inner: DictMemoryStore, guarded: GuardedStore) -> None:
    assert guarded.items is inner.items


def test_dict_store_search_orders_by_overlap() -> None:
    store = DictMemoryStore()
    store.put("a", "red apple pie")
    store.put("b", "red car")
    store.put("c", "blue sky")
    assert [k for k, _, _ in store.search("red apple", 5)] == ["a", "b"]
    assert store.search("red apple", 1)[0][2] == pytest.approx(2 / 3)
    with pytest.raises(KeyError):
        store.get("missing")
