"""`validate_new` checks a record once per write: the store's second check of the
record the engine just checked (same object, limits and time) answers the first
check's result, and any other call is checked in full."""

from __future__ import annotations

from dataclasses import replace

import pytest
from memlineage.lineage.errors import ValidationError
from memlineage.lineage.model import MemoryRecord
from memlineage.lineage.validation import StoreLimits, validate_new
from support.memories import NOW, memory

LIMITS = StoreLimits()


def _proposed() -> MemoryRecord:
    return memory("m1", "d1", ns="t", tags=("a", "b", "c"), created_at=NOW)


def test_checking_the_checked_record_again_returns_it() -> None:
    checked = validate_new(_proposed(), now=NOW, limits=LIMITS)
    assert validate_new(checked, now=NOW, limits=LIMITS) is checked
    assert checked.version == 1 and checked.dependencies == ("d1",)


def test_other_limits_or_another_time_check_it_in_full() -> None:
    checked = validate_new(_proposed(), now=NOW, limits=LIMITS)
    with pytest.raises(ValidationError) as tags:
        validate_new(checked, now=NOW, limits=StoreLimits(max_tags=2))
    assert tags.value.field == "tags"
    checked = validate_new(_proposed(), now=NOW, limits=LIMITS)
    with pytest.raises(ValidationError) as future:  # created_at is now an hour ahead
        validate_new(checked, now=NOW - 3600, limits=LIMITS)
    assert future.value.code == "FUTURE_TIMESTAMP"


def test_an_equal_record_that_is_not_the_checked_one_is_checked() -> None:
    checked = validate_new(_proposed(), now=NOW, limits=LIMITS)
    bad = replace(checked, creator_id="not an id")
    with pytest.raises(ValidationError) as err:
        validate_new(bad, now=NOW, limits=LIMITS)
    assert err.value.field == "creator_id"
