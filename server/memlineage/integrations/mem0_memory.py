"""`GuardedMem0Memory` / `GuardedAsyncMem0Memory`: Mem0's `Memory` / `AsyncMemory`
with MemLineage's checks in front, so an agent keeps calling Mem0's API.

Mem0 assigns memory ids inside ``add``, so lineage cannot be recorded before the
content is stored. The order is therefore: a provisional ``write`` check per
creator (a denial raises `PolicyDenied` with Mem0 untouched), Mem0's ``add``,
then one ``client.record`` per memory Mem0 created, under Mem0's id; when a
record is refused (or fails) every memory of that ``add`` is deleted from Mem0
again before `PolicyDenied` (or the error) is raised, and when Mem0 itself fails
half-way the memories it stored are found by the add's nonce and deleted
(`mem0_add`). Updates and deletes are
checked first and refused with Mem0 untouched; reads hide denied memories and
return degraded ones with their decision under `DECISION_KEY`; search is one
``client.filter_rank``. docs/integrations.md has the reserved keys and each rule.

`GuardedAsyncMem0Memory` takes an `AsyncMemLineageClient` (awaited) or, as
before, a `MemLineageClient` (run in a worker thread); both go through `_acall`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Generator
from concurrent.futures import Future
from typing import Any

from memlineage.client.aio import AsyncMemLineageClient
from memlineage.client.errors import PolicyDenied
from memlineage.client.messages import VERSION_READ
from memlineage.client.revise_outcome import OutcomeUnknown
from memlineage.client.sync import MemLineageClient
from memlineage.integrations.answers import DECISION_KEY, mem0_history, mem0_shown
from memlineage.integrations.concurrency import finished
from memlineage.integrations.lineage_fields import LINEAGE_FIELDS
from memlineage.integrations.mem0_add import (
    ADD_KEY,
    LINEAGE_KEY,
    UNDO_PAGE,
    UNDO_ROUNDS,
    AddPlan,
    listed_ids,
    unmarked,
)
from memlineage.integrations.mem0_guard import (
    DEFAULT_ACTOR,
    PROVISIONAL_ID,
    RESET_REFUSED,
    RETRIED,
    ListingStep,
    Mem0Guard,
    changed_since,
    check_top_k,
    delete_all_filters,
    restoring,
)
from memlineage.v1 import memlineage_pb2 as pb

__all__ = [
    "ADD_KEY",
    "DECISION_KEY",
    "LINEAGE_FIELDS",
    "LINEAGE_KEY",
    "PROVISIONAL_ID",
    "GuardedAsyncMem0Memory",
    "GuardedMem0Memory",
]


class GuardedMem0Memory(Mem0Guard[MemLineageClient]):
    """A `mem0.Memory` with MemLineage's checks in front (see the module docstring).

    Memory ids are Mem0's, recorded in the client's sidecar namespace. ``defaults``
    are lineage fields for every add (e.g. ``{"creator": "agent:planner"}``),
    overridden by ``metadata["_lineage"]``; ``actor`` is who asks (None: the
    sidecar's default); each read/update/delete also takes ``actor=``.
    ``delete_all`` decides each memory it would delete; ``reset`` is refused (use
    ``.memory.reset()`` knowingly).
    """

    def add(
        self,
        messages: Any,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Mem0's ``add``, its memories' lineage recorded under Mem0's ids (rolled back
        from Mem0 when a record is refused). Returns Mem0's ``{"results": [...]}``."""
        plan = self._plan(messages, metadata, user_id, agent_id, kwargs)
        for creator in self._prechecks(plan, messages):
            decision = self.client.check("write", PROVISIONAL_ID, actor=self.actor or creator)
            self._check_write(decision)
        try:
            result = self.memory.add(
                messages, user_id=user_id, agent_id=agent_id, metadata=plan.metadata, **kwargs
            )
        except BaseException as exc:
            self._undo_failed_add(plan, exc)
            raise
        added = self._added(result)
        try:
            for item in added:
                args, record_kwargs = self._record_call(plan, item)
                response = self.client.record(*args, **record_kwargs)
                if not response.recorded:
                    raise PolicyDenied(response.decision)
                self._known.remember(response.memory, self.client)
        except BaseException:
            for item in added:  # roll back: Mem0 keeps no memory without lineage
                with contextlib.suppress(Exception):
                    self.memory.delete(item["id"])
            raise
        return dict(result)

    def _undo_failed_add(self, plan: AddPlan, error: BaseException) -> None:
        """Delete what an add that failed inside Mem0 stored before it failed (found by
        its nonce, `ADD_KEY`). Deleted rather than recorded: the caller sees the add's
        exception, and an add that raised is one that did not happen (recording would
        also need a write decision for memories the caller believes absent). A lookup
        or delete that fails is noted on `error`, which is raised either way."""
        scope = plan.made_by_it()
        if scope is None:
            return
        try:
            for _ in range(UNDO_ROUNDS):
                listing = self.memory.get_all(filters=scope, top_k=UNDO_PAGE, show_expired=True)
                ids = listed_ids(listing)
                for memory_id in ids:
                    self.memory.delete(memory_id)
                if len(ids) < UNDO_PAGE:
                    return
        except Exception as failed:
            error.add_note(f"memlineage: memories of this add may remain in Mem0: {failed!r}")

    def get(self, memory_id: str, *, actor: str | None = None) -> dict[str, Any] | None:
        """Mem0's memory if the read is allowed (degraded: with `DECISION_KEY`), else None."""
        item = self.memory.get(memory_id)
        if item is None:
            return None
        decision = self.client.check(
            "read", memory_id, actor=actor or self.actor, historical=self.historical
        )
        return mem0_shown(unmarked(item), decision)

    def get_all(self, *, actor: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """Mem0's listing without denied memories, in Mem0's order, at most ``top_k``:
        one FilterRank, more rounds only while hidden ones leave it short (`_listing`)."""
        return self._run_steps(self._listing(actor, kwargs))

    def _run_steps(self, steps: Generator[ListingStep, Any, dict[str, Any]]) -> dict[str, Any]:
        """Run a plan's steps (`_listing`, `_deleting_all`): each a call to Mem0 or the
        sidecar, its answer sent back; the plan's return value."""
        answer: Any = None
        while True:
            try:
                target, method, args, call_kwargs = steps.send(answer)
            except StopIteration as done:
                out: dict[str, Any] = done.value
                return out
            called = self.memory if target == "memory" else self.client
            answer = getattr(called, method)(*args, **call_kwargs)

    def search(
        self, query: str, *, top_k: int = 20, actor: str | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Mem0's search widened to ``overfetch x top_k``, then one FilterRank: at most
        ``top_k`` kept memories, best first by the sidecar's rank score."""
        check_top_k(top_k)
        result = self.memory.search(query, top_k=top_k * self.overfetch, **kwargs)
        candidates = self._candidates(result.get("results", []), scored=True)
        if not candidates or top_k == 0:
            return {**result, "results": []}
        args, rank_kwargs = self._rank_call(candidates, top_k, actor)
        response = self.client.filter_rank(*args, **rank_kwargs)
        return {**result, "results": self._ranked(candidates, response)[:top_k]}

    def update(
        self,
        memory_id: str,
        text: str | None = None,
        metadata: dict[str, Any] | None = None,
        *,
        actor: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """Decided first: DENY raises `PolicyDenied`, Mem0 untouched. With a writer
        named (``actor``, per call or the wrapper's), the update is a new version of
        the record whose creator is that writer, recorded once Mem0 holds the change
        (Revise; when it fails, Mem0 gets the old text back), so a change by a blocked
        or untrusted source is judged as that source's content from then on, and a
        failed one never credits the old text to the writer; with none,
        ``check("update")`` and the record keeps its creator."""
        self._no_lineage_change(metadata)
        writer = actor or self.actor
        read = None
        if writer is not None and self._known.get(memory_id, self.client) is None:
            # the version it revises over, read while the sidecar decides (one round trip)
            read = self._beside.submit(self.client.explain, memory_id, **VERSION_READ)
        checked = self.client.check("update", memory_id, actor=writer or DEFAULT_ACTOR)
        self._check_write(checked)
        if writer is None:
            return self._changed(self.memory.update(memory_id, text, metadata, **kwargs), checked)
        before = self.memory.get(memory_id)
        try:
            result = self.memory.update(memory_id, text, metadata, **kwargs)
            decision = self._update_decision(memory_id, writer, read) or checked
            self._check_write(decision)
        except OutcomeUnknown:  # recorded or not, nobody can say: out of Mem0
            self.memory.delete(memory_id)
            raise
        except BaseException as exc:  # the store back to what its record names
            self._put_back(memory_id, before, (metadata, kwargs), exc)
            raise
        return self._changed(result, decision)

    def _put_back(
        self, memory_id: str, before: Any, update: tuple[Any, Any], error: BaseException
    ) -> None:
        """Mem0's memory back to `before` after a failed `update` (its metadata and
        keywords): the new version refused, or Mem0 failing after it wrote (its history
        db), when the memory is no longer as it was. Before, a Mem0 that failed there
        kept the new text under the old record. A put back that fails is noted on
        `error`, which is raised either way."""
        if before is None:
            return
        try:
            if changed_since(before, self.memory.get(memory_id)):
                self.memory.update(memory_id, **restoring(before, *update))
        except Exception as failed:
            error.add_note(f"memlineage: memory {memory_id!r} may not be as it was: {failed!r}")

    def _update_decision(
        self, memory_id: str, writer: str, read: Future[pb.ExplainResponse] | None = None
    ) -> pb.Decision | None:
        """`Mem0Guard._revised`, its calls made here (`read`: the Explain asked beside
        the decision, its answer or error taken once the loop needs it)."""
        first: Any = None
        if read is not None:
            try:
                first = read.result()
            except Exception as exc:  # raised by `_revised` only if it reads this version
                first = exc
        steps = self._revised(memory_id, writer, first)
        answer: Any = None
        while True:
            try:
                method, args, kwargs = steps.send(answer)
            except StopIteration as done:
                decision: pb.Decision | None = done.value
                return decision
            try:
                answer = getattr(self.client, method)(*args, **kwargs)
            except RETRIED as exc:
                answer = exc

    def delete(self, memory_id: str, *, actor: str | None = None) -> Any:
        """``check("delete")`` first: DENY raises `PolicyDenied`, Mem0 untouched. The
        lineage record stays in the sidecar for audit."""
        decision = self.client.check(
            "delete", memory_id, actor=actor or self.actor or DEFAULT_ACTOR
        )
        self._check_write(decision)
        return self._changed(self.memory.delete(memory_id), decision)

    def delete_all(
        self,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        *,
        actor: str | None = None,
    ) -> dict[str, Any]:
        """Mem0's ``delete_all``, each memory the filters list checked for ``delete``
        first: one DENY raises `PolicyDenied` (naming it) with Mem0 untouched; else each
        is deleted by Mem0's ``delete``, so a memory added meanwhile, never decided, is
        not. More than `DELETE_ALL_MOST` memories is a ValueError, nothing deleted."""
        return self._run_steps(
            self._deleting_all(delete_all_filters(user_id, agent_id, run_id), actor)
        )

    def reset(self) -> None:
        """Refused: it would delete every memory without a decision (`RESET_REFUSED`)."""
        raise NotImplementedError(RESET_REFUSED)

    def history(self, memory_id: str, *, actor: str | None = None) -> list[Any]:
        """Mem0's change history of the memory, decided as a read of it: a denied
        memory's history is ``[]`` (as `get` answers None), a degraded one's entries
        carry `DECISION_KEY`; only the current text is in it (`_history_shown`). The
        operator's unfiltered audit trail is ``.memory.history``."""
        decision = self.client.check("read", memory_id, actor=actor or self.actor, historical=True)
        return mem0_history(self.memory.history(memory_id), decision)


class GuardedAsyncMem0Memory(Mem0Guard[MemLineageClient | AsyncMemLineageClient]):
    """`GuardedMem0Memory`'s twin over `mem0.AsyncMemory`: the same rules, Mem0's
    coroutines awaited, the sidecar through `_acall` (an `AsyncMemLineageClient`
    awaited, a `MemLineageClient` in a worker thread)."""

    async def _acall(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """One sidecar call without blocking the event loop: ``client.<method>``."""
        call: Callable[..., Any] = getattr(self.client, method)
        if isinstance(self.client, AsyncMemLineageClient):
            return await call(*args, **kwargs)
        return await asyncio.to_thread(call, *args, **kwargs)

    async def add(
        self,
        messages: Any,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """`GuardedMem0Memory.add`, awaited. A cancelled add (`asyncio.wait_for`, a task
        timeout) finishes first, shielded: Mem0 may already be storing the memories
        (in its own threads), so they are recorded, or rolled back, before the
        cancellation goes on; none is left in Mem0 without its lineage."""
        plan = self._plan(messages, metadata, user_id, agent_id, kwargs)
        for creator in self._prechecks(plan, messages):
            decision = await self._acall(
                "check", "write", PROVISIONAL_ID, actor=self.actor or creator
            )
            self._check_write(decision)
        return await finished(self._add_recorded(plan, messages, user_id, agent_id, kwargs))

    async def _add_recorded(
        self,
        plan: AddPlan,
        messages: Any,
        user_id: str | None,
        agent_id: str | None,
        kwargs: dict[str, Any],
    ) -> dict[str, Any]:
        try:
            result = await self.memory.add(
                messages, user_id=user_id, agent_id=agent_id, metadata=plan.metadata, **kwargs
            )
        except BaseException as exc:
            await self._undo_failed_add(plan, exc)
            raise
        added = self._added(result)
        try:
            for item in added:
                args, record_kwargs = self._record_call(plan, item)
                response = await self._acall("record", *args, **record_kwargs)
                if not response.recorded:
                    raise PolicyDenied(response.decision)
                self._known.remember(response.memory, self.client)
        except BaseException:
            for item in added:  # roll back: Mem0 keeps no memory without lineage
                with contextlib.suppress(Exception):
                    await self.memory.delete(item["id"])
            raise
        return dict(result)

    async def _undo_failed_add(self, plan: AddPlan, error: BaseException) -> None:
        """`GuardedMem0Memory._undo_failed_add`, awaited."""
        scope = plan.made_by_it()
        if scope is None:
            return
        try:
            for _ in range(UNDO_ROUNDS):
                listing = await self.memory.get_all(
                    filters=scope, top_k=UNDO_PAGE, show_expired=True
                )
                ids = listed_ids(listing)
                for memory_id in ids:
                    await self.memory.delete(memory_id)
                if len(ids) < UNDO_PAGE:
                    return
        except Exception as failed:
            error.add_note(f"memlineage: memories of this add may remain in Mem0: {failed!r}")

    async def get(self, memory_id: str, *, actor: str | None = None) -> dict[str, Any] | None:
        """`GuardedMem0Memory.get`, awaited."""
        item = await self.memory.get(memory_id)
        if item is None:
            return None
        decision = await self._acall(
            "check",
            "read",
            memory_id,
            actor=actor or self.actor,
            historical=self.historical,
        )
        return mem0_shown(unmarked(item), decision)

    async def get_all(self, *, actor: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """`GuardedMem0Memory.get_all`, awaited."""
        return await self._run_steps(self._listing(actor, kwargs))

    async def _run_steps(
        self, steps: Generator[ListingStep, Any, dict[str, Any]]
    ) -> dict[str, Any]:
        """`GuardedMem0Memory._run_steps`, each call awaited."""
        answer: Any = None
        while True:
            try:
                target, method, args, call_kwargs = steps.send(answer)
            except StopIteration as done:
                out: dict[str, Any] = done.value
                return out
            if target == "memory":
                answer = await getattr(self.memory, method)(*args, **call_kwargs)
            else:
                answer = await self._acall(method, *args, **call_kwargs)

    async def search(
        self, query: str, *, top_k: int = 20, actor: str | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """`GuardedMem0Memory.search`, awaited."""
        check_top_k(top_k)
        result = await self.memory.search(query, top_k=top_k * self.overfetch, **kwargs)
        candidates = self._candidates(result.get("results", []), scored=True)
        if not candidates or top_k == 0:
            return {**result, "results": []}
        args, rank_kwargs = self._rank_call(candidates, top_k, actor)
        response = await self._acall("filter_rank", *args, **rank_kwargs)
        return {**result, "results": self._ranked(candidates, response)[:top_k]}

    async def update(
        self,
        memory_id: str,
        text: str | None = None,
        metadata: dict[str, Any] | None = None,
        *,
        actor: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """`GuardedMem0Memory.update`, awaited. From Mem0's update on it runs to its end,
        the new version recorded or the old memory put back, even if the caller is
        cancelled (`finished`; before, a cancellation during Mem0's update left what it
        wrote under the old record)."""
        self._no_lineage_change(metadata)
        writer = actor or self.actor
        asked = [self._acall("check", "update", memory_id, actor=writer or DEFAULT_ACTOR)]
        if writer is not None and self._known.get(memory_id, self.client) is None:
            # as the sync twin: the version read while the sidecar decides
            asked.append(self._acall("explain", memory_id, **VERSION_READ))
        checked, *read = await asyncio.gather(*asked, return_exceptions=True)
        if isinstance(checked, BaseException):
            raise checked
        self._check_write(checked)
        if writer is None:
            result = await self.memory.update(memory_id, text, metadata, **kwargs)
            return self._changed(result, checked)
        before = await self.memory.get(memory_id)
        update = (text, metadata, kwargs)
        return await finished(self._updated(memory_id, update, before, writer, checked, read))

    async def _updated(
        self,
        memory_id: str,
        update: tuple[Any, Any, dict[str, Any]],
        before: Any,
        writer: str,
        checked: pb.Decision,
        read: list[Any],
    ) -> Any:
        """Mem0's update, then its new version recorded or the old memory put back."""
        text, metadata, kwargs = update
        try:
            result = await self.memory.update(memory_id, text, metadata, **kwargs)
            decision = await self._update_decision(memory_id, writer, *read) or checked
            self._check_write(decision)
        except OutcomeUnknown:  # as the sync twin: out of Mem0
            await self.memory.delete(memory_id)
            raise
        except BaseException as exc:
            await self._put_back(memory_id, before, (metadata, kwargs), exc)
            raise
        return self._changed(result, decision)

    async def _put_back(
        self, memory_id: str, before: Any, update: tuple[Any, Any], error: BaseException
    ) -> None:
        """`GuardedMem0Memory._put_back`, awaited."""
        if before is None:
            return
        try:
            if changed_since(before, await self.memory.get(memory_id)):
                await self.memory.update(memory_id, **restoring(before, *update))
        except Exception as failed:
            error.add_note(f"memlineage: memory {memory_id!r} may not be as it was: {failed!r}")

    async def _update_decision(
        self, memory_id: str, writer: str, read: Any = None
    ) -> pb.Decision | None:
        """`Mem0Guard._revised`, its calls awaited; `read`: the first Explain's answer
        (or its error), asked beside the decision."""
        steps = self._revised(memory_id, writer, read)
        answer: Any = None
        while True:
            try:
                method, args, kwargs = steps.send(answer)
            except StopIteration as done:
                decision: pb.Decision | None = done.value
                return decision
            try:
                answer = await self._acall(method, *args, **kwargs)
            except RETRIED as exc:
                answer = exc

    async def delete(self, memory_id: str, *, actor: str | None = None) -> Any:
        """`GuardedMem0Memory.delete`, awaited."""
        decision = await self._acall(
            "check", "delete", memory_id, actor=actor or self.actor or DEFAULT_ACTOR
        )
        self._check_write(decision)
        return self._changed(await self.memory.delete(memory_id), decision)

    async def delete_all(
        self,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        *,
        actor: str | None = None,
    ) -> dict[str, Any]:
        """`GuardedMem0Memory.delete_all`, awaited."""
        filters = delete_all_filters(user_id, agent_id, run_id)
        return await self._run_steps(self._deleting_all(filters, actor))

    async def reset(self) -> None:
        """Refused, as `GuardedMem0Memory.reset`."""
        raise NotImplementedError(RESET_REFUSED)

    async def history(self, memory_id: str, *, actor: str | None = None) -> list[Any]:
        """`GuardedMem0Memory.history`, awaited."""
        decision = await self._acall(
            "check", "read", memory_id, actor=actor or self.actor, historical=True
        )
        return mem0_history(await self.memory.history(memory_id), decision)
