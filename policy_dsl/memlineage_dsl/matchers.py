"""The matchers generated code calls for a policy set's named lists and `matches`:
an action list (every spelling of a name), a source list (exact ids and globs, with
its recent answers kept), one glob or a list of them."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

from .facts import Creator, action_listed
from .globs import glob_fullmatch


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


_SEPARATORS = "-_./ "


def source_spelling(name: str) -> str:
    """How a source list compares ids: case-folded, without the separators `-`, `_`,
    `.`, `/` and spaces (`tool:Web-Search`, `tool:web/search`, `tool:WebSearch` are
    all `tool:websearch`). A runtime names a tool as the tool names itself, so
    `tool:WEB_SEARCH` escaped a list of `tool:web_*` (an outside audit); a name
    chosen to pass for a listed one could be spelled exactly anyway."""
    head, colon, rest = name.partition(":")
    if not colon:
        return name.casefold().translate(_DROP)
    # the kind keeps its separators: `to-ol:x` is no tool's id (the store refuses a
    # prefix naming another kind in any case, not one spelled apart)
    return f"{head.casefold()}:{rest.casefold().translate(_DROP)}"


_DROP = str.maketrans("", "", _SEPARATORS)


def glob_spelling(pattern: str) -> str:
    """`source_spelling` of a glob (`_glob_rest` after a plain `kind:` prefix)."""
    head, colon, rest = pattern.partition(":")
    if colon and not any(c in head for c in "*?["):
        return f"{head.casefold()}:{_glob_rest(rest)}"
    return _glob_rest(pattern)


def _glob_rest(pattern: str) -> str:
    """`source_spelling` of a glob: outside `[...]` as of an id; inside, case-folded,
    a range's `-` kept (`[0-9]`), a literal separator dropped, a class of separators
    only (`[-_]`, which now stands for nothing) dropped whole and its negation
    (`[!_]`) any character."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c != "[":
            out.append(c.casefold().translate(_DROP))
            i += 1
            continue
        j = i + 1
        if j < n and pattern[j] == "!":
            j += 1
        if j < n and pattern[j] == "]":  # a leading `]` is a member
            j += 1
        end = pattern.find("]", j)
        if end < 0:  # no class: `[` is a literal, as fnmatch reads it
            out.append("[")
            i += 1
            continue
        body = pattern[i + 1 : end]
        negated = body.startswith("!")
        members = body[1:] if negated else body
        kept: list[str] = []
        for k, m in enumerate(members):
            ranged = m == "-" and 0 < k < len(members) - 1
            if ranged or m not in _SEPARATORS:
                kept.append(m.casefold())
        if kept:
            out.append("[" + ("!" if negated else "") + "".join(kept) + "]")
        elif negated:  # not a separator: after dropping them, any character
            out.append("?")
        i = end + 1
    return "".join(out)


class SourceMatcher:
    """Membership in a named source list: exact ids in a set, globs in one regex, both
    in `source_spelling`, and the answers for the ids asked lately (a few creators ask
    again and again: each decision of a FilterRank tests its candidate's creator)."""

    __slots__ = ("_seen", "exact", "patterns", "regex")

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.patterns = patterns
        spelled = [glob_spelling(p) for p in patterns]
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
    # a glob computed from the request is bounded, and cached apart (`globs`)
    return glob_fullmatch(value, pattern)
