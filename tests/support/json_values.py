"""JSON-like values for the fuzzes of what takes untrusted input (edited log lines,
simulation steps, an agent's stored values): None, booleans, integers (some past a
float's range, as JSON allows), floats (nan and infinities too), strings, and lists
and mappings of them."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy


def json_like(
    words: SearchStrategy[str] | None = None,
    *,
    max_leaves: int = 6,
    also: SearchStrategy[Any] | None = None,
    tuples: bool = False,
) -> SearchStrategy[Any]:
    """Values as JSON can hold them; `words`: the strings (default: any, short).
    What Python callers hand over besides: `also`, more leaves (bytes, say), and
    with `tuples`, tuples of two beside the lists."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.integers(min_value=10**300, max_value=10**400)
        | st.floats()
        | (words if words is not None else st.text(max_size=6))
    )
    if also is not None:
        scalars = scalars | also

    def nested(inner: SearchStrategy[Any]) -> SearchStrategy[Any]:
        made = st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        return made | st.tuples(inner, inner) if tuples else made

    return st.recursive(scalars, nested, max_leaves=max_leaves)
