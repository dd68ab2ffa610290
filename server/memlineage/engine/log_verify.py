"""`memlineage log verify`: walk decision-log files in order as one chain and name
the first line that does not fit: altered (its hash), removed, inserted or moved (its
`seq` and `prev`), unreadable, a `gap` line the writer wrote on finding the file
cut behind its head record (`log_head`), or a file that ends before that record while
the writer is down. The line format: `decision_log`."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TextIO

from memlineage.engine.log_chain import GENESIS, HASH_RE, HEX64, digester, key_bytes
from memlineage.engine.log_head import Head, gap_after, read_head
from memlineage.lineage.errors import TOO_DEEP
from memlineage.oserrors import check_kind, said


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


@dataclass(frozen=True, slots=True)
class Verified:
    """What `verify` found: the decisions read, the first line's seq, and the first
    problem (None: the chain is intact)."""

    decisions: int
    first_seq: int | None
    problem: Problem | None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def describe(self) -> str:
        if self.problem is not None:
            return str(self.problem)
        text = f"{self.decisions} decision{'s' * (self.decisions != 1)}, chain intact"
        if self.first_seq:
            text += f" from seq {self.first_seq} (--partial: the lines before it not checked)"
        return text


def _describe_link(seq: int, last: int) -> str:
    if seq > last + 1:
        missing = seq - last - 1
        return f"seq {seq} follows seq {last}: {missing} line{'s' * (missing > 1)} removed or moved"
    return f"seq {seq} follows seq {last}: line out of order, repeated or inserted"


def _entry(
    line: bytes,
    digest: Callable[[bytes], str],
    what_hash: str,
    keyed: bool,
) -> tuple[int, str, str] | str:
    """(seq, prev, hash) of one line (without its newline) whose hash holds, or what
    is wrong with it."""
    if not line.strip():
        return "empty line (inserted)"
    try:
        entry = json.loads(line)
    except UnicodeDecodeError:
        return "not UTF-8 text"
    except ValueError as exc:
        return f"not a JSON line ({str(exc).split(':')[0]})"
    except RecursionError:
        return f"not a JSON line ({TOO_DEEP})"
    if not isinstance(entry, dict):
        return "not a decision line (a JSON object)"
    seq, prev = entry.get("seq"), entry.get("prev")
    if type(seq) is not int or seq < 0:
        return "no seq (a non-negative integer): not a chained decision line"
    if not (isinstance(prev, str) and HEX64.match(prev)):
        return "no prev (64 hex digits): not a chained decision line"
    end = HASH_RE.search(line)
    if end is None or entry.get("hash") != end.group(1).decode():
        return "no hash (64 hex digits) ending the line: not as written"
    stated = end.group(1).decode()
    if digest(line[: end.start()] + b"}") != stated:
        hint = "or written with another key" if keyed else "or written with a key: pass --key"
        return f"altered: the {what_hash} does not match the line ({hint})"
    return seq, prev, stated


def verify(
    paths: Iterable[str], key: str | bytes | None = None, *, partial: bool = False
) -> Verified:
    """Walk the decision-log files `paths` in order (oldest first) as one chain and
    stop at the first line that does not fit. OSError when a file cannot be read.

    The chain must start at its genesis (seq 0): lines removed from its head look
    like older files not given, so that is a problem unless ``partial`` (the older
    files rotated away, e.g. past ``decision_log_keep``)."""
    keyed = key_bytes(key)
    digest = digester(keyed)
    what_hash = "HMAC" if keyed else "hash"
    paths = list(paths)
    for path in paths:  # before: `log verify /dev/zero` read one endless line, growing
        check_kind(path, pipe=True)
    # the live file's head record (`log_head`), read before the lines: a writer going
    # on meanwhile only ever puts it behind what is read next
    kept = read_head(paths[-1], digest) if paths else None
    decisions = 0
    first_seq: int | None = None
    last_seq, last_hash = -1, GENESIS
    last_path = ""
    for path in paths:
        with open(path, "rb") as fh:
            for number, raw in enumerate(fh, 1):
                found = (
                    _entry(raw[:-1], digest, what_hash, keyed is not None)
                    if raw.endswith(b"\n")
                    else "truncated: the last line does not end (a torn or cut write)"
                )
                if isinstance(found, str):
                    return Verified(decisions, first_seq, Problem(path, number, found))
                seq, prev, stated = found
                problem = None
                if (seq == 0) != (prev == GENESIS):
                    problem = "a half genesis line (seq 0 goes with prev 0...0, and only)"
                elif last_seq < 0:
                    if seq != 0 and not partial:  # older files rotated away, or a cut head
                        problem = (
                            f"the chain starts at seq {seq}, not at its genesis (seq 0): "
                            f"{seq} line{'s' * (seq > 1)} before it are not in the files "
                            "given (removed, or in older files: give them first, or pass "
                            "--partial when they were rotated away)"
                        )
                elif seq == 0:
                    problem = (
                        f"a new chain (seq 0) after seq {last_seq}: the lines before "
                        "were cut off, or the files are out of order"
                    )
                elif seq != last_seq + 1:
                    problem = _describe_link(seq, last_seq)
                elif prev != last_hash:
                    problem = (
                        f"does not link to the line before (prev is not the hash of "
                        f"seq {last_seq}): it or the line before was replaced"
                    )
                if problem is not None:
                    return Verified(decisions, first_seq, Problem(path, number, problem))
                if b'"event":"gap"' in raw:  # its hash held: the writer's own line
                    said = json.loads(raw).get("problem")
                    return Verified(
                        decisions,
                        first_seq,
                        Problem(
                            path, number, f"the sidecar found the log cut when it started: {said}"
                        ),
                    )
                if first_seq is None:
                    first_seq = seq
                decisions += 1
                last_seq, last_hash = seq, stated
        last_path = path
    if decisions == 0:  # an emptied log said "0 decisions, chain intact"
        return Verified(0, None, Problem(last_path, 0, "no decision line: nothing was verified"))
    # lines cut from the end leave a whole chain: only the head record shows them
    # (before: "chain intact" over a log cut while its sidecar was down; an audit)
    cut = gap_after(Head(last_seq, last_hash), kept)
    if cut is not None:
        return Verified(decisions, first_seq, Problem(last_path, 0, cut))
    return Verified(decisions, first_seq, None)


def verify_command(
    paths: Sequence[str],
    key: str | None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    *,
    partial: bool = False,
) -> int:
    """`memlineage log verify`: 0 intact, 1 a problem (FILE:LINE: what), 2 unreadable."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        found = verify(paths, key, partial=partial)
    except OSError as exc:
        print(f"error: {said(exc)}", file=err)
        return 2
    if found.problem is not None:
        print(found.describe(), file=err)
        return 1
    print(found.describe(), file=out)
    return 0
