"""Lineage store benchmark: prints figures, asserts nothing (not a timed test).

For the embedded store in memory, the embedded store with a data directory (SQLite,
``synchronous=NORMAL``: every acknowledged write survives a killed process) and
Redis: records/s, get-many latency for 100 ids,
revoke of a root with N descendants (time and time per descendant), lineage
event log paging and wait_events wake-up latency, due_for_review of 1,000 on
the record namespace, a claim polled 5,000 times by one source (each value
superseding the last: the Record time of its first values beside its last; a
Record compares with the claim's live members only), and Redis MEMORY USAGE per
record (3 dependencies, 3 tags; plain and with confirmations/contradictions/
feedback/review marks); with a data directory and on Redis, a memory's recent
decisions among the ``decision_retention`` kept (Explain's look; on Redis the longest
single script call beside it).  Embedded
only: due_for_review of a batch of 1,000 on a namespace of 1,000,000 memories
vs one of 10,000 (bulk-loaded with ``EmbeddedStore._bulk_load``): the time per
call should not depend on the namespace size.  Without --redis-url a
throwaway redis-server is started on a free loopback port.

The embedded store with a data directory also reports: records/s with
``fsync=True`` (``synchronous=FULL``: one fsync per write), and the restart time
(open = integrity check + load) of ``--restart-records`` bulk-loaded records from
the snapshot, and of ops replayed after a crash (no snapshot since).  The issue's
targets: >= 10,000 records/s durable embedded; a restart of 1,000,000 records
< 10 s (``--restart-records 1000000``; the default run uses 100,000).

    .venv/bin/python bench/store_bench.py                # full: 100,000 descendants
    .venv/bin/python bench/store_bench.py --backends sqlite --restart-records 1000000
    .venv/bin/python bench/store_bench.py --descendants 10000 --records 2000 \
        --review-sizes 10000,100000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from memlineage.lineage import ManualClock, MemoryRecord
from memlineage.store import EmbeddedStore, LineageStore, open_store

NS = "bench:tenant"
NOW = 1_700_000_000.0


def _record(store: LineageStore, memory_id: str, deps: tuple[str, ...], ns: str = NS) -> None:
    store.record(
        MemoryRecord(
            id=memory_id,
            namespace=ns,
            type="tool_result",
            tags=("travel", "flight", "price"),
            creator_kind="tool",
            creator_id="tool:flight_api",
            creator_confidence=0.85,
            context_id="ctx:000123",
            dependencies=deps,
        )
    )


def bench_records(store: LineageStore, n: int) -> float:
    ids = [f"mem:{i:06d}" for i in range(n)]
    start = time.perf_counter()
    for i, memory_id in enumerate(ids):
        deps = tuple(ids[j] for j in (i - 1, i - 7, i - 31) if j >= 0)
        _record(store, memory_id, deps)
    elapsed = time.perf_counter() - start
    print(
        f"  record: {n} records with up to 3 deps and 3 tags in {elapsed:.2f} s "
        f"-> {n / elapsed:,.0f} records/s"
    )
    return elapsed


def bench_get_many(store: LineageStore, n: int, rounds: int = 200) -> None:
    ids = [f"mem:{i:06d}" for i in range(0, n, max(1, n // 100))][:100]
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        got = store.get_many(NS, ids)
        samples.append(time.perf_counter() - start)
    assert len(got) == len(ids)
    samples.sort()
    print(
        f"  get_many({len(ids)} ids): median {statistics.median(samples) * 1e3:.2f} ms, "
        f"p99 {samples[int(len(samples) * 0.99) - 1] * 1e3:.2f} ms"
    )


def build_dag(
    store: LineageStore,
    ns: str,
    roots: int = 1000,
    layer1: int = 600,
    layer2: int = 400,
    seed: int = 7,
) -> list[str]:
    """The grpc bench's shape: roots, then two layers of derived memories with 1-3
    dependencies each (layer 2 on roots and layer 1)."""
    import random

    rnd = random.Random(seed)
    base = [f"r:{i}" for i in range(roots)]
    for memory_id in base:
        _record(store, memory_id, (), ns)
    one = [f"p1:{i}" for i in range(layer1)]
    for memory_id in one:
        _record(store, memory_id, tuple(rnd.sample(base, rnd.randint(1, 3))), ns)
    two = [f"p2:{i}" for i in range(layer2)]
    for memory_id in two:
        pool = one if rnd.random() < 0.7 else base
        _record(store, memory_id, tuple(rnd.sample(pool, rnd.randint(1, 3))), ns)
    return base + one + two


def bench_lineage_view(store: LineageStore, rounds: int = 200) -> None:
    """lineage_view of 100 random ids with their ancestors (a FilterRank's read)."""
    import random

    ns = f"{NS}:view"
    ids = build_dag(store, ns)
    rnd = random.Random(11)
    batches = [rnd.sample(ids, 100) for _ in range(rounds)]
    sizes = [len(store.lineage_view(ns, b, ancestor_depth=8).records) for b in batches[:20]]
    samples = []
    for batch in batches:
        start = time.perf_counter()
        store.lineage_view(ns, batch, ancestor_depth=8)
        samples.append(time.perf_counter() - start)
    samples.sort()
    med = statistics.median(samples)
    per = statistics.mean(sizes)
    print(
        f"  lineage_view(100 ids + ancestors, ~{per:.0f} records): median "
        f"{med * 1e3:.3f} ms, p99 {samples[int(len(samples) * 0.99) - 1] * 1e3:.3f} ms "
        f"-> {per / med:,.0f} records/s"
    )
    # The same after an access flush on each batch's 100 ids (the sidecar's steady
    # state: read, flush, read again): those rows' cached records are rebuilt.
    samples = []
    for n, batch in enumerate(batches):
        store.record_accesses(ns, {i: (1, NOW + n) for i in batch})
        start = time.perf_counter()
        store.lineage_view(ns, batch, ancestor_depth=8)
        samples.append(time.perf_counter() - start)
    print(
        f"  lineage_view right after an access flush of the 100 ids: median "
        f"{statistics.median(samples) * 1e3:.3f} ms"
    )
    accesses = {i: (1, NOW + 1.0) for i in batches[0]}
    ms = _median_ms(lambda: store.record_accesses(ns, accesses), 50)
    print(f"  record_accesses(100 ids): median {ms:.3f} ms")
    ms = _median_ms(lambda: store.record_access(ns, batches[0], now=NOW + 1.0), 50)
    print(f"  record_access(100 ids): median {ms:.3f} ms")


def build_tree(store: LineageStore, ns: str, total: int, fanout: int = 10) -> int:
    """root + a breadth-first tree of ``total`` descendants (fan-out 10)."""
    _record(store, "root", (), ns)
    frontier, made, level = ["root"], 0, 0
    while made < total:
        nxt = []
        for parent in frontier:
            for k in range(fanout):
                if made >= total:
                    break
                child = f"n{level}:{parent}:{k}" if level < 2 else f"d:{made}"
                _record(store, child, (parent,), ns)
                nxt.append(child)
                made += 1
        frontier, level = nxt, level + 1
    return made


def bench_cascade(store: LineageStore, n: int) -> None:
    ns = f"{NS}:cascade"
    start = time.perf_counter()
    made = build_tree(store, ns, n)
    print(f"  built a tree of {made:,} descendants in {time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    result = store.revoke(ns, "root", reason="bench")
    elapsed = time.perf_counter() - start
    assert result.marked == made, (result.marked, made)
    print(
        f"  revoke root with {made:,} descendants: {elapsed:.3f} s "
        f"({elapsed / made * 1e6:.2f} us per descendant, {result.marked:,} marked)"
    )


def bench_events(store: LineageStore, rounds: int = 50) -> None:
    start = time.perf_counter()
    cursor, total = None, 0
    while True:
        page, cursor = store.events(NS, after=cursor, limit=500)
        if not page:
            break
        total += len(page)
    elapsed = time.perf_counter() - start
    print(
        f"  events: paged through {total:,} events (500 per call) in {elapsed:.3f} s "
        f"-> {total / elapsed:,.0f} events/s"
    )
    ns = f"{NS}:watch"
    latencies: list[float] = []
    for i in range(rounds):
        cursor = store.latest_cursor(ns)
        woke: list[float] = []
        ready = threading.Event()

        def watch(
            after: str = cursor, ready: threading.Event = ready, woke: list[float] = woke
        ) -> None:
            ready.set()
            events, _ = store.wait_events(ns, after=after, timeout=10.0)
            woke.append(time.perf_counter())
            assert events

        t = threading.Thread(target=watch)
        t.start()
        ready.wait()
        time.sleep(0.002)  # let the watcher block
        sent = time.perf_counter()
        _record(store, f"w:{i}", (), ns)
        t.join()
        latencies.append(woke[0] - sent)
    latencies.sort()
    print(
        f"  wait_events wake-up after a record: median "
        f"{statistics.median(latencies) * 1e3:.2f} ms, max {latencies[-1] * 1e3:.2f} ms"
    )


def _median_ms(call, rounds: int) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def bench_kept_decisions(store: LineageStore, rounds: int = 20) -> None:
    """Explain's look for a memory's recent decisions in what the store keeps: a full
    namespace (`decision_retention` of them), the memory in every 500th and none;
    on Redis also the longest single script call (its slow log): Redis serves no
    one else meanwhile."""
    if not store.keeps_decisions:
        return
    from memlineage.lineage.decisions import KeptDecision

    n = store.decision_retention
    ns = "bench:kept"
    kept = [
        KeptDecision(
            f"d{i}",
            ns,
            "read",
            ("m" if i % 500 == 0 else f"o{i}",),
            "user:u",
            NOW + i,
            "v",
            "allow",
            "{}",
        )
        for i in range(n)
    ]
    for start in range(0, n, 1000):
        store.keep_decisions(ns, kept[start : start + 1000])
    client = getattr(store, "client", None)
    saved = {}
    if client is not None:  # every command in the slow log, for the rounds (then as it was)
        saved = client.config_get("slowlog-*")
        client.config_set("slowlog-max-len", 100_000)
    for memory, note in (("m", "in every 500th"), ("nobody", "in none")):
        longest = ""
        if client is not None:
            client.config_set("slowlog-log-slower-than", 0)
            client.slowlog_reset()
        ms = _median_ms(lambda m=memory: store.kept_decisions(ns, m, 20), rounds)
        if client is not None:
            client.config_set("slowlog-log-slower-than", saved["slowlog-log-slower-than"])
            calls = [
                e["duration"]
                for e in client.slowlog_get(100_000)
                if "EVALSHA" in str(e["command"]).upper()
            ]
            longest = f", longest script call {max(calls) / 1e3:.2f} ms ({len(calls)} calls)"
        print(f"  recent decisions of a memory {note}, {n:,} kept: median {ms:.2f} ms{longest}")
    for name, value in saved.items():
        client.config_set(name, value)  # type: ignore[union-attr]  # saved only with a client


def bench_due(store: LineageStore, rounds: int = 50) -> None:
    """due_for_review(limit=1000) on the namespace of bench_records (all due)."""
    at = NOW + store.limits.first_review_seconds
    got = store.due_for_review(NS, now=at, limit=1000)
    ms = _median_ms(lambda: store.due_for_review(NS, now=at, limit=1000), rounds)
    print(
        f"  due_for_review(limit=1000) on the record namespace: {len(got)} ids, median {ms:.2f} ms"
    )


def bench_review_scaling(sizes: list[int], batch: int = 1000, rounds: int = 50) -> None:
    """Embedded: due_for_review of ``batch`` ids on namespaces of different sizes.

    Every memory is scheduled far in the future except 5 x ``batch`` of them, due
    at distinct times; the call must cost the same whatever the namespace size."""
    print("== embedded review schedule (due_for_review scaling)")
    timings: dict[int, float] = {}
    for n in sizes:
        store = EmbeddedStore(clock=ManualClock(NOW))
        start = time.perf_counter()
        store._bulk_load(
            NS,
            (
                MemoryRecord(id=f"r:{i:07d}", namespace=NS, creator_id="tool:t", created_at=NOW)
                for i in range(n)
            ),
            review_at=NOW + 10**6,
        )
        loaded = time.perf_counter() - start
        step = max(1, n // (5 * batch))
        due = {f"r:{i:07d}": NOW + i / n for i in range(0, n, step)}
        store.schedule_review(NS, due, now=NOW)
        got = store.due_for_review(NS, now=NOW + 1, limit=batch)
        assert len(got) == min(batch, len(due)), len(got)
        timings[n] = ms = _median_ms(
            lambda s=store: s.due_for_review(NS, now=NOW + 1, limit=batch), rounds
        )
        print(
            f"  namespace of {n:>9,} memories (bulk-loaded in {loaded:.1f} s, "
            f"{len(due):,} due): due_for_review(limit={batch}) median {ms:.3f} ms"
        )
        store.close()
    small, large = min(timings), max(timings)
    if small != large:
        print(
            f"  ratio {large:,} / {small:,}: {timings[large] / timings[small]:.2f}x "
            f"(namespace {large / small:,.0f}x larger)"
        )


def bench_polled_claim(store: LineageStore, values: int, window: int = 200) -> None:
    """A claim re-recorded by one source without end (a price polled every minute):
    each new value supersedes the last, in one Record. The first `window` Records
    beside the last `window`: a Record compares with the claim's live members only,
    so the late ones should cost what the early ones do, whatever the history."""
    ns = f"{NS}:polled"
    times: list[float] = []
    for i in range(values):
        rec = MemoryRecord(
            id=f"p{i}",
            namespace=ns,
            creator_id="tool:price",
            subject="flight:CA123",
            attribute="price",
            value=str(i),
        )
        t = time.perf_counter()
        store.record_claim(
            rec, holder=None if i == 0 else f"p{i - 1}", supersede=f"p{i - 1}" if i else None
        )
        times.append(time.perf_counter() - t)
    early = statistics.median(times[:window]) * 1e3
    late = statistics.median(times[-window:]) * 1e3
    print(
        f"  a polled claim, {values:,} values from one source (each supersedes the last): "
        f"Record p50 {early:.3f} ms over the first {window}, {late:.3f} ms over the last "
        f"{window} ({late / early:.2f}x)"
    )


def bench_memory(store: LineageStore) -> None:
    client = store.client  # type: ignore[attr-defined]
    ns = f"{NS}:mem"
    for d in ("mem:000001", "mem:000002", "mem:000003"):
        _record(store, d, (), ns)
    store.record(
        MemoryRecord(
            id="mem:000004",
            namespace=ns,
            type="tool_result",
            tags=("travel", "flight", "price"),
            subject="user:42",
            attribute="destination_city",
            value="Shanghai",
            volatility="high",
            creator_kind="tool",
            creator_id="tool:flight_api",
            creator_confidence=0.85,
            context_id="ctx:000123",
            dependencies=("mem:000001", "mem:000002", "mem:000003"),
        )
    )
    usage = store.memory_usage(ns, "mem:000004")  # type: ignore[attr-defined]
    print(f"  MEMORY USAGE of a record hash (3 deps, 3 tags, claim): {usage} bytes (target < 600)")
    for i, (source, value) in enumerate(
        (("tool:other_api", "Shanghai"), ("agent:planner", "Paris"))
    ):
        store.record(
            MemoryRecord(
                id=f"mem:00001{i}",
                namespace=ns,
                type="tool_result",
                subject="user:42",
                attribute="destination_city",
                value=value,
                creator_kind=source.split(":")[0],
                creator_id=source,
            )
        )
    store.feedback(ns, ["mem:000004"], True)
    store.feedback(ns, ["mem:000004"], False)
    store.schedule_review(ns, {"mem:000004": NOW + 60}, now=NOW)
    usage = store.memory_usage(ns, "mem:000004")  # type: ignore[attr-defined]
    print(f"  same record once confirmed, contradicted, used ok/failed and reviewed: {usage} bytes")
    before = client.info("memory")["used_memory"]
    n = 2000
    for i in range(n):
        deps = tuple(f"x:{j}" for j in (i - 1, i - 2, i - 3) if j >= 0)
        _record(store, f"x:{i}", deps, f"{ns}:bulk")
    after = client.info("memory")["used_memory"]
    print(
        f"  used_memory per record incl. its 3 derivation links: {(after - before) / n:.0f} "
        f"bytes (over {n} records)"
    )


def bench_fsync(records: int) -> None:
    """records/s with fsync=True (synchronous=FULL): one fsync per write."""
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"embedded://{tmp}", clock=ManualClock(NOW), fsync=True)
        print("  with fsync=True (synchronous=FULL):")
        bench_records(store, records)
        store.close()


def _bulk_records(n: int) -> Iterator[MemoryRecord]:
    for i in range(n):
        yield MemoryRecord(
            id=f"mem:{i:07d}",
            namespace=NS,
            type="tool_result",
            tags=("travel", "flight", "price"),
            creator_kind="tool",
            creator_id="tool:flight_api",
            creator_confidence=0.85,
            context_id="ctx:000123",
            created_at=NOW,
            dependencies=tuple(f"mem:{j:07d}" for j in (i - 1, i - 7, i - 31) if j >= 0),
        )


def bench_restart(n: int, replayed: int) -> None:
    """Open (check + load) of a data directory of ``n`` records from its snapshot, and
    of ``replayed`` records written one by one with no snapshot since (a crash)."""
    from memlineage.store.embedded import persistence
    from memlineage.store.embedded.persistence import DB_NAME, SqliteLog
    from memlineage.store.embedded.state import State

    print(f"== embedded with a data directory: restart ({n:,} records)")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "snap"
        source = EmbeddedStore(clock=ManualClock(NOW))
        start = time.perf_counter()
        source._bulk_load(NS, _bulk_records(n), review_at=NOW + 3600)
        print(
            f"  bulk-loaded {n:,} records (3 deps, 3 tags) in memory in "
            f"{time.perf_counter() - start:.1f} s"
        )
        log = SqliteLog(data)
        empty = State(source.limits, threading.Condition())
        with empty._changed:
            log.open(empty)
        start = time.perf_counter()
        log.compact(source._state)  # what the server's upkeep (maybe_compact) writes
        log.close()
        del source
        size = (data / DB_NAME).stat().st_size
        print(
            f"  snapshot written in {time.perf_counter() - start:.1f} s: "
            f"{size / 1e6:,.0f} MB, {size / n:,.0f} bytes per record"
        )
        start = time.perf_counter()
        summary = persistence.check(data)
        print(f"  store check: {time.perf_counter() - start:.2f} s ({summary.records:,} records)")
        start = time.perf_counter()
        store = EmbeddedStore(data)
        elapsed = time.perf_counter() - start
        assert len(store.get_many(NS, [f"mem:{n - 1:07d}"])) == 1
        print(
            f"  restart from the snapshot: {elapsed:.2f} s (target < 10 s for "
            f"1,000,000) -> {n / elapsed:,.0f} records/s"
        )
        store.close()

        data = Path(tmp) / "ops"
        store = EmbeddedStore(data, clock=ManualClock(NOW))
        for i, rec in enumerate(_bulk_records(replayed)):
            store.record(rec)
            if i % 1000 == 999:
                store.record_accesses(NS, {rec.id: (1, NOW + i)})
        store.close()
        start = time.perf_counter()
        store = EmbeddedStore(data)
        elapsed = time.perf_counter() - start
        store.close()
        print(
            f"  restart replaying {replayed:,} records' ops (no snapshot: after a crash): "
            f"{elapsed:.2f} s -> {replayed / elapsed:,.0f} ops/s"
        )


def run(kind: str, url: str, args: argparse.Namespace) -> None:
    print(f"== {kind} ({url})")
    store = open_store(url, clock=ManualClock(NOW))
    bench_records(store, args.records)
    bench_get_many(store, args.records)
    bench_lineage_view(store)
    if args.only_view:
        store.close()
        return
    bench_cascade(store, args.descendants)
    bench_events(store)
    bench_due(store)
    bench_kept_decisions(store)
    bench_polled_claim(store, args.claim_values)
    if kind == "redis":
        bench_memory(store)
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--descendants", type=int, default=100_000)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--redis-url", help="use this Redis instead of starting one")
    parser.add_argument(
        "--only-view",
        action="store_true",
        help="stop after the lineage_view line (quick before/after)",
    )
    parser.add_argument(
        "--backends",
        default="embedded,sqlite,redis",
        help="embedded (in memory), sqlite (embedded with a data directory), redis",
    )
    parser.add_argument(
        "--restart-records",
        type=int,
        default=100_000,
        help="records in the sqlite restart bench (the target is for 1,000,000)",
    )
    parser.add_argument(
        "--replay-records",
        type=int,
        default=20_000,
        help="records replayed from ops in the sqlite restart bench",
    )
    parser.add_argument(
        "--claim-values",
        type=int,
        default=5_000,
        help="values of the polled claim (its last Records beside its first)",
    )
    parser.add_argument(
        "--review-sizes",
        default="10000,1000000",
        help="embedded namespace sizes for the due_for_review scaling bench",
    )
    args = parser.parse_args()
    backends = args.backends.split(",")
    if "embedded" in backends:
        run("embedded", "embedded", args)
        if not args.only_view:
            bench_review_scaling([int(n) for n in args.review_sizes.split(",") if n])
    if "sqlite" in backends:
        with tempfile.TemporaryDirectory() as tmp:
            run("sqlite", f"embedded://{tmp}/data", args)
        if not args.only_view:
            bench_fsync(min(args.records, 2000))
            bench_restart(args.restart_records, args.replay_records)
    if "redis" in backends:
        if args.redis_url:
            run("redis", args.redis_url, args)
            return
        from support.redis_servers import start_redis_server

        with tempfile.TemporaryDirectory() as tmp:
            # Bench the default AOF policy (everysec), not the tests' fsync-always.
            server = start_redis_server(Path(tmp), extra_args=("--appendfsync", "everysec"))
            try:
                run("redis", server.url, args)
            finally:
                server.stop()


if __name__ == "__main__":
    main()
