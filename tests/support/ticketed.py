"""Asking an engine as the servicer does, for the decision-reuse tests."""

from __future__ import annotations

from typing import Any

from memlineage.engine.core import Engine
from memlineage_dsl.facts import Creator

USER = Creator("user", "user:alice")


class Ticketed:
    """A request seen before is reissued from its ticket (never restated);
    check_ticketed only when there is none or it no longer holds."""

    def __init__(self, engine: Engine, namespace: str = "default") -> None:
        self.engine = engine
        self.namespace = namespace
        self.tickets: dict[tuple[Any, ...], Any] = {}
        self.reissued = 0

    def decide(self, op: str, ids: list[str], actor: Creator = USER, **kw: Any) -> Any:
        key = (op, tuple(ids), actor, tuple(sorted(kw.items())))
        ticket = self.tickets.get(key)
        if ticket is not None:
            issued = self.engine.reissue(ticket)
            if issued is not None:
                self.reissued += 1
                rec = self.engine.journal.get(self.namespace, issued[0])  # its own id, journaled
                assert rec is not None and rec.decided_at == issued[1] == self.engine.clock()
                return rec.decision
        rec, ticket = self.engine.check_ticketed(self.namespace, op, ids, actor, **kw)
        if ticket is not None:
            self.tickets[key] = ticket
        return rec.decision
