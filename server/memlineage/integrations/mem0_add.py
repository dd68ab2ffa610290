"""What a Mem0 ``add`` through `GuardedMem0Memory` records, decided before Mem0 is
called (`AddPlan`: the lineage fields, each memory's creator), and how the memories
of an add that failed inside Mem0 are found again (`ADD_KEY`, `AddPlan.made_by_it`).

Mem0 chooses the ids inside ``add`` and stores memory after memory: an add of several
messages whose embedder (or vector store) fails on the second has stored the first,
and the exception carries no id. Each add therefore passes Mem0 a nonce under
`ADD_KEY` in its metadata, and a failed add lists what carries it (Mem0's own
``get_all`` with that metadata filter, in the add's scope) to delete it.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memlineage.integrations.lineage_fields import checked_lineage

LINEAGE_KEY = "_lineage"
"""The ``metadata`` key of an ``add`` holding the memories' lineage; never given to Mem0."""

ADD_KEY = "_memlineage_add"
"""The ``metadata`` key under which each memory keeps the nonce of the ``add`` that
made it (in Mem0: which memories one add made, so a failed one can be undone)."""

UNDO_PAGE = 100  # memories a failed add's lookup lists at once (Mem0's get_all top_k)
UNDO_ROUNDS = 50  # lookups at most: a bound even if Mem0 keeps answering the same ids

CREATOR_NAME = re.compile(r"[A-Za-z0-9._:/-]{1,128}")  # the sidecar's id rule


def record_args(fields: Mapping[str, Any]) -> dict[str, Any]:
    """`MemLineageClient.record` keyword arguments from lineage fields (creator aside)."""
    args = {k: v for k, v in fields.items() if k != "creator" and v is not None}
    if "claim" in args:
        args["claim"] = tuple(args["claim"])
    for many in ("tags", "dependencies"):
        if many in args:
            args[many] = [str(x) for x in args[many]]
    return args


@dataclass(frozen=True)
class AddPlan:
    """What an ``add`` records, decided before Mem0 is called."""

    metadata: dict[str, Any]  # what Mem0 gets: without LINEAGE_KEY, with ADD_KEY
    fields: dict[str, Any]  # defaults < metadata["_lineage"]
    user_id: str | None
    agent_id: str | None
    run_id: str | None

    @classmethod
    def of(
        cls,
        defaults: Mapping[str, Any],
        metadata: Mapping[str, Any] | None,
        user_id: str | None,
        agent_id: str | None,
        run_id: str | None,
    ) -> AddPlan:
        """The plan of one add; a ValueError (nothing called) for lineage that cannot be
        used, a reserved key in the metadata or ids that cannot name the creators."""
        given = dict(metadata or {})
        if ADD_KEY in given:
            raise ValueError(f"metadata: {ADD_KEY!r} is reserved (the nonce of the add)")
        fields = {**defaults, **checked_lineage(given.pop(LINEAGE_KEY, {}), LINEAGE_KEY)}
        if not fields.get("creator"):  # the ids name the creators: refused before Mem0 is
            for name, value, kind in (
                ("user_id", user_id, "user"),
                ("agent_id", agent_id, "agent"),
            ):
                if value is not None and not CREATOR_NAME.fullmatch(f"{kind}:{value}"):
                    raise ValueError(
                        f"{name}: {value!r} cannot name its creator ({kind}:<{name}>, an id of "
                        "at most 128 letters, digits and ._:/-); pass such an id, or the "
                        f'creator in metadata["{LINEAGE_KEY}"]'
                    )
        given[ADD_KEY] = secrets.token_hex(16)
        return cls(given, fields, user_id, agent_id, run_id)

    def made_by_it(self) -> dict[str, Any] | None:
        """Mem0 ``get_all`` filters for the memories this add stored: its scope and its
        nonce. None when it named no scope (Mem0 then refuses it before storing any)."""
        ids = {"user_id": self.user_id, "agent_id": self.agent_id, "run_id": self.run_id}
        scope = {k: v for k, v in ids.items() if v is not None}
        return {**scope, ADD_KEY: self.metadata[ADD_KEY]} if scope else None

    def creator(self, result: Mapping[str, Any]) -> str:
        """The explicit creator, else by the message's role: the user's own messages
        are ``user:<user_id>``, a tool's ``tool:<its name>`` (Mem0's ``actor_id``,
        the message's ``name``; ``tool:mem0`` when it has none that names an id),
        anything else (the assistant's, an inferred fact) ``agent:<agent_id or
        "mem0">``."""
        explicit = self.fields.get("creator")
        if explicit:
            return str(explicit)
        role = result.get("role")
        if role == "user" and self.user_id:
            return f"user:{self.user_id}"
        if role == "tool":  # a tool's output is the tool's, whatever it says
            name = result.get("actor_id")
            named = f"tool:{name}"
            return named if name and CREATOR_NAME.fullmatch(named) else "tool:mem0"
        return f"agent:{self.agent_id or 'mem0'}"

    def creators(self, messages: Any) -> list[str]:
        """The distinct creators an add of ``messages`` will record, for the prechecks."""
        said: list[Mapping[str, Any]]
        if isinstance(messages, str):
            said = [{"role": "user"}]
        elif isinstance(messages, Mapping):
            said = [messages]
        elif isinstance(messages, list):
            said = [m for m in messages if isinstance(m, Mapping)]
        else:
            said = []
        return sorted(
            {
                self.creator({"role": m.get("role"), "actor_id": m.get("name")})
                for m in said
                if m.get("role") != "system"
            }
        )


def listed_ids(listing: Any) -> list[str]:
    """The ids of a Mem0 ``get_all`` answer."""
    items = listing.get("results", []) if isinstance(listing, Mapping) else []
    return [str(i["id"]) for i in items if isinstance(i, Mapping) and i.get("id")]


def unmarked(item: Any) -> Any:
    """A memory as Mem0 would answer it without the wrapper: ``metadata`` without the
    add's nonce (`ADD_KEY`), None when nothing else is in it (as Mem0 answers a memory
    added with no metadata). Before, every memory read through the wrapper carried
    ``{"_memlineage_add": ...}`` in its metadata, which a bare Mem0 never shows."""
    if not isinstance(item, Mapping):
        return item
    metadata = item.get("metadata")
    if not isinstance(metadata, Mapping) or ADD_KEY not in metadata:
        return item
    rest = {k: v for k, v in metadata.items() if k != ADD_KEY}
    return {**item, "metadata": rest or None}
