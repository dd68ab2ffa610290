"""Globs as a policy writes them: one that can match nothing, and the bound on a
glob computed at run time.

A class with an empty range (`[z-a]`, `tool:[9-0]*`) matches no character, so
the glob matches no id: a `sources` list, an `actions` list or a `matches` that
holds one never lists anything, and a `deny` over it never fires, silently.
The checker refuses such a glob written in the set (E203).

`matches` also takes a glob computed from the request (`x matches memory.value`);
fnmatch compiles each distinct pattern into a regex and keeps up to 32,768 of
them, so a client sending long, distinct patterns could make every decision slow
and hold gigabytes. `glob_match` refuses a pattern past `MAX_GLOB` characters (the
rule fails closed for that request) and keeps its compiled globs in a small cache
of its own.
"""

from __future__ import annotations

import fnmatch
import re
from functools import lru_cache

MAX_GLOB = 1024  # characters of one glob `matches` compiles (an id is at most 128)
_CACHE = 1024  # compiled globs kept


def empty_class(pattern: str) -> str | None:
    """The first `[...]` class of `pattern` that matches no character, or None."""
    i, n = 0, len(pattern)
    while i < n:
        if pattern[i] != "[":
            i += 1
            continue
        j = i + 1
        if j < n and pattern[j] == "!":
            j += 1
        if j < n and pattern[j] == "]":
            j += 1
        end = pattern.find("]", j)
        if end < 0:  # no class: `[` is a literal
            return None
        cls = pattern[i : end + 1]
        if fnmatch.translate(cls).startswith("(?s:(?!))"):
            return cls
        i = end + 1
    return None


@lru_cache(maxsize=_CACHE)
def compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern))


def glob_fullmatch(value: str, pattern: str) -> bool:
    """`fnmatch.fnmatchcase(value, pattern)`, a pattern past MAX_GLOB refused."""
    if len(pattern) > MAX_GLOB:
        raise ValueError(
            f"a glob of {len(pattern):,} characters (at most {MAX_GLOB:,}): not matched"
        )
    return compiled(pattern).match(value) is not None
