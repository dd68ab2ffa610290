"""LangChain callback handlers that record an agent's lineage and gate its tool calls.

`LineageCallbackHandler` (a ``langchain_core`` ``BaseCallbackHandler``) and its async
twin `AsyncLineageCallbackHandler` sit in a run's ``callbacks``. They record what the
agent sees, so the act gate can tell an instruction planted in a tool output from the
user's own request:

- the **root run's input** (a chain's or agent's start input, a root chat model's
  human messages) as memories of the user, type ``user_input``;
- every **tool result** as a memory of ``tool:<name>``, type ``tool_result``, with the
  run's parent chain as context (``context_id`` the root run id, ``run:<id>`` tags);
- **derived conclusions** the runtime names (`derived`, or ``memlineage_derived`` in a
  run's metadata) as agent memories with their dependencies.

Before each tool runs (``on_tool_start``) they ask the sidecar's ``act`` with the
tool's arguments bound to the memories their values came from (`sources_of`: found in
the user's input -> the user memory; else in a recorded tool output or derived
value -> those memories; else no source), and raise `ActDenied` on DENY, which
LangChain propagates (``raise_error = True``) before the tool's body runs. A DEGRADE
asks ``on_confirm(decision)``; refusing raises `ActNotConfirmed`. `grant` records the
user's delegation. docs/integrations.md ("LangChain callbacks") has the id scheme,
the binding rule and its limits.

Like every integration this imports only the client, ``memlineage.v1`` and its
framework (docs/architecture.md).
"""

from __future__ import annotations

from memlineage.integrations.langchain_callbacks.binding import ActRecord
from memlineage.integrations.langchain_callbacks.errors import (
    ARGS_KEY,
    DERIVED_KEY,
    RELIES_ON_KEY,
    TOOL_RESULT_TYPE,
    USER_INPUT_TYPE,
    ActDenied,
    ActNotConfirmed,
    LineageRefused,
)
from memlineage.integrations.langchain_callbacks.handlers import (
    AsyncLineageCallbackHandler,
    LineageCallbackHandler,
)

__all__ = [
    "ARGS_KEY",
    "DERIVED_KEY",
    "RELIES_ON_KEY",
    "TOOL_RESULT_TYPE",
    "USER_INPUT_TYPE",
    "ActDenied",
    "ActNotConfirmed",
    "ActRecord",
    "AsyncLineageCallbackHandler",
    "LineageCallbackHandler",
    "LineageRefused",
]
