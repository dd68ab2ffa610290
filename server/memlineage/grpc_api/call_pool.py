"""The threads the synchronous gRPC server runs its calls on (`CallPool`).

The sync server hands a unary call to a worker thread, which then waits for the
request message: a caller that opens calls and never sends one holds a worker each,
and four of them (the embedded store's pool then) stopped every other caller. A thread
per call in flight instead (a wide pool) was slower at 32 calls in flight, the
threads contending for the GIL. So the pool keeps its `workers` threads and knows
which of its calls still wait for their request: once some have waited longer than
`STUCK_SECONDS`, the next call (or a timer, while calls queue) grows the pool by a
thread for each of them and for each call queued behind them (up to `MOST_THREADS`),
so that `workers` threads again serve calls that came whole.

Calls wait their turn per caller (the token's name, `for_caller`), not in one line:
a free thread takes the oldest call of the first caller in turn with none running,
else of the first in turn (round robin). And a caller whose first call finds every
thread busy with other callers' calls gets a thread of its own (the pool grows by
one, up to `MOST_THREADS`): it shares the GIL with them instead of waiting for one to
end. In one line, one tenant's burst of heavy calls (FilterRanks of 10,000
candidates) kept another's Check queued behind all of them, 2.6 s at the median and
past its 5 s deadline at worst (an outside audit). Without tokens every call is no
one's: one line, and nothing grows for it.

The pool runs its own threads rather than ThreadPoolExecutor's (it subclasses it
only for its interface: grpc takes a per-handler pool only if it is one): a call
costs one future and one hand-off. On top of the executor's, the per-caller lines
cost each call a second future and hand-off, about 11 us of a fresh Check's CPU
(a throwaway loop of submits, 21.6 us a call against the executor's 10.8).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from queue import SimpleQueue
from typing import Any

log = logging.getLogger("memlineage.server")

STUCK_SECONDS = 0.25
"""A call whose request has not come this long after a thread took it holds that
thread: the pool grows by one for it. A whole unary request is there in microseconds;
a thread that took one may still wait for the GIL behind every other thread of the
process (0.1 s was seen with 64 callers in the sidecar's own process)."""
MOST_THREADS = 256
"""The pool never grows past this: a caller must hold this many calls open without
sending their requests to stop others (each call's deadline still ends it)."""


_Queued = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any], list[str | None]]
"""A call waiting its turn: its future, the function and arguments, its unread count."""


class CallPool(ThreadPoolExecutor):
    """The sync server's pool for unary calls (see the module's doc)."""

    def __init__(
        self, workers: int, most: int = MOST_THREADS, name: str = "memlineage-grpc"
    ) -> None:
        super().__init__(workers, thread_name_prefix=name)  # never starts a thread of its own
        self.name = name
        self.workers, self.most = workers, max(workers, most)
        self._limit = workers  # threads the pool may run now (grown, never shrunk)
        self._pool_threads: list[threading.Thread] = []
        self._wake: SimpleQueue[bool] = SimpleQueue()  # one per call queued; False: stop
        self._idle = 0  # threads not running a call (started, waiting for one)
        self._stopped = False
        # call token -> (when a thread took it, its caller when known)
        self._waiting: dict[object, tuple[float, str | None]] = {}
        # per caller: its calls submitted whose request has not come (queued or on a
        # thread), each counted once (`_give_back`) until its request comes or it ends
        self._unread: dict[str, int] = {}
        self._unread_lock = threading.Lock()
        self._local = threading.local()
        self._next = threading.local()  # the caller of the call submitted next (`for_caller`)
        self._recheck_due = False  # a timer will look again (see `_look`)
        # the calls submitted and not yet taken, per caller, and the callers with any,
        # in the order of their turns (each once): a thread takes the first one's oldest
        self._lines: dict[str | None, deque[_Queued]] = {}
        self._turns: deque[str | None] = deque()
        self._queued = 0  # calls in the lines, all callers'
        self._running: dict[str | None, int] = {}  # per caller: its calls on a thread
        self._busy = 0  # calls on a thread, all callers'
        self._lock = threading.Lock()  # the lines, the counts and the threads

    def for_caller(self, name: str | None) -> None:
        """The call this thread submits next is `name`'s (None: no one's): the server's
        interceptor (`gate.AuthGate`) says so on the server's thread just before grpc
        submits it (a call to another pool, as Watch, leaves it for the next call, whose
        interceptor says again)."""
        self._next.caller = name

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """`fn` in its caller's line, and a thread woken (or started) to take a turn
        (`_take`), which runs the call whose turn it is then. The future is this call's."""
        caller = getattr(self._next, "caller", None)
        unread: list[str | None] = [caller]  # the call's count, until given back
        if caller is not None:
            self._next.caller = None
            with self._unread_lock:
                self._unread[caller] = self._unread.get(caller, 0) + 1
        future: Future[Any] = Future()
        with self._lock:
            if self._stopped:
                self._give_back(unread)
                raise RuntimeError("cannot schedule new futures after shutdown")
            line = self._lines.get(caller)
            if line is None:
                line = self._lines[caller] = deque()
                self._turns.append(caller)
            line.append((future, fn, args, kwargs, unread))
            self._queued += 1
            # every thread busy with others' calls, none of this caller's: one of its own
            if (
                caller is not None
                and len(line) == 1
                and not self._running.get(caller)
                and self._busy >= self._limit
            ):
                self._limit = min(self.most, self._limit + 1)
            self._start_wanted(self._limit)
        self._wake.put(True)
        if self._waiting:
            self._look()
        return future

    def _start_wanted(self, bound: int) -> None:
        """Start threads (under the lock) while calls queue with no idle thread to
        take them, up to `bound`."""
        threads = self._pool_threads
        while self._queued > self._idle and len(threads) < bound:
            thread = threading.Thread(
                target=self._work, name=f"{self.name}_{len(threads)}", daemon=True
            )
            threads.append(thread)
            self._idle += 1  # until it takes its first call
            thread.start()

    def _work(self) -> None:
        """A thread's life: a turn for each call queued, until the pool shuts down."""
        wake, take = self._wake.get, self._take
        while wake():
            take()
        self._wake.put(False)  # the next thread stops too

    def _take(self) -> None:
        """One turn: the oldest call of the caller first in line, who then goes to the
        back of it if it has more (round robin over callers with calls queued)."""
        with self._lock:
            turns = self._turns
            if not turns:  # taken back by a shutdown that cancelled it
                return
            running = self._running
            # the first in turn with no call running, else the first in turn
            caller = turns[0]
            if running.get(caller):
                at = next((i for i, c in enumerate(turns) if not running.get(c)), 0)
                caller = turns[at]
                del turns[at]
            else:
                turns.popleft()
            line = self._lines[caller]
            future, fn, args, kwargs, unread = line.popleft()
            if line:
                turns.append(caller)
            else:
                del self._lines[caller]
            running[caller] = running.get(caller, 0) + 1
            self._queued -= 1
            self._idle -= 1
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
            with self._lock:  # counted off before its future says it ended
                self._busy -= 1
                self._idle += 1
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
        if starts and self._queued and not self._recheck_due and not self._stopped:
            self._recheck_due = True
            timer = threading.Timer(STUCK_SECONDS, self._recheck)
            timer.daemon = True
            timer.start()

    def _recheck(self) -> None:
        self._recheck_due = False
        self._look()

    def _grow(self, stuck: int) -> None:
        """Threads for the `stuck` calls and for every call queued behind them (any of
        those may be one more that never sends its request), `workers` beyond; started
        only for calls no idle thread is there to take."""
        with self._lock:
            want = min(self.most, self.workers + stuck + self._queued)
            if want > self._limit:
                log.warning(
                    "%d calls have waited over %gs for their request (a caller holding "
                    "calls open without sending them?): the gRPC pool may grow to %d threads "
                    "(at most %d)",
                    stuck,
                    STUCK_SECONDS,
                    want,
                    self.most,
                )
                self._limit = want
            if not self._stopped:
                self._start_wanted(want)

    def _run(self, fn: Callable[..., Any], args: Any, kwargs: Any, unread: list[str | None]) -> Any:
        token = object()
        self._waiting[token] = (time.monotonic(), unread[0])
        if self._queued and not self._recheck_due:
            # calls queued before this one was on a thread: none of their submits
            # looked, so look now (else one queued behind held calls waits for them)
            self._look()
        local = self._local
        local.token, local.unread = token, unread
        try:
            return fn(*args, **kwargs)
        finally:
            self._waiting.pop(token, None)
            self._give_back(unread)
            local.token = local.unread = None

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

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No call taken after this; `cancel_futures`: the queued ones are cancelled
        (their futures say so), else they still run. `wait`: until every thread ended."""
        with self._lock:
            self._stopped = True
            cancelled: list[_Queued] = []
            if cancel_futures:
                for line in self._lines.values():
                    cancelled.extend(line)
                self._lines.clear()
                self._turns.clear()
                self._queued = 0
            threads = list(self._pool_threads)
        for future, *_, unread in cancelled:
            self._give_back(unread)
            future.cancel()
        self._wake.put(False)
        if wait:
            current = threading.current_thread()
            for thread in threads:
                if thread is not current:
                    thread.join()

    def unread_by(self, caller: str) -> int:
        """`caller`'s calls submitted whose request has not come: queued, or on a
        thread waiting for it, however long (a burst opened at once is counted from
        its first call; `held_by` counts only calls that have waited)."""
        return self._unread.get(caller, 0)

    @property
    def threads(self) -> int:
        """Threads started so far (they stay until shutdown)."""
        return len(self._pool_threads)

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

        def handler(request: Any, context: Any) -> Any:
            received()
            return behaviour(request, context)

        return handler
