"""Error recovery: one broken item must not hide the next item or its errors."""

from memlineage_dsl.parser import parse_source


def test_missing_brace_costs_one_item_not_the_rest_of_the_file() -> None:
    text = (
        "policy a {\n"
        "  on read\n"
        "  when memory.confidence < 0.5\n"
        "  deny\n"
        "\n"
        "policy b { on read when true deny }\n"
        "policy c { on read when memory.x == = 1 deny }\n"
    )
    module, diags = parse_source(text, "x.mlp")
    # `c` is mended (the stray `=` blanked out) and kept for the checker; `a` is lost
    assert [item.name for item in module.items] == ["b", "c"]
    assert [(d.code, d.span.line) for d in diags] == [("E003", 4), ("E001", 7)]
    assert diags[0].message == "missing `}` before the next item"
    assert diags[0].help == "is a closing `}` missing?"
    assert diags[1].help is not None and "expected" in diags[1].help


def test_end_of_file_in_last_item_says_end_of_file() -> None:
    _, diags = parse_source("policy ok { on read deny }\npolicy a {\n  on read\n", "y.mlp")
    assert [(d.code, d.message) for d in diags] == [("E003", "unexpected end of file")]


def test_a_spaced_duration_suggests_one_word_and_the_rule_is_checked_on() -> None:
    from memlineage_dsl.pipeline import build_texts

    text = (
        "policy p {\n"
        "  on read\n"
        "  when age(memory) > 5 mins and since(memory.last_access) > 2 hours\n"
        "    and memory.confidnce > 0.5\n"
        "  deny\n"
        "}\n"
    )
    build = build_texts({"t.mlp": text})
    found = [(d.code, d.span.line, d.span.column, d.help) for d in build.diagnostics]
    assert ("E001", 3, 24, "a duration is one word: write `5m`") in found
    assert ("E001", 3, 63, "a duration is one word: write `2h`") in found
    assert any(code == "E102" and line == 4 for code, line, _, _ in found)  # behind them
    assert build.compiled is None  # a mended rule is checked, never served


def test_a_single_equals_is_mended_to_a_comparison_and_the_rule_checked_on() -> None:
    from memlineage_dsl.pipeline import build_texts

    text = (
        'policy p {\n  on read\n  when memory.type = "fact" and memory.confidnce > 0.5\n  deny\n}\n'
    )
    build = build_texts({"t.mlp": text})
    found = [(d.code, d.span.line, d.span.column, d.help) for d in build.diagnostics]
    assert found[0] == ("E001", 3, 20, "try `==` instead of `=`")
    assert ("E102", 3, 40, "did you mean `confidence`?") in found
    assert build.compiled is None
    # `=` with no space after it cannot be mended in place: only the syntax error
    tight = build_texts({"t.mlp": text.replace('= "fact"', '="fact"')})
    assert [d.code for d in tight.diagnostics] == ["E001"]


def test_a_misspelt_keyword_is_mended_and_the_rule_checked_on() -> None:
    from memlineage_dsl.pipeline import build_texts

    text = "policy p {\n  on read\n  whne memory.confidnce < 0.5\n  deny\n}\n"
    found = [(d.code, d.span.line, d.help) for d in build_texts({"t.mlp": text}).diagnostics]
    assert found[0] == ("E001", 3, "did you mean `when`?")
    assert ("E102", 3, "did you mean `confidence`?") in found


def _found(text: str) -> list[tuple[str, int, int, str | None]]:
    from memlineage_dsl.pipeline import build_texts

    build = build_texts({"t.mlp": text})
    assert build.compiled is None  # a mended rule is checked, never served
    return [(d.code, d.span.line, d.span.column, d.help) for d in build.diagnostics]


def test_a_missing_parenthesis_is_put_back_and_the_rule_checked_on() -> None:
    text = (
        'policy p {\n  on read\n  when (memory.confidence < 0.5 and memory.typ == "x"\n  deny\n}\n'
    )
    assert _found(text) == [
        ("E102", 3, 44, "did you mean `type`?"),  # behind the missing `)`
        ("E001", 4, 3, "expected `)`"),
    ]


def test_a_stray_token_is_passed_over_and_the_rule_checked_on() -> None:
    text = (
        'policy p {\n  on read\n  when memory.confidence < 0.5 0.7 and memory.typ == "x"\n'
        "  deny\n}\n"
    )
    found = _found(text)
    assert [(c, line, col) for c, line, col, _ in found] == [("E001", 3, 32), ("E102", 3, 47)]


def test_a_missing_comma_in_a_list_is_put_back() -> None:
    text = (
        'policy p {\n  on read\n  when memory.type in ["a" "b"] and memory.typ == "x"\n  deny\n}\n'
    )
    found = _found(text)
    assert [(c, line, col) for c, line, col, _ in found] == [("E001", 3, 28), ("E102", 3, 44)]


def test_single_quotes_are_mended_as_the_hint_says() -> None:
    text = (
        "policy p {\n  on read\n  when memory.type == 'fact' and memory.confidnce > 0.5\n"
        "  deny\n}\n"
    )
    assert _found(text) == [
        ("E002", 3, 23, "strings use double quotes"),
        ("E102", 3, 41, "did you mean `confidence`?"),
    ]


def test_a_keyword_misspelt_longer_or_shorter_is_one_word_and_mended() -> None:
    # `whenn` is one name (never `when` + `n`), whichever names the parser accepts there
    longer = "policy p {\n  on read\n  whenn memory.confidnce < 0.5\n  deny\n}\n"
    assert _found(longer) == [
        ("E001", 3, 3, "did you mean `when`?"),
        ("E102", 3, 16, "did you mean `confidence`?"),
    ]
    shorter = "policy p {\n  on read\n  wen  memory.confidnce < 0.5\n  deny\n}\n"
    assert _found(shorter)[1] == ("E102", 3, 15, "did you mean `confidence`?")


def test_a_mend_that_only_moves_the_error_on_is_not_taken() -> None:
    # blanking `&` leaves `0.5   memory.typ`, an error one token later: reported once
    text = 'policy p {\n  on read\n  when memory.confidence < 0.5 & memory.typ == "x"\n  deny\n}\n'
    assert [c for c, *_ in _found(text)] == ["E002"]
