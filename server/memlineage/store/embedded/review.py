"""The embedded store's review schedule: each memory's next review time, due ones
found without looking at the others (``due_for_review``).
"""

from __future__ import annotations

import heapq


class ReviewQueue:
    """Next review time per id: a heap of (time, id) with lazy deletion plus a dict.

    ``schedule`` is O(log n); ``due`` pops the due entries (dropping stale ones:
    rescheduled or unscheduled ids), then pushes the live ones back, so it costs
    O((k + stale) log n) for k results and never looks at an entry that is not due.
    Stale entries are each dropped once; the heap is rebuilt from the dict when they
    outnumber the live ones, so it stays O(n).  ``examined`` counts popped entries
    (tests use it to check that non-due memories are never touched).
    """

    __slots__ = ("examined", "heap", "next")

    def __init__(self) -> None:
        self.heap: list[tuple[float, str]] = []
        self.next: dict[str, float] = {}
        self.examined = 0

    def __len__(self) -> int:
        return len(self.next)

    def schedule(self, memory_id: str, at: float) -> None:
        if self.next.get(memory_id) == at:
            return
        self.next[memory_id] = at
        heapq.heappush(self.heap, (at, memory_id))
        if len(self.heap) > 2 * len(self.next) + 64:
            self.rebuild()

    def unschedule(self, memory_id: str) -> bool:
        return self.next.pop(memory_id, None) is not None

    def rebuild(self) -> None:
        self.heap = [(t, i) for i, t in self.next.items()]
        heapq.heapify(self.heap)

    def due(self, now: float, limit: int) -> list[str]:
        heap, nxt = self.heap, self.next
        out: list[tuple[float, str]] = []
        seen: set[str] = set()
        while heap and len(out) < limit and heap[0][0] <= now:
            at, memory_id = heapq.heappop(heap)
            self.examined += 1
            if nxt.get(memory_id) != at or memory_id in seen:
                continue  # stale (rescheduled/unscheduled) or a duplicate entry: drop it
            seen.add(memory_id)
            out.append((at, memory_id))
        for entry in out:
            heapq.heappush(heap, entry)
        return [memory_id for _, memory_id in out]
