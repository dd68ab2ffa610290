"""Text shown on one line (a reason, an action): `validation.check_one_line`."""

from __future__ import annotations

import re

import pytest
from memlineage.lineage.errors import ValidationError
from memlineage.lineage.validation import check_one_line


@pytest.mark.parametrize(
    ("text", "code_point"),
    [
        ("keep\x00this", "U+0000"),
        ("a\nFAKE LINE", "U+000A"),
        ("\x9b2K cleared", "U+009B"),  # C1 CSI: a terminal's escape without ESC
        ("paid \u202eevil", "U+202E"),  # right-to-left override: shows text reversed
        ("x\u2066y", "U+2066"),
        ("line\u2028break", "U+2028"),
    ],
)
def test_controls_that_move_or_reorder_what_a_terminal_shows_are_refused(
    text: str, code_point: str
) -> None:
    """Before: only C0 and DEL were refused; a revoke reason holding U+009B and U+202E
    was stored and printed raw by `memlineage explain` (an outside audit)."""
    said = re.escape(f"control characters ({code_point})")
    with pytest.raises(ValidationError, match=said) as err:
        check_one_line(text, "reason")
    assert err.value.field == "reason"


@pytest.mark.parametrize("text", ["the trip is next month", "déjà vu", "満席", "שלום world"])
def test_ordinary_text_passes(text: str) -> None:
    assert check_one_line(text, "reason") == text
