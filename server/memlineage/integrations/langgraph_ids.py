"""The id mapping of `GuardedLangGraphStore`: a LangGraph item ``(namespace, key)`` as
one memory id in the client's sidecar namespace, injective and inverted by
`split_memory_id` (docs/integrations.md, "Namespaces and ids")."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langgraph.store.base import InvalidNamespaceError

__all__ = ["MAX_ID_LENGTH", "memory_id", "split_memory_id"]

MAX_ID_LENGTH = 128
"""The sidecar's default id limit (``StoreLimits.max_id_length``)."""

_LABEL = re.compile(r"[A-Za-z0-9_:-]+")
_KEY = re.compile(r"[A-Za-z0-9._:/-]+")


def memory_id(namespace: Sequence[str], key: str, *, max_length: int = MAX_ID_LENGTH) -> str:
    """The sidecar memory id of LangGraph item ``(namespace, key)``: labels joined by
    ``/``, then ``.``, then the key: ``("alice", "trip"), "city"`` -> ``alice/trip.city``.

    Injective: a label holds no ``/`` and no ``.`` (letters, digits, ``_:-``), so the
    first ``.`` ends the namespace and ``/`` splits it; the key is anything the
    sidecar allows in an id (letters, digits, ``._:/-``). What does not fit, or
    would be longer than ``max_length``, is a ValueError naming the part.
    """
    return _joined(_prefix(namespace), key, max_length)


def _prefix(namespace: Sequence[str]) -> str:
    """The id's namespace part, ``alice/trip.``, or an InvalidNamespaceError (LangGraph's
    own, a ValueError) naming the label."""
    if isinstance(namespace, str) or not isinstance(namespace, tuple | list):
        raise InvalidNamespaceError(f"namespace: {namespace!r} is not a tuple of labels")
    if not namespace:
        raise InvalidNamespaceError("namespace: an empty namespace holds no item")
    for i, label in enumerate(namespace):
        if not isinstance(label, str) or not _LABEL.fullmatch(label):
            raise InvalidNamespaceError(
                f"namespace[{i}]: {label!r} cannot be mapped to a memory id; a label is "
                "1 or more letters, digits, '_', ':' or '-' ('/' joins labels, '.' ends them)"
            )
    return "/".join(namespace) + "."


def _cached_prefix(seen: dict[tuple[str, ...], str | None], namespace: Any) -> str:
    """`_prefix`, each tuple checked once per ``seen`` (one search's hits); a
    namespace that cannot be mapped is a ValueError every time."""
    if not isinstance(namespace, tuple):
        return _prefix(namespace)
    if namespace not in seen:
        try:
            seen[namespace] = _prefix(namespace)
        except ValueError:
            seen[namespace] = None
            raise
    prefix = seen[namespace]
    if prefix is None:
        raise InvalidNamespaceError(f"namespace: {namespace!r} cannot be mapped to a memory id")
    return prefix


def _joined(prefix: str, key: str, max_length: int = MAX_ID_LENGTH) -> str:
    """`memory_id` from its checked namespace part: the key checked, then the length."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ValueError(
            f"key: {key!r} cannot be mapped to a memory id; a key is 1 or more letters, "
            "digits, '.', '_', ':', '/' or '-'"
        )
    out = prefix + key
    if len(out) > max_length:
        raise ValueError(
            f"namespace, key: the memory id {out[:40]!r}... is {len(out)} characters long, "
            f"the limit is {max_length}"
        )
    return out


def split_memory_id(memory_id: str) -> tuple[tuple[str, ...], str]:
    """The inverse of `memory_id`: ``alice/trip.city`` -> ``(("alice", "trip"), "city")``."""
    head, dot, key = memory_id.partition(".")
    if not dot or not head or not key:
        raise ValueError(f"memory_id: {memory_id!r} is not a mapped LangGraph item id")
    return tuple(head.split("/")), key


def dependency_id(namespace: tuple[str, ...], dependency: Any) -> str:
    """A dependency named by a key (same namespace) or by ``[namespace, key]``."""
    if isinstance(dependency, str):
        return memory_id(namespace, dependency)
    if (
        isinstance(dependency, tuple | list)
        and len(dependency) == 2
        and isinstance(dependency[0], tuple | list)
    ):
        return memory_id(tuple(dependency[0]), dependency[1])
    raise ValueError(f"dependencies: {dependency!r} is neither a key nor [namespace, key]")
