"""The shipped parser (`grammar_blob`) is the grammar's: built from this grammar, and
parsing every file as a parser built now (strict) does, errors included."""

from __future__ import annotations

from pathlib import Path

import pytest
from lark import Lark
from lark.exceptions import UnexpectedInput
from memlineage_dsl import grammar_blob
from memlineage_dsl.syntax import lark_parser, parser_options

REPO = Path(__file__).resolve().parents[2]
CORPUS = sorted([*(REPO / "policies").glob("*.mlp"), *(REPO / "tests" / "dsl").glob("**/*.mlp")])


def _outcome(parser: Lark, text: str) -> object:
    try:
        return parser.parse(text, start="start")
    except UnexpectedInput as exc:
        return (type(exc).__name__, exc.line, exc.column)


def test_the_shipped_parser_was_built_from_this_grammar() -> None:
    blob = (Path(grammar_blob.__file__).parent / grammar_blob.BLOB).read_bytes()
    shipped = blob.partition(b"\n")[0].decode().split()[0]
    current = grammar_blob.stamp().split()[0]
    assert shipped == current, "grammar.lark changed: run scripts/build_parser.py"


def test_the_parser_in_use_parses_as_one_built_now() -> None:
    built = grammar_blob.build(**parser_options())
    used = lark_parser()
    assert len(CORPUS) > 20
    for path in CORPUS:
        text = path.read_text()
        assert _outcome(used, text) == _outcome(built, text), path
    assert {t.name for t in used.terminals} == {t.name for t in built.terminals}


def test_a_blob_of_another_grammar_or_lark_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[object] = []
    real = grammar_blob.build

    def counting(**options: object) -> Lark:
        built.append(options)
        return real(**options)

    monkeypatch.setattr(grammar_blob, "build", counting)
    monkeypatch.setattr(grammar_blob, "stamp", lambda: "another grammar lark 0.0")
    parser = grammar_blob.load(**parser_options())
    assert built, "a stale blob was loaded"
    assert _outcome(parser, 'policy p { on read when memory.id == "x" deny "no" }')
