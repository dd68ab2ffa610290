"""The decision log is hash-chained: every edit, removal, insertion, reordering or cut
of its lines is found by `verify` at the line where it happened; with a key, a log
re-chained without it is refused; the chain holds under concurrent writers, across a
restart, a rotation by size and a reopen after logrotate."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from memlineage import cli
from memlineage.config import ConfigError, load_config
from memlineage.engine.decision_log import DecisionLog
from memlineage.engine.log_chain import GENESIS
from memlineage.engine.log_verify import Verified, verify
from memlineage.engine.records import DecisionLog as ReExported
from memlineage.engine.records import DecisionRecord
from memlineage_dsl.decision import Decision, Reason

DENY = Decision("deny", 0.2, 1.0, (), (Reason("low_confidence", "deny", "doubtful", 50),))
ALLOW = Decision("allow", 1.0, 0.0)


def rec(i: int, d: Decision | None = None) -> DecisionRecord:
    d = d or (DENY if i % 3 == 0 else ALLOW)
    return DecisionRecord(
        f"d{i:x}-feed-{i:x}", d, "ns", "read", (f"m{i}",), "agent:a", 1_700_000_000.0 + i, "v1"
    )


def write_log(path: Path, n: int = 12, key: str | None = None) -> list[str]:
    log = DecisionLog.open(str(path), key=key)
    log.write(rec(0))
    log.write_many([rec(i) for i in range(1, n)])
    log.close()
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def problem(found: Verified) -> tuple[str, int, str]:
    assert found.problem is not None, found.describe()
    return Path(found.problem.file).name, found.problem.line, found.problem.what


def sha_chain(
    lines: list[str],
    start: int,
    digest: Callable[[bytes], str] = lambda b: hashlib.sha256(b).hexdigest(),
) -> list[str]:
    """What a forger without the key does: re-hash lines[start:] so they chain again."""
    out = list(lines[:start])
    prev = json.loads(lines[start - 1])["hash"] if start else GENESIS
    for line in lines[start:]:
        entry = json.loads(line)
        entry["prev"] = prev
        del entry["hash"]
        content = json.dumps(entry, separators=(",", ":")).encode()
        prev = digest(content)
        out.append(f'{content.decode()[:-1]},"hash":"{prev}"}}\n')
    return out


# ------------------------------------------------------------------------- format
def test_lines_keep_their_fields_and_chain(tmp_path: Path) -> None:
    path = tmp_path / "d.log"
    lines = write_log(path)
    entries = [json.loads(x) for x in lines]
    assert [e["seq"] for e in entries] == list(range(12))
    assert entries[0]["prev"] == GENESIS
    for before, after in itertools.pairwise(entries):
        assert after["prev"] == before["hash"]
    first = entries[0]
    assert list(first) == [
        "seq",
        "ts",
        "time",  # `ts` in RFC 3339 (docs/decision-log.schema.json)
        "decision_id",
        "namespace",
        "op",
        "memory_ids",
        "actor",
        "policy_version",
        "effect",
        "score",
        "cost",
        "policies",
        "reasons",
        "obligations",
        "errors",
        "prev",
        "hash",
    ]  # today's, seq/prev/hash
    assert {k: first[k] for k in ("decision_id", "op", "effect", "policies", "reasons")} == {
        "decision_id": "d0-feed-0",
        "op": "read",
        "effect": "deny",
        "policies": ["low_confidence"],
        "reasons": ["low_confidence[fired]: doubtful"],
    }
    # hash = SHA-256 of the line as written without its `,"hash":"…"`
    raw = lines[3].rstrip("\n")
    assert (
        hashlib.sha256(raw[: raw.rindex(',"hash":')].encode() + b"}").hexdigest()
        == entries[3]["hash"]
    )
    assert ReExported is DecisionLog  # engine/core.py imports it from records
    found = verify([str(path)])
    assert found.ok and found.decisions == 12 and found.describe() == "12 decisions, chain intact"


# ---------------------------------------------------------------------- tampering
def tamper(tmp_path: Path, change: Callable[[list[str]], list[str]]) -> tuple[str, int, str]:
    path = tmp_path / "d.log"
    path.unlink(missing_ok=True)  # a fresh log each time (its head record too: a log
    Path(f"{path}.head").unlink(missing_ok=True)  # deleted behind its head has a gap)
    lines = write_log(path)
    path.write_text("".join(change(lines)), encoding="utf-8")
    return problem(verify([str(path)]))


def test_an_edited_line_deny_to_allow_is_found_at_its_line(tmp_path: Path) -> None:
    def edit(lines: list[str]) -> list[str]:
        assert '"effect":"deny"' in lines[6]
        lines[6] = lines[6].replace('"effect":"deny"', '"effect":"allow"')
        return lines

    _, line, what = tamper(tmp_path, edit)
    assert (line, what.split(":")[0]) == (7, "altered")


def test_a_deleted_line_is_found_where_it_was(tmp_path: Path) -> None:
    _, line, what = tamper(tmp_path, lambda lines: lines[:4] + lines[5:])
    assert line == 5 and "seq 5 follows seq 3: 1 line removed" in what


def test_a_swapped_pair_is_found_at_the_first_of_them(tmp_path: Path) -> None:
    def swap(lines: list[str]) -> list[str]:
        lines[7], lines[8] = lines[8], lines[7]
        return lines

    _, line, what = tamper(tmp_path, swap)
    assert line == 8 and "seq 8 follows seq 6" in what


def test_an_inserted_line_is_found_at_its_line(tmp_path: Path) -> None:
    # a copy of an earlier line (its hash holds: only its place is wrong)
    _, line, what = tamper(tmp_path, lambda lines: [*lines[:5], lines[2], *lines[5:]])
    assert line == 6 and "seq 2 follows seq 4: line out of order, repeated or inserted" in what
    # a made-up decision (a line edited into another id)
    _, line, what = tamper(
        tmp_path,
        lambda lines: [
            *lines[:3],
            lines[3].replace(json.loads(lines[3])["decision_id"], "d99-feed-99"),
            *lines[3:],
        ],
    )
    assert (line, what.split(":")[0]) == (4, "altered")


def test_a_forged_line_chained_in_breaks_the_line_after_it(tmp_path: Path) -> None:
    """Without a key a forger can hash a line of his own and link it; the original
    line that now follows it no longer links (its seq repeats)."""

    def insert(lines: list[str]) -> list[str]:
        entry = json.loads(lines[4])
        entry["effect"] = "allow"
        forged = sha_chain([*lines[:4], json.dumps(entry, separators=(",", ":")) + "\n"], 4)
        return [*forged, *lines[4:]]

    _, line, what = tamper(tmp_path, insert)
    assert line == 6 and "seq 4 follows seq 4" in what


def test_a_truncated_last_line_is_found(tmp_path: Path) -> None:
    _, line, what = tamper(tmp_path, lambda lines: [*lines[:-1], lines[-1][:40]])
    assert line == 12 and what.startswith("truncated")
    _, line, what = tamper(tmp_path, lambda lines: [*lines[:-1], lines[-1][:-1]])  # its \n
    assert line == 12 and what.startswith("truncated")


@pytest.mark.parametrize(
    ("bad", "what"),
    [
        (b"\xff\xfe not text\n", "not UTF-8 text"),
        (b'{"seq": 3, "oops\n', "not a JSON line (Unterminated string starting at)"),
        (b"[1, 2]\n", "not a decision line (a JSON object)"),
        (b"\n", "empty line (inserted)"),
        (
            b'{"ts":1.0,"decision_id":"x","effect":"allow"}\n',  # a line of the unchained format
            "no seq (a non-negative integer): not a chained decision line",
        ),
        (
            b'{"seq":true,"prev":"0"}\n',
            "no seq (a non-negative integer): not a chained decision line",
        ),
        (b'{"seq":4,"prev":"abc"}\n', "no prev (64 hex digits): not a chained decision line"),
        (
            b'{"seq":4,"prev":"' + b"a" * 64 + b'"}\n',
            "no hash (64 hex digits) ending the line: not as written",
        ),
    ],
)
def test_unparseable_lines_are_named_precisely(tmp_path: Path, bad: bytes, what: str) -> None:
    path = tmp_path / "d.log"
    lines = write_log(path, 6)
    path.write_bytes("".join(lines[:3]).encode() + bad + "".join(lines[3:]).encode())
    assert problem(verify([str(path)])) == ("d.log", 4, what)


def test_a_reformatted_line_counts_as_altered(tmp_path: Path) -> None:
    """Same JSON, other bytes (spaces, key order): not the line that was written."""

    def reformat(lines: list[str]) -> list[str]:
        lines[2] = json.dumps(json.loads(lines[2])) + "\n"
        return lines

    _, line, _ = tamper(tmp_path, reformat)
    assert line == 3


# ---------------------------------------------------------------------------- HMAC
def test_hmac_log_rejects_a_log_rechained_without_the_key(tmp_path: Path) -> None:
    path = tmp_path / "d.log"
    lines = write_log(path, key="s3cret")
    entry = json.loads(lines[5])
    raw = lines[5].rstrip("\n")
    content = raw[: raw.rindex(',"hash":')].encode() + b"}"
    assert hmac.new(b"s3cret", content, "sha256").hexdigest() == entry["hash"]  # standard HMAC
    assert verify([str(path)], key="s3cret").ok
    assert problem(verify([str(path)]))[1:] == (
        1,
        "altered: the hash does not match the line (or written with a key: pass --key)",
    )
    assert problem(verify([str(path)], key="other"))[1] == 1

    # deny -> allow on line 4, everything after re-chained by someone without the key
    assert '"effect":"deny"' in lines[3]
    lines[3] = lines[3].replace('"effect":"deny"', '"effect":"allow"')
    path.write_text("".join(sha_chain(lines, 3)), encoding="utf-8")
    assert problem(verify([str(path)], key="s3cret"))[1:] == (
        4,
        "altered: the HMAC does not match the line (or written with another key)",
    )
    path.write_text("".join(sha_chain(lines, 0)), encoding="utf-8")
    # a plain SHA-256 chain can be redone: hence the key. Its head record, written with
    # the key, does not read back without it: verify says so (with the record deleted
    # too, the re-chained log verifies without the key, as README says)
    assert problem(verify([str(path)]))[1:] == (
        0,
        "its head record was altered (or written with another key)",
    )
    Path(f"{path}.head").unlink()
    assert verify([str(path)]).ok
    assert problem(verify([str(path)], key="s3cret"))[1] == 1
    wrong = sha_chain(lines, 3, lambda b: hmac.new(b"guess", b, "sha256").hexdigest())
    path.write_text("".join(wrong), encoding="utf-8")
    assert problem(verify([str(path)], key="s3cret"))[1] == 4


def test_a_long_key_is_hashed_first_as_hmac_does(tmp_path: Path) -> None:
    key = "k" * 100  # longer than SHA-256's 64-byte block
    lines = write_log(tmp_path / "d.log", 2, key=key)
    raw = lines[1].rstrip("\n")
    content = raw[: raw.rindex(',"hash":')].encode() + b"}"
    assert hmac.new(key.encode(), content, "sha256").hexdigest() == json.loads(raw)["hash"]


# --------------------------------------------------------------------- concurrency
def test_eight_writers_keep_one_intact_chain(tmp_path: Path) -> None:
    path = tmp_path / "d.log"
    log = DecisionLog.open(str(path), key="k")
    start = threading.Barrier(8)

    def writer(t: int) -> None:
        start.wait()
        for i in range(150):
            n = t * 10_000 + i
            if i % 2:
                log.write(rec(n))
            else:
                log.write_many([rec(n + 1000 * j) for j in range(1, 4)])

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    log.close()
    found = verify([str(path)], key="k")
    assert found.ok, found.describe()
    assert found.decisions == 8 * (75 + 75 * 3)
    seqs = [json.loads(x)["seq"] for x in path.read_text().splitlines()]
    assert seqs == list(range(len(seqs)))


# ------------------------------------------------------- restart, rotation, reopen
def test_a_restart_continues_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "d.log"
    write_log(path, 5)
    log = DecisionLog.open(str(path))
    log.write(rec(5))
    log.close()
    entries = [json.loads(x) for x in path.read_text().splitlines()]
    assert entries[5]["seq"] == 5 and entries[5]["prev"] == entries[4]["hash"]
    assert verify([str(path)]).decisions == 6


def test_a_restart_after_a_torn_write_goes_on_from_the_last_whole_line(tmp_path: Path) -> None:
    """A torn last line is ended and named by verify; the chain goes on from the whole
    line before it, and the head check still runs (before: a new chain from seq 0, and
    the head overwritten, so a cut made mid-line hid how many lines were cut; an
    outside audit)."""
    path = tmp_path / "d.log"
    lines = write_log(path, 5)
    path.write_text("".join(lines[:4]) + lines[4][:30], encoding="utf-8")  # cut mid-line
    log = DecisionLog.open(str(path))
    log.write(rec(9))
    log.close()
    after = path.read_text().splitlines()
    assert len(after) == 7 and after[4] == lines[4][:30]  # the torn line, ended
    gap, last = json.loads(after[5]), json.loads(after[6])
    assert (gap["seq"], gap["prev"], gap["event"]) == (4, json.loads(lines[3])["hash"], "gap")
    assert gap["problem"].startswith("decisions seq 4..4 are missing")  # the head said 4
    assert (last["seq"], last["prev"]) == (5, gap["hash"])
    assert problem(verify([str(path)]))[1:] == (
        5,
        "not a JSON line (Unterminated string starting at)",
    )
    # a writer killed mid-line (its head at the last whole line): no gap, the next seq
    crashed = tmp_path / "c.log"
    lines = write_log(crashed, 4)
    with crashed.open("a", encoding="utf-8") as fh:
        fh.write('{"seq":4,"ts":17')
    log = DecisionLog.open(str(crashed))
    log.write(rec(9))
    log.close()
    after = crashed.read_text().splitlines()
    assert len(after) == 6 and after[4] == '{"seq":4,"ts":17'
    nxt = json.loads(after[5])
    assert (nxt["seq"], nxt["prev"]) == (4, json.loads(lines[3])["hash"])


def test_rotation_by_size_keeps_the_chain_across_files(tmp_path: Path) -> None:
    path = tmp_path / "d.log"
    log = DecisionLog.open(str(path), max_bytes=3000, keep=10)
    for i in range(43):
        log.write(rec(i))
    log.close()
    rotated = sorted(
        (p for p in tmp_path.glob("d.log.*") if p.suffix != ".head"),
        key=lambda p: -int(p.suffix[1:]),
    )
    assert len(rotated) >= 3
    assert all(p.stat().st_size >= 3000 for p in rotated)
    in_order = [str(p) for p in rotated] + [str(path)]
    found = verify(in_order)
    assert found.ok and found.decisions == 43 and found.first_seq == 0
    # the first line of each newer file links to the last of the one before
    first_of_newest = json.loads(path.read_text().splitlines()[0])
    last_of_previous = json.loads(Path(in_order[-2]).read_text().splitlines()[-1])
    assert first_of_newest["prev"] == last_of_previous["hash"]
    # out of order: named at the first line of the misplaced file
    swapped = [in_order[1], in_order[0], *in_order[2:]]
    assert problem(verify(swapped))[:2] == (Path(in_order[1]).name, 1)  # no genesis
    assert problem(verify(swapped, partial=True))[:2] == (Path(in_order[0]).name, 1)
    newest_first = list(reversed(in_order))
    assert problem(verify(newest_first))[:2] == (Path(in_order[-1]).name, 1)  # no genesis
    assert problem(verify(newest_first, partial=True))[:2] == (Path(in_order[-2]).name, 1)
    # a file left out in the middle: a gap at the first line of the one after it
    name, line, what = problem(verify([in_order[0], *in_order[2:]]))
    assert (name, line) == (Path(in_order[2]).name, 1) and "removed" in what


def test_rotation_keeps_n_files_and_the_rest_verifies_from_where_it_starts(tmp_path: Path) -> None:
    path = tmp_path / "d.log"
    log = DecisionLog.open(str(path), max_bytes=1500, keep=2)
    for i in range(40):
        log.write(rec(i))
    log.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "d.log",
        "d.log.1",
        "d.log.2",
        "d.log.head",
    ]
    kept = [str(tmp_path / "d.log.2"), str(tmp_path / "d.log.1"), str(path)]
    found = verify(kept, partial=True)
    assert found.ok and found.first_seq and found.first_seq > 0
    assert found.describe().endswith(
        f"from seq {found.first_seq} (--partial: the lines before it not checked)"
    )
    # without --partial a missing head is a problem: lines cut from the start of the
    # oldest file look the same as files rotated away
    name, line, what = problem(verify(kept))
    assert (name, line) == ("d.log.2", 1)
    assert what.startswith(f"the chain starts at seq {found.first_seq}, not at its genesis")
    # a restart after the rotation (the new file still empty) continues from FILE.1
    log = DecisionLog.open(str(path), max_bytes=10**6)
    log.write(rec(40))
    log.close()
    assert verify([str(tmp_path / "d.log.1"), str(path)], partial=True).ok


def test_reopen_after_logrotate_moved_the_file(tmp_path: Path) -> None:
    path = tmp_path / "d.log"
    log = DecisionLog.open(str(path))
    log.write_many([rec(i) for i in range(5)])
    path.rename(tmp_path / "d.log-old")
    log.write(rec(5))  # still into the moved file until reopened
    log.reopen()
    log.write_many([rec(i) for i in range(6, 9)])
    log.close()
    assert len((tmp_path / "d.log-old").read_text().splitlines()) == 6
    assert [json.loads(x)["seq"] for x in path.read_text().splitlines()] == [6, 7, 8]
    assert verify([str(tmp_path / "d.log-old"), str(path)]).decisions == 9
    swapped = [str(path), str(tmp_path / "d.log-old")]
    assert problem(verify(swapped))[:2] == ("d.log", 1)  # it does not start at seq 0
    assert problem(verify(swapped, partial=True))[:2] == ("d.log-old", 1)


def test_a_stream_log_chains_too_and_close_leaves_the_stream_open(tmp_path: Path) -> None:
    out = (tmp_path / "stream").open("w", encoding="utf-8")
    log = DecisionLog(out)
    log.write_many([rec(i) for i in range(3)])
    log.reopen()  # a stream it does not own: nothing to reopen
    log.close()
    log.write(rec(3))  # after close: dropped, no error
    assert not out.closed
    out.close()
    assert verify([str(tmp_path / "stream")]).decisions == 3


# ------------------------------------------------------------------ command, config
def test_log_verify_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "d.log"
    lines = write_log(path, 4, key="k")
    assert cli.main(["log", "verify", "--key", "k", str(path)]) == 0
    assert capsys.readouterr().out == "4 decisions, chain intact\n"
    monkeypatch.setenv("MEMLINEAGE_DECISION_LOG_KEY", "k")
    assert cli.main(["log", "verify", str(path)]) == 0
    capsys.readouterr()
    path.write_text("".join(lines[:1] + lines[2:]), encoding="utf-8")
    assert cli.main(["log", "verify", str(path)]) == 1
    assert capsys.readouterr().err == f"{path}:2: seq 2 follows seq 0: 1 line removed or moved\n"
    path.write_text("".join(lines[1:]), encoding="utf-8")  # the first line removed
    assert cli.main(["log", "verify", str(path)]) == 1
    assert capsys.readouterr().err.startswith(f"{path}:1: the chain starts at seq 1, not at")
    assert cli.main(["log", "verify", "--partial", str(path)]) == 0
    assert "from seq 1 (--partial" in capsys.readouterr().out
    assert cli.main(["log", "verify", str(tmp_path / "missing")]) == 2
    # the path and the system's reason, not Python's "[Errno 2] ...: 'PATH'"
    assert capsys.readouterr().err == f"error: {tmp_path / 'missing'}: No such file or directory\n"
    assert cli.main(["log", "verify", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path}: Is a directory\n"


def test_decision_log_settings(tmp_path: Path) -> None:
    cfg = load_config(
        env={"MEMLINEAGE_DECISION_LOG_KEY": "k1", "MEMLINEAGE_DECISION_LOG_MAX_BYTES": "1048576"}
    )
    assert (cfg.decision_log_key, cfg.decision_log_max_bytes, cfg.decision_log_keep) == (
        "k1",
        1048576,
        5,
    )
    assert "k1" not in repr(cfg)
    toml = tmp_path / "m.toml"
    toml.write_text('decision_log_key = "k2"\ndecision_log_max_bytes = 10\ndecision_log_keep = 3\n')
    cfg = load_config(str(toml), env={})
    assert (cfg.decision_log_key, cfg.decision_log_max_bytes, cfg.decision_log_keep) == (
        "k2",
        10,
        3,
    )
    toml.write_text("decision_log_keep = 0\n")
    with pytest.raises(ConfigError, match="decision_log_keep"):
        load_config(str(toml), env={})


@pytest.mark.parametrize("key", [None, "s3cret"])
def test_lines_cut_from_the_end_while_down_are_found_after_a_restart(
    tmp_path: Path, key: str | None
) -> None:
    """The writer keeps its head (FILE.head); a restart that finds the file ending
    before it writes a chained gap line, which verify names (before: the chain was
    resumed from the cut end and verified intact; an outside audit)."""
    path = tmp_path / "d.log"
    lines = write_log(path, 12, key)
    path.write_text("".join(lines[:-2]), encoding="utf-8")  # seq 10 and 11 cut
    log = DecisionLog.open(str(path), key=key)
    log.write_many([rec(i) for i in range(12, 15)])
    log.close()
    name, line, what = problem(verify([str(path)], key))
    assert (name, line) == ("d.log", 11)
    assert what == (
        "the sidecar found the log cut when it started: decisions seq 10..11 are missing: "
        "the log ended at seq 9 when the sidecar started, its head record says seq 11 "
        "(lines cut while it was down)"
    )
    # the gap line is chained: taking it out breaks the chain there instead
    text = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(text[:10] + text[11:]), encoding="utf-8")
    assert problem(verify([str(path)], key))[1] == 11


def test_a_head_record_rewritten_without_the_key_is_a_gap(tmp_path: Path) -> None:
    path = tmp_path / "d.log"
    lines = write_log(path, 12, "s3cret")
    path.write_text("".join(lines[:-2]), encoding="utf-8")
    last = json.loads(lines[-3])
    forged = hashlib.sha256(f"head:{last['seq']}:{last['hash']}".encode()).hexdigest()
    Path(f"{path}.head").write_text(
        json.dumps({"seq": last["seq"], "hash": last["hash"], "mac": forged}), encoding="utf-8"
    )
    DecisionLog.open(str(path), key="s3cret").close()
    assert problem(verify([str(path)], "s3cret"))[2].endswith(
        "its head record was altered (or written with another key)"
    )


def test_restarts_and_a_killed_writer_leave_no_gap(tmp_path: Path) -> None:
    path = tmp_path / "d.log"
    write_log(path, 5)
    for start in (5, 8):  # clean restarts
        log = DecisionLog.open(str(path))
        log.write_many([rec(i) for i in range(start, start + 3)])
        log.close()
    killed = DecisionLog.open(str(path))  # never closed: its head record lags its lines
    killed.write_many([rec(i) for i in range(11, 20)])
    killed.sink.flush()  # type: ignore[union-attr]
    DecisionLog.open(str(path)).close()
    found = verify([str(path)])
    assert found.ok and found.decisions == 20, found.describe()


def test_an_emptied_log_verifies_nothing(tmp_path: Path) -> None:
    path = tmp_path / "d.log"
    path.write_text("", encoding="utf-8")
    assert problem(verify([str(path)])) == ("d.log", 0, "no decision line: nothing was verified")


def test_verify_finds_lines_cut_from_the_end_by_the_head_record(tmp_path: Path) -> None:
    """Lines cut from the end of a log while its sidecar is down leave a whole chain:
    before, `log verify` said "chain intact" (the head record was only read by the
    next writer; an outside audit). It reads the head record first, and names the
    missing seqs; a log whose head record is gone is verified on its lines alone."""
    path = tmp_path / "d.log"
    lines = write_log(path, key="s3cret")
    assert verify([str(path)], key="s3cret").ok
    path.write_text("".join(lines[:-3]), encoding="utf-8")
    found = verify([str(path)], key="s3cret")
    assert found.problem is not None and found.problem.line == 0
    last = len(lines) - 4
    assert found.problem.what.startswith(
        f"decisions seq {last + 1}..{last + 3} are missing: the log ended at seq {last}"
    ), found.problem.what
    Path(f"{path}.head").unlink()
    assert verify([str(path)], key="s3cret").ok
