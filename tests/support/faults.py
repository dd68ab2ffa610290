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
