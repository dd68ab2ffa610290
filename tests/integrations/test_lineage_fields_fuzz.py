"""An adapter's lineage fields come from the application's values and metadata (and,
through them, from whatever an agent stored): any mapping of any JSON-like values is
taken or refused with ValueError naming the place and the field, never another
exception (a confidence past float's range raised OverflowError, keys of mixed types
TypeError)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memlineage.integrations.lineage_fields import LINEAGE_FIELDS, checked_lineage
from support.json_values import json_like

values = json_like(st.text(max_size=8), max_leaves=8, also=st.binary(max_size=4), tuples=True)
keys = st.sampled_from(LINEAGE_FIELDS) | st.text(max_size=6) | st.integers() | st.none()


@settings(max_examples=500, deadline=None)
@given(fields=st.dictionaries(keys, values, max_size=5) | values)
def test_any_lineage_is_taken_or_refused_with_a_value_error(fields: Any) -> None:
    try:
        taken = checked_lineage(fields, "metadata['_lineage']")
    except ValueError as exc:
        assert str(exc).startswith("metadata['_lineage']: "), exc
    else:
        assert taken == dict(fields)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"confidence": 10**400}, "confidence: "),
        ({"created_at": -(10**400)}, "created_at: "),
        ({1: "x", "creator": "user:a"}, "unknown lineage field(s) 1"),
    ],
)
def test_numbers_past_floats_and_keys_of_any_type_are_named(fields: Any, said: str) -> None:
    with pytest.raises(ValueError, match=r"^metadata\['_lineage'\]: ") as refused:
        checked_lineage(fields, "metadata['_lineage']")
    assert said in str(refused.value), refused.value
