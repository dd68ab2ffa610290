"""The in-process store (``EmbeddedStore``): the zero-setup default, optionally
persistent.  Its rooms, by what they hold:

* ``store`` — ``EmbeddedStore``: the contract's primitives, under one lock
* ``state`` — every namespace's state and the deterministic apply functions (the ops)
* ``space`` — what one namespace owns
* ``row`` — the mutable row, its cached frozen copies and its JSON form
* ``score_mirror`` — the columnar mirror of the rows' score inputs
* ``review`` — the review queue
* ``persistence`` — everything on disk (``JsonLog``: log, replay, snapshot, compaction)
"""

from memlineage.store.embedded.store import EmbeddedStore

__all__ = ["EmbeddedStore"]
