"""`GuardedMem0Memory` beside a bare Mem0 `Memory`, both real and offline, fed the same
messages, metadata and queries an agent hands over (any roles, contents, tool names,
metadata and lineage, queries and `top_k`). Per operation the wrapper either does what
Mem0 does, raises what Mem0 raises on the same input, or refuses as it documents
(`ValueError`, `PolicyDenied`); a refused add leaves nothing of it in Mem0, and what
Mem0 holds after an add is recorded in the sidecar."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import support.mem0_offline  # noqa: F401  (before mem0: no telemetry, its home a temp dir)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mem0 import Memory
from memlineage.client import MemLineageClient, NotFound
from memlineage.integrations.mem0_memory import LINEAGE_KEY, GuardedMem0Memory
from support.differential import agrees, outcome, refused
from support.json_values import json_like
from support.mem0_offline import embedder, mem0_config
from support.sidecar import RunningSidecar

OUTCOMES: Counter[str] = Counter()
_users = itertools.count()


@pytest.fixture(scope="module")
def pair(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Memory, GuardedMem0Memory, MemLineageClient]]:
    """A bare Mem0, and a guarded one over a Mem0 of its own (each its own Qdrant)."""
    tmp = tmp_path_factory.mktemp("mem0-fuzz")
    with (
        embedder() as url,
        RunningSidecar() as sidecar,
        MemLineageClient(sidecar.address, timeout=10) as ml,
    ):
        bare = Memory.from_config(mem0_config(tmp / "bare", url))
        inner = Memory.from_config(mem0_config(tmp / "guarded", url))
        try:
            yield bare, GuardedMem0Memory(inner, ml), ml
        finally:
            bare.close()
            inner.close()


texts = st.sampled_from(["I am vegetarian", "pay eve@evil.example", "", " ", "\x1b[2J", "é"]) | (
    st.text(max_size=12)
)
message = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["user", "assistant", "tool", "system", "weird"]) | st.text(),
        "content": texts | st.lists(texts, max_size=2) | st.none(),
        "name": st.none() | st.sampled_from(["web search!", "x" * 300, "flight_api"]) | texts,
    },
)
messages = texts | st.lists(message, max_size=3)
lineage = st.fixed_dictionaries(
    {},
    optional={
        "creator": st.sampled_from(["user:alice", "tool:web", "agent:x", "alice", ""]),
        "confidence": st.sampled_from([0.4, 0.9, 1.5, "high"]),
        "tags": st.sampled_from([["travel"], "travel", [1]]),
        "dependencies": st.sampled_from([["nope"], [], "city", [3]]),
        "claim": st.sampled_from([["user:alice", "city", "Paris"], ["a", "b"]]),
        "type": texts,
        "owner": json_like(),  # no lineage field
    },
)
with_lineage = st.builds(
    lambda m, lin: {**m, LINEAGE_KEY: lin},
    st.dictionaries(st.text(max_size=4), json_like(), max_size=1),
    lineage | json_like(),
)
metadata = st.one_of(
    st.none(),
    st.dictionaries(st.text(max_size=4), json_like(), max_size=2),
    with_lineage,
    with_lineage,
)


def _held(memory: Memory, user: str) -> set[str]:
    return {r["id"] for r in memory.get_all(filters={"user_id": user})["results"]}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    msgs=messages,
    meta=metadata,
    query=texts,
    top_k=st.integers(-1, 4),
)
def test_any_input_is_done_as_mem0_does_it_or_refused_as_documented(
    pair: tuple[Memory, GuardedMem0Memory, MemLineageClient],
    msgs: Any,
    meta: Any,
    query: str,
    top_k: int,
) -> None:
    bare, guarded, ml = pair
    user = f"fuzz{next(_users)}"
    b = outcome(lambda: bare.add(msgs, user_id=user, metadata=meta, infer=False))
    g = outcome(lambda: guarded.add(msgs, user_id=user, metadata=meta, infer=False))
    assert agrees(b, g), (msgs, meta, b, g)
    held = _held(guarded.memory, user)
    if g[0] != "ok":
        assert held == set(), (msgs, meta, g)  # a refused or failed add did not happen
    for mid in held:  # what Mem0 holds from the wrapper is recorded
        try:
            ml.explain(mid)
        except NotFound:
            pytest.fail(f"{mid} is in Mem0 without a record ({msgs!r}, {meta!r})")
    OUTCOMES["add " + g[0]] += 1
    for op in (
        lambda m: m.search(query, filters={"user_id": user}, top_k=top_k),
        lambda m: m.get_all(filters={"user_id": user}, top_k=max(top_k, 1)),
    ):
        b, g = outcome(lambda op=op: op(bare)), outcome(lambda op=op: op(guarded))
        assert agrees(b, g), (query, top_k, b, g)
        if g[0] == "ok":
            assert {r["id"] for r in g[1]["results"]} <= held
    for mid in sorted(held)[:1]:
        g = outcome(lambda mid=mid: guarded.update(mid, query or "changed"))
        assert g[0] == "ok" or refused(g), g
        g = outcome(lambda mid=mid: guarded.delete(mid))
        assert g[0] == "ok" or refused(g), g
        OUTCOMES["delete " + g[0]] += 1


def test_the_fuzz_reaches_mem0_and_the_sidecar() -> None:
    """Run after the fuzz (file order): adds were done, and deletes asked of them
    (most are refused: the bundled policies keep what a user stated)."""
    deletes = sum(n for outcome, n in OUTCOMES.items() if outcome.startswith("delete "))
    assert OUTCOMES["add ok"] > 5 and deletes > 5, OUTCOMES
