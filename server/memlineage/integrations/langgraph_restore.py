"""How `GuardedLangGraphStore` puts an item back after the sidecar refused its update.

A LangGraph `Item` shows a value and two timestamps: no store answers the ``index``
setting an item was put with, nor its TTL. Before, the old value went back as
``PutOp(namespace, key, value)``: an item put with ``index=False`` came back
embedded (found by vector search), one put with a TTL came back with none (never
expiring), and in `InMemoryStore` the refused value's vectors stayed, so a search
for the refused text found the old item. So:

- the wrapper keeps the settings of the last put it applied of each item
  (`PutSettings`), tied to the value it wrote by a fingerprint: while the store
  holds that value, they are the item's settings;
- the item is deleted first, in a batch of its own (a store applies one put per
  key in a batch), so no vector of the refused value is left, then put back with
  those settings;
- an item whose settings it does not know (written around this wrapper, or by
  another instance) comes back on the safe side: ``index=False`` (never found by a
  vector it may not have had), and a TTL no longer than the refused put's nor the
  store's default (never outliving what either would have let it live).

What no store lets a put set stays as the put leaves it: the TTL counts from the
restore (its expiry moves as a read's refresh would move it), and ``created_at``
and ``updated_at`` are the restore's (both stores set them on every put, as for
any update).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.store.base import Item, PutOp

KEEP = 10_000
"""Items whose settings are kept per wrapper; past that the least recently put is
dropped (a rollback of it then comes back on the safe side)."""


@dataclass(frozen=True, slots=True)
class Settings:
    """What a put set besides the value, which no store reads back."""

    index: Literal[False] | list[str] | None
    ttl: float | None


def fingerprint(value: Mapping[str, Any]) -> bytes:
    """The value as JSON with sorted keys, hashed: equal for the value as put and as
    a store answers it (stores keep JSON)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


class PutSettings:
    """The settings of the last put this wrapper applied, per memory id (thread-safe)."""

    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._kept: OrderedDict[str, tuple[bytes, Settings]] = OrderedDict()
        self._lock = threading.Lock()

    def applied(self, mid: str, put: PutOp) -> None:
        """The store now holds `put` (a delete: nothing to keep)."""
        with self._lock:
            if put.value is None:
                self._kept.pop(mid, None)
                return
            self._kept[mid] = (fingerprint(put.value), Settings(put.index, put.ttl))
            self._kept.move_to_end(mid)
            if len(self._kept) > self._keep:
                self._kept.popitem(last=False)

    def forget(self, mid: str) -> None:
        with self._lock:
            self._kept.pop(mid, None)

    def of(self, mid: str, value: Mapping[str, Any]) -> Settings | None:
        """The settings `value` was put with, if this wrapper put it last; else None."""
        with self._lock:
            kept = self._kept.get(mid)
        if kept is None or kept[0] != fingerprint(value):
            return None
        return kept[1]


def safe_settings(put: PutOp, supports_ttl: bool, ttl_config: Any) -> Settings:
    """The settings of an item put back whose own are unknown: not embedded, and a
    TTL no longer than the refused put's nor the store's default (none when neither
    has one, or the store keeps no TTL)."""
    if not supports_ttl:
        return Settings(False, None)
    default = ttl_config.get("default_ttl") if isinstance(ttl_config, Mapping) else None
    bounds = [t for t in (put.ttl, default) if t is not None]
    return Settings(False, min(bounds) if bounds else None)


def restoring(
    back: list[tuple[PutOp, Item | None, Settings]],
) -> tuple[list[PutOp], list[PutOp]]:
    """The two batches that put items back: each refused put's item deleted, then
    the old ones (`Item`, or None: there was none) put again with their settings."""
    deletes = [PutOp(put.namespace, put.key, None) for put, _, _ in back]
    puts = [
        PutOp(put.namespace, put.key, old.value, index=settings.index, ttl=settings.ttl)
        for put, old, settings in back
        if old is not None
    ]
    return deletes, puts
