"""Deciding threads write the decision log together: each one's lines are in the sink
when `write_many` returns, lines queued while another thread writes go out in one
write after it (no thread waits its turn behind each other one), a write the sink
refuses is raised in every thread whose lines it held and leaves the chain where it
was, and a line's text is what `json.dumps` writes for its fields."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memlineage.engine.decision_log import DecisionLog, DecisionLogError
from memlineage.engine.log_verify import verify
from memlineage.engine.records import DecisionRecord
from memlineage_dsl.decision import Decision

ALLOW = Decision("allow", 1.0, 0.0)


def rec(i: int, **fields: object) -> DecisionRecord:
    base: dict[str, object] = {
        "decision_id": f"d{i}",
        "namespace": "ns",
        "memory_ids": (f"m{i}",),
        "actor": "agent:a",
        "policy_version": "v1",
    }
    base.update(fields)
    return DecisionRecord(
        str(base["decision_id"]),
        ALLOW,
        str(base["namespace"]),
        "read",
        tuple(base["memory_ids"]),  # type: ignore[call-overload]  # a tuple of ids above
        str(base["actor"]),
        1_700_000_000.25 + i,
        str(base["policy_version"]),
    )


class HeldSink(io.StringIO):
    """A stream whose first write waits until `release` is set (a slow disk), and
    which counts its writes."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.entered = threading.Event()
        self.writes = 0

    def write(self, s: str) -> int:
        self.writes += 1
        if self.writes == 1:
            self.entered.set()
            assert self.release.wait(10)
        return super().write(s)


def test_lines_queued_during_a_write_go_out_together_after_it() -> None:
    sink = HeldSink()
    log = DecisionLog(sink)
    returned: list[int] = []
    first = threading.Thread(target=lambda: (log.write(rec(0)), returned.append(0)))
    first.start()
    assert sink.entered.wait(10)  # the first line's write is under way, held
    others = [
        threading.Thread(target=lambda i=i: (log.write(rec(i)), returned.append(i)))
        for i in range(1, 6)
    ]
    for t in others:
        t.start()
    time.sleep(0.5)  # the five queue their lines (microseconds) behind the held write
    assert returned == [], "a line was reported written before its write"
    sink.release.set()
    for t in [first, *others]:
        t.join(10)
    assert sorted(returned) == list(range(6))
    # One write for the first line, one for the five queued behind it: with a lock
    # held across each write, each thread wrote its own line in turn (six writes).
    assert sink.writes == 2
    lines = [json.loads(x) for x in sink.getvalue().splitlines()]
    assert [x["seq"] for x in lines] == list(range(6))
    assert {x["decision_id"] for x in lines} == {f"d{i}" for i in range(6)}


def _in_six_threads(writer: Callable[[int], None]) -> None:
    """`writer(0)` to `writer(5)` at once, each on a thread of its own, to their end."""
    threads = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)


class RefusingSink(io.StringIO):
    """A stream that refuses its writes while `full` is set (a full disk)."""

    def __init__(self) -> None:
        super().__init__()
        self.full = False

    def write(self, s: str) -> int:
        if self.full:
            raise OSError(28, "No space left on device")
        return super().write(s)


def test_a_stream_refusing_a_write_raises_it_and_the_chain_shows_the_gap(
    tmp_path: Path,
) -> None:
    sink = RefusingSink()
    log = DecisionLog(sink)
    log.write_many([rec(0), rec(1)])
    sink.full = True
    with pytest.raises(DecisionLogError) as refused:
        log.write(rec(2))
    assert refused.value.code == "DECISION_LOG_UNAVAILABLE"
    assert refused.value.grpc_status == "UNAVAILABLE"
    assert "the decision log (stream) cannot be written: No space left on device" in str(
        refused.value
    )
    sink.full = False
    log.write(rec(3))
    lines = [json.loads(x) for x in sink.getvalue().splitlines()]
    assert [x["decision_id"] for x in lines] == ["d0", "d1", "d3"]
    # A stream may keep refused lines in its buffer and write them later, so the chain
    # goes on past them; when they never come, verify names the gap.
    assert [x["seq"] for x in lines] == [0, 1, 3]
    path = tmp_path / "stream.log"
    path.write_text(sink.getvalue())
    found = verify([str(path)])
    assert found.problem is not None and found.problem.line == 3
    assert found.problem.what == "seq 3 follows seq 1: 1 line removed or moved"


def test_many_threads_writing_leave_one_chain_that_verifies(tmp_path: Path) -> None:
    path = tmp_path / "d.log"
    log = DecisionLog.open(str(path))

    def writer(k: int) -> None:
        for j in range(200):
            if j % 7 == 0:
                log.write_many([rec(k * 1000 + j), rec(k * 1000 + j + 500)])
            else:
                log.write(rec(k * 1000 + j))

    _in_six_threads(writer)
    log.close()
    found = verify([str(path)])
    assert found.ok, found.describe()
    assert found.decisions == 6 * (200 + 29)


text = st.text(st.characters(codec="utf-8"), max_size=12) | st.text(max_size=6)


@settings(max_examples=200, deadline=None)
@given(ns=text, mid=st.lists(text, min_size=1, max_size=3), actor=text, version=text)
def test_a_line_reads_back_as_its_fields_whatever_their_characters(
    ns: str, mid: list[str], actor: str, version: str
) -> None:
    sink = io.StringIO()
    log = DecisionLog(sink)
    log.write(rec(0, namespace=ns, memory_ids=tuple(mid), actor=actor, policy_version=version))
    line = sink.getvalue()
    assert line.isascii() and line.count("\n") == 1
    got = json.loads(line)
    assert (got["namespace"], got["memory_ids"], got["actor"], got["policy_version"]) == (
        ns,
        mid,
        actor,
        version,
    )
    assert got["ts"] == 1_700_000_000.25
    # byte for byte what json.dumps writes for the same fields
    head = json.dumps(
        {
            "ts": got["ts"],
            "time": got["time"],
            "decision_id": "d0",
            "namespace": ns,
            "op": "read",
            "memory_ids": mid,
            "actor": actor,
            "policy_version": version,
        },
        separators=(",", ":"),
    )[1:-1]
    assert line.startswith('{"seq":0,' + head + ",")


class SlowFlushSink(io.StringIO):
    """A stream whose flush (at close) waits until `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.flushing = threading.Event()

    def flush(self) -> None:
        if not self.flushing.is_set():
            self.flushing.set()
            assert self.release.wait(10)


def test_a_thread_writing_while_the_log_closes_returns() -> None:
    sink = SlowFlushSink()
    log = DecisionLog(sink)
    log.write(rec(0))
    closer = threading.Thread(target=log.close)
    closer.start()
    assert sink.flushing.wait(10)  # close holds the writer while the stream flushes
    late = threading.Thread(target=log.write_many, args=([rec(1)],), daemon=True)
    late.start()
    time.sleep(0.2)  # it queued its line and found the writer taken
    sink.release.set()
    closer.join(10)
    late.join(10)
    assert not late.is_alive(), "a line queued during close waited for ever"
    assert [json.loads(x)["decision_id"] for x in sink.getvalue().splitlines()] == ["d0"]


def test_threads_writing_across_rotations_leave_one_chain(tmp_path: Path) -> None:
    """Rotation happens on the writer's turn, between two group writes: every file
    the threads' lines went to verifies as one chain, oldest first, and holds each
    line once."""
    path = tmp_path / "d.log"
    log = DecisionLog.open(str(path), max_bytes=20_000, keep=200)

    def writer(k: int) -> None:
        for j in range(150):
            log.write(rec(k * 1000 + j))

    _in_six_threads(writer)
    log.close()
    rotated = sorted(tmp_path.glob("d.log.*[0-9]"), key=lambda p: -int(p.suffix[1:]))
    assert len(rotated) > 5  # it did rotate, many times
    files = [str(p) for p in (*rotated, path)]
    found = verify(files)
    assert found.ok, found.describe()
    assert found.decisions == 6 * 150
    ids = [json.loads(x)["decision_id"] for f in files for x in Path(f).read_text().splitlines()]
    assert sorted(ids) == sorted(f"d{k * 1000 + j}" for k in range(6) for j in range(150))
