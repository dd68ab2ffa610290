"""JSON-like values for the fuzzes of what takes untrusted input (edited log lines,
simulation steps, an agent's stored values): None, booleans, integers (some past a
float's range, as JSON allows), floats (nan and infinities too), strings, and lists
and mappings of them."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy


def json_like(
    words: SearchStrategy[str] | None = None, *, max_leaves: int = 6
) -> SearchStrategy[Any]:
    """Values as JSON can hold them; `words`: the strings (default: any, short)."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.integers(min_value=10**300, max_value=10**400)
        | st.floats()
        | (words if words is not None else st.text(max_size=6))
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=max_leaves,
    )
