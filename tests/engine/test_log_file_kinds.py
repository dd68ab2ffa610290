"""`log verify` and `replay` take decision-log files: a device is refused with its path
(before: `log verify /dev/zero` read one endless line, growing, and `replay /dev/zero`
or `replay <(zcat log.gz)` said "0 decision(s) read" and exited 0: a gate passed that
replayed nothing)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from memlineage.engine.log_verify import verify_command
from memlineage.engine.replay import replay_command

REPO = Path(__file__).resolve().parents[2]
POLICIES = str(REPO / "policies")


def test_log_verify_refuses_a_device_instead_of_reading_it_without_end() -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join(str(REPO / d) for d in ("server", "policy_dsl")),
    }
    out = subprocess.run(
        [sys.executable, "-m", "memlineage", "log", "verify", "/dev/zero"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr == "error: /dev/zero: not a regular file (a device or socket)\n"


def test_log_verify_names_a_directory(tmp_path: Path) -> None:
    err = io.StringIO()
    assert verify_command([str(tmp_path)], None, io.StringIO(), err) == 2
    assert err.getvalue() == f"error: {tmp_path}: Is a directory\n"


def _writer(path: str, done: threading.Event) -> None:
    """An empty writer for whoever opens the FIFO to read (so a reader never blocks)."""
    while not done.wait(0.01):
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # ENXIO: no reader yet
            continue


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_replay_refuses_a_log_it_cannot_size_or_seek(tmp_path: Path, kind: str) -> None:
    path = "/dev/zero"
    done = threading.Event()
    if kind == "fifo":
        path = str(tmp_path / "log")
        os.mkfifo(path)  # as `<(zcat decisions.log.gz)` hands it
        threading.Thread(target=_writer, args=(path, done), daemon=True).start()
    out = io.StringIO()
    try:
        assert replay_command([path], POLICIES, out=out, err=io.StringIO()) == 2
    finally:
        done.set()
    assert out.getvalue() == (
        f"cannot read {path}: not a regular file (a FIFO, device or socket; write it to "
        "a file first, e.g. zcat log.gz > log)\n"
    )
