"""Revise through a real sidecar, on the embedded store (with a data directory), a real
redis-server and a real Redis Cluster, with the bundled policies: the version chain in
Explain, the compare-and-set, a cycle refused with the cycle named, an update the
write-protection policy denies, descendants pending with their Watch events; every
refusal leaves the store as it was (read from the store itself)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from memlineage.client import (
    AsyncMemLineageClient,
    FailedPrecondition,
    InvalidArgument,
    MemLineageClient,
    MemLineageError,
)
from memlineage.config import Config
from memlineage.grpc_api.auth import TokenGrant
from memlineage.lineage.clock import ManualClock
from memlineage.prov_export import to_prov
from memlineage.v1 import memlineage_pb2 as pb
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES, STORES, RunningSidecar, store_of, store_url

NS = "rev"
TOKENS = (TokenGrant("tok", (NS,), name="t"),)


@pytest.fixture(params=STORES)
def sidecar(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunningSidecar]:
    store = store_url(request.param, request, tmp_path)
    config = Config(policy_dir=BUNDLED_POLICIES, store=store, tokens=TOKENS, decision_log="off")
    with RunningSidecar(config, ManualClock(T0)) as s:
        yield s


def held(s: RunningSidecar, ids: list[str]) -> dict[str, Any]:
    """What the store holds of `ids`: records (with history), versions, events."""
    store = store_of(s)
    return {
        "records": store.get_many(NS, ids, with_history=True),
        "versions": {i: store.versions(NS, i) for i in ids},
        "events": store.events(NS)[0],
    }


def lineage(c: MemLineageClient) -> None:
    """city (the user's) <- hotel <- plan; quote (a tool's); note (the agent's)."""
    assert c.record("city", creator="user:alice", claim=("user:alice", "city", "Paris")).recorded
    assert c.record("hotel", creator="agent:planner", dependencies=["city"]).recorded
    assert c.record("plan", creator="agent:planner", dependencies=["hotel"]).recorded
    assert c.record("quote", creator="tool:hotel_api", type="tool_result").recorded
    assert c.record("note", creator="agent:planner").recorded


IDS = ["city", "hotel", "plan", "quote", "note"]


def test_revisions_chain_cascade_and_watch(sidecar: RunningSidecar) -> None:
    with MemLineageClient(sidecar.address, token="tok", namespace=NS) as c:
        lineage(c)
        watch = c.watch(store_of(sidecar).latest_cursor(NS))  # after what is there
        out = c.revise(
            "hotel",
            expected_version=1,
            creator="agent:planner",
            confidence=0.7,
            tags=["booked"],
            dependencies=["city", "quote"],
        )
        assert out.applied and out.decision.effect == pb.EFFECT_ALLOW
        assert out.decision.operation == pb.OPERATION_UPDATE
        assert (out.memory.version, list(out.memory.dependencies)) == (2, ["city", "quote"])
        assert out.previous_version == 1 and list(out.affected_ids) == ["plan"]
        events = [next(watch), next(watch)]
        watch.cancel()
        assert [(e.type, e.memory_id, e.version) for e in events] == [
            ("updated", "hotel", 2),
            ("cascaded", "hotel", 0),
        ]
        assert list(events[0].affected_ids) == ["city", "quote"]
        assert (events[1].root_id, list(events[1].affected_ids)) == ("hotel", ["plan"])
        assert c.explain("plan").memory.status == pb.STATUS_PENDING_VERIFICATION
        again = c.revise(
            "hotel", expected_version=2, creator="agent:planner", dependencies=["quote"]
        )
        assert again.applied and again.memory.version == 3
        ex = c.explain("hotel")
        assert [(v.version, list(v.dependencies)) for v in ex.versions] == [
            (2, ["city", "quote"]),
            (1, ["city"]),
        ]
        assert list(ex.versions[0].tags) == ["booked"]
        # the W3C PROV export chains them: hotel wasRevisionOf hotel@v2 wasRevisionOf hotel@v1
        revisions = [
            (r["prov:generatedEntity"], r["prov:usedEntity"])
            for r in to_prov(ex).get("wasDerivedFrom", {}).values()
            if r.get("prov:type", {}).get("$") == "prov:Revision"
        ]
        assert revisions == [("mem:hotel", "mem:hotel@v2"), ("mem:hotel@v2", "mem:hotel@v1")]
        assert list(c.explain("city").memory.derivations) == []
        assert list(c.explain("quote").memory.derivations) == ["hotel"]


def test_stale_version_and_cycle_are_refused_and_nothing_is_written(
    sidecar: RunningSidecar,
) -> None:
    with MemLineageClient(sidecar.address, token="tok", namespace=NS) as c:
        lineage(c)
        before = held(sidecar, IDS)
        with pytest.raises(FailedPrecondition) as stale:
            c.revise("hotel", expected_version=7, creator="agent:planner")
        assert stale.value.details == "expected_version: memory 'hotel' is at version 1, not 7"
        with pytest.raises(InvalidArgument) as cycle:
            c.revise(
                "city",
                expected_version=1,
                creator="user:alice",
                claim=("user:alice", "city", "Paris"),
                dependencies=["note", "plan"],
            )
        assert cycle.value.details == (
            "memory.dependencies[1]: would make a cycle city -> plan -> hotel -> city"
        )
        with pytest.raises(InvalidArgument, match=r"memory\.dependencies\[0\]: no memory"):
            c.revise("hotel", expected_version=1, creator="agent:planner", dependencies=["x"])
        with pytest.raises(InvalidArgument, match=r"memory\.claim\.subject"):
            c.revise("city", expected_version=1, creator="user:alice")
        with pytest.raises(MemLineageError) as missing:
            c.revise("nope", expected_version=1, creator="user:alice")
        assert missing.value.code == grpc.StatusCode.NOT_FOUND
        with pytest.raises(InvalidArgument, match="expected_version: is required"):
            c.revise("hotel", expected_version=0, creator="agent:planner")
        assert held(sidecar, IDS) == before


def test_write_protection_denies_a_tool_revising_the_users_memory(
    sidecar: RunningSidecar,
) -> None:
    with MemLineageClient(sidecar.address, token="tok", namespace=NS) as c:
        lineage(c)
        before = held(sidecar, IDS)
        denied = c.revise(
            "city",
            expected_version=1,
            creator="tool:flight_api",
            claim=("user:alice", "city", "Rome"),
        )
        assert not denied.applied and denied.decision.effect == pb.EFFECT_DENY
        assert [r.policy for r in denied.decision.reasons if r.status == "fired"] == [
            "user_statements_protected"
        ]
        assert not denied.HasField("memory") and not denied.affected_ids
        other_tool = c.revise(
            "quote", expected_version=1, creator="tool:web_search", type="tool_result"
        )
        assert not other_tool.applied
        assert held(sidecar, IDS) == before
        # the user may; the tool its own result
        ok = c.revise(
            "city", expected_version=1, creator="user:alice", claim=("user:alice", "city", "Rome")
        )
        assert ok.applied and ok.memory.claim.value == "Rome"
        assert list(ok.affected_ids) == ["hotel", "plan"]
        assert c.revise(
            "quote", expected_version=1, creator="tool:hotel_api", type="tool_result"
        ).applied
        assert c.explain("city").versions[0].claim.value == "Paris"


def fired(d: pb.Decision) -> set[str]:
    return {r.policy for r in d.reasons if r.status == "fired"}


def test_no_one_but_the_user_makes_a_memory_the_users(sidecar: RunningSidecar) -> None:
    """A tool revising its own output into a "user:" memory, an agent relabelling its
    note as the user's, a tool recording the user's words: each denied, nothing
    written, and the tool's output still cannot drive a payment (before: each was
    applied, and the relabelled output then paid as the user's words; an outside
    audit)."""
    with MemLineageClient(sidecar.address, token="tok", namespace=NS) as c:
        lineage(c)
        assert c.record("ask", creator="user:alice").recorded
        before = held(sidecar, IDS)
        relabel = c.revise(
            "quote", expected_version=1, creator="user:alice", actor="tool:hotel_api"
        )
        assert not relabel.applied
        assert fired(relabel.decision) == {
            "tool_records_as_itself",
            "only_the_user_makes_it_the_users",
        }
        laundered = c.revise(
            "note", expected_version=1, creator="user:alice", actor="agent:planner"
        )
        assert not laundered.applied
        assert fired(laundered.decision) == {"only_the_user_makes_it_the_users"}
        forged = c.record("said", creator="user:alice", actor="tool:read_inbox")
        assert not forged.recorded and fired(forged.decision) == {"tool_records_as_itself"}
        assert held(sidecar, IDS) == before
        with pytest.raises(MemLineageError):
            c.explain("said")
        pay = c.act("send_money", {"recipient": ["quote"], "amount": ["ask"]})
        assert pay.effect == pb.EFFECT_DENY
        # the user may make the agent's note theirs; an agent records what the user said
        assert c.revise(
            "note", expected_version=1, creator="user:alice", actor="user:alice"
        ).applied
        assert c.record("heard", creator="user:alice", actor="agent:planner").recorded


def test_the_async_client_revises_too(sidecar: RunningSidecar) -> None:
    with MemLineageClient(sidecar.address, token="tok", namespace=NS) as c:
        lineage(c)

    async def go() -> pb.ReviseResponse:
        async with AsyncMemLineageClient(sidecar.address, token="tok", namespace=NS) as ac:
            with pytest.raises(FailedPrecondition):
                await ac.revise("note", expected_version=3, creator="agent:planner")
            return await ac.revise(
                "note", expected_version=1, creator="agent:planner", dependencies=["quote"]
            )

    out = asyncio.run(go())
    assert out.applied and out.memory.version == 2 and out.previous_version == 1
