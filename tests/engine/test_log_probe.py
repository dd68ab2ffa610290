"""`log_probe.room_for`: whether a refused decision log has room for a line again,
found without writing to the log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from memlineage.engine.log_probe import room_for


def test_room_is_found_without_writing_to_the_log(tmp_path: Path) -> None:
    log = tmp_path / "decisions.log"
    log.write_bytes(b"x" * 100)
    assert room_for(str(log), 100, 4096) is None
    assert log.read_bytes() == b"x" * 100
    assert [p.name for p in tmp_path.iterdir()] == ["decisions.log"]  # probe removed


def test_a_device_or_a_missing_file_is_not_probed(tmp_path: Path) -> None:
    assert room_for("/dev/full", 0, 100) == "not a regular file: only its next line tells"
    assert room_for(str(tmp_path / "gone.log"), 0, 100) == "No such file or directory"


def test_the_file_size_limit_counts_the_logs_own_size(tmp_path: Path) -> None:
    """RLIMIT_FSIZE limits each file: a small probe file would pass where the log's
    next line cannot. Run in a process of its own (the limit is per process)."""
    log = tmp_path / "decisions.log"
    log.write_bytes(b"x" * 1000)
    code = (
        "import resource, sys; from memlineage.engine.log_probe import room_for; "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1500, resource.RLIM_INFINITY)); "
        f"print(room_for({str(log)!r}, 1000, 400)); print(room_for({str(log)!r}, 1000, 600))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert out == ["None", "past the file size limit (1500 bytes)"]


PROBE_RACE = """
import resource, sys, threading, time
from memlineage.engine import decision_log
from memlineage.engine.decision_log import DecisionLog, DecisionLogError
from memlineage.engine.records import DecisionRecord
from memlineage_dsl.decision import Decision

def rec(i):
    return DecisionRecord(f"d{i}", Decision("allow", 1.0, 0.0), "ns", "read", (f"m{i}",),
                          "agent:a", 1_700_000_000.0 + i, "v1")

path = sys.argv[1]
log = DecisionLog.open(path)
log.write(rec(0))
size = len(open(path, "rb").read())
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 10, resource.RLIM_INFINITY))
try:
    log.write(rec(1))
except DecisionLogError as exc:
    print("refused:", exc.why)
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
print("refusing:", log.refusing)

# While the probe holds the writer's lock, a deciding thread queues its line and
# sleeps: the probe must write it once it lets go.
writer = threading.Thread(target=lambda: log.write(rec(2)))
real = decision_log.room_for
def held(*args):
    writer.start()
    time.sleep(0.3)  # the thread found the lock taken and queued its line
    return real(*args)
decision_log.room_for = held
print("writable:", log.writable(), "refusing:", log.refusing)
writer.join(timeout=10)
print("writer done:", not writer.is_alive())
log.close()
print("lines:", len(open(path, "rb").read().splitlines()))
"""


def test_a_line_queued_while_the_probe_held_the_log_is_written(tmp_path: Path) -> None:
    """A refused log (a real file size limit, lifted again) probed while a deciding
    thread commits: the probe holds the writer's lock, the thread queues its line and
    sleeps, and the probe writes it when it lets go (else the thread sleeps for ever)."""
    log = tmp_path / "decisions.log"
    out = subprocess.run(
        [sys.executable, "-c", PROBE_RACE, str(log)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "refused: File too large",
        "refusing: True",
        "writable: True refusing: False",
        "writer done: True",
        "lines: 2",
    ]


def test_a_directory_refusing_the_probe_file_is_no_room_yet(tmp_path: Path) -> None:
    """Where the probe file cannot be made (here: a directory in its place), the
    answer is the error, not room: only the log's next line can tell then."""
    log = tmp_path / "decisions.log"
    log.write_bytes(b"x")
    (tmp_path / "decisions.log.probe").mkdir()
    assert room_for(str(log), 1, 100) == "Is a directory"
    assert log.read_bytes() == b"x"
