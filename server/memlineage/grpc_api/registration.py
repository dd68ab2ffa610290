"""How the servicers' methods are put on the synchronous gRPC server, and on which threads.

The sync server hands a unary call to a worker thread, which then waits for the
request message: a caller that opens calls and never sends one holds a worker each,
and four of them (the embedded store's pool then) stopped every other caller. A thread
per call in flight instead (a wide pool) was slower at 32 calls in flight, the
threads contending for the GIL. So the server's pool (`CallPool`) keeps its
`workers` threads and knows which of its calls still wait for their request: once
some have waited longer than `STUCK_SECONDS`, the next call (or a timer, while calls
queue) grows the pool by a thread for each of them and for each call queued behind
them (up to `MOST_THREADS`), so that `workers` threads again serve calls that came
whole. Watch streams run on the servicer's own pool, health and reflection on theirs
(`standard.py`): CallPools too, told by their handlers when they start.

Calls wait their turn per caller (the token's name, `for_caller`), not in one line:
a free thread takes the oldest call of the first caller in turn with none running,
else of the first in turn (round robin). And a caller whose first call finds every
thread busy with other callers' calls gets a thread of its own (the pool grows by
one, up to `MOST_THREADS`): it shares the GIL with them instead of waiting for one to
end. In one line, one tenant's burst of heavy calls (FilterRanks of 10,000
candidates) kept another's Check queued behind all of them, 2.6 s at the median and
past its 5 s deadline at worst (an outside audit). Without tokens every call is no
one's: one line, as before, and nothing grows for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import grpc

log = logging.getLogger("memlineage.server")

STUCK_SECONDS = 0.25
"""A call whose request has not come this long after a thread took it holds that
thread: the pool grows by one for it. A whole unary request is there in microseconds;
a thread that took one may still wait for the GIL behind every other thread of the
process (0.1 s was seen with 64 callers in the sidecar's own process)."""
MOST_THREADS = 256
"""The pool never grows past this: a caller must hold this many calls open without
sending their requests to stop others (each call's deadline still ends it)."""

ENCODED = ("Check", "FilterRank")
"""Answers the servicers return already encoded (bytes), passed through untouched."""


_Queued = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any], list[str | None]]
"""A call waiting its turn: its future, the function and arguments, its unread count."""


class Caught:
    """Stands in for a server to catch what a generated ``add_*_to_server`` registers."""

    service: str
    handlers: dict[str, Any]

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        self.service, self.handlers = service, handlers


class CallPool(ThreadPoolExecutor):
    """The sync server's pool for unary calls (see the module's doc). It reads
    ThreadPoolExecutor's `_max_workers`, the bound its `submit` starts threads up to."""

    def __init__(
        self, workers: int, most: int = MOST_THREADS, name: str = "memlineage-grpc"
    ) -> None:
        super().__init__(workers, thread_name_prefix=name)
        self.name = name
        self.workers, self.most = workers, max(workers, most)
        # call token -> (when a thread took it, its caller when known)
        self._waiting: dict[object, tuple[float, str | None]] = {}
        # per caller: its calls submitted whose request has not come (queued or on a
        # thread), each counted once (`_Unread`) until its request comes or it ends
        self._unread: dict[str, int] = {}
        self._unread_lock = threading.Lock()
        self._local = threading.local()
        self._next = threading.local()  # the caller of the call submitted next (`for_caller`)
        self._recheck_due = False  # a timer will look again (see `_look`)
        # the calls submitted and not yet taken, per caller, and the callers with any,
        # in the order of their turns (each once): a thread takes the first one's oldest
        self._lines: dict[str | None, deque[_Queued]] = {}
        self._turns: deque[str | None] = deque()
        self._running: dict[str | None, int] = {}  # per caller: its calls on a thread
        self._busy = 0  # calls on a thread, all callers'
        self._lines_lock = threading.Lock()

    def for_caller(self, name: str | None) -> None:
        """The call this thread submits next is `name`'s (None: no one's): the server's
        interceptor (`gate.AuthGate`) says so on the server's thread just before grpc
        submits it (a call to another pool, as Watch, leaves it for the next call, whose
        interceptor says again)."""
        self._next.caller = name

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """`fn` in its caller's line; the executor gets a turn (`_take`), which runs the
        call whose turn it is then. The future is this call's own."""
        caller = getattr(self._next, "caller", None)
        unread: list[str | None] = [caller]  # the call's count, until given back
        if caller is not None:
            self._next.caller = None
            with self._unread_lock:
                self._unread[caller] = self._unread.get(caller, 0) + 1
        future: Future[Any] = Future()
        with self._lines_lock:
            line = self._lines.get(caller)
            if line is None:
                line = self._lines[caller] = deque()
                self._turns.append(caller)
            line.append((future, fn, args, kwargs, unread))
            # every thread busy with others' calls, none of this caller's: one of its own
            alone = (
                caller is not None
                and len(line) == 1
                and not self._running.get(caller)
                and self._busy >= self._max_workers
            )
        if alone:
            with self._shutdown_lock:
                self._max_workers = min(self.most, self._max_workers + 1)
        try:
            super().submit(self._take)
        except RuntimeError:  # shut down: the call is not queued after all
            self._unqueue(caller, future)
            self._give_back(unread)
            raise
        if self._waiting:
            self._look()
        return future

    def _unqueue(self, caller: str | None, future: Future[Any]) -> None:
        """Take back a call no turn was queued for (unless a turn took it meanwhile)."""
        with self._lines_lock:
            line = self._lines.get(caller)
            if line is None:
                return
            for queued in line:
                if queued[0] is future:
                    line.remove(queued)
                    break
            if not line:
                del self._lines[caller]
                self._turns.remove(caller)

    def _take(self) -> None:
        """One turn: the oldest call of the caller first in line, who then goes to the
        back of it if it has more (round robin over callers with calls queued)."""
        with self._lines_lock:
            turns = self._turns
            if not turns:  # its call was taken back (`_unqueue`)
                return
            running = self._running
            # the first in turn with no call running, else the first in turn
            at = next((i for i, c in enumerate(turns) if not running.get(c)), 0)
            caller = turns[at]
            del turns[at]
            line = self._lines[caller]
            future, fn, args, kwargs, unread = line.popleft()
            if line:
                turns.append(caller)
            else:
                del self._lines[caller]
            running[caller] = running.get(caller, 0) + 1
            self._busy += 1
        result: Any = None
        failed: BaseException | None = None
        started = future.set_running_or_notify_cancel()
        try:
            if started:
                result = self._run(fn, args, kwargs, unread)
            else:
                self._give_back(unread)
        except BaseException as exc:  # the call's own future carries it, as the executor's
            failed = exc
        finally:
            with self._lines_lock:  # counted off before its future says it ended
                self._busy -= 1
                left = running[caller] - 1
                if left:
                    running[caller] = left
                else:
                    del running[caller]
        if not started:
            return
        if failed is not None:
            future.set_exception(failed)
        else:
            future.set_result(result)

    def _look(self) -> None:
        """Grow for the calls held now; while calls queue behind ones still waiting for
        their request, look again in `STUCK_SECONDS` (else a call queued behind calls
        that are not yet held, with no call after it, would wait for them to end)."""
        waiting = self._waiting
        since = time.monotonic() - STUCK_SECONDS
        starts = [t for t, _ in tuple(waiting.values())]  # others add and drop theirs
        if starts and min(starts) < since:
            self._grow(sum(1 for t in starts if t < since))
        if starts and self._work_queue.qsize() and not self._recheck_due and not self._shutdown:
            self._recheck_due = True
            timer = threading.Timer(STUCK_SECONDS, self._recheck)
            timer.daemon = True
            timer.start()

    def _recheck(self) -> None:
        self._recheck_due = False
        self._look()

    def _grow(self, stuck: int) -> None:
        """Threads for the `stuck` calls and for every call queued behind them (any of
        those may be one more that never sends its request), `workers` beyond. Uses
        ThreadPoolExecutor's `_adjust_thread_count`, which starts one thread unless one
        is idle (then that one takes the queue: no more are needed now)."""
        want = min(self.most, self.workers + stuck + self._work_queue.qsize())
        with self._shutdown_lock:
            if want > self._max_workers:
                log.warning(
                    "%d calls have waited over %gs for their request (a caller holding "
                    "calls open without sending them?): the gRPC pool may grow to %d threads "
                    "(at most %d)",
                    stuck,
                    STUCK_SECONDS,
                    want,
                    self.most,
                )
                self._max_workers = want
            while len(self._threads) < want and not self._shutdown:
                started = len(self._threads)
                self._adjust_thread_count()
                if len(self._threads) == started:
                    break

    def _run(self, fn: Callable[..., Any], args: Any, kwargs: Any, unread: list[str | None]) -> Any:
        token = object()
        self._waiting[token] = (time.monotonic(), unread[0])
        self._local.token, self._local.unread = token, unread
        try:
            return fn(*args, **kwargs)
        finally:
            self._waiting.pop(token, None)
            self._give_back(unread)
            self._local.token = self._local.unread = None

    def _give_back(self, unread: list[str | None]) -> None:
        """The call's request came, or it ended: its caller's count down, once."""
        caller = unread[0]
        if caller is None:
            return
        unread[0] = None
        with self._unread_lock:
            left = self._unread.get(caller, 0) - 1
            if left > 0:
                self._unread[caller] = left
            else:
                self._unread.pop(caller, None)

    def received(self) -> None:
        """The call on this thread has its request (its handler is about to run)."""
        token = getattr(self._local, "token", None)
        if token is not None:
            self._waiting.pop(token, None)
            self._give_back(self._local.unread)

    def unread_by(self, caller: str) -> int:
        """`caller`'s calls submitted whose request has not come: queued, or on a
        thread waiting for it, however long (a burst opened at once is counted from
        its first call; `held_by` counts only calls that have waited)."""
        return self._unread.get(caller, 0)

    @property
    def threads(self) -> int:
        """Threads started so far (they stay until shutdown)."""
        return len(self._threads)

    @property
    def held(self) -> int:
        """Calls that have waited over `STUCK_SECONDS` for their request, now."""
        return self.held_by(None)

    def held_by(self, caller: str | None) -> int:
        """`held`, of `caller`'s calls only (those submitted after `for_caller`); None:
        of every caller."""
        since = time.monotonic() - STUCK_SECONDS
        return sum(
            1
            for t, c in tuple(self._waiting.values())
            if t < since and (caller is None or c == caller)
        )

    def arrived(self, behaviour: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """`behaviour` (a unary-unary handler), first telling the pool its request came."""
        received = self.received

        def handler(request: Any, context: grpc.ServicerContext) -> Any:
            received()
            return behaviour(request, context)

        return handler


def on_pool(behaviour: Callable[..., Any], pool: CallPool) -> Callable[..., Any]:
    """`behaviour` (a unary-stream handler) run on `pool` instead of the server's
    threads (the sync server's per-handler `experimental_thread_pool`), telling it when
    the request came: a Watch lives for minutes."""
    received = pool.received

    def handler(request: Any, context: grpc.ServicerContext) -> Any:
        received()
        yield from behaviour(request, context)

    handler.experimental_thread_pool = pool  # type: ignore[attr-defined]  # grpc reads it off the function
    return handler


def as_is(response: Any) -> bytes:
    """The serializer of Check's and FilterRank's answers: the bytes the servicer
    encoded, passed through (a message, as other servers' stubs may return, serialized)."""
    return response if type(response) is bytes else response.SerializeToString()


def as_bytes(service: Any, add_to_server: Callable[[Any, Any], None]) -> tuple[str, dict[str, Any]]:
    """The service name and method handlers ``add_to_server`` (a generated
    ``add_*Servicer_to_server``) registers, with every request handed over as its bytes
    and Check's and FilterRank's answers sent as the bytes the servicer encoded: what
    both runtimes serve (`register` here, `aio_handlers.register`)."""
    caught = Caught()
    add_to_server(service, caught)
    handlers = {}
    for name, h in caught.handlers.items():
        h = h._replace(request_deserializer=None)
        handlers[name] = h._replace(response_serializer=as_is) if name in ENCODED else h
    return caught.service, handlers


def register(
    service: Any,
    add_to_server: Callable[[Any, Any], None],
    server: Any,
    pool: CallPool | None = None,
    streams: Mapping[str, CallPool] | None = None,
) -> None:
    """What ``add_to_server`` (a generated ``add_*Servicer_to_server``) registers, except
    that every request comes in as its bytes (the servicer parses them, so undecodable
    bytes are INVALID_ARGUMENT, not grpc's INTERNAL "Exception deserializing request!";
    Check recognises requests it has seen before by them), Check's and FilterRank's
    answers go out as the bytes the servicer encoded (no message built, parsed or
    serialized again), unary calls tell `pool` (the server's) when their request came,
    and each stream named in `streams` runs on its pool."""
    streams = streams or {}
    name_of_service, handlers = as_bytes(service, add_to_server)
    for name, h in handlers.items():
        if h.unary_unary is not None and pool is not None:
            h = h._replace(unary_unary=pool.arrived(h.unary_unary))
        if h.unary_stream is not None and name in streams:
            h = h._replace(unary_stream=on_pool(h.unary_stream, streams[name]))
        handlers[name] = h
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(name_of_service, handlers),)
    )
    server.add_registered_method_handlers(name_of_service, handlers)
