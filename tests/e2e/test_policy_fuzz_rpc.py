"""LintPolicy and ReloadPolicies on hostile policy texts, through a real sidecar.

Each used to come back UNKNOWN (a RecursionError, an OverflowError) or, worse,
to load: then every Check where it fired and every ListPolicies failed with
"Value out of range". Now each is answered with positioned diagnostics, a
rejected reload leaves the old set serving, and a clean extreme set serves.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from memlineage.client import MemLineageClient
from memlineage.config import Config
from memlineage.grpc_api.auth import TokenGrant
from memlineage.v1 import memlineage_pb2 as pb
from memlineage_dsl.limits import MAX_DEPTH
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

TOKENS = (
    TokenGrant("token-admin", (), admin=True, name="ops"),
    TokenGrant("token-alice", ("user-a",), name="alice"),
)
TERM = 'memory.id == "b"'


def _policy(when: str, head: str = "") -> str:
    return f'policy p{head} {{\n  on read\n  when {when}\n  deny "x"\n}}\n'


BROKEN = {
    "priority-int32": (_policy(TERM, " priority 2147483648"), "E203", (1, 19)),
    "priority-inf": (_policy(TERM, " priority 1e309"), "E203", (1, 19)),
    "const-priority": ("const P = 2147483648\n" + _policy(TERM, " priority P"), "E203", (2, 19)),
    "weight-inf": (_policy(TERM, " weight 1e309"), "E203", (1, 17)),
    "any-600": (
        _policy("any(a in ancestors(memory) : " * 600 + "true" + ")" * 600),
        "E007",
        (3, 8 + 29 * (MAX_DEPTH - 2) + len("any(a in ancestors(")),
    ),
    "not-600": (_policy("not " * 600 + "true"), "E007", (3, 8 + 4 * MAX_DEPTH)),
    "minus-600": (_policy("memory.confidence < 1" + " - 1" * 600), "E007", None),
    "consts": (
        "\n".join(["const C0 = 1"] + [f"const C{i} = C{i - 1} + 1" for i in range(1, 600)])
        + "\n"
        + _policy("memory.confidence < C599"),
        "E007",
        None,
    ),
    "unclosed-deep": (_policy("(" * 5000 + "true"), "E001", None),
}
CLEAN = {
    "and-5000": _policy(" and ".join([TERM] * 5000)),
    "or-600": _policy(" or ".join([TERM] * 600)),
    "plus-600": _policy("memory.confidence < " + " + ".join(["1"] * 600)),
    "extreme-numbers": _policy(TERM, " priority 2147483647 weight 1000000")
    + _policy(TERM, " priority -2147483648").replace("policy p", "policy q"),
}


@pytest.fixture(scope="module")
def clients() -> Iterator[tuple[MemLineageClient, MemLineageClient]]:
    config = Config(policy_dir=BUNDLED_POLICIES, tokens=TOKENS, decision_log="off")
    with RunningSidecar(config) as sidecar:
        admin = MemLineageClient(sidecar.address, token="token-admin", timeout=60)
        alice = MemLineageClient(
            sidecar.address, token="token-alice", namespace="user-a", timeout=30
        )
        try:
            alice.record("b", creator="user:alice")
            yield admin, alice
        finally:
            admin.close()
            alice.close()


@pytest.mark.parametrize("name", BROKEN)
def test_a_hostile_text_is_answered_with_diagnostics(clients, name: str) -> None:
    admin, alice = clients
    text, code, where = BROKEN[name]
    before = admin.list_policies().version
    files = {"policies/new.mlp": text}

    lint = admin.lint_policy(files)
    assert not lint.ok
    assert [d.code for d in lint.diagnostics if d.severity == "error"][:1] == [code]
    first = next(d for d in lint.diagnostics if d.severity == "error")
    assert first.file == "policies/new.mlp" and first.line >= 1 and first.column >= 1
    assert first.rendered.startswith(f"policies/new.mlp:{first.line}:{first.column}: error")
    if where is not None:
        assert (first.line, first.column) == where
    assert "parenthes" not in first.message

    out = admin.reload_policies(files)
    assert not out.applied and out.version == before
    assert [d.code for d in out.diagnostics if d.severity == "error"][:1] == [code]

    # the old set keeps serving
    assert alice.check("read", "b").policy_version == before
    assert admin.list_policies().version == before


@pytest.mark.parametrize("name", CLEAN)
def test_a_clean_extreme_set_serves_checks_and_listings(clients, name: str) -> None:
    admin, alice = clients
    files = {"policies/new.mlp": CLEAN[name]}
    lint = admin.lint_policy(files)
    assert lint.ok, [d.rendered for d in lint.diagnostics]
    try:
        out = admin.reload_policies(files)
        assert out.applied
        d = alice.check("read", "b")
        assert d.policy_version == out.version and d.effect == pb.EFFECT_DENY
        listed = admin.list_policies()
        assert {p.priority for p in listed.policies} <= {0, 2**31 - 1, -(2**31)}
    finally:
        assert admin.reload_policies().applied  # back to the bundled directory
