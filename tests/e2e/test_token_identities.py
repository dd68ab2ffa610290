"""A token's `speaks_as`: the identities its caller may state as a creator or an
actor. The agent runtime's token that may speak only as `agent:*` and `tool:*`
cannot record the user's words, revise a memory into the user's, or grant and
object as the user (an outside audit: with one token for everything, an agent
process recorded an injected value as `user:alice` and the act gate ALLOWed it)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from memlineage.client import MemLineageClient
from memlineage.client.errors import NotFound, PermissionDenied
from memlineage.config import Config, TokenGrant
from memlineage.v1 import memlineage_pb2 as pb
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

USER_TOKEN = TokenGrant("user-tok", ("default",), name="frontend")
AGENT_TOKEN = TokenGrant("agent-tok", ("default",), name="runtime", speaks_as=("agent:*", "tool:*"))


@pytest.fixture(scope="module")
def sidecar() -> Iterator[RunningSidecar]:
    config = replace(Config(policy_dir=BUNDLED_POLICIES), tokens=(USER_TOKEN, AGENT_TOKEN))
    with RunningSidecar(config) as s:
        yield s


def _refused(err: PermissionDenied, field: str) -> str:
    assert err.field == field, (err.field, err.details)
    return err.details


def test_the_runtimes_token_cannot_speak_as_the_user(sidecar: RunningSidecar) -> None:
    with (
        MemLineageClient(sidecar.address, token="user-tok") as user,
        MemLineageClient(sidecar.address, token="agent-tok") as agent,
    ):
        user.record("prompt", creator="user:alice")
        agent.record("inbox", creator="tool:read_inbox")
        # the injected recipient recorded as the user's words: refused, nothing written
        with pytest.raises(PermissionDenied) as err:
            agent.record("forged", creator="user:alice")
        details = _refused(err.value, "memory.creator.id")
        assert "may not speak as 'user:alice'" in details and "agent:*, tool:*" in details
        with pytest.raises(NotFound):
            user.explain("forged")
        # nor as a tool it states but with the user as the one asking
        with pytest.raises(PermissionDenied) as err:
            agent.record("x", creator="tool:read_inbox", actor="user:alice")
        _refused(err.value, "actor")
        # an agent note of the inbox revised into the user's: refused, version unchanged
        agent.record("note", creator="agent:assistant", dependencies=["inbox"])
        with pytest.raises(PermissionDenied) as err:
            agent.revise("note", expected_version=1, creator="user:alice")
        _refused(err.value, "memory.creator.id")
        assert user.explain("note").memory.version == 1
        # a grant as the user (unset actor: the namespace's user) or named: refused
        with pytest.raises(PermissionDenied) as err:
            agent.grant(["send_*"], source="tool:*")
        _refused(err.value, "actor")
        with pytest.raises(PermissionDenied) as err:
            agent.grant(["send_*"], source="tool:*", actor="user:alice")
        _refused(err.value, "actor")
        # acting as the agent is what it is for; the injected recipient stays denied
        d = agent.act(
            "send_money",
            {"recipient": ["inbox"], "amount": ["prompt"]},
            actor="agent:assistant",
        )
        assert d.effect == pb.EFFECT_DENY
        # a Check with no actor asks as the namespace's user: it must state its own
        with pytest.raises(PermissionDenied) as err:
            agent.check("read", "prompt")
        assert _refused(err.value, "actor") == (
            "actor: the request states no actor, so it asks as the namespace's user "
            "'user:default'; this caller's token speaks as agent:*, tool:*: state an actor "
            "it may be (the client's and the adapters' `actor=`)"
        )
        assert agent.check("read", "prompt", actor="agent:assistant").effect == pb.EFFECT_ALLOW
        # the frontend's token (no speaks_as) speaks as anyone, as before
        assert user.grant(["send_*"], source="tool:read_inbox").id


def test_a_remembered_check_is_not_answered_to_a_token_that_may_not_ask_it(
    sidecar: RunningSidecar,
) -> None:
    """Check answers are remembered per caller scope: the same request bytes from a
    token that may not speak as the request's actor are refused, not answered."""
    with (
        MemLineageClient(sidecar.address, token="user-tok") as user,
        MemLineageClient(sidecar.address, token="agent-tok") as agent,
    ):
        user.record("fact", creator="user:bob")
        for _ in range(3):
            assert user.check("read", "fact", actor="user:bob").effect == pb.EFFECT_ALLOW
        with pytest.raises(PermissionDenied) as err:
            agent.check("read", "fact", actor="user:bob")
        _refused(err.value, "actor")
