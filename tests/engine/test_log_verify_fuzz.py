"""`memlineage log verify` reads files an attacker may have edited: whatever bytes a
chained log is turned into, `verify` answers (never raises), and it names a problem
unless what is left is the log itself or its first lines cut at a line's end (a cut
tail is the head record's to find, at the writer's restart)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memlineage.engine.decision_log import DecisionLog
from memlineage.engine.log_verify import verify
from memlineage.engine.records import DecisionRecord
from memlineage_dsl.decision import Decision, Reason

DENY = Decision("deny", 0.2, 1.0, (), (Reason("low_confidence", "deny", "doubtful", 50),))
ALLOW = Decision("allow", 1.0, 0.0)


def _log(tmp: Path, key: str | None) -> bytes:
    path = tmp / "clean.log"
    log = DecisionLog.open(str(path), key=key)
    log.write_many(
        [
            DecisionRecord(
                f"d{i}",
                DENY if i % 3 else ALLOW,
                "ns",
                "read",
                (f"m{i}", "é\u2028"),
                "agent:a",
                1_700_000_000.5 + i,
                "v1",
            )
            for i in range(6)
        ]
    )
    log.close()
    return path.read_bytes()


@pytest.fixture(scope="module", params=[None, "k3y"])
def clean(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[bytes, str | None]:
    return _log(tmp_path_factory.mktemp("log"), request.param), request.param


junk = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"\n", b"{", b"}", b'"', b"\\", b"\x00", b"\xff", b"[" * 3000, b"0", b","]),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    where=st.floats(0, 1),
    cut=st.integers(0, 80),
    insert=junk,
)
def test_any_edit_of_a_log_is_answered_and_named(
    tmp_path: Path, clean: tuple[bytes, str | None], where: float, cut: int, insert: bytes
) -> None:
    data, key = clean
    at = int(where * len(data))
    edited = data[:at] + insert + data[at + cut :]
    path = tmp_path / "edited.log"
    path.write_bytes(edited)
    found = verify([str(path)], key=key)  # never raises
    lines = data.splitlines(keepends=True)
    untouched = edited == data or any(edited == b"".join(lines[:n]) for n in range(1, len(lines)))
    if untouched:
        assert found.ok, found.describe()
    else:
        assert not found.ok, (edited, found.describe())
        assert found.problem is not None and found.problem.what


DEEP = b"[" * 5000


def test_a_last_line_nested_past_the_parser_starts_a_new_chain(tmp_path: Path) -> None:
    """The writer reads the log's last line to continue its chain: one nested deeper
    than the JSON parser goes is not a chain to continue (before: RecursionError, and
    the sidecar did not start)."""
    path = tmp_path / "d.log"
    path.write_bytes(_log(tmp_path, None) + DEEP + b"\n")
    log = DecisionLog.open(str(path))
    log.write(DecisionRecord("d9", ALLOW, "ns", "read", ("m9",), "agent:a", 1.7e9, "v1"))
    log.close()
    found = verify([str(path)])
    assert found.problem is not None and found.problem.line == 7
    assert found.problem.what == "not a JSON line (nested deeper than the parser goes)"


def test_a_head_record_nested_past_the_parser_is_a_gap(tmp_path: Path) -> None:
    path = tmp_path / "d.log"
    path.write_bytes(_log(tmp_path, None))
    (tmp_path / "d.log.head").write_bytes(DEEP[:4000])
    log = DecisionLog.open(str(path))  # before: RecursionError
    log.close()
    found = verify([str(path)])
    assert found.problem is not None
    assert "head record was altered" in found.problem.what, found.problem.what
