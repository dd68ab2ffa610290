"""The decision log's head record: the last (seq, hash) the writer wrote, kept beside
the log in ``FILE.head`` (at most a second behind, and at close, rotation and
reopen), so that lines cut from the end of the log while the sidecar is down show.

Without it a restart resumed the chain from whatever line the file ended with, and
the cut became a gap no check could see (keyed logs too: an outside audit). Now the
writer, finding the file ending before its head (or with another line there),
first writes a chained `gap` line naming what is missing, which `log verify`
reports; removing that line breaks the chain in turn. The record carries a MAC of
its own fields (HMAC with the log's key), so it cannot be rewritten to match a cut
without the key; deleting the record together with the tail is not detected (ship
the lines off the box, or keep FILE.head where only the sidecar writes)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass

from memlineage.oserrors import reason

HEAD_EVERY = 1.0  # seconds between two writes of the head record while writing
_SUFFIX = ".head"


@dataclass(frozen=True, slots=True)
class Head:
    seq: int
    hash: str


def head_path(path: str) -> str:
    return path + _SUFFIX


def _mac(digest: Callable[[bytes], str], seq: int, digest_of: str) -> str:
    return digest(f"head:{seq}:{digest_of}".encode())


def write_head(path: str, head: Head, digest: Callable[[bytes], str]) -> None:
    """Replace the head record (a temporary file renamed over it: whole or not at
    all). A failure is not the decisions' failure: the caller logs it."""
    target = head_path(path)
    text = json.dumps(
        {"seq": head.seq, "hash": head.hash, "mac": _mac(digest, head.seq, head.hash)},
        separators=(",", ":"),
    )
    partial = f"{target}.{os.getpid()}.tmp"
    with open(partial, "w", encoding="utf-8") as fh:
        fh.write(text + "\n")
    os.replace(partial, target)


def read_head(path: str, digest: Callable[[bytes], str]) -> Head | str | None:
    """The head record of the log `path`: None when there is none (a new log, or one
    written before records), what is wrong with it when it does not read back as
    written (said in the gap line)."""
    try:
        with open(head_path(path), "rb") as fh:
            raw = fh.read(4096)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"its head record cannot be read ({reason(exc)})"
    with contextlib.suppress(ValueError, RecursionError):  # nested past the parser's depth
        v = json.loads(raw)
        if isinstance(v, dict):
            seq, got, mac = v.get("seq"), v.get("hash"), v.get("mac")
            if type(seq) is int and isinstance(got, str) and mac == _mac(digest, seq, got):
                return Head(seq, got)
    return "its head record was altered (or written with another key)"


def gap_after(found: Head | None, kept: Head | str | None) -> str | None:
    """What is missing when the log ends at `found` (None: empty) while its head
    record says `kept`; None when nothing is."""
    if kept is None:
        return None
    if isinstance(kept, str):
        return kept
    last = found.seq if found is not None else -1
    if last < kept.seq:
        return (
            f"decisions seq {last + 1}..{kept.seq} are missing: the log ended at seq "
            f"{last} when the sidecar started, its head record says seq {kept.seq} "
            "(lines cut while it was down)"
        )
    if found is not None and last == kept.seq and found.hash != kept.hash:
        return (
            f"decision seq {last} is not the one written: its hash differs from the "
            "head record's (the line was replaced while the sidecar was down)"
        )
    return None
