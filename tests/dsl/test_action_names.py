"""Action lists compare names in every spelling and by a namespaced name's last part
(an outside audit: `Send_money`, `SendMoney`, `bank/send_money` and
`mcp__bank__transfer` all passed a bundled list naming `send_*` and `transfer*`)."""

from __future__ import annotations

import pytest
from memlineage_dsl.facts import action_in, action_listed, name_forms

LIST = ("send_*", "transfer*", "update_password", "*credential*")


@pytest.mark.parametrize(
    "name",
    [
        "send_money",
        "Send_money",
        "SEND_MONEY",
        "SendMoney",
        "send-money",
        "bank/send_money",
        "mcp__bank__transfer",
        "email.send_email",
        "tools:transfer_funds",
        "UpdatePassword",
        "get_Credentials",
    ],
)
def test_every_spelling_of_a_listed_name_is_on_the_list(name: str) -> None:
    assert action_in(name, LIST)


@pytest.mark.parametrize("name", ["read_file", "resend_money", "bank/read_file", "sender", ""])
def test_other_names_are_not(name: str) -> None:
    assert not action_in(name, LIST)


def test_a_name_is_its_key_and_each_namespaced_tail() -> None:
    assert name_forms("mcp__Bank__sendMoney") == (
        "mcp_bank_send_money",
        "bank_send_money",
        "send_money",
    )
    assert name_forms("a/b.c") == ("a/b.c", "b.c", "c")


@pytest.mark.parametrize(
    "name",
    ["sendmoney", "SENDmoney", "sEnD_mOnEy", "send.money", "mcp__bank__SENDMONEY"],
)
def test_a_policys_list_also_takes_a_name_run_together_or_oddly_cased(name: str) -> None:
    """A policy's `in` (`action_listed`): a name written as one word is compared run
    together, an oddly cased one without splitting its humps (an outside audit: each
    of these passed a list naming `send_*`). A grant's actions (`action_in`) stay exact:
    a grant for `send_*` does not widen to them."""
    assert action_listed(name, LIST)
    assert not action_in(name, LIST)


@pytest.mark.parametrize("name", ["read_file", "resend_money", "bookmarks_list", "get_sender"])
def test_run_together_matching_is_only_for_one_word_names(name: str) -> None:
    assert not action_listed(name, LIST)
    assert action_listed("sender", LIST)  # one word: run together, on `send_*` (wider)


def test_acts_counts_an_action_under_a_pattern_as_in_matches_it() -> None:
    """`acts("send_*")` counts every spelling a policy's `in` takes (before: a literal
    glob, so a rate rule on `send_*` never counted `SendMoney`)."""
    from memlineage_dsl.pipeline import build_texts

    text = 'policy r priority 1 {\n  on act\n  when acts("send_*", 1h) > 3\n  deny "too many"\n}\n'
    build = build_texts({"r.mlp": text})
    assert build.compiled is not None, [d.message for d in build.diagnostics]
    for name in ("send_money", "SendMoney", "sendmoney", "bank/send_money"):
        assert build.compiled.counts_action(name) == ["send_*"], name
    assert build.compiled.counts_action("read_file") == []
