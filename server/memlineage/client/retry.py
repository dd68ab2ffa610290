"""Which calls gRPC itself may re-send, and the channel options that tell it so.

Both clients leave retrying to gRPC instead of reading error text. Each opens two
channels to the sidecar (gRPC shares one connection between them):

- the *retrying* channel carries a service config whose ``retryPolicy`` re-sends
  the calls in `RETRIED_METHODS`, and only those, when the server answers
  UNAVAILABLE: read-only calls (Check of read/write/... decisions, FilterRank,
  Explain, ListPolicies, LintPolicy, health), where a second send changes nothing;
- the *once* channel has no retry policy. Record, an act (a Check that spends a
  user grant: it shares the Check method, hence a channel of its own), RecordGrant,
  Feedback, UpdateStatus, ReloadPolicies and RunSweep go through it, so a request a
  server has seen is never sent again.

On both, gRPC's transparent retry still re-sends a request that never reached the
server's application (the stream was refused or never left the client): that one
was not applied. And with ``wait_for_ready`` a call made while the channel is
down waits, within its deadline, for the sidecar to come up instead of failing at
once: it has not been sent, so waiting is safe for every call. That wait ends soon
after the sidecar is back, however long it was away: both channels try to reconnect
at least every `MAX_RECONNECT_BACKOFF` (gRPC's own default grows to 120 s, so after a
long outage calls kept failing for minutes against a sidecar already serving).

`backoff_delay` remains for the one retry gRPC cannot do: a Watch resuming after
the last event it delivered (gRPC retries a stream only before its first message).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "BACKOFF_MULTIPLIER",
    "INITIAL_BACKOFF",
    "INITIAL_RECONNECT_BACKOFF",
    "MAX_BACKOFF",
    "MAX_RECONNECT_BACKOFF",
    "MAX_RETRIES",
    "RETRIED_METHODS",
    "backoff_delay",
    "channel_options",
    "service_config",
]

RETRIED_METHODS: tuple[tuple[str, str], ...] = (
    ("memlineage.v1.MemLineage", "Check"),
    ("memlineage.v1.MemLineage", "FilterRank"),
    ("memlineage.v1.MemLineage", "Explain"),
    ("memlineage.v1.PolicyAdmin", "ListPolicies"),
    ("memlineage.v1.PolicyAdmin", "LintPolicy"),
    ("grpc.health.v1.Health", "Check"),
)
"""The (service, method) pairs the retrying channel re-sends on UNAVAILABLE. Check is
here for decisions only: an act goes through the once channel."""

MAX_RETRIES = 4
"""gRPC caps ``maxAttempts`` at 5 (a first attempt and 4 retries); more is treated as 5."""
INITIAL_BACKOFF = 0.05
MAX_BACKOFF = 1.0
BACKOFF_MULTIPLIER = 2.0
"""gRPC waits a random time in [0, min(INITIAL_BACKOFF·2^(n-1), MAX_BACKOFF)] before
retry n (the same ceilings as `backoff_delay`, fully jittered)."""


INITIAL_RECONNECT_BACKOFF = 0.1
MAX_RECONNECT_BACKOFF = 1.0
"""The channel's reconnect pacing while the sidecar is unreachable: first retry after
INITIAL, growing 1.6x up to MAX (a local sidecar: a refused connect costs nothing)."""

KEEPALIVE_SECONDS = 20.0
KEEPALIVE_TIMEOUT_SECONDS = 10.0
"""While a call is open (a Watch lives for hours), the channel pings the sidecar every
KEEPALIVE_SECONDS and drops a connection that has not answered in KEEPALIVE_TIMEOUT:
a Watch over a connection that died without a word (a partition, a host gone) then
fails UNAVAILABLE and resumes from its cursor, where it waited for ever. The sidecar
takes pings this often (`grpc.http2.max_ping_strikes` 0 in its server options)."""


def service_config(retries: int) -> dict[str, Any]:
    """The service config of a channel re-sending `RETRIED_METHODS` up to ``retries``
    times (at most `MAX_RETRIES`); ``retries=0`` is a config with no retry policy."""
    if retries <= 0:
        return {}
    return {
        "methodConfig": [
            {
                "name": [{"service": s, "method": m} for s, m in RETRIED_METHODS],
                "retryPolicy": {
                    "maxAttempts": min(retries, MAX_RETRIES) + 1,
                    "initialBackoff": f"{INITIAL_BACKOFF}s",
                    "maxBackoff": f"{MAX_BACKOFF}s",
                    "backoffMultiplier": BACKOFF_MULTIPLIER,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ]
    }


def channel_options(retries: int, options: Sequence[tuple[str, Any]] = ()) -> list[tuple[str, Any]]:
    """Channel arguments for `service_config(retries)`, retries on, the config not
    replaced by one from name resolution, reconnects at least every
    `MAX_RECONNECT_BACKOFF`, and keepalive pings while a call is open
    (`KEEPALIVE_SECONDS`); the caller's ``options`` win over these."""
    merged: dict[str, Any] = {
        "grpc.enable_retries": 1,
        "grpc.initial_reconnect_backoff_ms": int(INITIAL_RECONNECT_BACKOFF * 1000),
        "grpc.max_reconnect_backoff_ms": int(MAX_RECONNECT_BACKOFF * 1000),
        "grpc.keepalive_time_ms": int(KEEPALIVE_SECONDS * 1000),
        "grpc.keepalive_timeout_ms": int(KEEPALIVE_TIMEOUT_SECONDS * 1000),
        # what newer grpcio reads for it (its default: 60 s); older ones ignore it
        "grpc.http2.ping_timeout_ms": int(KEEPALIVE_TIMEOUT_SECONDS * 1000),
        "grpc.http2.max_pings_without_data": 0,  # an idle Watch sends no data: ping on
        "grpc.service_config": json.dumps(service_config(retries)),
        "grpc.service_config_disable_resolution": 1,
    }
    merged.update(dict(options))
    return list(merged.items())


def backoff_delay(
    attempt: int,
    *,
    base: float = INITIAL_BACKOFF,
    cap: float = MAX_BACKOFF,
    rng: Callable[[], float] = random.random,
) -> float:
    """Sleep before a Watch's reconnect number ``attempt`` (0-based): base·2^attempt
    capped, half jittered.

    The delay lies in [c/2, c] with c = min(cap, base·2^attempt), so watchers that
    failed together do not come back together, yet never reconnect immediately.
    """
    ceiling = min(cap, base * 2.0**attempt)
    return ceiling * (0.5 + 0.5 * rng())
