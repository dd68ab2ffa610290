"""Python client for the MemLineage sidecar, and a guard for existing memory stores.

`MemLineageClient` is a thin typed layer over the generated stubs: Python values
in, pb messages out, one deadline per call, the bearer token on every call, and
gRPC's own retries only where a retry cannot apply a change twice (see `retry`).
`AsyncMemLineageClient` is the same on `grpc.aio`, for asyncio agents.

`GuardedStore` puts the sidecar's checks in front of any store with
``put/get/search/delete`` so the agent code that calls the store stays as it is.

The modules, each importable on its own:

- `errors`: `MemLineageError` and one subclass per gRPC status, `error_from_rpc`,
  `PolicyDenied`;
- `convert`: ``"kind:id"`` actors/creators, operation names, timestamps;
- `retry`: which calls gRPC may re-send (the channels' service config) and
  `backoff_delay` for a Watch's reconnects;
- `targets`: `check_target`, a sidecar address gRPC cannot resolve refused when a
  client is made;
- `messages`: the request messages both clients build, and the keyword sets of
  the calls that take many (`MemoryFields`, `CheckOptions`, `RankOptions`,
  `GrantFields`);
- `stubs`: typed shapes of the generated gRPC stubs;
- `sync`: `MemLineageClient` and `WatchStream`;
- `aio`: `AsyncMemLineageClient` and `AsyncWatchStream`;
- `guarded`: `GuardedStore`, the `MemoryStore` protocol and `DictMemoryStore`.

The client imports no server module: only the generated `memlineage.v1` code,
grpc and protobuf.
"""

from __future__ import annotations

from memlineage.client.aio import AsyncMemLineageClient, AsyncWatchStream
from memlineage.client.convert import (
    ActArg,
    from_timestamp,
    parse_actor,
    parse_creator,
    parse_operation,
    to_timestamp,
)
from memlineage.client.errors import (
    Aborted,
    AlreadyExists,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    MemLineageError,
    NotFound,
    OutOfRange,
    PermissionDenied,
    PolicyDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    error_from_rpc,
)
from memlineage.client.guarded import DictMemoryStore, GuardedStore, MemoryStore
from memlineage.client.messages import CheckOptions, GrantFields, MemoryFields, RankOptions
from memlineage.client.retry import backoff_delay
from memlineage.client.sync import MemLineageClient, WatchStream

__all__ = [
    "Aborted",
    "ActArg",
    "AlreadyExists",
    "AsyncMemLineageClient",
    "AsyncWatchStream",
    "Cancelled",
    "CheckOptions",
    "DataLoss",
    "DeadlineExceeded",
    "DictMemoryStore",
    "FailedPrecondition",
    "GrantFields",
    "GuardedStore",
    "Internal",
    "InvalidArgument",
    "MemLineageClient",
    "MemLineageError",
    "MemoryFields",
    "MemoryStore",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "PolicyDenied",
    "RankOptions",
    "ResourceExhausted",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "WatchStream",
    "backoff_delay",
    "error_from_rpc",
    "from_timestamp",
    "parse_actor",
    "parse_creator",
    "parse_operation",
    "to_timestamp",
]
