"""A user's grant for tests: `send_money` delegated by `user:alice` (the fields a test
cares about given, the rest the usual)."""

from __future__ import annotations

import math
import time

from memlineage.lineage.grants import GrantRecord


def user_grant(
    ns: str,
    gid: str,
    *,
    uses: int = 1,
    memory_id: str = "",
    source: str = "",
    expires_in: float | None = None,
) -> GrantRecord:
    """`gid` in `ns`: `uses` uses of `send_money` over `memory_id` or `source`,
    expiring `expires_in` seconds from now (None: never)."""
    return GrantRecord(
        id=gid,
        namespace=ns,
        issuer="user:alice",
        actions=("send_money",),
        memory_id=memory_id,
        source=source,
        uses=uses,
        expires_at=math.inf if expires_in is None else time.time() + expires_in,
    )
