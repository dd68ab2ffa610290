"""Action lists compare names in every spelling and by a namespaced name's last part
(an outside audit: `Send_money`, `SendMoney`, `bank/send_money` and
`mcp__bank__transfer` all passed a bundled list naming `send_*` and `transfer*`)."""

from __future__ import annotations

import pytest
from memlineage_dsl.facts import action_in, name_forms

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
