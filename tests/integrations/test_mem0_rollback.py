"""GuardedMem0Memory / GuardedAsyncMem0Memory's rollback over a real, offline Mem0
(configured as in test_mem0_memory) and a real sidecar: an update by a named writer
that the sidecar refuses after Mem0 applied it puts the old memory back as it was,
its text, its metadata, its role and its expiration date."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import support.mem0_offline  # noqa: F401  (before mem0: no telemetry, its home a temp dir)
from mem0 import AsyncMemory, Memory
from memlineage.client import MemLineageClient, Unavailable
from memlineage.integrations.mem0_guard import restoring
from memlineage.integrations.mem0_memory import (
    ADD_KEY,
    LINEAGE_KEY,
    GuardedAsyncMem0Memory,
    GuardedMem0Memory,
)
from support.faults import LosesRevise
from support.mem0_offline import mem0_config
from support.sidecar import RunningSidecar


@pytest.fixture
def client(sidecar: RunningSidecar) -> Iterator[LosesRevise]:
    """The real client, whose Revise fails once `lose` is set."""
    with LosesRevise(sidecar.address, timeout=10) as c:
        yield c


_users = itertools.count()


@pytest.fixture
def user() -> str:
    return f"rbuser{next(_users)}"


MINE = {"trip": "may", LINEAGE_KEY: {"creator": "agent:planner"}}
REFUSED = {"trip": "june", "seat": "aisle", "role": "assistant"}


def shown(item: dict[str, Any]) -> dict[str, Any]:
    """What an update may change of a memory Mem0 answers (``updated_at`` is always now)."""
    return {k: v for k, v in item.items() if k not in ("updated_at", "hash")}


def test_a_refused_update_leaves_the_old_expiration_date_metadata_and_role(
    tmp_path: Path, embedder_url: str, client: LosesRevise, user: str
) -> None:
    """Before: only the text and ``metadata`` went back, and Mem0's update keeps what
    it is not given again, so the refused update's expiration date stayed (one in the
    past hid the memory from every listing), as did its role and its new keys."""
    memory = Memory.from_config(mem0_config(tmp_path, embedder_url))
    try:
        planner = GuardedMem0Memory(memory, client, actor="agent:planner")
        (item,) = planner.add(
            "book the train", user_id=user, metadata=MINE, infer=False, expiration_date="2999-01-01"
        )["results"]
        before = memory.get(item["id"])
        assert before["expiration_date"] == "2999-01-01" and before["role"] == "user"
        client.lose = True
        with pytest.raises(Unavailable):
            planner.update(
                item["id"],
                "book the plane",
                REFUSED,
                actor="agent:other",
                expiration_date="2000-01-01",
            )
        after = memory.get(item["id"])
        assert (after["expiration_date"], after["role"]) == ("2999-01-01", "user")
        seat = after["metadata"].pop("seat")  # Mem0 cannot drop a key: its value is gone
        assert seat is None
        assert shown(after) == shown(before)
        listed = memory.get_all(filters={"user_id": user})["results"]
        assert [r["id"] for r in listed] == [item["id"]]  # not expired
        record = client.explain(item["id"]).memory
        assert (record.creator.id, record.version) == ("agent:planner", 1)
    finally:
        memory.close()


def test_a_refused_update_that_set_an_expiration_date_clears_it(
    tmp_path: Path, embedder_url: str, client: LosesRevise, user: str
) -> None:
    """A memory with no expiration date comes back with none (Mem0 clears it to None),
    not with the refused update's, given as a keyword or in its metadata."""
    memory = Memory.from_config(mem0_config(tmp_path, embedder_url))
    try:
        planner = GuardedMem0Memory(memory, client, actor="agent:planner")
        (item,) = planner.add("book the train", user_id=user, metadata=MINE, infer=False)["results"]
        assert "expiration_date" not in memory.get(item["id"])
        client.lose = True
        with pytest.raises(Unavailable):
            planner.update(item["id"], "x", actor="agent:other", expiration_date="2000-01-01")
        assert memory.get(item["id"])["expiration_date"] is None
        with pytest.raises(Unavailable):
            planner.update(item["id"], metadata={"expiration_date": "2000-01-01"}, actor="agent:x")
        got = memory.get(item["id"])
        assert got["expiration_date"] is None and got["memory"] == "book the train"
        assert [r["id"] for r in memory.get_all(filters={"user_id": user})["results"]] == [
            item["id"]
        ]
    finally:
        memory.close()


def test_the_async_twin_puts_the_old_memory_back_as_it_was(
    tmp_path: Path, embedder_url: str, client: LosesRevise, user: str
) -> None:
    async def scenario() -> None:
        memory = AsyncMemory.from_config(mem0_config(tmp_path, embedder_url))
        try:
            planner = GuardedAsyncMem0Memory(memory, client, actor="agent:planner")
            added = await planner.add(
                "book the train",
                user_id=user,
                metadata=MINE,
                infer=False,
                expiration_date="2999-01-01",
            )
            (item,) = added["results"]
            before = await memory.get(item["id"])
            client.lose = True
            with pytest.raises(Unavailable):
                await planner.update(
                    item["id"],
                    "book the plane",
                    REFUSED,
                    actor="agent:other",
                    expiration_date="2000-01-01",
                )
            after = await memory.get(item["id"])
            assert after["metadata"].pop("seat") is None
            assert shown(after) == shown(before)
        finally:
            memory.close()

    asyncio.run(scenario())


def test_restoring_gives_back_what_mem0_showed() -> None:
    """The keywords of the restore: the text, the metadata with the shown keys an
    update can change, a key the refused update added set to None, and the keys Mem0
    sets itself left out."""
    before = {
        "id": "m1",
        "memory": "old",
        "metadata": {"trip": "may", ADD_KEY: "n"},
        "user_id": "u",
        "role": "user",
        "created_at": "t0",
    }
    refused = {"seat": "aisle", "trip": "june", "hash": "h", "user_id": "v"}
    assert restoring(before, refused, {"expiration_date": "2000-01-01"}) == {
        "text": "old",
        "metadata": {"trip": "may", ADD_KEY: "n", "role": "user", "seat": None},
        "expiration_date": None,
    }
    assert restoring({"memory": "old"}, None, {}) == {"text": "old", "metadata": None}


def _history_refuses_writes(memory: Any) -> None:
    """Mem0's history db refuses every new entry (a real SQLite trigger: as a full or
    read-only disk would): Mem0's update fails after it wrote the vector store."""
    with sqlite3.connect(memory.config.history_db_path) as db:
        db.execute(
            "create trigger refuse before insert on history "
            "begin select raise(abort, 'history is read-only'); end"
        )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_update_mem0_fails_after_writing_puts_the_old_memory_back(
    tmp_path: Path, embedder_url: str, sidecar: RunningSidecar, user: str, mode: str
) -> None:
    """Before: Mem0's update was outside the rollback, so one that failed after writing
    the vector store (its history db) left the new text in Mem0 under the old record,
    credited to the old creator."""
    kind: Any = Memory if mode == "sync" else AsyncMemory
    memory = kind.from_config(mem0_config(tmp_path, embedder_url))

    async def run(call: Any) -> Any:
        return (await call) if mode == "async" else call

    async def scenario(ml: MemLineageClient) -> None:
        wrapper: Any = GuardedMem0Memory if mode == "sync" else GuardedAsyncMem0Memory
        planner = wrapper(memory, ml, actor="agent:planner")
        added = await run(planner.add("book the train", user_id=user, metadata=MINE, infer=False))
        (item,) = added["results"]
        _history_refuses_writes(memory)
        with pytest.raises(sqlite3.IntegrityError, match="read-only") as raised:
            await run(planner.update(item["id"], "book the plane", actor="agent:other"))
        assert (await run(memory.get(item["id"])))["memory"] == "book the train"
        record = ml.explain(item["id"]).memory
        assert (record.creator.id, record.version) == ("agent:planner", 1)
        notes = getattr(raised.value, "__notes__", [])
        assert "may not be as it was" in "".join(notes)  # the put back's history entry too

    try:
        with MemLineageClient(sidecar.address, timeout=10) as ml:
            asyncio.run(scenario(ml))
    finally:
        memory.close()


def test_a_cancelled_async_update_ends_recorded_or_put_back(
    tmp_path: Path, embedder_url: str, sidecar: RunningSidecar, user: str
) -> None:
    """Cancelled while Mem0 writes (its history db busy: another process holds it), the
    update finishes first: Mem0's text and the record name the same writer. Before:
    the cancellation left Mem0's write unrecorded, the new text under the old record."""

    async def scenario(ml: MemLineageClient) -> tuple[str, str, int]:
        memory = AsyncMemory.from_config(mem0_config(tmp_path, embedder_url))
        try:
            planner = GuardedAsyncMem0Memory(memory, ml, actor="agent:planner")
            added = await planner.add("book the train", user_id=user, metadata=MINE, infer=False)
            (item,) = added["results"]
            busy = sqlite3.connect(memory.config.history_db_path, isolation_level=None)
            busy.execute("begin exclusive")  # Mem0's history entry waits for it
            update = asyncio.ensure_future(
                planner.update(item["id"], "book the plane", actor="agent:other")
            )
            for _ in range(200):  # until the vector store holds the new text
                await asyncio.sleep(0.02)
                if (await memory.get(item["id"]))["memory"] == "book the plane":
                    break
            update.cancel()
            await asyncio.sleep(0.1)
            busy.execute("rollback")
            busy.close()
            with pytest.raises(asyncio.CancelledError):
                await update
            for _ in range(250):  # Mem0's history entry written (before: by a thread left over)
                if len(await memory.history(item["id"])) >= 2:
                    break
                await asyncio.sleep(0.02)
            record = ml.explain(item["id"]).memory
            text = (await memory.get(item["id"]))["memory"]
            return text, record.creator.id, record.version
        finally:
            memory.close()

    with MemLineageClient(sidecar.address, timeout=10) as ml:
        ended = asyncio.run(scenario(ml))
    assert ended in {("book the train", "agent:planner", 1), ("book the plane", "agent:other", 2)}
