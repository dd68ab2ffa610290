"""What `GuardedMem0Memory` and `GuardedAsyncMem0Memory` (`mem0_memory`) share: their
configuration, the constants of their rules, and the pure steps of each operation
(the sidecar calls as arguments; each wrapper makes them its own way)."""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from memlineage.client.aio import AsyncMemLineageClient
from memlineage.client.errors import (
    FailedPrecondition,
    MemLineageError,
    NotFound,
    PolicyDenied,
    revised_concurrently,
)
from memlineage.client.messages import VERSION_READ
from memlineage.client.revise_outcome import UNKNOWN_OUTCOME, settled, unknown
from memlineage.client.sync import MemLineageClient
from memlineage.integrations.answers import DECISION_KEY, mem0_decision, mem0_shown
from memlineage.integrations.concurrency import Beside
from memlineage.integrations.known_versions import KnownVersions
from memlineage.integrations.lineage_fields import checked_lineage
from memlineage.integrations.mem0_add import (
    LINEAGE_KEY,
    AddPlan,
    listed_ids,
    record_args,
    unmarked,
)
from memlineage.v1 import memlineage_pb2 as pb

REVISE_ATTEMPTS = 4  # a concurrent update moved the version: read it again
DEFAULT_ACTOR = "agent:mem0"
"""Who asks an update or a delete when no ``actor`` is named: an agent, never the user
(the sidecar's own default is the namespace's user, which let an agent change or
delete what the user stated; an outside audit)."""

PROVISIONAL_ID = "mem0:provisional"
"""The id the provisional ``write`` check of an ``add`` names (Mem0 has not chosen one yet)."""

_C = TypeVar("_C", bound=MemLineageClient | AsyncMemLineageClient)

SidecarCall = tuple[str, tuple[Any, ...], dict[str, Any]]
ListingStep = tuple[str, str, tuple[Any, ...], dict[str, Any]]
"""A call `Mem0Guard._listing` asks its wrapper to make: ``<target>.<method>(*args, **kw)``."""
GET_ALL_TOP_K = 20  # Mem0's own default of get_all's top_k
"""A call `Mem0Guard._revised` asks its wrapper to make: ``client.<method>(*args, **kw)``."""
RETRIED: tuple[type[MemLineageError], ...] = (FailedPrecondition, NotFound, *UNKNOWN_OUTCOME)
"""The errors of a call that `_revised` decides on (a stale version, a record gone, a
Revise that may have been applied); any other propagates from the wrapper's call as
it is."""


DELETE_ALL_PAGE = 100  # memories `delete_all` lists at once, doubled while more come
DELETE_ALL_MOST = 100_000  # ... and at most: a delete_all of more is refused, nothing deleted
RESET_REFUSED = (
    "reset() deletes every memory without a decision: call .memory.reset() knowingly "
    "(the sidecar keeps the lineage records), or delete_all(user_id=...) through the "
    "wrapper, which decides each memory"
)


def delete_all_filters(
    user_id: str | None, agent_id: str | None, run_id: str | None
) -> dict[str, str]:
    """Mem0's ``delete_all`` entity filters; none is Mem0's own ValueError."""
    filters = {
        k: v for k, v in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)) if v
    }
    if not filters:
        raise ValueError(
            "At least one filter is required to delete all memories (user_id, agent_id or "
            "run_id); reset() is not wrapped"
        )
    return filters


SET_BY_MEM0 = frozenset(
    {"data", "hash", "text_lemmatized", "created_at", "updated_at"}
    | {"user_id", "agent_id", "run_id", "actor_id"}
)
"""Payload keys an update's metadata cannot change: Mem0 sets the first from the text
and keeps ``created_at``; it ignores the identity keys."""
SHOWN = ("role", "attributed_to", "expiration_date")
"""Payload keys Mem0's ``get`` shows beside ``metadata``, not in it, that an update's
metadata (or ``expiration_date=``) can change."""


def restoring(
    before: Mapping[str, Any], metadata: Mapping[str, Any] | None, kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """``Memory.update`` keywords putting back the memory `before` (Mem0's ``get`` of
    it) over an update given `metadata` and `kwargs`: its text, its metadata and the
    keys shown beside it (`SHOWN`: a role, an expiration date), which Mem0 keeps from
    an update unless given again (before, only the text and ``metadata`` went back, so
    a refused update's expiration date, role and new keys stayed). Mem0's update
    merges metadata and cannot drop a key: one the refused update added is set to
    None (its value gone, the key left)."""
    old = dict(before.get("metadata") or {})
    old.update((k, before[k]) for k in SHOWN if k in before)
    added = {*(metadata or {}), *(["expiration_date"] if "expiration_date" in kwargs else [])}
    old.update((k, None) for k in added - old.keys() - SET_BY_MEM0)
    back: dict[str, Any] = {"text": before.get("memory")}
    if "expiration_date" in old:  # Mem0's own keyword: a date, or None to clear it
        back["expiration_date"] = old.pop("expiration_date")
    return {**back, "metadata": old or None}


def changed_since(before: Mapping[str, Any], now: Any) -> bool:
    """Whether Mem0's memory `now` (its ``get``) is no longer `before` (``updated_at``
    aside: Mem0 sets it on every update, and no update can set it back)."""
    if not isinstance(now, Mapping):
        return True
    return {k: v for k, v in before.items() if k != "updated_at"} != {
        k: v for k, v in now.items() if k != "updated_at"
    }


def check_top_k(top_k: object) -> None:
    """The caller's `top_k` refused as the caller wrote it (Mem0 named the overfetched
    number: `Invalid top_k: -3` for -1)."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ValueError(f"top_k: {top_k!r} must be a whole number >= 0")


class Mem0Guard(Generic[_C]):
    """What the sync and async wrappers share: configuration and the pure steps
    (the sidecar calls as arguments; each wrapper makes them its own way)."""

    def __init__(
        self,
        memory: Any,
        client: _C,
        *,
        defaults: Mapping[str, Any] | None = None,
        actor: str | None = None,
        overfetch: int = 3,
        historical: bool = False,
        precheck: bool = True,
    ) -> None:
        if overfetch < 1:
            raise ValueError(f"overfetch: {overfetch!r} must be at least 1")
        self.memory = memory  # the wrapped Mem0 memory, for what the wrapper does not guard
        self.client = client
        self.defaults = checked_lineage(defaults or {}, "defaults")
        self.actor = actor  # who asks; None: the sidecar's default
        self.overfetch = overfetch
        self.historical = historical
        self.precheck = precheck
        self._known = KnownVersions()  # the records it last wrote: updates need no Explain
        self._beside = Beside("memlineage-mem0")  # an update's version read beside its check

    def _plan(
        self,
        messages: Any,
        metadata: Mapping[str, Any] | None,
        user_id: str | None,
        agent_id: str | None,
        kwargs: Mapping[str, Any],
    ) -> AddPlan:
        plan = AddPlan.of(self.defaults, metadata, user_id, agent_id, kwargs.get("run_id"))
        if isinstance(messages, str) and self.actor and not self.actor.startswith("user:"):
            # A bare text says no role: asked by an agent, it is the agent's (Mem0 files
            # it as a user message; before, recorded as the user's, so a "remember
            # this" tool the model fed injected text made it the user's; an outside audit)
            plan.fields.setdefault("creator", self.actor)
        return plan

    def _prechecks(self, plan: AddPlan, messages: Any) -> list[str]:
        return plan.creators(messages) if self.precheck else []

    def _check_write(self, decision: pb.Decision) -> None:
        if decision.effect == pb.EFFECT_DENY:
            raise PolicyDenied(decision)

    @staticmethod
    def _added(result: Any) -> list[dict[str, Any]]:
        """The memories an ``add`` created: its ``{"results": [...]}`` entries with
        event ADD (Mem0 2.x adds only; infer=False makes one per non-system message)."""
        items = result.get("results", []) if isinstance(result, Mapping) else []
        return [r for r in items if isinstance(r, dict) and r.get("event") == "ADD" and r.get("id")]

    def _record_call(
        self, plan: AddPlan, item: Mapping[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``client.record``'s arguments for one memory an add created."""
        kwargs = {"creator": plan.creator(item), "actor": self.actor}
        return (str(item["id"]),), {**kwargs, **record_args(plan.fields)}

    def _candidates(self, items: Iterable[Mapping[str, Any]], scored: bool) -> list[Any]:
        seen: dict[str, Any] = {}
        for item in items:
            key = str(item.get("id", ""))
            if key and key not in seen:
                seen[key] = unmarked(item)
        # a negative similarity (cosine) counts as 0: the rank multiplies it by penalties
        score = (lambda i: max(0.0, float(i.get("score") or 0.0))) if scored else (lambda i: 1.0)
        return [(k, score(i), i) for k, i in seen.items()]

    def _rank_call(
        self, candidates: Sequence[Any], limit: int, actor: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``client.filter_rank``'s arguments for these candidates."""
        pairs = [(k, s) for k, s, _ in candidates]
        kwargs = {"actor": actor or self.actor, "historical": self.historical, "limit": limit}
        return (pairs,), kwargs

    @staticmethod
    def _ranked(candidates: Sequence[Any], response: pb.FilterRankResponse) -> list[Any]:
        """Kept memories in the sidecar's order; ``score`` is its rank score, Mem0's own
        score moves to ``mem0_score``."""
        items = {k: i for k, _, i in candidates}
        kept = {c.memory_id: c for c in response.candidates if c.kept}
        out = []
        for memory_id in response.ranked_ids:
            c = kept.get(memory_id)
            if c is None or memory_id not in items:
                continue
            item = {**items[memory_id], "mem0_score": items[memory_id].get("score")}
            item["score"] = c.rank_score
            shown = mem0_shown(item, c.decision)
            if shown is not None:
                out.append(shown)
        return out

    @staticmethod
    def _listed(candidates: Sequence[Any], decided: Mapping[str, Any]) -> list[Any]:
        """Kept memories in Mem0's own order (get_all is a listing, not a ranking);
        `decided`: FilterRank's candidates by memory id."""
        out = []
        for memory_id, _, item in candidates:
            c = decided.get(memory_id)
            shown = mem0_shown(dict(item), c.decision) if c is not None and c.kept else None
            if shown is not None:
                out.append(shown)
        return out

    def _listing(
        self, actor: str | None, kwargs: dict[str, Any]
    ) -> Generator[ListingStep, Any, dict[str, Any]]:
        """`get_all`'s steps: Mem0's listing of ``overfetch x top_k`` memories, one
        FilterRank of the ones no earlier round decided, and, while hidden memories
        leave fewer than ``top_k`` kept and Mem0 listed all it was asked (it may hold
        more), the listing asked again for twice as many (Mem0 lists in a stable order:
        a longer listing starts with the shorter one). Before, Mem0 was asked for
        ``top_k`` exactly, so each hidden memory left the answer one short although
        Mem0 held more the caller may read. It yields ``(target, method, args,
        keywords)``, target ``"memory"`` or ``"client"``, and is sent the answer."""
        top_k = kwargs.pop("top_k", GET_ALL_TOP_K)
        check_top_k(top_k)
        ask = top_k * self.overfetch
        decided: dict[str, Any] = {}
        while True:
            result = yield ("memory", "get_all", (), {**kwargs, "top_k": ask})
            items = result.get("results", []) if isinstance(result, Mapping) else []
            candidates = self._candidates(items, scored=False)
            new = [c for c in candidates if c[0] not in decided]
            if new:
                args, rank_kwargs = self._rank_call(new, 0, actor)
                response = yield ("client", "filter_rank", args, rank_kwargs)
                decided.update((c.memory_id, c) for c in response.candidates)
            listed = self._listed(candidates, decided)
            if len(listed) >= top_k or len(items) < ask:
                # top_k 0: Mem0's own answer (it lists one memory then) filtered, uncut
                return {**result, "results": listed[:top_k] if top_k else listed}
            ask *= 2

    def _deleting_all(
        self, filters: dict[str, str], actor: str | None
    ) -> Generator[ListingStep, Any, dict[str, Any]]:
        """`delete_all`'s steps (as `_listing`'s): Mem0's listing of what the filters
        hold, twice as long while it comes back full; a ``delete`` check of each, the
        first DENY raising `PolicyDenied` before anything is deleted; then Mem0's own
        ``delete`` of each (a memory added meanwhile, never decided, stays)."""
        top_k = DELETE_ALL_PAGE
        while True:
            listing = yield ("memory", "get_all", (), {"filters": filters, "top_k": top_k})
            ids = listed_ids(listing)
            if len(ids) > DELETE_ALL_MOST:
                raise ValueError(
                    f"delete_all({filters}): more than {DELETE_ALL_MOST:,} memories; nothing "
                    "deleted (narrow the filters, or delete through .memory knowingly)"
                )
            if len(ids) < top_k:
                break
            top_k = min(top_k * 2, DELETE_ALL_MOST + 1)
        who = actor or self.actor or DEFAULT_ACTOR
        for memory_id in ids:
            self._check_write((yield ("client", "check", ("delete", memory_id), {"actor": who})))
        for memory_id in ids:
            yield ("memory", "delete", (memory_id,), {})
        return {"message": "Memories deleted successfully!"}

    @staticmethod
    def _changed(result: Any, decision: pb.Decision) -> Any:
        if decision.effect == pb.EFFECT_DEGRADE and isinstance(result, dict):
            return {**result, DECISION_KEY: mem0_decision(decision)}
        return result

    @staticmethod
    def _revision(stored: pb.Memory, writer: str) -> dict[str, Any]:
        """`client.revise`'s keywords for an update by `writer`: the record's lineage
        kept (type, tags, claim, dependencies, ...), its creator now the writer."""
        fields: dict[str, Any] = {
            "creator": writer,
            "actor": writer,
            "expected_version": stored.version,
            "type": stored.type or "fact",
            "tags": list(stored.tags),
            "dependencies": list(stored.dependencies),
            "confidence": stored.creator_confidence,
            "context_id": stored.context_id,
        }
        if stored.volatility:
            fields["volatility"] = stored.volatility
        if stored.HasField("claim"):
            c = stored.claim
            fields["claim"] = (c.subject, c.attribute, c.value)
        return fields

    def _revised(
        self, memory_id: str, writer: str, read: Any = None
    ) -> Generator[SidecarCall, Any, pb.Decision | None]:
        """An update's new version by `writer` (Revise, decided as an update), over the
        record this wrapper last wrote (`KnownVersions`) or else the one Explain reads
        (`read`: its first answer, or the error it raised, asked beside the decision),
        written once for both wrappers as the calls it makes: it yields each (method,
        args, keywords) and is sent the answer, or the `RETRIED` error it raised."""
        known = self._known.get(memory_id, self.client)
        attempts = 0  # versions read: a remembered one that proved stale costs none
        while attempts < REVISE_ATTEMPTS:
            if known is not None:
                stored = known
            else:
                attempts += 1
                if read is not None:
                    found, read = read, None
                else:
                    found = yield ("explain", (memory_id,), VERSION_READ)
                if isinstance(found, BaseException):
                    raise found
                stored = found.memory
            revised = yield ("revise", (memory_id,), self._revision(stored, writer))
            if isinstance(revised, UNKNOWN_OUTCOME):  # maybe applied: read the record again
                found = yield ("explain", (memory_id,), VERSION_READ)
                done = settled(found, stored.version, writer)
                if done is None:
                    raise unknown(memory_id, revised)  # `update` takes it out of Mem0
                if done:
                    self._known.remember(found.memory, self.client)
                    return None  # applied, its decision lost: the update's check stands
                raise revised  # not applied: the old text goes back
            if isinstance(revised, BaseException):
                if not self._known.read_again(memory_id, revised, known):
                    raise revised
                known = None
                continue
            self._known.remember(revised.memory, self.client)
            decision: pb.Decision = revised.decision
            return decision
        raise revised_concurrently(memory_id, REVISE_ATTEMPTS)

    @staticmethod
    def _no_lineage_change(metadata: Mapping[str, Any] | None) -> None:
        if metadata and LINEAGE_KEY in metadata:
            raise ValueError(f"{LINEAGE_KEY}: lineage is recorded once, by add; update keeps it")
