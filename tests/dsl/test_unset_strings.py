"""A string attribute never set is "" to policies, as the checker types it (before:
None, so `memory.context_id == ""` never fired, `!= ""` always did, and
`len(memory.volatility)` failed the rule closed)."""

from __future__ import annotations

from support.mlp import test_failures

POLICY = """
policy contextless priority 50 {
  on read
  when memory.context_id == "" and memory.type == "fact"
  deny "recorded without a context"
}

policy unclassified priority 40 {
  on read
  when len(memory.volatility) == 0 and memory.subject == "" and memory.successor == ""
  degrade annotate("no volatility class")
}

test "unset strings are empty" {
  given memory bare { creator: "tool:x" }
  given memory placed { creator: "tool:x", context_id: "run-1" }
  given memory classed { creator: "tool:x", context_id: "run-1", volatility: "high" }
  expect read bare -> deny
  expect read placed -> degrade with annotate("no volatility class")
  expect read classed -> allow
}
"""


def test_a_string_never_set_is_empty() -> None:
    assert test_failures({"p.mlp": POLICY}) == []
