"""The quote test over every recorded tool output, indexed once when each is recorded,
so a text costs lookups in proportion to its own length, not to the history's; and
with it, which recorded memories a model's input holds (`_memories_in`).

The rule is `binding._quotes`'s (docs/integrations.md, "A human text that quotes a
tool"): a run of 32 characters shared with an output, or half of an output shorter
than 64 (at least 12), compared normalised and with all whitespace removed. Before, it
was computed by slicing every output for each new human text, under the handler's
lock: 50 outputs of ~97 KB against a 19 KB text took 3.2 s (an outside review)."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from memlineage.integrations.langchain_callbacks.binding import (
    _QUOTED,
    _QUOTED_RUN,
    _norm,
    _quotes,
    _Source,
    _texts,
)

_BLOCK = 16
"""A long output is indexed by its blocks of this size at positions multiple of it: a
shared run of ``2 * _BLOCK - 1`` characters or more holds one of them whole."""

_MAX_INDEXED = 1 << 20
"""The index holds at most this many positions (about 16 MB of outputs' text in their
two forms, at most 64 MB of tables); an output past it is checked by slicing it, as
before: slower, never wrong."""

_MAX_PLACES = 8
"""Places kept of one window in one output (a repetitive output holds one in many):
past them the window is marked crowded in it, and a text holding it is searched for
in the output (each search counted as this many tries below)."""

_MAX_TRIES = 64
"""Window matches checked per text and output that make no quote: past them the output
is taken for quoted, fail-closed (not the user's words; read by the model), so a
crafted output cannot make the check slow. Only a text sharing one 16-character
piece with an output again and again (a table's rule `----`) meets it."""


@dataclass(frozen=True)
class _Entry:
    memory_id: str
    origin: str  # "tool" | "derived"
    text: str  # one form of one of its texts: normalised, or with no whitespace
    run: int  # the shared run that makes a quote of it


def _run_at(a: str, i: int, b: str, j: int, size: int, need: int) -> bool:
    """Whether ``a[i:i+size] == b[j:j+size]`` (known) extends to a run of ``need``."""
    left, most = 0, min(i, j, need - size)
    while left < most and a[i - 1 - left] == b[j - 1 - left]:
        left += 1
    right, most = 0, min(len(a) - i - size, len(b) - j - size, need - size - left)
    while right < most and a[i + size + right] == b[j + size + right]:
        right += 1
    return size + left + right >= need


def _held(a: str, i: int, size: int, e: _Entry) -> bool:
    """Whether a run of ``e.run`` of ``a`` around its window at ``i`` is anywhere in
    ``e.text`` (a crowded window: its places there are not all kept)."""
    for lo in range(max(0, i + size - e.run), min(i, len(a) - e.run) + 1):
        if a[lo : lo + e.run] in e.text:
            return True
    return False


class _Table:
    """A multimap from a window's hash to the places it occurs (an entry's number and a
    position, packed in one integer): open addressing in two arrays, 16 bytes a slot
    and no object per place, where a dict of lists took some 280 bytes a place."""

    def __init__(self) -> None:
        self.keys = array("q", [0]) * 64
        self.vals = array("q", [-1]) * 64  # -1: an empty slot
        self.used = 0
        self.crowded: dict[int, set[int]] = {}  # a window's hash: entries it crowds

    def reserve(self, more: int) -> None:
        """Room for ``more`` places at half load (a linear probe stays short)."""
        slots = len(self.keys)
        while 2 * (self.used + more) > slots:
            slots *= 2
        if slots == len(self.keys):
            return
        old = [(k, v) for k, v in zip(self.keys, self.vals, strict=True) if v != -1]
        self.keys, self.vals = array("q", [0]) * slots, array("q", [-1]) * slots
        self.used = 0
        for k, v in old:
            self.add(k, v)

    def add(self, h: int, v: int) -> None:
        """One place (`reserve` first)."""
        keys, vals, mask = self.keys, self.vals, len(self.keys) - 1
        i = h & mask
        while vals[i] != -1:
            i = (i + 1) & mask
        keys[i], vals[i] = h, v
        self.used += 1

    def get(self, h: int) -> list[int]:
        """The places of the windows of hash ``h`` (another window may share it)."""
        keys, vals, mask = self.keys, self.vals, len(self.keys) - 1
        out, i = [], h & mask
        while (v := vals[i]) != -1:
            if keys[i] == h:
                out.append(v)
            i = (i + 1) & mask
        return out


class _QuoteIndex:
    """The recorded tool outputs (and derived values), each indexed once: a long form
    (a run of 31 or 32 makes a quote) by its aligned blocks, a short one (12 to 30) by
    every slice of 12. ``lookups`` counts the windows of texts looked up (what a text
    costs: about twice its length per window size in use, whatever the history)."""

    def __init__(self, limit: int = _MAX_INDEXED) -> None:
        self.limit = limit
        self.entries: list[_Entry] = []
        # per form (0: normalised, 1: no whitespace), per window size
        self.tables: tuple[dict[int, _Table], dict[int, _Table]] = ({}, {})
        self.unindexed: list[tuple[str, str, str]] = []  # past the limit: sliced
        self.size = 0
        self.lookups = 0

    def add(self, memory_id: str, origin: str, text: str) -> None:
        """Index a normalised text of a recorded memory (past the limit: kept aside)."""
        plan = []
        for f, form in enumerate((text, text.replace(" ", ""))):
            if len(form) < _QUOTED:
                continue  # too short to tell from the user's own words
            run = min(_QUOTED_RUN, max(_QUOTED, -(-len(form) // 2)))
            size, step = (_BLOCK, _BLOCK) if run >= 2 * _BLOCK - 1 else (_QUOTED, 1)
            plan.append((f, form, run, size, range(0, len(form) - size + 1, step)))
        cost = sum(len(at) for *_, at in plan)
        if self.size + cost > self.limit:
            self.unindexed.append((memory_id, origin, text))
            return
        self.size += cost
        for f, form, run, size, at in plan:
            table = self.tables[f].setdefault(size, _Table())
            table.reserve(len(at))
            n = len(self.entries)
            self.entries.append(_Entry(memory_id, origin, form, run))
            kept: Counter[str] = Counter()
            for p in at:
                window = form[p : p + size]
                kept[window] += 1
                if kept[window] <= _MAX_PLACES:
                    table.add(hash(window), n << 32 | p)
                elif kept[window] == _MAX_PLACES + 1:
                    table.crowded.setdefault(hash(window), set()).add(n)

    def quoted(self, text: str, origins: Collection[str], first: bool = False) -> set[str]:
        """The memories of ``origins`` the normalised ``text`` quotes (``first``: stop
        at one)."""
        found: set[str] = set()
        tries: Counter[int] = Counter()
        for a, tables in zip((text, text.replace(" ", "")), self.tables, strict=True):
            for size, table in tables.items():
                for i in range(len(a) - size + 1):
                    self.lookups += 1
                    window = a[i : i + size]
                    h = hash(window)
                    places, crowded = table.get(h), table.crowded.get(h, ())
                    if not places and not crowded:
                        continue
                    tried = [(v >> 32, v & 0xFFFFFFFF) for v in places]
                    tried += [(n, -1) for n in crowded]
                    for n, p in tried:
                        e = self.entries[n]
                        if e.origin not in origins or e.memory_id in found:
                            continue
                        if p >= 0 and not e.text.startswith(window, p):
                            continue  # another window of the same hash
                        tries[n] += 1 if p >= 0 else _MAX_PLACES
                        if (
                            tries[n] > _MAX_TRIES
                            or (p >= 0 and _run_at(a, i, e.text, p, size, e.run))
                            or (p < 0 and _held(a, i, size, e))
                        ):
                            found.add(e.memory_id)
                            if first:
                                return found
        for memory_id, origin, t in self.unindexed:
            if origin in origins and memory_id not in found and _quotes(text, t):
                found.add(memory_id)
                if first:
                    break
        return found


def _memories_in(
    value: Any, index: _QuoteIndex, users: Sequence[_Source], by_call: Mapping[str, str]
) -> set[str]:
    """The memories a model's input (its messages, or a completion model's prompts)
    holds: a tool message's own, by its call id; in every message's text, the user
    inputs it contains and the tool outputs and derived values it quotes (a ReAct
    observation, a summary that copies one), whatever the message's role."""
    found: set[str] = set()
    texts: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, ToolMessage) and v.tool_call_id in by_call:
            found.add(by_call[v.tool_call_id])
        if isinstance(v, BaseMessage):
            texts.extend([v.content] if isinstance(v.content, str) else _texts(v.content))
        elif isinstance(v, str):
            texts.append(v)
        elif isinstance(v, list | tuple):
            for item in v:
                walk(item)

    walk(value)
    for text in texts:
        norm = _norm(text)
        found |= {s.memory_id for s in users if any(u in norm for u in s.texts)}
        found |= index.quoted(norm, ("tool", "derived"))
    return found
