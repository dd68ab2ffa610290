"""graph_export over hand-built Explain answers: nodes, edges, colours, escaping."""

from __future__ import annotations

import re

import pytest
from memlineage.graph_export import STATUS_COLOURS, status_name, to_dot, to_mermaid, to_text
from memlineage.v1 import memlineage_pb2 as pb


def memory(memory_id: str, status: int, creator: str = "tool:flight_api") -> pb.Memory:
    kind = {"user": 1, "tool": 2, "reasoning": 3, "agent": 4, "system": 5}[creator.split(":")[0]]
    return pb.Memory(
        id=memory_id,
        status=status,
        creator=pb.Creator(kind=kind, id=creator),
        type="fact",
        version=1,
        creator_confidence=0.9,
    )


@pytest.fixture
def chain() -> pb.ExplainResponse:
    """price (revoked) -> plan (pending, explained) -> booking (pending), summary (active)."""
    resp = pb.ExplainResponse(
        memory=memory("plan", pb.STATUS_PENDING_VERIFICATION, "agent:planner"),
        ancestors=[memory("price", pb.STATUS_REVOKED)],
        descendants=[
            memory("booking", pb.STATUS_PENDING_VERIFICATION, "agent:booker"),
            memory("summary", pb.STATUS_ACTIVE, "reasoning:sum"),
        ],
        edges=[
            pb.Edge(from_id="price", to_id="plan"),
            pb.Edge(from_id="plan", to_id="booking"),
            pb.Edge(from_id="plan", to_id="summary"),
        ],
        decisions=[
            pb.Decision(
                decision_id="d-1",
                effect=pb.EFFECT_DEGRADE,
                operation=pb.OPERATION_READ,
                compliance_score=0.4,
                reasons=[pb.Reason(policy="dependency_revoked", message="an ancestor was revoked")],
                obligations=[pb.Obligation(kind="annotate", text="may be outdated")],
            )
        ],
    )
    resp.memory.history.add(
        from_status=pb.STATUS_ACTIVE,
        to_status=pb.STATUS_PENDING_VERIFICATION,
        reason="revoked: stale",
        root_id="price",
    ).at.seconds = 1_700_000_000
    return resp


def dot_nodes(dot: str) -> dict[str, str]:
    return dict(re.findall(r'^  "([^"]+)" \[(.*)\];$', dot, re.MULTILINE))


def test_status_names_cover_every_status() -> None:
    for value in pb.Status.values():
        assert status_name(value) in STATUS_COLOURS
    assert status_name(pb.STATUS_PENDING_VERIFICATION) == "pending_verification"


def test_dot_is_structurally_sound(chain: pb.ExplainResponse) -> None:
    dot = to_dot(chain)
    assert dot.startswith("digraph lineage {\n") and dot.endswith("}\n")
    assert dot.count("{") == dot.count("}") == 1
    edge_lines = [line for line in dot.splitlines() if "->" in line]
    assert edge_lines == [
        '  "price" -> "plan";',
        '  "plan" -> "booking";',
        '  "plan" -> "summary";',
    ]
    assert set(dot_nodes(dot)) == {"price", "plan", "booking", "summary"}


def test_dot_colours_by_status_and_highlights_the_memory(chain: pb.ExplainResponse) -> None:
    nodes = dot_nodes(to_dot(chain))
    assert 'fillcolor="#e53935"' in nodes["price"]  # revoked: red
    assert 'fillcolor="#ff9800"' in nodes["booking"]  # pending: orange
    assert 'fillcolor="#4caf50"' in nodes["summary"]  # active: green
    assert "penwidth=3" in nodes["plan"]
    assert all("penwidth" not in attrs for n, attrs in nodes.items() if n != "plan")
    assert 'label="plan\\nagent:planner\\npending_verification"' in nodes["plan"]


@pytest.mark.parametrize(
    ("status", "fill"),
    [
        (pb.STATUS_SUPERSEDED, "#9e9e9e"),
        (pb.STATUS_ARCHIVED, "#64b5f6"),
        (pb.STATUS_COMPRESSED, "#81d4fa"),
        (pb.STATUS_EVICTED, "#000000"),
    ],
)
def test_dot_colour_per_status(status: int, fill: str) -> None:
    nodes = dot_nodes(to_dot(pb.ExplainResponse(memory=memory("m", status))))
    assert f'fillcolor="{fill}"' in nodes["m"]


def test_dot_escapes_quotes_backslashes_and_newlines() -> None:
    resp = pb.ExplainResponse(memory=memory('say "hi"\nnow\\', pb.STATUS_ACTIVE, 'user:"x"'))
    dot = to_dot(resp)
    node_line = next(line for line in dot.splitlines() if "label=" in line)
    assert node_line.startswith('  "say \\"hi\\"\\nnow\\\\" [')
    assert 'user:\\"x\\"' in node_line
    assert len(dot.splitlines()) == 5  # header, 2 defaults, one node, closing brace
    # every double quote that is not escaped opens or closes a string: they pair up
    assert len(re.findall(r'(?<!\\)"', node_line.replace("\\\\", ""))) % 2 == 0


def test_edge_ends_not_in_the_answer_are_drawn_dashed() -> None:
    resp = pb.ExplainResponse(
        memory=memory("m", pb.STATUS_ACTIVE),
        truncated=True,
        edges=[pb.Edge(from_id="far", to_id="m")],
    )
    dot = to_dot(resp)
    assert 'style="rounded,dashed"' in dot_nodes(dot)["far"]
    assert "truncated" in dot


def test_mermaid_nodes_edges_and_classes(chain: pb.ExplainResponse) -> None:
    text = to_mermaid(chain)
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    nodes = dict(re.findall(r'^  (n\d+)\["([^"]*)"\]$', text, re.MULTILINE))
    by_id = {label.split("<br/>")[0]: key for key, label in nodes.items()}
    assert set(by_id) == {"price", "plan", "booking", "summary"}
    assert f"  {by_id['price']} --> {by_id['plan']}" in lines
    assert f"  {by_id['plan']} --> {by_id['booking']}" in lines
    assert sum("-->" in line for line in lines) == 3
    assert "  classDef revoked fill:#e53935,color:#ffffff,stroke:#333333" in lines
    assert f"  class {by_id['plan']},{by_id['booking']} pending_verification" in lines
    assert f"  style {by_id['plan']} stroke:#1a237e,stroke-width:4px" in lines


def test_mermaid_escapes_label_text() -> None:
    resp = pb.ExplainResponse(memory=memory('a"b<c>#1\nd`', pb.STATUS_ACTIVE))
    node = to_mermaid(resp).splitlines()[1]
    assert node == '  n0["a#quot;b#lt;c#gt;#35;1<br/>d#96;<br/>tool:flight_api<br/>active"]'


def test_text_rendering(chain: pb.ExplainResponse) -> None:
    text = to_text(chain)
    assert text.splitlines()[0] == "plan [pending_verification] by agent:planner"
    assert "    price [revoked] by tool:flight_api" in text
    assert "    booking [pending_verification] by agent:booker" in text
    assert "active -> pending_verification: revoked: stale (cascade from price)" in text
    assert "d-1 read -> degrade (score 0.40)" in text
    assert "dependency_revoked: an ancestor was revoked" in text
    assert "obligation annotate: may be outdated" in text


def test_text_handles_diamonds_and_cycles_without_looping() -> None:
    resp = pb.ExplainResponse(
        memory=memory("d", pb.STATUS_ACTIVE),
        ancestors=[memory(x, pb.STATUS_ACTIVE) for x in "abc"],
        edges=[
            pb.Edge(from_id="a", to_id="b"),
            pb.Edge(from_id="a", to_id="c"),
            pb.Edge(from_id="b", to_id="d"),
            pb.Edge(from_id="c", to_id="d"),
            pb.Edge(from_id="d", to_id="a"),
        ],
    )
    text = to_text(resp)
    assert "(shown above)" in text
    assert len(text.splitlines()) < 20
