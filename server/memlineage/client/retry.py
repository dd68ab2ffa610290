"""When a failed attempt may be sent again (`should_retry`), and how long to wait
first (`backoff_delay`)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import grpc

__all__ = ["backoff_delay", "should_retry"]

_NOT_SENT = re.compile(
    r"failed to connect|connection refused|connect failed|dns resolution failed"
    r"|name resolution|no route to host|network is unreachable",
    re.IGNORECASE,
)


def should_retry(code: grpc.StatusCode, details: str, *, idempotent: bool) -> bool:
    """Whether a failed attempt may be sent again.

    Only UNAVAILABLE is retried. A read-only call (Check, FilterRank, Explain,
    Watch, ListPolicies, LintPolicy, health) may always be retried. A call that
    changes state (Record, UpdateStatus, Feedback, ReloadPolicies) is retried
    only when the details show the channel never reached a server (connection
    refused, name resolution): once a server has the request, a second send
    could apply it twice (Feedback would count twice), so that error surfaces.
    """
    if code != grpc.StatusCode.UNAVAILABLE:
        return False
    return idempotent or bool(_NOT_SENT.search(details))


def backoff_delay(
    attempt: int,
    *,
    base: float = 0.05,
    cap: float = 1.0,
    rng: Callable[[], float] = random.random,
) -> float:
    """Sleep before retry number ``attempt`` (0-based): base·2^attempt capped, half jittered.

    The delay lies in [c/2, c] with c = min(cap, base·2^attempt), so clients that
    failed together do not come back together, yet never retry immediately.
    """
    ceiling = min(cap, base * 2.0**attempt)
    return ceiling * (0.5 + 0.5 * rng())
