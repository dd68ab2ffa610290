"""One Record is one op of the embedded store's log: a `memlineage serve --data-dir`
killed with SIGKILL while clients record claims that supersede each other (each new
value of a claim replaces the last, whose dependents the cascade marks) leaves no
half-applied Record. After each kill, opening the store directly finds every
acknowledged record; each claim has exactly one live holder, its latest record; every
superseded memory names its successor and its dependents are pending_verification;
the creator's rate counter holds one event per stored record. Five kill rounds on
the same data directory (a kill lands between two ops of one Record often enough
that the composed primitives fail it in most runs), each bounded in time."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import pytest
from memlineage.client import MemLineageClient, MemLineageError
from memlineage.lineage.model import Status
from memlineage.store.embedded import EmbeddedStore
from support.serve_process import REASONING_POLICY, ServeProcess

POLICY = REASONING_POLICY
NS = "default"


def Server(data: Path, policies: Path) -> ServeProcess:
    """`memlineage serve --data-dir` on the policy directory."""
    return ServeProcess(["--policies", str(policies), "--data-dir", str(data)])


CREATOR = "tool:crawler"
WRITERS = 3
KEYS = 3  # claims per writer: each writer's record of key k supersedes its previous one
ROUNDS = 5
ACKED_PER_ROUND = 100
LIVE = (Status.ACTIVE, Status.PENDING_VERIFICATION)


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    p = tmp_path / "policies"
    p.mkdir()
    (p / "main.mlp").write_text(POLICY)
    return p


def _load(
    server: Server,
    writer: int,
    start: int,
    acked: list[str],
    failed: list[BaseException],
    stop: threading.Event,
) -> None:
    """Writer ``writer``: claim c<w>-<i> on doc<w>/k<i % KEYS>, then a note built on it
    (the next claim of the key supersedes c<w>-<i>, whose cascade marks the note)."""
    with MemLineageClient(server.address, timeout=5) as c:
        i = start
        while not stop.is_set():
            claim_id, note_id = f"c{writer}-{i}", f"n{writer}-{i}"
            try:
                out = c.record(
                    claim_id,
                    creator=CREATOR,
                    confidence=0.9,
                    claim=(f"doc{writer}", f"k{i % KEYS}", f"v{i}"),
                )
                assert out.recorded
                acked.append(claim_id)
                out = c.record(note_id, creator=CREATOR, confidence=0.9, dependencies=[claim_id])
                assert out.recorded
                acked.append(note_id)
            except MemLineageError as exc:  # the server died: stop
                failed.append(exc)
                return
            i += 1


def _check(data: Path, acked: list[str]) -> None:
    """The invariants of whole Records, on the store opened directly."""
    store = EmbeddedStore(data)
    try:
        store.check()
        got = store.get_many(NS, acked)
        assert sorted(got) == sorted(acked), "an acknowledged record is missing"
        sp = store._spaces[NS]
        everything = store.get_many(NS, list(sp.rows))
        for (subject, attribute), members in sp.groups.items():
            live = [m for m in members if everything[m].status in LIVE]
            assert live == [members[-1]], (subject, attribute, live, members[-1])
            holder = store.current_claim(NS, subject, attribute)
            assert holder is not None and holder.id == members[-1]
            for older, newer in itertools.pairwise(members):
                rec = everything[older]
                assert (rec.status, rec.successor) == (Status.SUPERSEDED, newer), older
                for child in rec.derivations:
                    assert everything[child].status == Status.PENDING_VERIFICATION, child
        counted = store.count(NS, f"calls:{CREATOR}", 86400, now=time.time() + 1)
        assert counted == len(everything), "a record without its count (or a count alone)"
    finally:
        store.close()


def test_sigkill_during_superseding_claims_leaves_whole_records(
    tmp_path: Path, policies: Path
) -> None:
    data = tmp_path / "data"
    acked: list[str] = []
    servers: list[Server] = []
    started = time.monotonic()
    try:
        for round_no in range(ROUNDS):
            server = Server(data, policies)
            servers.append(server)
            stop = threading.Event()
            failed: list[BaseException] = []
            mine: list[str] = []
            loaders = [
                threading.Thread(
                    target=_load,
                    args=(server, w, round_no * 1_000_000, mine, failed, stop),
                    daemon=True,
                )
                for w in range(WRITERS)
            ]
            for t in loaders:
                t.start()
            deadline = time.monotonic() + 60
            while (
                len(mine) < ACKED_PER_ROUND
                and time.monotonic() < deadline
                and all(t.is_alive() for t in loaders)
            ):
                time.sleep(0.02)
            assert len(mine) >= ACKED_PER_ROUND, failed
            server.kill()  # SIGKILL while every writer is mid-loop
            for t in loaders:  # each stops at its first refused call
                t.join(timeout=30)
            stop.set()
            assert not any(t.is_alive() for t in loaders)
            assert len(failed) == WRITERS, "every writer should have seen the server die"
            acked += mine
            _check(data, acked)
    finally:
        for s in servers:
            s.kill()
    assert time.monotonic() - started < 240
