"""Reliability state on Redis: claim groups (``ml:{ns}:cg:<subject>|<attr>``),
source statistics (``ml:{ns}:src``), feedback and the review schedule
(``ml:{ns}:rv``)."""

from __future__ import annotations

import math
from typing import cast

from memlineage.lineage.errors import StoreCorruptError
from memlineage.lineage.model import MemoryRecord
from memlineage.store.redis_base import RedisBase
from memlineage.store.redis_codec import RECORD_REMEDY


class RedisReliability(RedisBase):
    """Claim groups, source statistics, feedback and the review schedule."""

    def _claim_group(self, namespace: str, subject: str, attribute: str) -> list[MemoryRecord]:
        key = self.keys.claim_group(namespace, subject, attribute)
        with self._guard(key):
            members = list(cast("set[str]", self.client.smembers(key)))
        return list(self._load(namespace, members).values())

    def _source_stats(self, namespace: str, sources: list[str]) -> dict[str, tuple[float, float]]:
        names = [f"{s}|{kind}" for s in sources for kind in ("ok", "bad")]
        key = self.keys.sources(namespace)
        with self._guard(key):
            values = cast("list[str | None]", self.client.hmget(key, names))
        try:
            counts = [float(v or 0.0) for v in values]
            sound = all(0.0 <= c < math.inf for c in counts)  # NaN fails too
        except ValueError:
            sound = False
        if not sound:
            raise _damaged_stats(key, names, values)
        return {s: (counts[2 * i], counts[2 * i + 1]) for i, s in enumerate(sources)}

    def _feedback(self, namespace: str, ids: list[str], success: bool, now: float) -> int:
        keys = [self.keys.record(namespace, i) for i in ids]
        keys.append(self.keys.sources(namespace))
        return int(
            self._run("feedback", keys, ["j", "|ok"] if success else ["q", "|bad"], namespace)
        )

    def _due_for_review(self, namespace: str, now: float, limit: int) -> list[str]:
        key = self.keys.review(namespace)
        with self._guard(key):
            return cast(
                "list[str]", self.client.zrangebyscore(key, "-inf", repr(now), start=0, num=limit)
            )

    def _schedule_review(self, namespace: str, times: dict[str, float], now: float) -> int:
        keys = [self.keys.record(namespace, i) for i in times]
        keys.append(self.keys.review(namespace))
        args: list[str] = [repr(now)]
        for memory_id, at in times.items():
            args += (memory_id, repr(at))
        return int(self._run("schedule_review", keys, args))

    def _unschedule_review(self, namespace: str, ids: list[str]) -> int:
        key = self.keys.review(namespace)
        with self._guard(key):
            return int(self.client.zrem(key, *ids))


def _damaged_stats(key: str, names: list[str], values: list[str | None]) -> StoreCorruptError:
    """The first source statistic of `names` that is not a count (HINCRBYFLOAT's
    finite, non-negative number)."""
    for name, value in zip(names, values, strict=True):
        try:
            ok = value is None or 0.0 <= float(value) < math.inf
        except ValueError:
            ok = False
        if not ok:
            return StoreCorruptError(
                key,
                f"the value of field {name!r} is not a count of uses: {value!r}",
                store="redis",
                remedy=RECORD_REMEDY,
            )
    return StoreCorruptError(key, "a source statistic is not a count", store="redis")
