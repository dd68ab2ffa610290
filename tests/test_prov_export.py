"""`memlineage explain --format prov` against a real sidecar: the W3C PROV-JSON it prints
is read back by the `prov` package (the reference implementation) and holds the
memories as entities with their attributes, the creators as agents, attribution,
derivation along the lineage edges, invalidation of a revoked memory, and the recent
decisions as activities that used the memories; memory versions (Explain's `versions`)
become `wasRevisionOf`."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import prov
import pytest
from memlineage import cli
from memlineage.client import MemLineageClient
from memlineage.prov_export import to_prov, to_prov_json
from memlineage.v1 import memlineage_pb2 as pb
from prov.model import (
    PROV_TYPE,
    ProvActivity,
    ProvAgent,
    ProvAttribution,
    ProvDerivation,
    ProvDocument,
    ProvEntity,
    ProvGeneration,
    ProvInvalidation,
    ProvUsage,
)
from support.sidecar import RunningSidecar

ML = "urn:memlineage:vocabulary#"


def explain_prov(address: str, memory_id: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["explain", memory_id, "--format", "prov", "--target", address])
    assert code == 0
    return out.getvalue()


def read(text: str) -> ProvDocument:
    doc = prov.read(io.StringIO(text), format="json")
    assert isinstance(doc, ProvDocument)
    return doc


def by_kind(doc: ProvDocument, kind: type) -> list[Any]:
    return [r for r in doc.get_records(kind)]


def attr(record: Any, name: str) -> Any:
    values = [v for k, v in record.attributes if k.uri == ML + name]
    return values[0] if len(values) == 1 else values


def ident(record: Any) -> str:
    return str(record.identifier.localpart)


@pytest.fixture(scope="module")
def lineage_prov() -> str:
    with RunningSidecar() as s, MemLineageClient(s.address) as c:
        c.record("price", creator="tool:flight_api", claim=("trip", "price", "420"))
        c.record("city", creator="user:alice", tags=["trip"], confidence=0.9)
        c.record("plan", creator="agent:planner", dependencies=["price", "city"])
        c.record("booking", creator="agent:booker", dependencies=["plan"])
        c.check("read", "plan")
        assert c.revoke("price", reason="fare changed", actor="tool:flight_api").applied
        return explain_prov(s.address, "plan")


def test_prov_json_reads_back_with_the_prov_package(lineage_prov: str) -> None:
    doc = read(lineage_prov)
    entities = {ident(e): e for e in by_kind(doc, ProvEntity)}
    assert set(entities) == {"price", "city", "plan", "booking"}
    plan = entities["plan"]
    assert str(next(iter(plan.get_attribute(PROV_TYPE)))) == "ml:Memory"
    assert attr(plan, "status") == "pending_verification"  # its dependency was revoked
    assert attr(plan, "version") >= 1
    assert attr(entities["city"], "tag") == "trip"
    assert attr(entities["city"], "confidence") == pytest.approx(0.9)
    assert attr(entities["price"], "claimValue") == "420"

    agents = {ident(a): a for a in by_kind(doc, ProvAgent)}
    assert set(agents) == {"user:alice", "tool:flight_api", "agent:planner", "agent:booker"}
    assert str(next(iter(agents["user:alice"].get_attribute(PROV_TYPE)))) == "prov:Person"
    assert str(next(iter(agents["tool:flight_api"].get_attribute(PROV_TYPE)))) == (
        "prov:SoftwareAgent"
    )
    assert 0 < attr(agents["user:alice"], "credibility") < 1

    attributed = {
        (str(r.args[0].localpart), str(r.args[1].localpart)) for r in by_kind(doc, ProvAttribution)
    }
    assert ("plan", "agent:planner") in attributed and ("city", "user:alice") in attributed
    derived = {
        (str(r.args[0].localpart), str(r.args[1].localpart)) for r in by_kind(doc, ProvDerivation)
    }
    assert derived == {("plan", "price"), ("plan", "city"), ("booking", "plan")}
    generated = {str(r.args[0].localpart) for r in by_kind(doc, ProvGeneration)}
    assert generated == {"price", "city", "plan", "booking"}
    (invalidated,) = by_kind(doc, ProvInvalidation)
    assert str(invalidated.args[0].localpart) == "price"
    assert attr(invalidated, "reason") == "fare changed"

    decisions = by_kind(doc, ProvActivity)
    assert decisions and all(
        str(next(iter(a.get_attribute(PROV_TYPE)))) == "ml:Decision" for a in decisions
    )
    used = {(str(r.args[0].localpart), str(r.args[1].localpart)) for r in by_kind(doc, ProvUsage)}
    assert any(entity == "plan" for _, entity in used)


def test_it_is_plain_json_with_the_prefixes_declared(lineage_prov: str) -> None:
    data = json.loads(lineage_prov)
    assert data["prefix"]["ml"] == ML
    assert data["prefix"]["mem"] == "urn:memlineage:memory:default/"
    assert set(data) <= {
        "prefix", "entity", "agent", "activity", "wasAttributedTo", "wasDerivedFrom",
        "wasGeneratedBy", "wasInvalidatedBy", "used",
    }  # fmt: skip


def test_versions_become_a_revision_chain() -> None:
    """Explain's `versions` (newest first): the memory is a revision of versions[0],
    which is one of versions[1]."""

    def version(n: int, creator: str) -> pb.Memory:
        return pb.Memory(
            id="city", namespace="default", version=n, status=pb.STATUS_ACTIVE,
            creator=pb.Creator(kind=pb.CREATOR_KIND_USER, id=creator), type="fact",
        )  # fmt: skip

    resp = pb.ExplainResponse(
        memory=version(3, "user:alice"), versions=[version(2, "user:bob"), version(1, "user:alice")]
    )
    doc = read(to_prov_json(resp))
    entities = {ident(e) for e in by_kind(doc, ProvEntity)}
    assert entities == {"city", "city@v2", "city@v1"}
    revisions = [
        (str(r.args[0].localpart), str(r.args[1].localpart))
        for r in by_kind(doc, ProvDerivation)
        if str(next(iter(r.get_attribute(PROV_TYPE)))) == "prov:Revision"
    ]
    assert revisions == [("city", "city@v2"), ("city@v2", "city@v1")]
    attributed = {
        (str(r.args[0].localpart), str(r.args[1].localpart)) for r in by_kind(doc, ProvAttribution)
    }
    assert ("city@v2", "user:bob") in attributed
    # An answer without versions has no revision.
    assert "wasDerivedFrom" not in to_prov(pb.ExplainResponse(memory=version(1, "user:alice")))


def test_creators_sharing_an_id_of_two_kinds_stay_two_agents() -> None:
    """An id may name no kind (`(user, "alice")`, `(tool, "alice")`): keyed by the id
    alone they were one agent, the user's memory attributed to a tool (an outside
    audit). An id that names its kind keeps its plain agent id."""

    def memory(mid: str, kind: int, creator: str) -> pb.Memory:
        return pb.Memory(
            id=mid, namespace="default", version=1, status=pb.STATUS_ACTIVE,
            creator=pb.Creator(kind=kind, id=creator), type="fact",
        )  # fmt: skip

    resp = pb.ExplainResponse(
        memory=memory("said", pb.CREATOR_KIND_USER, "alice"),
        ancestors=[
            memory("scraped", pb.CREATOR_KIND_TOOL, "alice"),
            memory("typed", pb.CREATOR_KIND_USER, "user:alice"),
        ],
    )
    agents = to_prov(resp)["agent"]
    assert {k: v["ml:kind"] for k, v in agents.items()} == {
        "creator:user/alice": "user",
        "creator:tool/alice": "tool",
        "creator:user:alice": "user",
    }
    doc = read(to_prov_json(resp))
    attributed = {
        (str(r.args[0].localpart), str(r.args[1].localpart)) for r in by_kind(doc, ProvAttribution)
    }
    assert attributed == {
        ("said", "user/alice"),
        ("scraped", "tool/alice"),
        ("typed", "user:alice"),
    }


def test_a_decision_used_the_version_it_met() -> None:
    """Each decision `used` the version of the memory current at its time (before:
    every decision, the first write's too, used the newest version; an outside
    audit)."""
    from google.protobuf.timestamp_pb2 import Timestamp

    def version(n: int, at: int) -> pb.Memory:
        return pb.Memory(
            id="note", namespace="default", version=n, status=pb.STATUS_ACTIVE,
            creator=pb.Creator(kind=pb.CREATOR_KIND_USER, id="user:alice"), type="fact",
            created_at=Timestamp(seconds=at),
        )  # fmt: skip

    def decision(did: str, at: int) -> pb.Decision:
        return pb.Decision(
            decision_id=did, operation=pb.OPERATION_UPDATE, effect=pb.EFFECT_ALLOW,
            memory_ids=["note"], decided_at=Timestamp(seconds=at),
        )  # fmt: skip

    resp = pb.ExplainResponse(
        memory=version(3, 300),
        versions=[version(2, 200), version(1, 100)],
        decisions=[decision("d-write", 100), decision("d-v2", 200), decision("d-late", 250)],
    )
    used = {r["prov:activity"]: r["prov:entity"] for r in to_prov(resp)["used"].values()}
    assert used == {
        "decision:d-write": "mem:note@v1",
        "decision:d-v2": "mem:note@v2",
        "decision:d-late": "mem:note@v2",
    }
