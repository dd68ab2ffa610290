"""`Beside`, the threads a sync adapter runs its independent sidecar calls on: at most
`BESIDE_THREADS` of them, started only when first needed, and gone with the adapter
that held them (an adapter built per request must not leave threads behind)."""

from __future__ import annotations

import gc
import threading
import time

from memlineage.integrations.concurrency import BESIDE_THREADS, Beside


def _named(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def test_no_thread_before_the_first_call_and_never_more_than_the_bound() -> None:
    beside = Beside("beside-bound")
    assert _named("beside-bound") == []
    running = threading.Semaphore(0)
    release = threading.Event()

    def held() -> None:
        running.release()
        release.wait(5)

    calls = [beside.submit(held) for _ in range(3 * BESIDE_THREADS)]
    for _ in range(BESIDE_THREADS):
        assert running.acquire(timeout=5)
    assert not running.acquire(timeout=0.2)  # the others wait for a thread
    assert len(_named("beside-bound")) == BESIDE_THREADS
    release.set()
    assert all(c.result(timeout=5) is None for c in calls)


def test_the_threads_end_when_their_adapter_is_dropped() -> None:
    beside = Beside("beside-dropped")
    assert beside.submit(lambda: 7).result(timeout=5) == 7
    assert len(_named("beside-dropped")) == 1
    del beside
    gc.collect()
    deadline = time.monotonic() + 5
    while _named("beside-dropped") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _named("beside-dropped") == []
