"""The decision log of a real `memlineage serve` process, as an operator keeps it:
logrotate renames the file and sends SIGHUP, the server goes on in a new file with the
same chain; `memlineage log verify old new` accepts the pair and names the line of a
changed byte. The HMAC key and the size rotation reach the log from the environment."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from memlineage.client import MemLineageClient
from memlineage.v1 import memlineage_pb2 as pb
from support.serve_process import REASONING_POLICY
from support.serve_process import ServeProcess as Served

POLICY = REASONING_POLICY
KEY = "e2e-log-key"


def verify(*files: Path | str, key: str | None = KEY) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MEMLINEAGE_DECISION_LOG_KEY"}
    if key is not None:
        env["MEMLINEAGE_DECISION_LOG_KEY"] = key
    return subprocess.run(
        [sys.executable, "-m", "memlineage", "log", "verify", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def entries(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_logrotate_then_sighup_keeps_one_chain_and_verify_finds_an_edit(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "main.mlp").write_text(POLICY)
    log, old = tmp_path / "decisions.log", tmp_path / "decisions.log.old"
    s = Served(
        ["--policies", str(policies), "--decision-log", str(log)],
        {"MEMLINEAGE_DECISION_LOG_KEY": KEY},
    )
    try:
        with MemLineageClient(s.address) as c:
            c.record("guess", creator="reasoning:planner", confidence=0.5)
            c.record("fact", creator="user:alice")
            for _ in range(3):
                assert c.check("read", "guess").effect == pb.EFFECT_DENY
                assert c.check("read", "fact").effect == pb.EFFECT_ALLOW
            log.rename(old)  # logrotate: move the file away, then tell the server
            s.proc.send_signal(signal.SIGHUP)
            s.expect(r"SIGHUP: policies reloaded")
            for _ in range(2):
                assert c.check("read", "guess").effect == pb.EFFECT_DENY
                assert c.check("read", "fact").effect == pb.EFFECT_ALLOW
    finally:
        assert s.stop() == 0

    before, after = entries(old), entries(log)
    assert len(before) == 8 and len(after) == 4  # 2 records + 6 checks, then 4 checks
    assert [e["seq"] for e in before + after] == list(range(12))
    assert after[0]["prev"] == before[-1]["hash"]

    ok = verify(old, log)
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "12 decisions, chain intact\n", "")
    no_key = verify(old, log, key=None)
    assert no_key.returncode == 1 and no_key.stderr.startswith(f"{old}:1: altered")
    swapped = verify(log, old)
    assert swapped.returncode == 1 and swapped.stderr.startswith(f"{log}:1: the chain starts")
    swapped = verify("--partial", log, old)
    assert swapped.returncode == 1
    assert swapped.stderr.startswith(f"{old}:1: a new chain (seq 0) after seq 11")

    # one byte: the deny of the 5th line (the second Check of "guess") becomes a denY;
    # then the deny becomes an allow
    lines = old.read_bytes().splitlines(keepends=True)
    assert b'"effect":"deny"' in lines[4]
    for changed in (b'"effect":"denY"', b'"effect":"allow"'):
        old.write_bytes(
            b"".join([*lines[:4], lines[4].replace(b'"effect":"deny"', changed), *lines[5:]])
        )
        bad = verify(old, log)
        assert bad.returncode == 1
        assert bad.stderr == (
            f"{old}:5: altered: the HMAC does not match the line (or written with another key)\n"
        )


def test_size_rotation_and_restart_continue_the_chain(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "main.mlp").write_text(POLICY)
    log = tmp_path / "decisions.log"
    env = {"MEMLINEAGE_DECISION_LOG_KEY": KEY, "MEMLINEAGE_DECISION_LOG_MAX_BYTES": "2500"}
    for _ in range(2):  # a restart continues from the file's last line
        s = Served(["--policies", str(policies), "--decision-log", str(log)], env)
        try:
            with MemLineageClient(s.address) as c:
                c.record(f"m{time.monotonic_ns()}", creator="user:alice")
                for _ in range(10):
                    c.check("read", "nothing-here")
        finally:
            assert s.stop() == 0
    rotated = sorted(
        (p for p in tmp_path.glob("decisions.log.*") if p.suffix != ".head"),
        key=lambda p: -int(p.suffix[1:]),
    )
    assert len(rotated) >= 3 and (tmp_path / "decisions.log.head").exists()
    files = [*rotated, log]
    ok = verify(*files)
    assert (ok.returncode, ok.stdout) == (0, "22 decisions, chain intact\n"), ok.stderr
    assert re.fullmatch(
        r"\d+ decisions, chain intact from seq \d+ \(--partial: the lines before it "
        r"not checked\)\n",
        verify("--partial", *files[1:]).stdout,
    )
    head = verify(*files[1:])  # without --partial: the head is missing
    assert head.returncode == 1 and head.stderr.startswith(f"{files[1]}:1: the chain starts")
    gap = verify(files[0], *files[2:])
    assert gap.returncode == 1 and gap.stderr.startswith(f"{files[2]}:1: seq ")
