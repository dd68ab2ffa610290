"""A LangGraph agent whose long-term memory goes through MemLineage (scripted nodes, no LLM).

The graph is compiled with ``store=GuardedLangGraphStore(...)``; its nodes use
``runtime.store`` as they would any LangGraph store. ``remember`` writes what
the user said, a web tip and a low-confidence guess, each with its lineage under
``"_lineage"``; ``plan`` searches (the guess is hidden, the tip comes back with
its caveat), tries to "correct" the user's city (refused by the policies) and
writes the plan, whose creator the lineage hook takes from the run's context.

Run it against a sidecar on 127.0.0.1:50051 (``bash scripts/run.sh``)::

    .venv/bin/python docs/examples/langgraph_agent.py

``tests/integrations/test_langgraph_store.py`` runs `run` and `arun` against a real
sidecar and checks what they return.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime, get_runtime
from langgraph.store.memory import InMemoryStore
from memlineage.client import MemLineageClient, PolicyDenied
from memlineage.integrations.langgraph_store import DECISION_KEY, LINEAGE_KEY, GuardedLangGraphStore


@dataclass
class Context:
    """Who the run is for, and which agent writes on its behalf."""

    user: str = "carol"
    agent: str = "agent:planner"


class State(TypedDict, total=False):
    answer: str
    notes: list[str]
    refused: list[str]


def creator_from_context(
    namespace: tuple[str, ...], key: str, value: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """The lineage hook: a put without its own creator is the running agent's. The
    hook has the last word over a value's `_lineage`; this one defers to it because
    these nodes build their values themselves (a node storing a tool's raw JSON
    should name the tool here instead: that JSON could carry a `_lineage` of its own)."""
    if "creator" in value.get(LINEAGE_KEY, {}):
        return None
    try:
        return {"creator": get_runtime(Context).context.agent}
    except RuntimeError:  # not inside a graph run: the store's defaults apply
        return None


def remember(state: State, runtime: Runtime[Context]) -> State:
    assert runtime.store is not None
    user, ns = runtime.context.user, (runtime.context.user, "trip")
    city = {"creator": f"user:{user}", "claim": [f"user:{user}", "destination_city", "Shanghai"]}
    runtime.store.put(ns, "city", {"text": "going to Shanghai", "_lineage": city})
    web = {"creator": "tool:web_search", "tags": ["travel_tip"]}
    runtime.store.put(ns, "tip", {"text": "Shanghai: walk the Bund at night", "_lineage": web})
    guess = {"creator": "reasoning:planner", "confidence": 0.4}
    runtime.store.put(ns, "guess", {"text": "Shanghai or maybe Paris", "_lineage": guess})
    return {}


def plan(state: State, runtime: Runtime[Context]) -> State:
    assert runtime.store is not None
    ns = (runtime.context.user, "trip")
    notes, caveated = [], []
    for item in runtime.store.search(ns, query="Shanghai", limit=5):
        caveats = [
            o["text"] for o in item.value.get(DECISION_KEY, {}).get("obligations", ()) if o["text"]
        ]
        notes.append(item.key)
        caveated.append(item.value["text"] + (f" ({'; '.join(caveats)})" if caveats else ""))
    refused = []
    try:  # the agent may not rewrite what the user said
        runtime.store.put(ns, "city", {"text": "going to Paris"})
    except PolicyDenied as denied:
        refused.append(str(denied))
    answer = "; ".join(caveated)
    runtime.store.put(ns, "plan", {"text": answer, "_lineage": {"dependencies": notes}})
    return {"answer": answer, "notes": notes, "refused": refused}


def build(store: GuardedLangGraphStore) -> Any:
    """The compiled graph: START -> remember -> plan -> END, over ``store``."""
    graph = StateGraph(State, context_schema=Context)
    graph.add_node("remember", remember)
    graph.add_node("plan", plan)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "plan")
    graph.add_edge("plan", END)
    return graph.compile(store=store)


def guarded(client: MemLineageClient) -> GuardedLangGraphStore:
    """A fresh in-memory LangGraph store behind the sidecar."""
    return GuardedLangGraphStore(InMemoryStore(), client, lineage_hook=creator_from_context)


def run(address: str, user: str = "carol") -> State:
    with MemLineageClient(address) as client:
        state: State = build(guarded(client)).invoke({}, context=Context(user=user))
        return state


async def arun(address: str, user: str = "carol") -> State:
    """The same run through ``ainvoke``: the store's ``abatch`` path."""
    with MemLineageClient(address) as client:
        state: State = await build(guarded(client)).ainvoke({}, context=Context(user=user))
        return state


if __name__ == "__main__":
    result = run(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051")
    print("answer:", result["answer"])
    print("refused:", *result["refused"], sep="\n  ")
