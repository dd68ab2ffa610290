"""GuardedLangGraphStore under concurrency in one process, over a real LangGraph
InMemoryStore (a subclass that holds a batch on an event: the store under the
adapter, paused where the test needs it) and a real sidecar with the bundled
policies: an ``aput`` cancelled between its write and its record (or during its
rollback), and two writers of one key interleaving. Each ends with the store and
the sidecar agreeing on who made what the store holds."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore
from memlineage.client import AsyncMemLineageClient, MemLineageClient
from memlineage.integrations.concurrency import KeyLocks
from memlineage.integrations.langgraph_store import GuardedLangGraphStore, memory_id
from support.faults import LosesRevise
from support.sidecar import RunningSidecar

BOUND = 20.0  # seconds any wait of these tests may take at most
UNLOCKED = 2.0  # how long the second writer gets to run past a held first writer


_users = itertools.count()


@pytest.fixture
def ns() -> tuple[str, str]:
    return (f"conc-{next(_users)}", "notes")


def put(text: str, creator: str) -> dict[str, Any]:
    return {"text": text, "_lineage": {"creator": creator}}


def agree(
    inner: InMemoryStore, ml: MemLineageClient, ns: tuple[str, str], writers: dict[str, str]
) -> str:
    """The store's value of ``note``, asserting the sidecar's record names its writer."""
    item = inner.get(ns, "note")
    assert item is not None
    text = item.value["text"]
    assert ml.explain(memory_id(ns, "note")).memory.creator.id == writers[text]
    return str(text)


# ---------------------------------------------------------------- cancellation


class _GatedAsync(InMemoryStore):
    """The wrapped store: its ``gate``-th async batch holding a put sets ``inside`` and
    waits for ``release``, after writing (``after``) or before."""

    def __init__(self, gate: int, after: bool) -> None:
        super().__init__()
        self.gate, self.after, self.writes = gate, after, 0
        self.inside = asyncio.Event()
        self.release = asyncio.Event()

    async def abatch(self, ops: Any) -> list[Any]:
        ops = list(ops)
        if not any(isinstance(op, PutOp) for op in ops):
            return await super().abatch(ops)
        self.writes += 1
        if self.writes != self.gate:
            return await super().abatch(ops)
        result = await super().abatch(ops) if self.after else None
        self.inside.set()
        await asyncio.wait_for(self.release.wait(), BOUND)
        return result if self.after else await super().abatch(ops)


@pytest.mark.parametrize(
    ("moment", "client_kind"),
    [("record", "sync"), ("record", "async"), ("rollback", "sync")],
)
def test_an_aput_cancelled_after_its_write_leaves_store_and_record_agreeing(
    sidecar: RunningSidecar,
    ml: MemLineageClient,
    ns: tuple[str, str],
    moment: str,
    client_kind: str,
) -> None:
    """Cancelled between the store write and the new version (``record``), the store
    held agent:second's text under agent:first's record; cancelled while the old value
    was being put back after a refused Revise (``rollback``), the same. Now the write
    ends with its record or its rollback, then the cancellation is raised."""
    writers = {"old": "agent:first", "new": "agent:second"}

    async def scenario() -> str:
        # put 1 is the first writer's; put 2 the update's write; put 3 its rollback
        inner = _GatedAsync(gate=2 if moment == "record" else 3, after=moment == "record")
        client: Any
        if moment == "rollback":
            client = LosesRevise(sidecar.address, timeout=10)
        elif client_kind == "async":
            client = AsyncMemLineageClient(sidecar.address, timeout=10)
        else:
            client = ml
        try:
            store = GuardedLangGraphStore(inner, client)
            await store.aput(ns, "note", put("old", "agent:first"))
            if isinstance(client, LosesRevise):
                client.lose = True  # the new version is refused: the old value goes back
            task = asyncio.create_task(store.aput(ns, "note", put("new", "agent:second")))
            await asyncio.wait_for(inner.inside.wait(), BOUND)
            task.cancel()
            inner.release.set()
            await asyncio.wait({task}, timeout=BOUND)
            assert task.cancelled()
            return agree(inner, ml, ns, writers)
        finally:
            if isinstance(client, AsyncMemLineageClient):
                await client.close()
            elif client is not ml:
                client.close()

    held = asyncio.run(scenario())
    assert held == ("new" if moment == "record" else "old")


# ---------------------------------------------------------------- two writers of one key


class _Held(InMemoryStore):
    """The wrapped store: a batch writing the text ``hold`` (sync or async) sets
    ``written`` once written and waits for ``go``."""

    hold = ""

    def __init__(self) -> None:
        super().__init__()
        self.written = threading.Event()
        self.go = threading.Event()

    def _holds(self, ops: list[Any]) -> bool:
        return any(
            isinstance(op, PutOp) and op.value and op.value.get("text") == self.hold for op in ops
        )

    def batch(self, ops: Any) -> list[Any]:
        ops = list(ops)
        result = super().batch(ops)
        if self._holds(ops):
            self.written.set()
            assert self.go.wait(BOUND)
        return result

    async def abatch(self, ops: Any) -> list[Any]:
        ops = list(ops)
        result = await super().abatch(ops)
        if self._holds(ops):
            self.written.set()
            assert await asyncio.to_thread(self.go.wait, BOUND)
        return result


def _in_thread(work: Callable[[], Any], errors: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("writers_are", ["threads", "tasks", "thread_and_task"])
def test_two_writers_of_one_key_land_in_store_and_sidecar_in_one_order(
    sidecar: RunningSidecar, ml: MemLineageClient, ns: tuple[str, str], writers_are: str
) -> None:
    """Writer a's put is held after its store write; writer b puts the same key. Before,
    b decided, wrote and recorded meanwhile, then a recorded its version last: the store
    held b's text under a's record. Now b waits for a's put to end (the key's lock in
    this adapter instance, threads and tasks alike), so both orders are a-then-b."""
    writers = {"zero": "agent:zero", "by-a": "agent:a", "by-b": "agent:b"}
    inner = _Held()
    store = GuardedLangGraphStore(inner, ml)
    store.put(ns, "note", put("zero", "agent:zero"))
    inner.hold = "by-a"
    errors: list[BaseException] = []

    def b_sync() -> None:
        store.put(ns, "note", put("by-b", "agent:b"))

    async def b_async() -> None:
        await store.aput(ns, "note", put("by-b", "agent:b"))

    if writers_are == "tasks":

        async def both() -> None:
            a = asyncio.create_task(store.aput(ns, "note", put("by-a", "agent:a")))
            assert await asyncio.to_thread(inner.written.wait, BOUND)
            b = asyncio.create_task(b_async())
            await asyncio.wait({b}, timeout=UNLOCKED)  # unlocked, b ends meanwhile
            inner.go.set()
            await asyncio.wait_for(asyncio.gather(a, b), BOUND)

        asyncio.run(both())
    else:
        a = _in_thread(lambda: store.put(ns, "note", put("by-a", "agent:a")), errors)
        assert inner.written.wait(BOUND)
        if writers_are == "threads":
            b = _in_thread(b_sync, errors)
        else:
            b = _in_thread(lambda: asyncio.run(b_async()), errors)
        b.join(UNLOCKED)  # unlocked, b ends meanwhile
        inner.go.set()
        a.join(BOUND)
        b.join(BOUND)
        assert not a.is_alive() and not b.is_alive() and errors == []
    assert agree(inner, ml, ns, writers) == "by-b"
    record = ml.explain(memory_id(ns, "note"))
    assert [v.creator.id for v in record.versions] == ["agent:a", "agent:zero"]  # newest first


@pytest.mark.parametrize("when", ["waiting", "handed_over"])
def test_a_task_cancelled_for_a_key_lock_leaves_it_free(when: str) -> None:
    """A task cancelled while it waits for a stripe, or just as the stripe was handed
    to it, holds nothing afterwards: the next caller takes the stripe at once."""
    locks = KeyLocks()
    stripes = locks.stripes(["alice/trip.note"])
    locks.acquire(stripes)  # held by this thread

    async def scenario() -> None:
        waiting = asyncio.create_task(locks.aacquire(stripes))
        await asyncio.sleep(0)  # one turn of the loop: the task is queued for the stripe
        if when == "handed_over":
            locks.release(stripes)  # handed to the waiting task, which has not run yet
        waiting.cancel()
        await asyncio.wait({waiting}, timeout=BOUND)
        assert waiting.cancelled()
        if when == "waiting":
            locks.release(stripes)
        await asyncio.wait_for(locks.aacquire(stripes), BOUND)  # free again
        locks.release(stripes)

    asyncio.run(scenario())
