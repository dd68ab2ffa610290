"""What one token holder can make the sidecar hold: the memory a structure costs per
namespace or per decision must stay bounded whatever the number of namespaces."""

from __future__ import annotations

import gc
import tracemalloc

from memlineage.store.embedded import EmbeddedStore
from support.memories import NOW, memory


def test_a_namespace_of_one_memory_costs_little() -> None:
    """Each namespace's score columns were 16 numpy arrays of 64 rows (~11 KB) from its
    first memory on: a token writing one small memory into each of 100,000 namespaces
    grew the sidecar by 1.8 GB (18 KB a namespace). They now start at a few rows."""
    store = EmbeddedStore()
    namespaces = 500
    for i in range(20):  # warm: interned names, first allocations
        store.record(memory("m", ns=f"warm{i}"), now=NOW)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(namespaces):
            store.record(memory("m", ns=f"n{i}"), now=NOW)
        gc.collect()
        per_namespace = (tracemalloc.get_traced_memory()[0] - before) / namespaces
    finally:
        tracemalloc.stop()
    assert per_namespace < 8_000, per_namespace
    for i in range(0, namespaces, 97):  # still one memory each, readable
        assert store.get(f"n{i}", "m").id == "m"
