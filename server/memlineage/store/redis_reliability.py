"""Reliability state on Redis: claim groups (``ml:{ns}:cg:<subject>|<attr>``),
source statistics (``ml:{ns}:src``), feedback and the review schedule
(``ml:{ns}:rv``)."""

from __future__ import annotations

from typing import cast

from memlineage.lineage.model import MemoryRecord
from memlineage.store.redis_base import RedisBase


class RedisReliability(RedisBase):
    """Claim groups, source statistics, feedback and the review schedule."""

    def _claim_group(self, namespace: str, subject: str, attribute: str) -> list[MemoryRecord]:
        with self._guard():
            members = list(
                cast(
                    "set[str]",
                    self.client.smembers(self.keys.claim_group(namespace, subject, attribute)),
                )
            )
        return list(self._load(namespace, members).values())

    def _source_stats(self, namespace: str, sources: list[str]) -> dict[str, tuple[float, float]]:
        names = [f"{s}|{kind}" for s in sources for kind in ("ok", "bad")]
        with self._guard():
            values = self.client.hmget(self.keys.sources(namespace), names)
        return {
            s: (float(values[2 * i] or 0.0), float(values[2 * i + 1] or 0.0))
            for i, s in enumerate(sources)
        }

    def _feedback(self, namespace: str, ids: list[str], success: bool, now: float) -> int:
        keys = [self.keys.record(namespace, i) for i in ids]
        keys.append(self.keys.sources(namespace))
        return int(
            self._run("feedback", keys, ["j", "|ok"] if success else ["q", "|bad"], namespace)
        )

    def _due_for_review(self, namespace: str, now: float, limit: int) -> list[str]:
        with self._guard():
            return cast(
                "list[str]",
                self.client.zrangebyscore(
                    self.keys.review(namespace), "-inf", repr(now), start=0, num=limit
                ),
            )

    def _schedule_review(self, namespace: str, times: dict[str, float], now: float) -> int:
        keys = [self.keys.record(namespace, i) for i in times]
        keys.append(self.keys.review(namespace))
        args: list[str] = [repr(now)]
        for memory_id, at in times.items():
            args += (memory_id, repr(at))
        return int(self._run("schedule_review", keys, args))

    def _unschedule_review(self, namespace: str, ids: list[str]) -> int:
        with self._guard():
            return int(self.client.zrem(self.keys.review(namespace), *ids))
