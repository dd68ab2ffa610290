"""`GuardedLangGraphStore`'s gets: how the gets of one batch are decided, and what a
get returns for its decision.

A lone get is one Check (read). The gets of a batch (``store.batch([GetOp, ...])``,
or LangGraph's async store gathering concurrent ``aget`` calls into one ``abatch``)
are decided by one FilterRank per `GETS_PER_RANK` of them: the sidecar decides each
candidate as a Check of it would (each on its own view when another's lineage
touches it), so ten gets cost one call instead of ten (5.7 ms for ten before, each
Check a round trip after the last on the synchronous client).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.store.base import Item

from memlineage.integrations.langgraph_search import shown
from memlineage.v1 import memlineage_pb2 as pb

GETS_PER_RANK = 1_000
"""Gets decided by one FilterRank (the sidecar takes up to 10,000 candidates a call)."""

Asked = int | list[int]
"""One call's gets: a lone get's op index (a Check), or op indices (a FilterRank)."""


def gets_asked(gets: list[int]) -> list[Asked]:
    """The calls deciding `gets` (op indices of the gets whose item the store found)."""
    if len(gets) == 1:
        return list(gets)
    return [gets[k : k + GETS_PER_RANK] for k in range(0, len(gets), GETS_PER_RANK)]


def gets_decided(asked: Sequence[Asked], replies: Sequence[Any]) -> dict[int, Any]:
    """Each get's decision (pb.Decision), or the error its call raised,
    from the replies to `asked`'s calls. A FilterRank answers its candidates in the
    order asked."""
    decided: dict[int, Any] = {}
    for gets, reply in zip(asked, replies, strict=True):
        if isinstance(gets, int):
            decided[gets] = reply
        elif isinstance(reply, Exception):
            decided.update(dict.fromkeys(gets, reply))
        else:
            decided.update((i, c.decision) for i, c in zip(gets, reply.candidates, strict=True))
    return decided


def get_result(item: Item, decision: pb.Decision) -> Item | None:
    """What a get returns: nothing when denied, the item with the decision under
    `DECISION_KEY` when degraded, else the item as stored."""
    if decision.effect == pb.EFFECT_DENY:
        return None
    if decision.effect != pb.EFFECT_DEGRADE:
        return item
    return Item(
        value=shown(item.value, decision),
        key=item.key,
        namespace=item.namespace,
        created_at=item.created_at,
        updated_at=item.updated_at,
    )
