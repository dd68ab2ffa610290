"""The closest known name to a mistyped one, for "did you mean" hints (a setting in
a config file, a MEMLINEAGE_* variable, a CLI flag): one matcher, each caller saying
it its own way. The policy language has its own (`memlineage_dsl.diagnostics`): it
knows no server module."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def nearest(word: str, known: Iterable[str]) -> str | None:
    """The closest of `known` to `word` (difflib's ratio, 0.6 at least), or None."""
    close = difflib.get_close_matches(word, sorted(set(known)), n=1)
    return close[0] if close else None
