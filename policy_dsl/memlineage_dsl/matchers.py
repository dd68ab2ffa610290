"""The matchers generated code calls for a policy set's named lists and `matches`:
an action list (every spelling of a name), a source list (exact ids and globs, with
its recent answers kept), one glob or a list of them."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

from .facts import Creator, action_listed


class ActionMatcher:
    """Membership in a named action list: every spelling of a name, run together too,
    and each tail of a namespaced one, the same (`facts.action_listed`)."""

    __slots__ = ("patterns",)

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.patterns = patterns

    def match(self, value: object) -> bool:
        if not isinstance(value, str):
            raise TypeError(f"action lists match strings, got {type(value).__name__}")
        return action_listed(value, self.patterns)


_SEEN_LIMIT = 4096  # answers a source list keeps (`SourceMatcher._seen`)


_SPELLING = str.maketrans({"-": "_", ".": "_"})


def source_spelling(name: str) -> str:
    """How a source list compares ids: case and the separators `-`, `_`, `.` alike
    (`tool:Web-Search` is `tool:web_search`). A runtime names a tool as the tool
    names itself, so `tool:WEB_SEARCH` escaped a list of `tool:web_*` (an outside
    audit); a name chosen to pass for a listed one could be spelled exactly anyway."""
    return name.lower().translate(_SPELLING)


class SourceMatcher:
    """Membership in a named source list: exact ids in a set, globs in one regex, both
    in `source_spelling`, and the answers for the ids asked lately (a few creators ask
    again and again: each decision of a FilterRank tests its candidate's creator)."""

    __slots__ = ("_seen", "exact", "patterns", "regex")

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.patterns = patterns
        spelled = [source_spelling(p) for p in patterns]
        self.exact = frozenset(p for p in spelled if not any(c in p for c in "*?["))
        globs = [fnmatch.translate(p) for p in spelled if p not in self.exact]
        self.regex = re.compile("|".join(globs)) if globs else None
        self._seen: dict[str, bool] = {}

    def match(self, value: object) -> bool:
        hit = self._seen.get(value) if type(value) is str else None
        if hit is not None:
            return hit
        if isinstance(value, Creator):  # a creator stands for its id
            value = value.id
        if not isinstance(value, str):
            raise TypeError(f"source lists match strings, got {type(value).__name__}")
        key, value = value, source_spelling(value)
        found = value in self.exact or bool(self.regex and self.regex.match(value))
        if len(self._seen) >= _SEEN_LIMIT:
            self._seen.clear()
        self._seen[key] = found
        return found


def glob_match(value: str, pattern: str | Sequence[str]) -> bool:
    """`value matches pattern`: one glob, or any of a list of them (the checker takes
    both); a creator stands for its id."""
    if isinstance(value, Creator):
        value = value.id
    if isinstance(pattern, list | tuple):
        return any(glob_match(value, p) for p in pattern)
    if not isinstance(value, str) or not isinstance(pattern, str):
        raise TypeError("`matches` needs two strings")
    return fnmatch.fnmatchcase(value, pattern)
