"""GuardedLangGraphStore's search pages over a real InMemoryStore (with and without a
vector index) and a real sidecar with the bundled policies: consecutive pages of one
``limit`` over an unchanged store partition the ranked result, with no item repeated
and none skipped, against one search holding every hit."""

from __future__ import annotations

import asyncio
import itertools
import re
import zlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore
from memlineage.client import MemLineageClient
from memlineage.config import Config
from memlineage.integrations.langgraph_store import GuardedLangGraphStore
from support.sidecar import BUNDLED_POLICIES, RunningSidecar


@pytest.fixture(scope="module")
def sidecar() -> Iterator[RunningSidecar]:
    """Reads counted by no one: a read's access count moves the value score, so pages
    read between would re-rank what they read (a change, not this test's subject)."""
    config = replace(Config(policy_dir=BUNDLED_POLICIES), record_access=False)
    with RunningSidecar(config) as s:
        yield s


_users = itertools.count()


def _vector(text: str) -> list[float]:
    v = [0.0] * 32
    for word in re.findall(r"\w+", text.lower()):
        v[zlib.crc32(word.encode()) % 32] += 1.0
    return v


def _inner(indexed: bool) -> InMemoryStore:
    if not indexed:
        return InMemoryStore()
    embed = {"dims": 32, "embed": lambda ts: [_vector(t) for t in ts], "fields": ["text"]}
    return InMemoryStore(index=embed)  # type: ignore[arg-type]


def _fill(store: GuardedLangGraphStore, ns: tuple[str, str]) -> set[str]:
    """In the store's order: hidden guesses, degraded web tips, hidden guesses, the
    user's notes, an agent's: the best ranked come last, as a store keeps them. The
    keys a search may show."""
    kinds = [
        ("guess", 3, {"creator": "reasoning:planner", "confidence": 0.2}),
        ("web", 3, {"creator": "tool:web_search"}),
        ("guess-b", 2, {"creator": "reasoning:planner", "confidence": 0.2}),
        ("user", 3, {"creator": f"user:{ns[0]}"}),
        ("agent", 3, {"creator": "agent:planner"}),
    ]
    for name, count, lineage in kinds:
        for n in range(count):
            text = f"trip note {name} {n} about the trip"
            store.put(ns, f"{name}-{n}", {"text": text, "_lineage": lineage})
    return {f"{name}-{n}" for name, count, _ in kinds if "guess" not in name for n in range(count)}


def _pages(
    store: GuardedLangGraphStore, ns: tuple[str, str], limit: int, **kw: Any
) -> list[list[str]]:
    pages: list[list[str]] = []
    for page in range(20):
        keys = [i.key for i in store.search(ns, limit=limit, offset=page * limit, **kw)]
        if not keys:
            return pages
        pages.append(keys)
    raise AssertionError(f"more than 20 pages: {pages}")


@pytest.mark.parametrize("limit", [1, 2, 4])
@pytest.mark.parametrize("query", [None, "trip note"])
def test_consecutive_pages_partition_the_ranked_result(
    ml: MemLineageClient, limit: int, query: str | None
) -> None:
    """Before, page k ranked the first ``overfetch x (k + 1) x limit`` hits and cut its
    window from that ranking: a larger pool moved the user's notes (last in the store,
    first in the ranking) ahead of what page 0 showed, which page 1 then showed again
    while others were never shown; and a page whose pool was all hidden came back
    empty, ending the paging early."""
    ns = (f"pages-{next(_users)}", "trip")
    store = GuardedLangGraphStore(_inner(query is not None), ml)
    shown = _fill(store, ns)
    kw = {"query": query} if query else {}
    everything = [i.key for i in store.search(ns, limit=100, **kw)]
    assert set(everything) == shown  # the guesses hidden, every other hit kept
    pages = _pages(store, ns, limit, **kw)
    flat = [key for page in pages for key in page]
    assert len(flat) == len(set(flat)), f"repeated: {pages}"
    assert set(flat) == set(everything), f"skipped: {set(everything) - set(flat)}"
    assert all(len(page) == limit for page in pages[:-1])  # only the last page is short
    assert _pages(store, ns, limit, **kw) == pages  # the same pages when asked again


def test_async_pages_are_the_sync_pages(ml: MemLineageClient) -> None:
    ns = (f"pages-{next(_users)}", "trip")
    store = GuardedLangGraphStore(_inner(False), ml)
    _fill(store, ns)

    async def apages() -> list[list[str]]:
        out = []
        for page in range(6):
            found = await store.asearch(ns, limit=2, offset=page * 2)
            out.append([i.key for i in found])
        return out

    assert [p for p in asyncio.run(apages()) if p] == _pages(store, ns, 2)
