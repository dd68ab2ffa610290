"""`GuardedLangGraphStore`'s search: which hits the wrapped store is asked for, how
the sidecar's ranking of them is paged.

The sidecar re-ranks the wrapped store's hits (one FilterRank), so a page cannot be
the store's own ``[offset, offset + limit)``. Before, each page ranked the first
``overfetch x (offset + limit)`` hits and cut its window from that ranking: the
second page ranked a larger pool than the first, so an item of the first could rank
second again (repeated) and one ranked first only in the larger pool was never shown
(skipped), with nothing changed in between. Now the hits are ranked in *blocks* of
``overfetch x limit`` consecutive hits (the first block is what the first page
ranks): the ranked result is the kept items of block 0 best first, then block 1's,
and so on, a sequence that does not depend on the page asking, so consecutive pages
of one ``limit`` over an unchanged store partition it. A page whose blocks keep too
few items (hidden ones) asks the store for twice as many blocks, until it is full or
the store has no more hits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import GetOp, Op, SearchItem, SearchOp

from memlineage.integrations.answers import DECISION_KEY, obligations_of
from memlineage.integrations.langgraph_ids import _cached_prefix, _joined
from memlineage.v1 import memlineage_pb2 as pb


@dataclass(frozen=True, slots=True)
class Pool:
    """The hits of one search asked of the wrapped store: by memory id, each with its
    block (``position // block``, its position among the store's hits)."""

    op: SearchOp  # the caller's
    block: int  # hits per block: overfetch x limit
    asked: int  # hits asked for (whole blocks, from the first hit)
    got: int  # hits answered
    found: dict[str, tuple[int, SearchItem]]

    def complete(self) -> bool:
        """The store answered fewer hits than asked: it holds no more."""
        return self.got < self.asked


def block_of(op: SearchOp, overfetch: int) -> int:
    return overfetch * op.limit


def first_ask(op: SearchOp, overfetch: int) -> int:
    """Hits the first round asks for: the blocks of the pages up to this one's."""
    return block_of(op, overfetch) * math.ceil((op.offset + op.limit) / op.limit)


def widened(op: SearchOp, asked: int) -> SearchOp:
    """The op as the wrapped store runs it: ``asked`` hits from the first, no TTL
    refreshed (`refreshes` refreshes the page's items only)."""
    return op._replace(limit=asked, offset=0, refresh_ttl=False)


def refreshes(ops: Sequence[Op], pages: Mapping[int, list[SearchItem]]) -> list[GetOp]:
    """The gets refreshing the TTLs of the items the searches asking for it answered.
    The wrapped store refreshes what its search returns, and it returns every hit of
    the widened search (hidden ones, and the blocks around the page): refreshed there,
    a search kept alive items it never showed, a hidden one as long as searches ran."""
    out: list[GetOp] = []
    for i, page in pages.items():
        op = ops[i]
        if isinstance(op, SearchOp) and op.refresh_ttl:
            out += [GetOp(item.namespace, item.key, refresh_ttl=True) for item in page]
    return out


def pool_of(op: SearchOp, overfetch: int, asked: int, hits: Any) -> Pool:
    """The store's hits by memory id; a hit whose namespace or key cannot be mapped
    (written around the wrapper) has no lineage and is left out."""
    block = block_of(op, overfetch)
    found: dict[str, tuple[int, SearchItem]] = {}
    prefixes: dict[tuple[str, ...], str | None] = {}  # hits share a few namespaces
    hits = list(hits or ())
    for position, item in enumerate(hits):
        try:
            mid = _joined(_cached_prefix(prefixes, item.namespace), item.key)
        except ValueError:
            continue
        found.setdefault(mid, (position // block, item))
    return Pool(op, block, asked, len(hits), found)


def rank_pairs(pool: Pool) -> list[tuple[str, float]]:
    """FilterRank's candidates: each hit with its store score as similarity."""
    return [
        (mid, similarity(getattr(item, "score", None))) for mid, (_, item) in pool.found.items()
    ]


def paged(pool: Pool, ranked: pb.FilterRankResponse) -> list[SearchItem] | None:
    """The page ``[offset, offset + limit)`` of the blocked ranking, ``score`` the
    sidecar's rank score; None when the pool keeps too few items for it and the store
    may hold more (ask again with more blocks)."""
    kept = {c.memory_id: c for c in ranked.candidates if c.kept}
    order = [mid for mid in ranked.ranked_ids if mid in kept and mid in pool.found]
    order.sort(key=lambda mid: pool.found[mid][0])  # stable: best first within a block
    op = pool.op
    if len(order) < op.offset + op.limit and not pool.complete():
        return None
    out: list[SearchItem] = []
    for mid in order[op.offset : op.offset + op.limit]:
        c, item = kept[mid], pool.found[mid][1]
        out.append(
            SearchItem(
                namespace=item.namespace,
                key=item.key,
                value=shown(item.value, c.decision),
                created_at=item.created_at,
                updated_at=item.updated_at,
                score=c.rank_score,
            )
        )
    return out


def decision_view(decision: pb.Decision) -> dict[str, Any]:
    """What a degraded item carries under `DECISION_KEY`: plain JSON-able values."""
    return {
        "effect": "degrade",
        "decision_id": decision.decision_id,
        "compliance_score": decision.compliance_score,
        "obligations": obligations_of(decision),
        "reasons": [
            r.message or r.policy for r in decision.reasons if r.effect == pb.EFFECT_DEGRADE
        ],
    }


def shown(value: dict[str, Any], decision: pb.Decision) -> dict[str, Any]:
    if decision.effect != pb.EFFECT_DEGRADE:
        return value
    return {**value, DECISION_KEY: decision_view(decision)}


def similarity(score: float | None) -> float:
    """The store's score as FilterRank's similarity; no score (no query or no index)
    counts as 1.0, so the sidecar's compliance and scores alone order the results.
    A negative one (cosine scores are in [-1, 1]) counts as 0: the rank multiplies
    similarity by its penalties, which would raise a negative one."""
    if score is None or not math.isfinite(score):
        return 1.0 if score is None else 0.0
    return max(0.0, float(score))
