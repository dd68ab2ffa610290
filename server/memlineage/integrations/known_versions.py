"""The records an adapter itself last wrote, so that an update of one needs no Explain.

An update through an adapter is a Revise over the record's current version, with
its lineage kept (the claim, and for Mem0 every field): the adapters asked Explain
for that record before each one, a round trip of its own. The Record and Revise
answers hold the record as stored, so an adapter keeps the last one it saw per
memory and revises over it. This stays exact: a record another writer moved since
has another version, so the Revise is refused (FailedPrecondition on
``expected_version``, nothing written) and the adapter forgets it and asks Explain,
as it did every time before; one the sidecar no longer holds (NotFound) is
forgotten too. They are the records of one sidecar and namespace, the adapter's
client's: an adapter given another client starts over.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from memlineage.client.errors import NotFound, stale_version
from memlineage.v1 import memlineage_pb2 as pb

KEEP = 10_000
"""Records kept per adapter; past that the least recently used is dropped (its next
update asks Explain)."""


class KnownVersions:
    """The last record written through this adapter, per memory id (thread-safe)."""

    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._records: OrderedDict[str, pb.Memory] = OrderedDict()
        self._client: object = None  # whose records they are
        self._lock = threading.Lock()

    def _of(self, client: object) -> OrderedDict[str, pb.Memory]:
        """The records kept through `client` (none when they were another's). Locked."""
        if client is not self._client:
            self._records.clear()
            self._client = client
        return self._records

    def remember(self, memory: pb.Memory, client: object) -> None:
        """`memory` as the sidecar answered a Record or a Revise of it through `client`."""
        if not memory.id:  # nothing recorded (a denied write answers no memory)
            return
        with self._lock:
            records = self._of(client)
            records[memory.id] = memory
            records.move_to_end(memory.id)
            if len(records) > self._keep:
                records.popitem(last=False)

    def get(self, memory_id: str, client: object) -> pb.Memory | None:
        """The record last written of `memory_id` through `client`, or None."""
        with self._lock:
            records = self._of(client)
            found = records.get(memory_id)
            if found is not None:
                records.move_to_end(memory_id)
            return found

    def forget(self, memory_id: str) -> None:
        with self._lock:
            self._records.pop(memory_id, None)

    def read_again(self, memory_id: str, answer: object, known: pb.Memory | None) -> bool:
        """Whether a Revise of `memory_id` that answered `answer` (its reply or error)
        is retried over the version read again, the remembered one forgotten: another
        writer revised it first, or the sidecar no longer holds the record `known`
        (the version the Revise was made over, when remembered)."""
        if stale_version(answer) or (known is not None and isinstance(answer, NotFound)):
            self.forget(memory_id)
            return True
        return False
