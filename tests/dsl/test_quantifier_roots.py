"""Quantifiers over `ancestors(memory)` and `lineage(memory)` of a memory built on
nothing skip the walk (`CodeGen.root_walk`), and one whose body is only an attribute
of its variable maps an attrgetter (`CodeGen.getter`): the same answers as the
general code gives, for every quantifier, for a root, a derived memory and one with
no recorded lineage."""

from __future__ import annotations

import pytest
from memlineage_dsl.evaluator import decide
from memlineage_dsl.facts import Creator, DictSnapshot, MemoryFacts, Request, UnknownMemory
from memlineage_dsl.pipeline import build_texts

ROOT = MemoryFacts(id="root", confidence=0.3, status="active")
MID = MemoryFacts(id="mid", confidence=0.6, dependencies=("root",), status="revoked")
LEAF = MemoryFacts(id="leaf", confidence=0.9, dependencies=("mid",))
SNAP = DictSnapshot([ROOT, MID, LEAF], [])

# (condition, whether it holds for root, mid, leaf)
CASES = [
    ("any(a in ancestors(memory) : a.status == revoked)", (False, False, True)),
    ("all(a in ancestors(memory) : a.confidence > 0.5)", (True, False, False)),
    ("count(a in ancestors(memory) : a.confidence < 1) == 0", (True, False, False)),
    ("sum(a in ancestors(memory) : a.confidence) < 0.5", (True, True, False)),
    ("min(a in lineage(memory) : a.confidence) < 0.5", (True, True, True)),
    ("max(a in lineage(memory) : a.confidence) > 0.5", (False, True, True)),
    ("count(a in lineage(memory) : a.confidence >= 0) == 1", (True, False, False)),
    ("any(a in lineage(memory) : a.id == memory.id)", (True, True, True)),
    # a body that is only an attribute of the variable maps an attrgetter
    ("any(a in ancestors(memory) : a.known)", (False, True, True)),
    ("all(a in lineage(memory) : a.known)", (True, True, True)),
    ("sum(a in lineage(memory) : a.confidence) > 1", (False, False, True)),
]


@pytest.mark.parametrize(("when", "holds"), CASES, ids=[c[0] for c in CASES])
def test_quantifiers_over_a_roots_walk_answer_as_the_walk(
    when: str, holds: tuple[bool, bool, bool]
) -> None:
    build = build_texts({"a.mlp": f'policy p {{ on read when {when} deny "x" }}\n'})
    assert build.compiled is not None, build.diagnostics
    for m, expected in zip((ROOT, MID, LEAF), holds, strict=True):
        d = decide(build.compiled, Request("read", m, Creator("user", "user:a"), time=1.0), SNAP)
        assert (d.effect == "deny", d.errors) == (expected, ()), (when, m.id, d)


def test_an_unknown_memory_is_not_read_as_built_on_nothing() -> None:
    """A memory with no recorded lineage takes the helper, which raises as before: the
    rule does not apply to it (`evaluator._resolve`), where a root's empty ancestry
    makes `all` true."""
    build = build_texts(
        {"a.mlp": 'policy p { on read when all(a in ancestors(memory) : false) deny "x" }\n'}
    )
    assert build.compiled is not None
    asker = Creator("user", "user:a")
    d = decide(build.compiled, Request("read", UnknownMemory("ghost"), asker, time=1.0), SNAP)
    assert (d.effect, d.errors) == ("allow", ()), d
    d = decide(build.compiled, Request("read", ROOT, asker, time=1.0), SNAP)
    assert d.effect == "deny", d
