"""What the adapters do about concurrency inside one process: `KeyLocks` serialise
the writes of one item (threads and asyncio tasks alike), `finished` lets a
write that has started end with its record even when the caller is cancelled, and
`Beside` runs a sync adapter's independent calls at once (one round trip for them).

A put over an item is decided, written to the wrapped store, then recorded as a new
version. Two writers of one key interleaving those steps could leave the store with
one writer's value and the sidecar with the other's version; a cancellation between
the write and the record left the old record crediting the old writer with the new
value. Both broke "the record names who made what the store holds".
"""

from __future__ import annotations

import asyncio
import threading
import zlib
from collections import deque
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

_T = TypeVar("_T")

BESIDE_THREADS = 8
"""Threads of one adapter's `Beside` at most (started when first needed)."""

STRIPES = 64
"""Locks per `KeyLocks`: keys share them by hash (bounded memory, whatever the keys)."""


@dataclass(eq=False, slots=True)
class _Waiter:
    """A thread (``event``) or a task (``future`` on ``loop``) waiting for a stripe;
    ``granted`` once the stripe was handed to it."""

    event: threading.Event | None = None
    future: asyncio.Future[None] | None = None
    loop: asyncio.AbstractEventLoop | None = None
    granted: bool = False


@dataclass(slots=True)
class _Stripe:
    held: bool = False
    waiters: deque[_Waiter] = field(default_factory=deque)


class KeyLocks:
    """Striped locks taken by threads (`acquire`, blocking) and by asyncio tasks
    (`aacquire`, awaiting) alike, first come first served, so a graph's sync nodes
    (in worker threads) and async ones serialise on the same key. A caller takes the
    stripes of all its keys at once, in order (`stripes`), so two batches never wait
    on each other in a cycle. Memory is `STRIPES` stripes, never one lock per key."""

    def __init__(self, stripes: int = STRIPES) -> None:
        self._mutex = threading.Lock()
        self._stripes = [_Stripe() for _ in range(stripes)]

    def stripes(self, keys: Iterable[str]) -> list[int]:
        """The stripes of these keys, each once, in the order every caller takes them."""
        n = len(self._stripes)
        return sorted({zlib.crc32(k.encode()) % n for k in keys})

    def acquire(self, stripes: list[int]) -> None:
        """Take each stripe in turn, blocking this thread while another holder has it."""
        for i in stripes:
            stripe = self._stripes[i]
            with self._mutex:
                if not stripe.held:
                    stripe.held = True
                    continue
                waiter = _Waiter(event=threading.Event())
                stripe.waiters.append(waiter)
            assert waiter.event is not None
            waiter.event.wait()  # handed over by `_release_one`

    async def aacquire(self, stripes: list[int]) -> None:
        """Take each stripe in turn, awaiting while another holder has it. Cancelled
        while waiting, the caller holds none of them (a stripe handed over meanwhile is
        passed on)."""
        taken: list[int] = []
        try:
            for i in stripes:
                await self._atake(i)
                taken.append(i)
        except BaseException:
            self.release(taken)
            raise

    async def _atake(self, i: int) -> None:
        stripe = self._stripes[i]
        loop = asyncio.get_running_loop()
        with self._mutex:
            if not stripe.held:
                stripe.held = True
                return
            waiter = _Waiter(future=loop.create_future(), loop=loop)
            stripe.waiters.append(waiter)
        assert waiter.future is not None
        try:
            await waiter.future
        except BaseException:
            with self._mutex:
                granted = waiter.granted
                if not granted:
                    stripe.waiters.remove(waiter)
            if granted:  # handed over as the caller gave up: pass it on
                self._release_one(i)
            raise

    def release(self, stripes: list[int]) -> None:
        """Give back these stripes (each to its next waiter, if any)."""
        for i in reversed(stripes):
            self._release_one(i)

    def _release_one(self, i: int) -> None:
        stripe = self._stripes[i]
        while True:
            with self._mutex:
                if not stripe.waiters:
                    stripe.held = False
                    return
                waiter = stripe.waiters.popleft()
                waiter.granted = True  # the stripe stays held: it is the waiter's now
            if waiter.event is not None:
                waiter.event.set()
                return
            assert waiter.loop is not None and waiter.future is not None
            try:
                waiter.loop.call_soon_threadsafe(_wake, waiter.future)
                return
            except RuntimeError:  # its event loop is closed: nobody will take it
                continue


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def finished(work: Coroutine[Any, Any, _T]) -> _T:
    """`work`'s result, `work` run to its end even if the caller is cancelled meanwhile
    (then the cancellation is raised once it has ended): a write that started ends with
    its record, or with its rollback, never between them."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: the caller's cancellation is what is raised
            raise
        while not task.done():  # the caller gave up: the work finishes first
            try:
                await asyncio.shield(task)
            except BaseException:  # its own error, or another cancellation
                continue
        raise


class Beside:
    """Threads of one adapter for calls made beside what its caller's thread does
    (a sync client blocks a thread per call): started when first needed, up to
    `BESIDE_THREADS`, idle ones kept for the next call."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> Future[_T]:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(BESIDE_THREADS, thread_name_prefix=self._name)
        return self._pool.submit(fn, *args, **kwargs)
