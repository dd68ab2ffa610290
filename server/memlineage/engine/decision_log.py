"""The decision log: one JSON line per decision, hash-chained (its verifier:
`log_verify`; what both share: `log_chain`).

A line is the decision's JSON object with three fields added: `seq` first, `prev`
and `hash` last::

    {"seq":7,"ts":…,"decision_id":…,…,"errors":[],"prev":"<64 hex>","hash":"<64 hex>"}

`hash` is SHA-256 (HMAC-SHA-256 when the log has a key) of the line's bytes as
written, without `,"hash":"…"` (so `prev` is covered): `{"seq":7,…,"prev":"…"}`.
`prev` is the hash of the line before, across files (a rotated file's first line
links to the last of the file before it). A chain starts with a genesis line, `seq`
0 and `prev` 64 zeros: a new log, or a log whose last line could not be read back.
A log reopened by a restart (or SIGHUP, or rotation) continues its chain.

Every field a line may carry is described by docs/decision-log.schema.json (JSON
Schema 2020-12; tests/e2e/test_decision_log_schema.py checks real logs against it):
`time` is `ts` in RFC 3339, `requested_by` the authenticated caller (OPA's field of
that name), `labels` name the sidecar, `trace_id`/`span_id` the OpenTelemetry span the
decision was made in (when tracing is on).

Writing is thread-safe and each decision's line is written (handed to the OS) before
`write_many` returns, so before the decision is answered: a SIGKILL loses no answered
decision. Lines are queued in order and written in groups: whichever deciding thread
finds the writer free chains and writes every line queued so far in one write, and
the threads whose lines it wrote return without writing. One lock held across each
write made the deciding threads queue behind each other and hand the lock and the
GIL back and forth (`bench/decision_log_bench.py` prints both designs). A write the
log cannot make is `DecisionLogError` (UNAVAILABLE) in every thread whose lines it
held: their decisions are not answered. An owned file is written unbuffered, whole
lines or nothing, so no refused line turns up later.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from json.encoder import encode_basestring_ascii as _quote  # what json.dumps quotes with
from typing import IO, TYPE_CHECKING, Any, BinaryIO

from memlineage.engine.log_chain import GENESIS, HEX64, digester, key_bytes
from memlineage.engine.log_head import HEAD_EVERY, Head, gap_after, read_head, write_head
from memlineage.engine.log_probe import room_for
from memlineage.lineage.errors import LineageError
from memlineage.oserrors import reason

if TYPE_CHECKING:
    from memlineage_dsl.decision import Decision

    from memlineage.engine.records import DecisionRecord

log = logging.getLogger("memlineage.decision_log")

_TAIL_CHUNK = 64 * 1024


class DecisionLogError(LineageError):
    """The decision log refused a write (a full disk, a closed pipe): the decision is
    not answered, since a line is written before its decision is answered (a store write
    it allowed, done before, stays). UNAVAILABLE: another replica, or this one once the
    log is writable again, answers it."""

    code = "DECISION_LOG_UNAVAILABLE"
    grpc_status = "UNAVAILABLE"

    def __init__(self, where: str, why: str, *, applied: str = "") -> None:
        self.where, self.why = where, why
        super().__init__(
            f"the decision log ({where}) cannot be written: {why}; the decision is not "
            "answered, since each is logged first" + (f" ({applied})" if applied else "")
        )


def _append_whole(fh: IO[Any], data: bytes) -> None:
    """`data` appended to the unbuffered file `fh`, or none of it: a write the disk
    refuses part way (ENOSPC) is cut back off before the error is raised."""
    done = 0
    try:
        while done < len(data):
            wrote = fh.write(data[done:])
            if not wrote:  # no progress (never for a regular file): not a loop for ever
                raise OSError(errno.EIO, "the file took none of the bytes")
            done += wrote
    except OSError:
        if done:
            fd = fh.fileno()
            with contextlib.suppress(OSError):
                os.ftruncate(fd, os.fstat(fd).st_size - done)
        raise


@contextlib.contextmanager
def applied_before(what: str) -> Iterator[None]:
    """Around the issue of a decision whose store change is already made: a refused log
    write says what stays changed (`what`), so the caller knows what a retry meets."""
    try:
        yield
    except DecisionLogError as exc:
        raise DecisionLogError(exc.where, exc.why, applied=what) from exc


class _Entry:
    """One thread's lines waiting for the writer, and the lock it sleeps on (taken at
    birth, released by the thread that writes them)."""

    __slots__ = ("done", "error", "fields")

    def __init__(self, fields: list[str]) -> None:
        self.fields = fields
        self.done = threading.Lock()
        self.done.acquire()
        self.error: BaseException | None = None


class DecisionLog:
    """One JSON line per decision, chained (module docstring). The part of a line that
    depends only on the (shared, frozen) Decision is rendered once and reused.

    `DecisionLog(sink)` writes to a stream it does not own (stderr, a test buffer);
    `DecisionLog.open(path)` owns a file: it continues the chain of what the file (or
    its `.1` rotation) ends with, rotates it past `max_bytes` keeping `keep` old files
    (`FILE.1` newest), and `reopen()`s it after an outside rotation (SIGHUP)."""

    def __init__(
        self,
        sink: IO[Any] | None,
        *,
        key: str | bytes | None = None,
        seq: int = -1,
        prev: str = GENESIS,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.sink: IO[Any] | None = sink  # a stream of text; an owned file: bytes
        # Constant per log: rendered once (`,"labels":{...}`, or nothing).
        self._labels = (
            ',"labels":' + json.dumps(dict(labels), separators=(",", ":")) if labels else ""
        )
        # Set by the composition root when tracing is on: the current span's (trace_id,
        # span_id) in hex, or None outside a span; called on the deciding thread.
        self.trace_ids: Callable[[], tuple[str, str] | None] | None = None
        # Set by the composition root: the name of the authenticated caller whose
        # request is being decided (a token's `[tokens.NAME]`; `local` without tokens),
        # None outside a request (the sweep); called on the deciding thread. The
        # `actor` of a line is what the request claims; this is who sent it.
        self.requested_by: Callable[[], str | None] | None = None
        self._callers: dict[str, str] = {}  # caller name -> its rendered field
        self._second: tuple[int, str] = (-1, "")  # the last whole second, formatted
        self._bodies: dict[int, tuple[Decision, str]] = {}
        # The writer's lock: the thread holding it chains and writes every queued line
        # (and rotates, writes the head record); deciding threads only try it.
        self._io = threading.Lock()
        self._queue: collections.deque[_Entry] = collections.deque()
        self._hash = digester(key_bytes(key))
        self._refusals = 0  # writes refused since the last one that went through
        self._wanted = 0  # bytes of the last write tried (a probe's size)
        self._seq = seq  # the last line written's seq (-1: the next line is a genesis)
        self._prev = prev  # the last line written's hash
        self.path: str | None = None
        self._max_bytes = 0
        self._keep = 0
        self._size = 0
        self._head_at = 0.0  # monotonic time of the last head record written

    @classmethod
    def open(
        cls,
        path: str,
        *,
        key: str | bytes | None = None,
        max_bytes: int = 0,
        keep: int = 5,
        labels: Mapping[str, str] | None = None,
    ) -> DecisionLog:
        """A log appending to the file `path` (created if absent)."""
        seq, prev, torn = _resume(path)
        fh = open(path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        try:
            if torn:  # end the torn line so the genesis line after it stands alone
                _append_whole(fh, b"\n")
            out = cls(fh, key=key, seq=seq, prev=prev, labels=labels)
            # before its first head record is written; a torn last line (a killed
            # writer) is a problem of its own, which verify names, and the chain goes
            # on from the last whole line before it: the head check still runs (before:
            # a cut made mid-line started a new chain and overwrote the head, hiding
            # how many lines were cut; an outside audit)
            found = Head(seq, prev) if seq >= 0 else None
            gap = gap_after(found, read_head(path, out._hash))
            out.path = path
            out._max_bytes = max_bytes
            out._keep = max(keep, 1)
            out._size = fh.tell()
            if gap is not None:
                log.error("decision log %s: %s; a gap line records it", path, gap)
                out._write_gap(gap)
            with out._io:
                out._save_head()
        except BaseException:
            fh.close()
            raise
        return out

    def _write_gap(self, problem: str) -> None:
        """A chained line saying what the writer found missing at start (`log_head`):
        `log verify` reports it; removing it breaks the chain."""
        now = time.time()
        body = json.dumps({"event": "gap", "problem": problem}, separators=(",", ":"))[1:-1]
        self._commit([f'"ts":{now!r},"time":"{self._rfc3339(now)}",{body}'])

    def _save_head(self) -> None:
        """Under the writer's lock: the head record of the last line written, when the
        log owns a file and wrote a line."""
        seq, prev = self._seq, self._prev
        if self.path is None or seq < 0:
            return
        self._head_at = time.monotonic()
        try:
            write_head(self.path, Head(seq, prev), self._hash)
        except OSError:
            log.exception("decision log %s: its head record cannot be written", self.path)

    # ---------------------------------------------------------------- writing
    def _body(self, d: Decision) -> str:
        hit = self._bodies.get(id(d))
        if hit is not None and hit[0] is d:
            return hit[1]
        body = json.dumps(
            {
                "effect": d.effect,
                "score": round(d.compliance_score, 6),
                "cost": d.expected_cost,
                "policies": [r.policy for r in d.reasons],
                "reasons": [f"{r.policy}[{r.status}]: {r.message}" for r in d.reasons],
                "obligations": [str(o) for o in d.obligations],
                "errors": list(d.errors),
            },
            separators=(",", ":"),
        )[1:-1]
        if len(self._bodies) > 4096:
            self._bodies.clear()
        self._bodies[id(d)] = (d, body)
        return body

    def _rfc3339(self, ts: float) -> str:
        """`ts` as RFC 3339 UTC with microseconds; the whole second's text is cached
        (consecutive lines mostly share it)."""
        second, micros = divmod(round(ts * 1_000_000), 1_000_000)
        cached = self._second
        if cached[0] != second:
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            cached = self._second = (second, text)
        return f"{cached[1]}.{micros:06d}Z"

    def _fields(self, rec: DecisionRecord) -> str:
        """The line's decision fields, without braces, seq, prev or hash; the text
        `json.dumps` writes for them (its own C string quoting), without building the
        dict it would walk (half a line's cost)."""
        ids = ",".join(map(_quote, rec.memory_ids))
        head = (
            f'"ts":{rec.decided_at!r},"time":"{self._rfc3339(rec.decided_at)}",'
            f'"decision_id":{_quote(rec.decision_id)},"namespace":{_quote(rec.namespace)},'
            f'"op":{_quote(rec.operation)},"memory_ids":[{ids}],"actor":{_quote(rec.actor)},'
            f'"policy_version":{_quote(rec.policy_version)}'
        )
        used = (
            ',"grants_used":' + json.dumps(list(rec.grants_used), separators=(",", ":"))
            if rec.grants_used
            else ""
        )
        span = self.trace_ids() if self.trace_ids is not None else None
        traced = f',"trace_id":"{span[0]}","span_id":"{span[1]}"' if span is not None else ""
        caller = self.requested_by() if self.requested_by is not None else None
        by = "" if caller is None else self._caller_field(caller)
        # `input` last: what the decision read, for `memlineage replay` (when captured)
        tail = f',"input":{rec.input}' if rec.input is not None else ""
        return f"{head}{by}{self._labels}{traced}{used},{self._body(rec.decision)}{tail}"

    def _caller_field(self, name: str) -> str:
        """`,"requested_by":"NAME"`, rendered once per caller name (names come from the
        configuration: a bounded set)."""
        field = self._callers.get(name)
        if field is None:
            field = ',"requested_by":' + json.dumps(name)
            if len(self._callers) < 1024:
                self._callers[name] = field
        return field

    def write(self, rec: DecisionRecord) -> None:
        if self.sink is not None:
            self.write_many((rec,))

    def write_many(self, recs: Sequence[DecisionRecord]) -> None:
        """A batch of decisions written, in order, before this returns (the module
        docstring: rendered here, chained and written by whichever thread writes next,
        in one write with whatever other threads queued meanwhile)."""
        if self.sink is None or not recs:
            return
        self._commit([self._fields(r) for r in recs])

    def _commit(self, fields: list[str]) -> None:
        """Return once the lines of `fields` (a line's fields without seq, prev and
        hash) are written. No thread ever blocks on a lock another deciding thread
        holds: the writer's lock is only tried. The thread that gets it writes what
        others queued, then its own lines; a thread that finds it taken queues its
        lines and sleeps on a lock of its own, which the thread that writes them
        releases."""
        if self._io.acquire(blocking=False):
            self._lead(fields)
            return
        entry = _Entry(fields)
        self._queue.append(entry)  # atomic: the queue's order is the chain's
        if self._io.acquire(blocking=False):  # let go meanwhile: no one took the line
            self._lead(())
        else:
            entry.done.acquire()  # released once written (or failed)
            self._lead_if_left()  # a thread woken by a write may find lines left behind
        if entry.error is not None:
            raise entry.error

    def _lead(self, own: Sequence[str]) -> None:
        """Holding the writer's lock: write the queue and `own` (this thread's lines),
        and the queue again until it is empty, then let go. After letting go, the
        queue is looked at again: a line queued by a thread that tried the lock just
        before it was let go would otherwise wait for ever. Raises `own`'s error."""
        try:
            error = self._write_queued(own)
        finally:
            self._io.release()
        while self._queue and self._io.acquire(blocking=False):  # other threads' lines
            try:
                self._write_queued()
            finally:
                self._io.release()
        if error is not None:
            raise error

    def _lead_if_left(self) -> None:
        if self._queue and self._io.acquire(blocking=False):
            self._lead(())

    def _write_queued(self, own: Sequence[str] = ()) -> BaseException | None:
        """Under the writer's lock: every queued line, then `own`, chained and written
        in one write; each queued entry's thread woken, with the error when the write
        failed. Returns that error (None: written)."""
        queue, entries = self._queue, []
        while queue:
            entries.append(queue.popleft())
        if not entries and not own:
            return None
        fields = [f for e in entries for f in e.fields] if entries else []
        fields.extend(own)
        error = self._write_lines(fields)
        for e in entries:
            e.error = error
            e.done.release()
        return error

    def _write_lines(self, fields: list[str]) -> BaseException | None:
        """Under the writer's lock: the lines of `fields` chained and written in one
        write (rotating or saving the head record after it when due); the error when
        the sink refused it."""
        sink = self.sink
        if sink is None:  # closed meanwhile: the lines go nowhere
            return None
        try:
            text, seq, prev = self._chain(fields)
            self._wanted = len(text)
            if self.path is not None:
                # All or nothing: a refused write leaves no part of these lines in the
                # file, and the chain where it was (the next line links to the last
                # line written).
                _append_whole(sink, text.encode())
            else:
                try:
                    sink.write(text)
                except OSError:
                    # A stream keeps in its buffer what it could not write, and may
                    # write it later: the chain goes on after these lines (if they
                    # never come, `log verify` names the gap).
                    self._seq, self._prev = seq, prev
                    raise
            self._seq, self._prev = seq, prev
            if self.path is not None:
                self._size += len(text)  # ASCII: the quoting escapes the rest
                if self._max_bytes and self._size >= self._max_bytes:
                    self._rotate()
                elif time.monotonic() - self._head_at >= HEAD_EVERY:
                    self._save_head()
        except OSError as exc:  # each thread whose lines these were raises it
            return self._refused(exc)
        except BaseException as exc:
            return exc
        if self._refusals:
            log.warning(
                "decision log %s: writable again, after %d refused writes",
                self._where(),
                self._refusals,
            )
            self._refusals = 0
        return None

    @property
    def refusing(self) -> bool:
        """Whether the last write was refused (until one goes through again)."""
        return self._refusals > 0

    def writable(self) -> bool:
        """Whether a decision's lines would be written now. While refusing: for an owned
        regular file, whether the room the last write lacked is there again
        (`log_probe.room_for`, which writes nothing to the log); if so the refusal
        is over. A stream or a device is known writable only by its next line."""
        if not self._refusals:
            return True
        if self.path is None or not self._io.acquire(blocking=False):
            return False  # a writer holds the lock: its result is the answer
        try:
            if not self._refusals:
                return True
            if room_for(self.path, self._size, self._wanted) is not None:
                return False
            log.warning(
                "decision log %s: writable again (room for a line), after %d refused writes",
                self._where(),
                self._refusals,
            )
            self._refusals = 0
            return True
        finally:
            self._io.release()
            self._lead_if_left()  # lines queued while the probe held the lock

    def _where(self) -> str:
        return self.path if self.path is not None else "stream"

    def _refused(self, exc: OSError) -> DecisionLogError:
        """Under the writer's lock: a refused write as the error its threads raise;
        said in the log at the first refusal (not once per decision)."""
        why = reason(exc)
        if not self._refusals:
            log.error(
                "decision log %s cannot be written (%s): decisions are refused "
                "UNAVAILABLE until it can",
                self._where(),
                why,
            )
        self._refusals += 1
        return DecisionLogError(self._where(), why)

    def _chain(self, fields: list[str]) -> tuple[str, int, str]:
        """Under the writer's lock: the lines of `fields`, chained after the last
        written; with the last one's seq and hash."""
        digest = self._hash
        seq, prev = self._seq, self._prev
        lines = []
        for f in fields:
            if seq < 0:
                seq, prev = 0, GENESIS
            else:
                seq += 1
            content = f'{{"seq":{seq},{f},"prev":"{prev}"}}'
            prev = digest(content.encode())
            lines.append(f'{content[:-1]},"hash":"{prev}"}}\n')
        return "".join(lines), seq, prev

    # ------------------------------------------------------- files it owns
    def _rotate(self) -> None:
        """Under the writer's lock: FILE.(k) -> FILE.(k+1) for the `keep` newest, FILE ->
        FILE.1, a new FILE. The chain goes on in the new file."""
        assert self.path is not None
        path, keep = self.path, self._keep
        try:
            with contextlib.suppress(FileNotFoundError):
                os.remove(f"{path}.{keep}")
            for k in range(keep - 1, 0, -1):
                with contextlib.suppress(FileNotFoundError):
                    os.replace(f"{path}.{k}", f"{path}.{k + 1}")
            os.replace(path, f"{path}.1")
        except OSError:
            log.exception("decision log rotation of %s failed; appending to it", path)
            self._size = 0  # try again after another max_bytes
            return
        self._switch()

    def _switch(self) -> None:
        """Under the writer's lock: write to a new handle on the path from now on; when it
        cannot be opened, go on with the old one (and say so)."""
        assert self.path is not None
        try:
            fh = open(self.path, "ab", buffering=0)  # noqa: SIM115
        except OSError:
            log.exception(
                "decision log %s cannot be opened; still writing to the old file", self.path
            )
            return
        old, self.sink, self._size = self.sink, fh, fh.tell()
        if old is not None:
            old.close()
        self._save_head()

    def reopen(self) -> None:
        """Open the path again (after logrotate moved the file away): the chain goes
        on in whatever file the path now names. A stream it does not own: nothing."""
        if self.path is None:
            return
        with self._io:
            self._write_queued()  # the lines queued so far go to the file they follow
            if self.sink is not None:
                self._switch()
        self._lead_if_left()  # lines queued while the file was switched

    def close(self) -> None:
        with self._io:
            self._write_queued()
            sink = self.sink
            if sink is not None and self.path is None:
                sink.flush()  # a stream it does not own stays open
            self.sink = None
            if sink is not None and self.path is not None:
                sink.close()
                self._save_head()
        # A thread that queued lines while the log closed sleeps until a writer takes
        # them: they go nowhere now, and it returns.
        self._lead_if_left()


def _resume(path: str) -> tuple[int, str, bool]:
    """(seq, hash) of the last line of `path` (or, when it is empty or absent, of
    `path.1`) to continue from, and whether `path` ends in a torn line; (-1, GENESIS)
    when there is nothing to continue: the next line starts a chain."""
    for candidate in (path, f"{path}.1"):
        try:
            last, torn = _last_line(candidate)
        except FileNotFoundError:
            continue
        except OSError:
            return -1, GENESIS, False
        if last is None and not torn:
            continue  # empty
        if last is None:  # torn, and no whole line before it
            return -1, GENESIS, candidate == path
        try:
            entry = json.loads(last)
            seq, digest = entry["seq"], entry["hash"]
        except (ValueError, KeyError, TypeError, RecursionError):
            return -1, GENESIS, torn and candidate == path
        if type(seq) is int and seq >= 0 and isinstance(digest, str) and HEX64.match(digest):
            return seq, digest, torn and candidate == path
        return -1, GENESIS, torn and candidate == path
    return -1, GENESIS, False


def _last_line(path: str) -> tuple[bytes | None, bool]:
    """The last complete line of a file (None: none), and whether the file ends
    without a newline (a torn write: the line before the torn one is returned)."""
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return None, False
        fh.seek(size - 1)
        torn = fh.read(1) != b"\n"
        end = _last_newline(fh, size) + 1 if torn else size  # past the last whole line
        if end == 0:
            return None, True
        start = _last_newline(fh, end - 1) + 1
        fh.seek(start)
        return fh.read(end - 1 - start), torn


def _last_newline(fh: BinaryIO, size: int) -> int:
    """The offset of the last newline before `size` (-1: none)."""
    chunk = _TAIL_CHUNK
    while True:
        start = max(0, size - chunk)
        fh.seek(start)
        at = fh.read(size - start).rfind(b"\n")
        if at >= 0:
            return start + at
        if start == 0:
            return -1
        chunk *= 4


# ------------------------------------------------------------------ verification
