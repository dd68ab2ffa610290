"""How much lineage a snapshot holds, and the error of a walk that needs more.

A server loads the lineage around a decision's memories to a bound (its
`lineage_depth`); the test runner is given all of it. A walk that meets a neighbour
the snapshot does not hold past that bound must not stop there silently (a blocked
source one derivation further up would go unseen): it raises `LineageCut`, unless the
neighbour is one the store does not hold either (a dangling id: passed over, as one
within the bound is; the snapshot's `stored` says which).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .facts import MemoryFacts

__all__ = ["Bound", "LineageCut", "cut_message", "levels_from"]


class LineageCut(Exception):
    """Raised when a walk needs lineage the snapshot was not loaded with: a server
    loads a decision's lineage to a bound (`DictSnapshot.bound`, its `lineage_depth`)
    and the walk goes past it. Not `UnknownProvenance` (a rule reading it would not
    apply, and a source past the bound would go unseen): the rule fails closed, as any
    rule failing at run time. `walked` is what the walk found in what was loaded."""

    def __init__(self, message: str, walked: Sequence[MemoryFacts]) -> None:
        super().__init__(message)
        self.walked = walked


Bound = tuple[tuple[str, ...], int, int, bool]
"""How much lineage a snapshot holds (`DictSnapshot.bound`): (roots, up, down, cut):
the ancestors `up` levels above each root memory and the descendants `down` levels
below it were loaded, and `cut` says a record limit stopped the load short (any
neighbour not held may then be one not loaded)."""


def levels_from(
    memories: Mapping[str, MemoryFacts],
    roots: Iterable[str],
    children: Mapping[str, tuple[str, ...]] | None = None,
) -> dict[str, int]:
    """Breadth first from the held `roots`: each held memory's level above the nearest
    (over dependencies), or below it with `children`, as a store's `lineage_view`
    walked them."""
    levels = {r: 0 for r in roots if r in memories}
    frontier = list(levels)
    level = 0
    while frontier:
        level += 1
        nxt: list[str] = []
        for node in frontier:
            near = memories[node].dependencies if children is None else children.get(node, ())
            for other in near:
                if other not in levels and other in memories:
                    levels[other] = level
                    nxt.append(other)
        frontier = nxt
    return levels


def cut_message(
    bound: Bound, reached: bool, walk: str, start: str, node: str, other: str, up: bool
) -> str:
    """Why the `walk` ("lineage", "descendants") from `start` stopped at `node`'s
    neighbour `other`: past the loaded depth (`reached`: `node` is at it), cut by the
    store's record limit, or `node`'s own lineage was never loaded."""
    edge = f"`{node}` {'depends on' if up else 'has the derivation'} `{other}`, not loaded"
    if bound[3]:
        return (
            f"the {walk} of `{start}` is not all loaded for this decision: the store's "
            f"record limit cut the load short ({edge})"
        )
    if reached:
        depth = bound[1] if up else bound[2]
        goes = "goes" if walk == "lineage" else "go"
        return (
            f"the {walk} of `{start}` {goes} deeper than the lineage_depth ({depth}) loaded "
            f"for this decision ({edge}): raise lineage_depth"
        )
    return f"the {walk} of `{start}` was not loaded for this decision ({edge})"
