"""What a put through `GuardedLangGraphStore` records: its lineage fields, from the
wrapper's defaults, the value's ``"_lineage"`` and the application's hook."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from langgraph.store.base import PutOp

from memlineage.integrations.langgraph_ids import dependency_id
from memlineage.integrations.lineage_fields import checked_lineage

LINEAGE_KEY = "_lineage"
"""The key of a put value holding that memory's lineage; never stored."""

LineageHook: TypeAlias = Callable[
    [tuple[str, ...], str, Mapping[str, Any]], Mapping[str, Any] | None
]
"""``hook(namespace, key, value)`` -> lineage fields for that put (or None)."""


def put_lineage(
    op: PutOp, defaults: Mapping[str, Any], hook: LineageHook | None, from_value: bool = True
) -> dict[str, Any]:
    """``client.record``'s keyword arguments for a put: defaults < value < hook.
    The hook is the application's code: what it says wins over a value's
    ``"_lineage"``, which a value holding a tool's output could carry (a page
    naming ``user:alice`` as its creator); a field it names as None is unset, so
    a hook can take every field from such a value (its claim, tags, confidence).
    ``from_value`` False: a value's ``"_lineage"`` is not read at all (a store whose
    values may hold untrusted JSON; the key is still never stored)."""
    assert op.value is not None
    if not isinstance(op.value, Mapping):  # as the wrapped store refuses it (not a traceback)
        raise ValueError(f"put {op.key!r}: value must be a dict, got {type(op.value).__name__}")
    fields = dict(defaults)
    own = op.value.get(LINEAGE_KEY) if from_value else None
    hooked = hook(op.namespace, op.key, op.value) if hook is not None else None
    if own is not None:
        fields.update(checked_lineage(own, f"value[{LINEAGE_KEY!r}]"))
    if hooked is not None:  # the application's word: a field it names (None too) wins
        fields.update(checked_lineage(hooked, "lineage_hook"))
    fields = {k: v for k, v in fields.items() if v is not None}
    creator = fields.get("creator")
    if not isinstance(creator, str) or not creator:
        raise ValueError(
            f'creator: put {op.key!r} names none; give value["{LINEAGE_KEY}"]["creator"], '
            "a lineage_hook or defaults={'creator': ...}"
        )
    if fields.get("claim") is not None:
        claim = fields["claim"]
        if isinstance(claim, str) or len(claim) != 3 or not all(isinstance(p, str) for p in claim):
            raise ValueError(f"claim: {claim!r} is not [subject, attribute, value]")
        fields["claim"] = tuple(claim)
    if "tags" in fields:
        tags = fields["tags"]
        if isinstance(tags, str):
            raise ValueError(f"tags: {tags!r} is not a list of tags")
        fields["tags"] = list(tags)
    if "dependencies" in fields:
        fields["dependencies"] = [
            dependency_id(op.namespace, d) for d in fields["dependencies"] or ()
        ]
    return fields
