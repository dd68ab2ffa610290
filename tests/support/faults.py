"""Faults injected into the real client, for the adapters' failure paths."""

from __future__ import annotations

from typing import Any

import grpc
from memlineage.client import MemLineageClient, Unavailable


class LosesRevise(MemLineageClient):
    """The real client, whose Revise calls fail as an unreachable sidecar's would
    once `lose` is set (a write the adapter made must then be undone)."""

    lose = False

    def revise(self, *args: Any, **kwargs: Any) -> Any:
        if self.lose:
            raise Unavailable(grpc.StatusCode.UNAVAILABLE, "the sidecar went away")
        return super().revise(*args, **kwargs)


class LosesExplain(MemLineageClient):
    """The real client, whose Explain calls fail as an unreachable sidecar's would once
    `lose` is set (an adapter reading a version it does not know must then give up)."""

    lose = False

    def explain(self, *args: Any, **kwargs: Any) -> Any:
        if self.lose:
            raise Unavailable(grpc.StatusCode.UNAVAILABLE, "the sidecar went away")
        return super().explain(*args, **kwargs)


class AppliesReviseLosesReply(MemLineageClient):
    """The real client, whose Revise, once `lose` is set, reaches the sidecar and is
    applied, and whose answer is then lost as a dropped connection loses it
    (UNAVAILABLE: the client never sends it again); with `lose_reads`, every Explain
    after that lost answer fails too (the sidecar gone for the read that would tell)."""

    lose = False
    lose_reads = False
    _gone = False

    def revise(self, *args: Any, **kwargs: Any) -> Any:
        answer = super().revise(*args, **kwargs)
        if self.lose:
            self._gone = self.lose_reads
            raise Unavailable(grpc.StatusCode.UNAVAILABLE, "the connection dropped the reply")
        return answer

    def explain(self, *args: Any, **kwargs: Any) -> Any:
        if self._gone:
            raise Unavailable(grpc.StatusCode.UNAVAILABLE, "the sidecar went away")
        return super().explain(*args, **kwargs)

    def back(self) -> None:
        """The connection and the sidecar answer again."""
        self.lose = self.lose_reads = self._gone = False
