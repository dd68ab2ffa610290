"""A grant pinned to one content covers that content however the runtime sends it: as
text (`value`) or as its `sha256:` digest, on either side (before, a grant pinned by
digest covered only an act sending that digest, and the LangChain handler sends text as
a value: the user's pin never matched and the act was denied)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from memlineage.engine.acts import ActArgument
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.errors import ValidationError
from memlineage.lineage.grants import GrantRecord
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator, sha256_of

POLICIES = Path(__file__).resolve().parents[2] / "policies"
IBAN = "DE89370400440532013000"
AGENT = Creator.parse("agent:assistant")
ALICE = Creator.parse("user:alice")


def _engine() -> Engine:
    """The bundled policies over a user's prompt and a bill an email tool read."""
    engine = Engine(EmbeddedStore(), PolicyHolder(str(POLICIES)))
    for mid, creator in (("prompt", "user:alice"), ("bill", "tool:read_inbox")):
        rec = MemoryRecord(
            id=mid, namespace="ns", creator_kind=creator.split(":")[0], creator_id=creator
        )
        engine.record(rec, Creator.parse(creator))
    return engine


def _grant(engine: Engine, *, value: str = "", digest: str = "") -> str:
    g = GrantRecord(
        id="",
        namespace="ns",
        issuer="",
        actions=("send_money",),
        arguments=("recipient",),
        memory_id="bill",
        uses=10,
        expires_at=math.inf,
        value=value,
        digest=digest,
    )
    return engine.record_grant(g, ALICE).id


def _pay(engine: Engine, *, value: str = "", digest: str = "") -> tuple[str, tuple[str, ...]]:
    rec = engine.act(
        "ns",
        "send_money",
        (),
        [
            ActArgument("recipient", ("bill",), value, digest),
            ActArgument("amount", ("prompt",)),
        ],
        AGENT,
    )
    return rec.decision.effect, rec.grants_used


@pytest.mark.parametrize(
    ("pin", "sent"),
    [
        ({"digest": sha256_of(IBAN)}, {"value": IBAN}),  # the handler's case
        ({"digest": sha256_of(IBAN).upper()}, {"value": IBAN}),
        ({"value": IBAN}, {"digest": sha256_of(IBAN)}),
        ({"value": IBAN}, {"value": IBAN}),
        ({"digest": sha256_of(IBAN)}, {"digest": sha256_of(IBAN)}),
        ({"value": IBAN, "digest": sha256_of(IBAN)}, {"value": IBAN}),
    ],
)
def test_the_pinned_content_is_covered_as_text_or_digest(pin: dict, sent: dict) -> None:
    engine = _engine()
    gid = _grant(engine, **pin)
    effect, used = _pay(engine, **sent)
    assert (effect, used) == ("allow", (gid,))


@pytest.mark.parametrize(
    ("pin", "sent"),
    [
        ({"digest": sha256_of(IBAN)}, {"value": "GB00EVIL"}),
        ({"value": IBAN}, {"digest": sha256_of("GB00EVIL")}),
        ({"value": IBAN}, {"value": "GB00EVIL"}),
        ({"digest": sha256_of(IBAN)}, {}),  # nothing sent to compare: not covered
    ],
)
def test_other_content_is_not_covered(pin: dict, sent: dict) -> None:
    engine = _engine()
    _grant(engine, **pin)
    effect, used = _pay(engine, **sent)
    assert effect == "deny" and used == ()


def test_a_grant_pinning_two_contents_is_refused() -> None:
    """A value with another value's digest would cover an act by either one."""
    engine = _engine()
    with pytest.raises(ValidationError) as err:
        _grant(engine, value=IBAN, digest=sha256_of("GB00EVIL"))
    assert err.value.field == "grant.digest"
    assert "is not the sha256 of the grant's value" in str(err.value)
    assert engine.store.grants("ns") == []  # nothing written
