"""The agent's voice in governance: `Proposal`, a transition the sweep proposes for
a memory an agent owns, with its deadline and the owners' objections.

A proposal is `pending` until its deadline (the owners heard it on the Watch
stream); an objection makes it `postponed` until a later deadline, after which the
sweep proposes again. Objections are bounded per memory (`max_objections`): past
the bound the proposal is final and the transition happens at its deadline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

PENDING, POSTPONED = "pending", "postponed"


@dataclass(frozen=True, slots=True)
class Objection:
    at: float
    by: str  # the owner, "kind:id"
    reason: str


@dataclass(frozen=True, slots=True)
class Proposal:
    memory_id: str
    namespace: str
    from_status: str
    to_status: str
    reason: str  # why the sweep proposes it
    owners: tuple[str, ...]
    proposed_at: float
    deadline: float  # pending: when it happens; postponed: when it is proposed again
    state: str = PENDING
    objections: tuple[Objection, ...] = ()

    def to_json(self) -> str:
        return json.dumps(
            [
                self.memory_id,
                self.namespace,
                self.from_status,
                self.to_status,
                self.reason,
                list(self.owners),
                self.proposed_at,
                self.deadline,
                self.state,
                [[o.at, o.by, o.reason] for o in self.objections],
            ],
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Proposal:
        v: Any = json.loads(text)
        return cls(
            str(v[0]),
            str(v[1]),
            str(v[2]),
            str(v[3]),
            str(v[4]),
            tuple(str(x) for x in v[5]),
            float(v[6]),
            float(v[7]),
            str(v[8]),
            tuple(Objection(float(a), str(b), str(c)) for a, b, c in v[9]),
        )


def owners_of(creator_id: str, tags: tuple[str, ...]) -> tuple[str, ...]:
    """Who hears about a memory's proposed transition: its creator when an agent or
    its reasoning made it, and every owner registered with an `owner:<kind:id>` tag."""
    out: dict[str, None] = {}
    if creator_id.split(":", 1)[0] in ("agent", "reasoning"):
        out[creator_id] = None
    for t in tags:
        if t.startswith("owner:") and ":" in t[6:]:
            out[t[6:]] = None
    return tuple(out)
