"""Calls a model names are kept with what its input held until they run; calls that
never run are not kept without end (a review: the map grew with every such id)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from memlineage.integrations.langchain_callbacks import core


def _named(*ids: str) -> LLMResult:
    message = AIMessage(content="", tool_calls=[{"name": "t", "args": {}, "id": i} for i in ids])
    return LLMResult(generations=[[ChatGeneration(message=message)]])


def test_calls_named_and_never_run_are_forgotten_oldest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(core, "MOST_NAMED", 3)
    c = core._Core("user:alice", None, None, True, True)
    for k in range(10):
        c.note_calls(_named(f"call-{k}"))
    assert list(c.decided) == ["call-7", "call-8", "call-9"]
    c.note_calls(_named("call-8"))  # named again: the newest now
    assert list(c.decided) == ["call-7", "call-9", "call-8"]
