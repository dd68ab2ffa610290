"""Instructions per request, the working tree beside a baseline revision: a figure
that does not move with the machine's load (prints figures, asserts nothing).

On a shared machine wall-clock figures swing by 1.5-2x from one minute to the next,
so a change of 10% cannot be told from noise; the instructions a request executes
do not depend on what else runs. Each workload runs in-process (no gRPC) under
valgrind's callgrind, counting only the measured loop (``callgrind_control -i``),
once with the working tree's code and once with a baseline revision's (checked out
into a temporary ``git worktree``), the same workload script for both:

- ``check``: a fresh read ``Check`` through the servicer, request bytes in and answer
  bytes out (decision reuse off), on 2,000 memories as ``grpc_bench.py`` loads them;
- ``act``: an ``act`` of ``send_email`` with three arguments bound to a user prompt, a
  granted tool output and a derivation of both (denied: the derivation's tool origin
  is not delegated for the body), through the engine;
- ``record``: a ``Record`` of a new memory (``grpc_bench.py``'s mix) through the
  engine (decided, then written to the embedded store in memory);
- ``filter_rank``: a fresh ``FilterRank`` of 100 candidates on the same 2,000 memories
  through the engine, with its answer encoded (per call: divide by 100 for a
  candidate);
- ``search``: an adapter's search, a ``FilterRank`` of the same 30 candidates with
  limit 10 on a reuse-on engine (1,000 memories of one user), decisions reused.

Fewer instructions is not the same as less time (cache misses, the CPU waking up),
but a change that removes work shows here at once; wall-clock targets are measured
by the other benches.

    .venv/bin/python bench/instructions_bench.py                    # vs HEAD, ~2 min
    .venv/bin/python bench/instructions_bench.py --baseline HEAD~3 --workloads check,act
    .venv/bin/python bench/instructions_bench.py --count 300

Needs valgrind (``apt-get install valgrind``); nothing else of the project does.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from baseline import checkout, pythonpath

REPO = Path(__file__).resolve().parent.parent
WORKLOADS = ("check", "act", "record", "filter_rank", "search")
COLLECTED = re.compile(r"Collected : (\d+)")


# ------------------------------------------------------------------ in the child
def _loaded(rng: random.Random) -> tuple[Any, list[str]]:
    """A reuse-off engine on the embedded store with `grpc_bench.py`'s 2,000 memories,
    recorded through the engine, and their ids."""
    from grpc_bench import memories
    from memlineage.engine.core import Engine
    from memlineage.engine.policies import PolicyHolder
    from memlineage.grpc_api import serde
    from memlineage.store.embedded import EmbeddedStore
    from memlineage_dsl.facts import Creator

    engine = Engine(EmbeddedStore(), PolicyHolder(str(REPO / "policies")), reuse_decisions=False)
    ids = []
    for layer in memories(2000, time.time(), rng):
        for m in layer:
            rec = serde.record_from_pb("default", m)
            engine.record(rec, Creator(rec.creator_kind, rec.creator_id))
            ids.append(m.id)
    return engine, ids


def _check_workload(count: int) -> Callable[[], None]:
    run, _one, _requests = check_calls(count)
    return run


def check_calls(count: int) -> tuple[Callable[[], None], Callable[[bytes], None], list[bytes]]:
    """The `check` workload's loop over `count` encoded requests, one call of it on one
    request, and the requests (grpc_bench times single calls after idle with them)."""
    from memlineage.grpc_api import serde
    from memlineage.grpc_api.auth import LOCAL, Authenticator
    from memlineage.grpc_api.servicer import MemLineageService
    from memlineage.metrics import Metrics
    from memlineage.v1 import memlineage_pb2 as pb

    rng = random.Random(7)
    engine, ids = _loaded(rng)
    service = MemLineageService(engine, Authenticator(), Metrics())
    requests = [
        pb.CheckRequest(operation=pb.OPERATION_READ, memory_id=rng.choice(ids)).SerializeToString()
        for _ in range(count)
    ]
    for raw in requests[:100]:  # warm: caches, the interpreter's specialisation
        service._check(serde.parse(pb.CheckRequest, raw), LOCAL, (LOCAL.scope, raw))

    def one(raw: bytes) -> None:
        service._check(serde.parse(pb.CheckRequest, raw), LOCAL, (LOCAL.scope, raw))

    def run() -> None:
        for raw in requests:
            service._check(serde.parse(pb.CheckRequest, raw), LOCAL, (LOCAL.scope, raw))

    return run, one, requests


def filter_rank_calls(
    count: int,
) -> tuple[Callable[[], None], Callable[[bytes], None], list[bytes]]:
    """`check_calls` for FilterRank: `count` encoded requests of `grpc_bench.py`'s
    fresh FilterRank (100 candidates drawn from the 2,000 memories, reuse off) through
    the servicer, bytes in, bytes out; the loop, one call, the requests."""
    from grpc_bench import FR_CANDIDATES
    from memlineage.grpc_api.auth import Authenticator
    from memlineage.grpc_api.servicer import MemLineageService
    from memlineage.metrics import Metrics
    from memlineage.v1 import memlineage_pb2 as pb

    rng = random.Random(7)
    engine, ids = _loaded(rng)
    service = MemLineageService(engine, Authenticator(), Metrics())
    requests = [
        pb.FilterRankRequest(
            candidates=[
                pb.Candidate(memory_id=mid, similarity=rng.uniform(0.3, 1.0))
                for mid in rng.sample(ids, FR_CANDIDATES)
            ]
        ).SerializeToString()
        for _ in range(count)
    ]

    def one(raw: bytes) -> None:  # as the server calls it (no auth: no context read)
        service.FilterRank(raw, None)

    for raw in requests[:20]:  # warm: caches, the interpreter's specialisation
        one(raw)

    def run() -> None:
        for raw in requests:
            one(raw)

    return run, one, requests


def _act_workload(count: int) -> Callable[[], None]:
    import math

    from memlineage.engine.acts import ActArgument
    from memlineage.engine.core import Engine
    from memlineage.engine.policies import PolicyHolder
    from memlineage.lineage.grants import GrantRecord
    from memlineage.lineage.model import MemoryRecord
    from memlineage.store.embedded import EmbeddedStore
    from memlineage_dsl.facts import Creator

    engine = Engine(EmbeddedStore(), PolicyHolder(str(REPO / "policies")))
    for mid, creator, deps in (
        ("prompt", "user:alice", ()),
        ("inbox", "tool:read_inbox", ()),
        ("draft", "agent:assistant", ("prompt", "inbox")),
    ):
        rec = MemoryRecord(
            id=mid,
            namespace="default",
            creator_kind=creator.split(":")[0],
            creator_id=creator,
            dependencies=deps,
        )
        engine.record(rec, Creator.parse(creator))
    engine.record_grant(
        GrantRecord(
            id="",
            namespace="default",
            issuer="",
            actions=("send_email",),
            arguments=("recipients",),
            memory_id="inbox",
            uses=1_000_000,
            expires_at=math.inf,
        ),
        Creator.parse("user:alice"),
    )
    agent = Creator.parse("agent:assistant")
    args = [
        ActArgument("recipients", ("inbox",), "bob@example.com"),
        ActArgument("subject", ("prompt",)),
        ActArgument("body", ("draft",)),
    ]
    for _ in range(100):
        engine.act("default", "send_email", (), args, agent)

    def run() -> None:
        for _ in range(count):
            engine.act("default", "send_email", (), args, agent)

    return run


def _record_workload(count: int) -> Callable[[], None]:
    from grpc_bench import memories
    from memlineage.engine.core import Engine
    from memlineage.engine.policies import PolicyHolder
    from memlineage.grpc_api import serde
    from memlineage.store.embedded import EmbeddedStore
    from memlineage_dsl.facts import Creator

    engine = Engine(EmbeddedStore(), PolicyHolder(str(REPO / "policies")))
    layers = memories(count + 200, time.time(), random.Random(11))
    protos = [m for layer in layers for m in layer]
    warm, measured = protos[:200], protos[200 : 200 + count]

    def record_all(ms: list[Any]) -> None:
        for m in ms:
            rec = serde.record_from_pb("default", m)
            engine.record(rec, Creator(rec.creator_kind, rec.creator_id))

    record_all(warm)
    return lambda: record_all(measured)


def _filter_rank_workload(count: int) -> Callable[[], None]:
    from grpc_bench import FR_CANDIDATES
    from memlineage.grpc_api import wire
    from memlineage_dsl.facts import Creator

    rng = random.Random(7)
    engine, ids = _loaded(rng)
    calls = [
        [(mid, rng.uniform(0.3, 1.0)) for mid in rng.sample(ids, FR_CANDIDATES)]
        for _ in range(count)
    ]
    actor = Creator("agent", "agent:default")
    for c in calls[:20]:
        wire.filter_rank_bytes(engine.filter_rank("default", c, actor))

    def run() -> None:
        for c in calls:
            wire.filter_rank_bytes(engine.filter_rank("default", c, actor))

    return run


def _search_workload(count: int) -> Callable[[], None]:
    """An adapter's search: FilterRank of 30 candidates with limit 10 (overfetch 3) on
    a reuse-on engine, the same candidates each call, as a LangGraph search repeats."""
    from memlineage.engine.core import Engine
    from memlineage.engine.policies import PolicyHolder
    from memlineage.grpc_api import wire
    from memlineage.lineage.model import MemoryRecord
    from memlineage.store.embedded import EmbeddedStore
    from memlineage_dsl.facts import Creator

    engine = Engine(EmbeddedStore(), PolicyHolder(str(REPO / "policies")))
    user = Creator("user", "user:alice")
    for i in range(1000):
        mem = MemoryRecord(
            id=f"k{i}", namespace="default", creator_kind="user", creator_id="user:alice"
        )
        engine.record(mem, user)
    candidates = [(f"k{i}", 0.3 + i / 100) for i in range(30)]
    actor = Creator("agent", "agent:default")
    for _ in range(20):
        wire.filter_rank_bytes(engine.filter_rank("default", candidates, actor, limit=10))

    def run() -> None:
        for _ in range(count):
            wire.filter_rank_bytes(engine.filter_rank("default", candidates, actor, limit=10))

    return run


def child(workload: str, count: int) -> None:
    """Set up `workload`, then count the instructions of its measured loop only."""
    sys.path.insert(0, str(REPO / "bench"))
    build = {
        "check": _check_workload,
        "act": _act_workload,
        "record": _record_workload,
        "filter_rank": _filter_rank_workload,
        "search": _search_workload,
    }
    run = build[workload](count)
    # The collector's state from here on depends only on the loop: where its
    # collections fell otherwise depended on how the modules were loaded (bytecode
    # from __pycache__ or compiled at import), a full one over the whole heap inside
    # the loop (+8% of a Check's count, 2026-12-07) or not.
    gc.collect()
    pid = str(os.getpid())
    subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)
    run()
    subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)


# ------------------------------------------------------------------ the parent
def measure(code: Path | None, workload: str, count: int) -> float:
    """Instructions per request of `workload` with the code of `code` (a checkout; None:
    the working tree)."""
    env = dict(os.environ, PYTHONHASHSEED="0")  # set iteration orders: the same work twice
    env["PYTHONPATH"] = pythonpath(code if code is not None else REPO)  # both alike
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            workload,
            "--count",
            str(count),
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    found = COLLECTED.search(out.stderr)
    if out.returncode != 0 or found is None:
        sys.exit(f"{workload} failed under valgrind:\n{out.stderr[-3000:]}")
    return int(found.group(1)) / count


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", default="HEAD", help="a git revision (default: HEAD)")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help=", ".join(WORKLOADS))
    p.add_argument("--count", type=int, default=500, help="requests measured per workload")
    p.add_argument("--child", help=argparse.SUPPRESS)
    opts = p.parse_args()
    if opts.child:
        child(opts.child, opts.count)
        return 0
    names = [w for w in opts.workloads.split(",") if w]
    for w in names:
        if w not in WORKLOADS:
            p.error(f"--workloads: {w!r} is not one of {', '.join(WORKLOADS)}")
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    with checkout(opts.baseline, "ml-instructions-") as (rev, base):
        print(f"instructions per request (callgrind), {opts.count} requests a workload")
        print(f"{'workload':12s} {'baseline ' + rev:>18s} {'working tree':>14s} {'ratio':>7s}")
        for w in names:
            old = measure(base, w, opts.count)
            new = measure(None, w, opts.count)
            print(f"{w:12s} {old / 1e3:16,.1f} k {new / 1e3:12,.1f} k {new / old:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
