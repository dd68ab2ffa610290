"""`GuardedLangGraphStore`: a LangGraph `BaseStore` with MemLineage's checks in front.

LangGraph agents read and write long-term memory through a `BaseStore`
(``store.put/get/search/delete``, or a graph compiled with ``store=``). Wrapping
that store here puts the sidecar in every one of those calls without changing
the agent: lineage is recorded before content is written, denied writes and
deletes raise `PolicyDenied`, denied reads are hidden, degraded reads carry
their obligations, and search results are re-ranked by one FilterRank call.
docs/integrations.md has the id mapping, the reserved keys and each behaviour.

Every batch runs as a *plan*, a generator that yields steps (a batch for the
wrapped store, or calls for the sidecar) and is driven by `batch` with the sync
store and client, or by `abatch` with the store's ``abatch`` and, in
`GuardedLangGraphStore._acall`, an `AsyncMemLineageClient` awaited (a step's
calls gathered) or a sync client in a worker thread. The plan itself never
blocks, so both drivers share every rule. The writes of one key are serialised
within an instance, and an async batch whose writes started ends with its records
even when cancelled (`concurrency`); search pages by blocks (`langgraph_search`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Iterable, Mapping
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memlineage.client.aio import AsyncMemLineageClient
from memlineage.client.errors import (
    NotFound,
    PolicyDenied,
    revised_concurrently,
)
from memlineage.client.messages import VERSION_READ, replayed
from memlineage.client.revise_outcome import (
    UNKNOWN_OUTCOME,
    OutcomeUnknown,
    settled,
    unknown,
)
from memlineage.client.sync import MemLineageClient
from memlineage.integrations import langgraph_search as paging
from memlineage.integrations.answers import DECISION_KEY
from memlineage.integrations.concurrency import Beside, KeyLocks, finished
from memlineage.integrations.known_versions import KnownVersions
from memlineage.integrations.langgraph_gets import get_result, gets_asked, gets_decided
from memlineage.integrations.langgraph_ids import (
    MAX_ID_LENGTH,
    memory_id,
    split_memory_id,
)
from memlineage.integrations.langgraph_lineage import LINEAGE_KEY, LineageHook, put_lineage
from memlineage.integrations.langgraph_restore import PutSettings, restoring, safe_settings
from memlineage.integrations.langgraph_steps import Call as _Call
from memlineage.integrations.langgraph_steps import Calls as _Calls
from memlineage.integrations.langgraph_steps import Plan as _Plan
from memlineage.integrations.langgraph_steps import Step as _Step
from memlineage.integrations.langgraph_steps import StoreBatch as _StoreBatch
from memlineage.integrations.langgraph_steps import already_exists as _already_exists
from memlineage.integrations.langgraph_steps import answer as _answer
from memlineage.integrations.langgraph_ttl import TTLSweeper
from memlineage.integrations.lineage_fields import LINEAGE_FIELDS, checked_lineage
from memlineage.v1 import memlineage_pb2 as pb

__all__ = [
    "DECISION_KEY",
    "DEFAULT_ACTOR",
    "LINEAGE_FIELDS",
    "LINEAGE_KEY",
    "MAX_ID_LENGTH",
    "GuardedLangGraphStore",
    "LineageHook",
    "memory_id",
    "split_memory_id",
]

DEFAULT_ACTOR = "agent:langgraph"
"""Who asks a delete when the store names no ``actor``: an agent, never the user (the
sidecar's own default is the namespace's user, which let any node delete what the
user stated; an outside audit)."""

_RESERVED = (LINEAGE_KEY, DECISION_KEY)


_REVISE_ATTEMPTS = 4  # a concurrent put moved the version: read it again and revise


class GuardedLangGraphStore(TTLSweeper, BaseStore):
    """A `BaseStore` that asks MemLineage before every write, change, delete and read.

    ``store`` is any LangGraph store (`InMemoryStore`, `SqliteStore`, ...); ``client``
    talks to the sidecar, in its namespace (one tenant): a `MemLineageClient` serves
    both ``batch`` and ``abatch`` (the latter from a worker thread), an
    `AsyncMemLineageClient` serves ``abatch`` only (the async store methods). A
    put's lineage: ``defaults`` (e.g. ``{"creator": "agent:planner"}``), then the
    value's ``"_lineage"`` over them (unless ``value_lineage`` is False: values that
    may hold untrusted JSON), then ``lineage_hook(namespace, key, value)`` over both.
    ``actor`` is who asks (None: the sidecar's default; an update is asked as the
    put's creator, a delete as `DEFAULT_ACTOR`). Search asks the wrapped store for
    ``overfetch`` times what it returns, so hidden items do not leave it short.
    ``historical`` is passed to every read decision.
    """

    def __init__(
        self,
        store: BaseStore,
        client: MemLineageClient | AsyncMemLineageClient,
        *,
        defaults: Mapping[str, Any] | None = None,
        lineage_hook: LineageHook | None = None,
        actor: str | None = None,
        overfetch: int = 3,
        historical: bool = False,
        value_lineage: bool = True,
    ) -> None:
        if overfetch < 1:
            raise ValueError(f"overfetch: {overfetch!r} must be at least 1")
        self.defaults = dict(defaults or {})
        self._check_fields(self.defaults, "defaults")
        self.store = store
        self.client = client
        self.lineage_hook = lineage_hook
        self.value_lineage = value_lineage
        self.actor = actor
        self.overfetch = overfetch
        self.historical = historical
        # LangGraph's put() consults these: the wrapped store's TTL support is ours.
        self.supports_ttl = getattr(store, "supports_ttl", False)
        self.ttl_config = getattr(store, "ttl_config", None)
        self._locks = KeyLocks()  # one writer of a key at a time, in this instance
        self._known = KnownVersions()  # the records it last wrote: updates need no Explain
        self._settings = PutSettings()  # each item's index and TTL, put back on a rollback
        self._beside = Beside("memlineage-langgraph")  # a step's calls at once (`_call`)

    # -- the drivers
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run a batch: sidecar calls and the wrapped store's ``batch``, in this thread."""
        if isinstance(self.client, AsyncMemLineageClient):
            raise TypeError(
                "GuardedLangGraphStore: an AsyncMemLineageClient serves the async methods "
                "(aput, aget, asearch, adelete, abatch); give a MemLineageClient for the sync ones"
            )
        ops = list(ops)
        stripes = self._stripes(ops)
        self._locks.acquire(stripes)
        try:
            plan = self._plan(ops)
            reply: Any = None
            while True:
                try:
                    step = plan.send(reply)
                except StopIteration as done:
                    result: list[Result] = done.value
                    return result
                if isinstance(step, _StoreBatch):
                    reply = self.store.batch(step.ops)
                else:
                    reply = self._call(step.calls)
        finally:
            self._locks.release(stripes)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run a batch: the wrapped store's ``abatch``, the sidecar through `_acall`.
        From its first write (a new item's Record, or the store's) the batch ends even if
        the caller is cancelled: the cancellation is raised once it has (`finished`)."""
        ops = list(ops)
        stripes = self._stripes(ops)
        await self._locks.aacquire(stripes)
        handed = False  # the stripes are released by whoever runs the plan's end
        try:
            plan = self._plan(ops)
            reply: Any = None
            while True:
                try:
                    step = plan.send(reply)
                except StopIteration as done:
                    result: list[Result] = done.value
                    return result
                if step.protected:
                    handed = True
                    return await finished(self._arest(plan, step, stripes))
                reply = await self._astep(step)
        finally:
            if not handed:
                self._locks.release(stripes)

    async def _arest(self, plan: _Plan, step: _Step, stripes: list[int]) -> list[Result]:
        """The plan from its writes to its end, then the stripes released."""
        try:
            while True:
                reply = await self._astep(step)
                try:
                    step = plan.send(reply)
                except StopIteration as done:
                    result: list[Result] = done.value
                    return result
        finally:
            self._locks.release(stripes)

    async def _astep(self, step: _Step) -> Any:
        if isinstance(step, _StoreBatch):
            return await self.store.abatch(step.ops)
        return await self._acall(step.calls)

    def _stripes(self, ops: list[Op]) -> list[int]:
        """The lock stripes of the items this batch writes (none for reads), held from
        its existence probe to its records: two writers of one key in this instance
        decide, write and record one after the other, so the store's last value and the
        record's last version are the same writer's."""
        try:
            keys = [memory_id(op.namespace, op.key) for op in ops if isinstance(op, PutOp)]
        except (TypeError, ValueError):
            return []  # the plan refuses the batch before any side effect
        return self._locks.stripes(keys)

    def _call(self, calls: list[_Call]) -> list[Any]:
        """A step's calls (independent: reads, or one write decision), several at once:
        all but the first on the wrapper's threads (one round trip for the step, not
        one per call, as on an async client)."""
        if len(calls) == 1:
            return [self._one(calls[0])]
        later = [self._beside.submit(self._one, c) for c in calls[1:]]
        return [self._one(calls[0]), *(f.result() for f in later)]

    def _one(self, c: _Call) -> Any:
        try:
            return getattr(self.client, c.method)(*c.args, **c.kwargs)
        except Exception as exc:  # the plan decides (ALREADY_EXISTS is not fatal)
            return exc

    async def _acall(self, calls: list[_Call]) -> list[Any]:
        """An async client's calls gathered (a step's calls are independent reads, or
        one write decision); a sync client's in a worker thread, off the event loop."""
        if isinstance(self.client, AsyncMemLineageClient):
            return list(await asyncio.gather(*(self._aone(self.client, c) for c in calls)))
        return await asyncio.to_thread(self._call, calls)

    @staticmethod
    async def _aone(client: AsyncMemLineageClient, call: _Call) -> Any:
        try:
            return await getattr(client, call.method)(*call.args, **call.kwargs)
        except Exception as exc:  # as `_call`: the plan decides
            return exc

    # -- the plan
    def _plan(self, ops: list[Op]) -> _Plan:
        """Authorise every write, then one wrapped batch, then filter what it read.

        Everything that can be refused from the input alone (namespaces, ids,
        lineage fields) is refused before the first side effect; a denied write
        or delete raises before the wrapped store is asked to write anything.
        """
        ids: dict[int, str] = {}
        lineage: dict[int, dict[str, Any]] = {}
        for i, op in enumerate(ops):
            if isinstance(op, GetOp | PutOp):
                ids[i] = memory_id(op.namespace, op.key)
            if isinstance(op, PutOp) and op.value is not None:
                lineage[i] = put_lineage(op, self.defaults, self.lineage_hook, self.value_lineage)
            elif isinstance(op, SearchOp) and (op.limit < 0 or op.offset < 0):
                raise ValueError(f"search: limit {op.limit} and offset {op.offset} must be >= 0")
            elif not isinstance(op, GetOp | PutOp | SearchOp | ListNamespacesOp):
                raise ValueError(f"unknown operation type: {type(op).__name__}")

        exists: dict[int, bool] = {}
        held: list[Any] = []
        if lineage:  # which puts replace an item the wrapped store holds: an update
            probe: list[Op] = []
            for i in lineage:
                put = ops[i]
                assert isinstance(put, PutOp)
                probe.append(GetOp(put.namespace, put.key, refresh_ttl=False))
            held = yield _StoreBatch(probe)
            exists = {i: item is not None for i, item in zip(lineage, held, strict=True)}
        pending: list[int] = []  # updates decided, recorded once the store holds them
        recorded: list[int] = []  # new items recorded: their values are due
        reads: dict[str, Any] = {}  # an update's record, read beside its decision
        # Deletes and updates are decided before any new item is recorded, and a refusal
        # after a Record still writes the items recorded, so no record names a value the
        # store never held (before, a put refused after another's Record left it so).
        new = {i for i in lineage if not exists[i]}
        puts = [i for i, op in enumerate(ops) if isinstance(op, PutOp)]
        try:
            for i in [i for i in puts if i not in new] + [i for i in puts if i in new]:
                if (
                    yield from self._authorise(
                        ids[i], lineage.get(i), exists=exists.get(i, False), reads=reads
                    )
                ):
                    pending.append(i)
                elif i in new:
                    recorded.append(i)
        except Exception:
            if recorded:  # protected: a cancellation meanwhile lets them be written
                written = [self._forwarded(ops[i]) for i in recorded]
                yield _StoreBatch(written, protected=True)
                for i, op in zip(recorded, written, strict=True):
                    assert isinstance(op, PutOp)
                    self._settings.applied(ids[i], op)
            raise
        pending.sort()
        before = {  # what a rollback puts back: the item, and the settings it was put with
            i: (item, None if item is None else self._settings.of(ids[i], item.value))
            for i, item in zip(lineage, held, strict=True)
        }

        writes = [self._forwarded(op) for op in ops]
        results = yield _StoreBatch(writes, protected=any(isinstance(op, PutOp) for op in ops))
        for i, op in enumerate(writes):
            if isinstance(op, PutOp):
                self._settings.applied(ids[i], op)
        yield from self._apply_updates(ops, ids, lineage, pending, before, reads)
        return (yield from self._filtered(ops, ids, results))

    def _filtered(
        self, ops: list[Op], ids: dict[int, str], results: list[Result]
    ) -> Generator[_Step, Any, list[Result]]:
        """The batch's reads filtered: one step with the gets' decisions (one Check for
        a lone get; for several, one FilterRank per `GETS_PER_RANK`, which decides
        each as its Check would, in one call instead of one each) and every search's
        FilterRank (then more rounds only for a search left short)."""
        gets = [i for i, op in enumerate(ops) if isinstance(op, GetOp) and results[i] is not None]
        pools = {
            i: paging.pool_of(op, self.overfetch, paging.first_ask(op, self.overfetch), results[i])
            for i, op in enumerate(ops)
            if isinstance(op, SearchOp) and op.limit
        }
        ranked = [i for i, pool in pools.items() if pool.found]
        asked = gets_asked(gets)
        calls = [
            self._read_check(ids[a]) if isinstance(a, int) else self._gets_call(a, ids)
            for a in asked
        ]
        calls += [self._rank_call(pools[i]) for i in ranked]
        replies = list((yield _Calls(calls)) if calls else [])
        decided = gets_decided(asked, replies[: len(asked)])
        decided.update(zip(ranked, replies[len(asked) :], strict=True))
        pages = yield from self._pages(ops, pools, {i: decided[i] for i in ranked})
        out: list[Result] = []
        shown: list[GetOp] = []  # gets answered with an item, whose TTL they refresh
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                item = results[i]
                assert item is None or isinstance(item, Item)
                answer = None if item is None else get_result(item, _answer(decided[i]))
                if answer is not None and op.refresh_ttl:
                    shown.append(op)
                out.append(answer)
            elif isinstance(op, SearchOp):
                out.append(pages.get(i, []))
            elif isinstance(op, PutOp):
                out.append(None)
            else:
                out.append(results[i])
        # The TTLs of what was answered only: a denied item's was refreshed by the get
        # that read it, so a hidden item lived on as long as anyone asked for it.
        if self.supports_ttl and (refresh := shown + paging.refreshes(ops, pages)):
            yield _StoreBatch(list(refresh))
        return out

    def _pages(
        self, ops: list[Op], pools: dict[int, paging.Pool], ranked: dict[int, Any]
    ) -> Generator[_Step, Any, dict[int, list[SearchItem]]]:
        """Each search's page of its blocked ranking (`langgraph_search`); one whose
        pool keeps too few items while the store may hold more asks it for twice the
        hits and ranks them again, until the page is full or the store has no more."""
        pages: dict[int, list[SearchItem]] = {}
        while True:
            short: dict[int, int] = {}
            for i, pool in pools.items():
                page = paging.paged(pool, _answer(ranked[i])) if pool.found else None
                if page is None and (pool.found or not pool.complete()):
                    short[i] = pool.asked * 2
                else:
                    pages[i] = page or []
            if not short:
                return pages
            asks = [paging.widened(_search_op(ops[i]), asked) for i, asked in short.items()]
            hits = yield _StoreBatch(list(asks))
            pools = {
                i: paging.pool_of(_search_op(ops[i]), self.overfetch, asked, found)
                for (i, asked), found in zip(short.items(), hits, strict=True)
            }
            again = [i for i, pool in pools.items() if pool.found]
            replies = (yield _Calls([self._rank_call(pools[i]) for i in again])) if again else []
            ranked = dict(zip(again, replies, strict=True))

    def _authorise(
        self, mid: str, lineage: dict[str, Any] | None, *, exists: bool, reads: dict[str, Any]
    ) -> Generator[_Step, Any, bool]:
        """Delete: check ``delete``, asked as ``actor`` or else `DEFAULT_ACTOR`.
        New item: Record (its write decision). An item the sidecar already holds a
        record of (the wrapped store has it, or the Record met one: after a delete,
        even with the same lineage): `_update`, its record read into `reads` in the
        step of its decision when this wrapper knows no version of it."""
        if lineage is None:
            who = self.actor or DEFAULT_ACTOR
            [decision] = yield _Calls([_Call("check", ("delete", mid), {"actor": who})])
            self._allowed(_answer(decision))
            return False
        if not exists:
            call = _Call("record", (mid,), {**lineage, "actor": self.actor})
            [reply] = yield _Calls([call], protected=True)  # cancelled: recorded, unwritten
            if not _already_exists(reply):
                response: pb.RecordResponse = _answer(reply)
                if not response.recorded:
                    raise PolicyDenied(response.decision)
                if not replayed(response):
                    self._known.remember(response.memory, self.client)
                    return False
        # An update: decided now, its new version recorded once the store holds the
        # new value (`_update`); before, it was recorded first, and a put the batch
        # then refused, or a store that failed, left the old value credited to the new
        # writer (a hidden guess served as the user's; an outside audit).
        asker = self.actor or lineage.get("creator")
        calls = [_Call("check", ("update", mid), {"actor": asker})]
        if self._known.get(mid, self.client) is None:  # read now, beside the decision
            calls.append(_Call("explain", (mid,), dict(VERSION_READ)))
        decision, *read = yield _Calls(calls)
        if read:
            reads[mid] = read[0]
        if isinstance(decision, NotFound):  # no record (written around the wrapper)
            return True  # `_update` records it
        self._allowed(_answer(decision))
        return True

    def _apply_updates(
        self,
        ops: list[Op],
        ids: dict[int, str],
        lineage: dict[int, dict[str, Any]],
        pending: list[int],
        before: dict[int, tuple[Any, Any]],
        reads: dict[str, Any],
    ) -> Generator[_Step, Any, None]:
        """Record the new versions of the updates the store now holds; one the sidecar
        refuses now (a concurrent change, its policies, an error) has its old item put
        back in the store with its index and TTL settings (`langgraph_restore`), so the
        store never holds a value its record does not name, and the refusal is raised;
        one whose outcome stayed unknown (`revise_outcome`) is taken out of the store."""
        failed: list[tuple[int, Exception]] = []
        for i in pending:
            try:
                yield from self._update(ids[i], lineage[i], reads.pop(ids[i], None))
            except Exception as exc:  # any: a closed client's ValueError too
                failed.append((i, exc))
        if not failed:
            return
        back = []
        for i, error in failed:
            put, (old, settings) = ops[i], before[i]
            assert isinstance(put, PutOp)
            old = None if isinstance(error, OutcomeUnknown) else old
            back.append(
                (put, old, settings or safe_settings(put, self.supports_ttl, self.ttl_config))
            )
        deletes, puts = restoring(back)
        yield _StoreBatch(list(deletes))  # no vector of a refused value left
        if puts:
            yield _StoreBatch(list(puts))
        for op in [*deletes, *puts]:
            self._settings.applied(memory_id(op.namespace, op.key), op)
        raise failed[0][1]

    def _update(
        self, mid: str, lineage: dict[str, Any], read: Any = None
    ) -> Generator[_Step, Any, None]:
        """A put over a memory: a new version of its record with this put's lineage
        (Revise, decided as an update, asked as ``actor`` or else the put's creator),
        so what the store holds is always what its record says made it, revised over
        the version this wrapper last wrote (`KnownVersions`) or else the one Explain
        reads (`read`: its first answer, asked beside the decision). Over an item the
        sidecar has no record of (written around the wrapper): the Record of it."""
        known = self._known.get(mid, self.client)  # as this wrapper last wrote it: no Explain
        attempts = 0  # versions read: a remembered one that proved stale costs none
        while attempts < _REVISE_ATTEMPTS:
            if known is not None:
                stored = known
            else:
                attempts += 1
                if read is not None:
                    found, read = read, None
                else:
                    [found] = yield _Calls([_Call("explain", (mid,), dict(VERSION_READ))])
                if isinstance(found, NotFound):
                    call = _Call("record", (mid,), {**lineage, "actor": self.actor})
                    [reply] = yield _Calls([call])
                    if _already_exists(reply):
                        continue  # recorded meanwhile: revise that
                    recorded: pb.RecordResponse = _answer(reply)
                    if not recorded.recorded:
                        raise PolicyDenied(recorded.decision)
                    if not replayed(recorded):
                        self._known.remember(recorded.memory, self.client)
                        return
                    continue
                stored = _answer(found).memory
            fields = dict(lineage)
            if "claim" not in fields and stored.HasField("claim"):  # a put naming none keeps it
                c = stored.claim
                fields["claim"] = (c.subject, c.attribute, c.value)
            call = _Call(
                "revise",
                (mid,),
                {**fields, "expected_version": stored.version, "actor": self.actor},
            )
            [reply] = yield _Calls([call])
            if isinstance(reply, UNKNOWN_OUTCOME):  # maybe applied: read the record again
                [found] = yield _Calls([_Call("explain", (mid,), dict(VERSION_READ))])
                done = settled(found, stored.version, fields["creator"])
                if done is None:
                    raise unknown(mid, reply)  # `_apply_updates` takes the item out
                if done:
                    self._known.remember(found.memory, self.client)
                    return
                raise reply  # not applied: the old value goes back
            if self._known.read_again(mid, reply, known):  # and record it, when gone
                known = None
                continue
            revised: pb.ReviseResponse = _answer(reply)
            if not revised.applied:
                raise PolicyDenied(revised.decision)
            self._known.remember(revised.memory, self.client)
            return
        raise revised_concurrently(mid, _REVISE_ATTEMPTS)

    @staticmethod
    def _allowed(decision: pb.Decision) -> None:
        if decision.effect == pb.EFFECT_DENY:
            raise PolicyDenied(decision)

    def _forwarded(self, op: Op) -> Op:
        """The op as the wrapped store runs it: reserved keys out of put values, a
        search widened to the blocks of its pages from the first hit."""
        if isinstance(op, PutOp) and op.value is not None:
            return op._replace(value={k: v for k, v in op.value.items() if k not in _RESERVED})
        if isinstance(op, SearchOp):  # whole blocks from the first hit (`langgraph_search`)
            return paging.widened(op, paging.first_ask(op, self.overfetch) if op.limit else 0)
        if isinstance(op, GetOp) and op.refresh_ttl:  # refreshed once answered (`_filtered`)
            return op._replace(refresh_ttl=False)
        return op

    def _read_check(self, mid: str) -> _Call:
        return _Call("check", ("read", mid), {"actor": self.actor, "historical": self.historical})

    def _gets_call(self, gets: list[int], ids: dict[int, str]) -> _Call:
        """One FilterRank deciding gets (read, as `_read_check`), none of them cut."""
        kwargs = {"actor": self.actor, "historical": self.historical}
        return _Call("filter_rank", ([(ids[i], 1.0) for i in gets],), kwargs)

    def _rank_call(self, pool: paging.Pool) -> _Call:
        """One FilterRank of a search's hits: all kept (no limit), paged by blocks."""
        kwargs = {"actor": self.actor, "historical": self.historical}
        return _Call("filter_rank", (paging.rank_pairs(pool),), kwargs)

    # -- lineage
    @staticmethod
    def _check_fields(fields: Mapping[str, Any], where: str) -> None:
        checked_lineage(fields, where)


def _search_op(op: Op) -> SearchOp:
    assert isinstance(op, SearchOp)
    return op
