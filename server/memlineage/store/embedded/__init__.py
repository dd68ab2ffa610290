"""The in-process store (``EmbeddedStore``): the zero-setup default, optionally
persistent.  Its rooms, by what they hold:

* ``store`` — ``EmbeddedStore``: the contract's primitives, under one lock
* ``claim_record`` — the one-op ``record_claim`` (one "R" op) and the row it writes
* ``event_log`` — the lineage-event reads: cursors, the long poll
* ``state`` — every namespace's state and the deterministic apply functions (the ops)
* ``space`` — what one namespace owns
* ``row`` — the mutable row, its cached frozen copies and its JSON form
* ``score_mirror`` — the columnar mirror of the rows' score inputs
* ``review`` — the review queue
* ``persistence`` — everything on disk (``SqliteLog``: one SQLite file in WAL mode, an
  op per transaction with a checksum, snapshots, the integrity check at open, backup)
* ``decision_table`` — the kept decisions, tables of their own in the same file
* ``sqlite_conn`` — the read-write connection (WAL settings) and transactions
* ``legacy`` — the one-time import of a data dir in the old JSON-lines format
* ``codec`` — the corruption error and the events' JSON form
"""

from memlineage.store.embedded.store import EmbeddedStore

__all__ = ["EmbeddedStore"]
