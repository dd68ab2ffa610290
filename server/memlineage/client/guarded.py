"""`GuardedStore`: the sidecar's checks in front of any store with
``put/get/search/delete``, so the agent code that calls the store stays as it is;
`MemoryStore` is what it needs from that store, `DictMemoryStore` a tiny one.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Container
from typing import Any, Protocol

from memlineage.client.errors import (
    AlreadyExists,
    FailedPrecondition,
    MemLineageError,
    NotFound,
    PolicyDenied,
    revised_concurrently,
    stale_version,
)
from memlineage.client.messages import VERSION_READ, replayed
from memlineage.client.revise_outcome import UNKNOWN_OUTCOME, settled, unknown
from memlineage.client.sync import MemLineageClient, require_sync_client
from memlineage.v1 import memlineage_pb2 as pb

__all__ = ["DEFAULT_ACTOR", "DictMemoryStore", "GuardedStore", "MemoryStore"]

DEFAULT_ACTOR = "agent:guarded_store"
"""Who asks a delete when the store names no ``actor``: an agent, never the user (the
sidecar's own default is the namespace's user, which let any caller delete what the
user stated; an outside audit). The LangGraph and Mem0 adapters do the same."""


class MemoryStore(Protocol):
    """What `GuardedStore` needs from the store it wraps."""

    def put(self, key: str, value: Any, **meta: Any) -> Any: ...
    def get(self, key: str) -> Any: ...
    def search(self, query: str, k: int) -> list[tuple[str, Any, float]]: ...
    def delete(self, key: str) -> Any: ...


_REVISE_ATTEMPTS = 4  # a concurrent put moved the version: read it again

RECORD_FIELDS = (
    "creator",
    "confidence",
    "type",
    "tags",
    "claim",
    "dependencies",
    "volatility",
    "context_id",
    "created_at",
)
"""The lineage fields a Record takes beside its id (the adapters' too)."""


class GuardedStore:
    """A memory store with MemLineage's checks in front; callers keep calling it as before.

    Lineage is recorded before content is written, so the store never holds a
    memory the sidecar has no provenance for. A denied operation raises
    `PolicyDenied` and leaves the wrapped store untouched. The decision behind the
    latest get/put/delete is in ``last_decision`` (DEGRADE obligations live there).
    Other attributes pass through to the wrapped store.
    """

    def __init__(
        self,
        store: MemoryStore,
        client: MemLineageClient,
        *,
        creator: str | None = None,
        actor: str | None = None,
        overfetch: int = 3,
        historical: bool = False,
    ) -> None:
        require_sync_client(
            client,
            "GuardedStore",
            "its put/get/search/delete are synchronous and cannot await an "
            "AsyncMemLineageClient's calls",
        )
        if overfetch < 1:
            raise ValueError(f"overfetch: {overfetch!r} must be at least 1")
        self.store = store
        self.client = client
        self.creator = creator  # used when a put names no creator
        self.actor = actor  # who asks; None: the sidecar's default, a delete `DEFAULT_ACTOR`
        self.overfetch = overfetch
        self.historical = historical
        self.last_decision: pb.Decision | None = None

    def __getattr__(self, name: str) -> Any:
        if name == "store":  # not yet set: avoid recursing into ourselves
            raise AttributeError(name)
        return getattr(self.store, name)

    def _exists(self, key: str) -> bool:
        if isinstance(self.store, Container):  # a class with __contains__ answers directly
            return key in self.store
        try:
            return self.store.get(key) is not None
        except LookupError:
            return False

    def _allow(self, decision: pb.Decision) -> pb.Decision:
        self.last_decision = decision
        if decision.effect == pb.EFFECT_DENY:
            raise PolicyDenied(decision)
        return decision

    def put(self, key: str, value: Any, **meta: Any) -> Any:
        """Record (a new key), or a new version of the key's record (a key the sidecar
        knows), then write through.

        ``meta`` reaches the wrapped store unchanged; its lineage keys (creator,
        confidence, type, tags, claim, dependencies, volatility, context_id,
        created_at) also go into the record. A put over a key is Revise with this
        put's lineage, decided as an update (asked as ``actor``, else the put's
        creator), so the record says who made what the store holds; a key the store
        holds but the sidecar does not know (written around the guard) is recorded.
        """
        lineage = {k: meta[k] for k in RECORD_FIELDS if k in meta}
        creator = lineage.pop("creator", None) or self.creator or self.actor  # who writes
        if creator is None:
            raise ValueError(
                "creator: pass creator= to put(), or creator=/actor= to GuardedStore()"
            )
        if "claim" in lineage and lineage["claim"] is not None:
            lineage["claim"] = tuple(lineage["claim"])
        if not self._exists(key):
            try:
                response = self.client.record(key, creator=creator, actor=self.actor, **lineage)
            except AlreadyExists:  # the sidecar holds another record of it: an update
                response = None
            if response is not None:
                self.last_decision = response.decision
                if not response.recorded:
                    raise PolicyDenied(response.decision)
                if not replayed(response):  # a replay: the record was there already
                    return self.store.put(key, value, **meta)
        decision = self._revised(key, creator, lineage)
        if decision is not None:  # None: applied, its answer lost (`revise_outcome`)
            self._allow(decision)
        try:
            return self.store.put(key, value, **meta)
        except BaseException:
            # the record now names this put's writer: the old value must not stay
            # under it (it would be served as this writer's; an outside audit)
            self._take_out(key)
            raise

    def _take_out(self, key: str) -> None:
        """Remove `key` from the wrapped store, as far as it lets us (a store that fails
        its put may fail this too: its own error is the one raised)."""
        with contextlib.suppress(Exception):  # the caller gets the first error
            self.store.delete(key)

    def _revised(self, key: str, creator: str, lineage: dict[str, Any]) -> pb.Decision | None:
        """The decision of a put over `key`: a new version of its record (Revise), or
        the Record of a key the sidecar does not know. None: a Revise whose answer was
        lost was applied (read again, `revise_outcome.settled`); one that cannot be
        told takes the key out of the store and raises `OutcomeUnknown`."""
        for _ in range(_REVISE_ATTEMPTS):
            try:
                stored = self.client.explain(key, **VERSION_READ).memory
            except NotFound:
                try:
                    response = self.client.record(key, creator=creator, actor=self.actor, **lineage)
                except AlreadyExists:
                    continue  # recorded meanwhile: revise that
                if response.recorded and replayed(response):
                    continue
                return response.decision
            fields = dict(lineage)
            if "claim" not in fields and stored.HasField("claim"):  # a put naming none keeps it
                c = stored.claim
                fields["claim"] = (c.subject, c.attribute, c.value)
            try:
                return self.client.revise(
                    key,
                    expected_version=stored.version,
                    creator=creator,
                    actor=self.actor,
                    **fields,
                ).decision
            except FailedPrecondition as exc:
                if not stale_version(exc):
                    raise  # else a concurrent put revised it first: read it again
            except UNKNOWN_OUTCOME as exc:  # maybe applied: read the record again
                try:
                    found: Any = self.client.explain(key, **VERSION_READ)
                except MemLineageError as again:
                    found = again
                done = settled(found, stored.version, creator)
                if done is None:
                    self._take_out(key)
                    raise unknown(key, exc) from exc
                if done:
                    return None
                raise  # not applied: the store keeps the old value, as its record says
        raise revised_concurrently(key, _REVISE_ATTEMPTS)

    def get(self, key: str) -> Any:
        """The value if the read is allowed or degraded (see ``last_decision``)."""
        self._allow(self.client.check("read", key, actor=self.actor, historical=self.historical))
        return self.store.get(key)

    def search(self, query: str, k: int) -> list[tuple[str, Any, float, pb.Decision]]:
        """At most ``k`` ``(key, value, rank_score, decision)``, allowed ones only, best first.

        The wrapped store is asked for ``overfetch·k`` candidates so that denied
        ones do not leave the answer short.
        """
        if k <= 0:
            return []
        found = self.store.search(query, k * self.overfetch)
        values: dict[str, Any] = {}
        candidates: list[tuple[str, float]] = []
        for key, value, similarity in found:
            if key not in values:
                values[key] = value
                candidates.append((key, max(0.0, float(similarity))))  # FilterRank: >= 0
        if not candidates:
            return []
        response = self.client.filter_rank(
            candidates, actor=self.actor, historical=self.historical, limit=k
        )
        ranked = {c.memory_id: c for c in response.candidates if c.kept}
        out = []
        for memory_id in response.ranked_ids:
            c = ranked.get(memory_id)
            if c is not None and memory_id in values:
                out.append((memory_id, values[memory_id], c.rank_score, c.decision))
        return out[:k]

    def delete(self, key: str) -> Any:
        """Delete if the policies allow, asked as ``actor`` or else `DEFAULT_ACTOR` (the
        store's ``creator`` names who made what it writes, not who asks); the lineage
        record stays for audit."""
        self._allow(self.client.check("delete", key, actor=self.actor or DEFAULT_ACTOR))
        return self.store.delete(key)


_TOKEN = re.compile(r"\w+")


def _tokens(text: Any) -> set[str]:
    return set(_TOKEN.findall(str(text).lower()))


class DictMemoryStore:
    """A tiny in-memory store (naive token-overlap search) for examples and tests."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[Any, dict[str, Any]]] = {}

    def put(self, key: str, value: Any, **meta: Any) -> None:
        self.items[key] = (value, meta)

    def get(self, key: str) -> Any:
        """The value; KeyError when absent."""
        return self.items[key][0]

    def search(self, query: str, k: int) -> list[tuple[str, Any, float]]:
        """The ``k`` best ``(key, value, jaccard similarity)`` with some overlap."""
        q = _tokens(query)
        scored = []
        for key, (value, _) in self.items.items():
            v = _tokens(value)
            union = q | v
            similarity = len(q & v) / len(union) if union else 0.0
            if similarity > 0:
                scored.append((key, value, similarity))
        scored.sort(key=lambda t: (-t[2], t[0]))
        return scored[:k]

    def delete(self, key: str) -> None:
        self.items.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self.items

    def __len__(self) -> int:
        return len(self.items)
