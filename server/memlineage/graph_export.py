"""Render an Explain answer as DOT, Mermaid or indented text.

So a person can see why a memory was degraded: the memories it was built from,
what was built on it, each node's creator and status. Pure functions over the
pb message; no server needed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from google.protobuf.timestamp_pb2 import Timestamp

from memlineage.v1 import memlineage_pb2 as pb

__all__ = ["STATUS_COLOURS", "status_name", "to_dot", "to_mermaid", "to_text"]

STATUS_COLOURS: dict[str, tuple[str, str]] = {
    # status: (fill, font)
    "active": ("#4caf50", "#000000"),
    "pending_verification": ("#ff9800", "#000000"),
    "revoked": ("#e53935", "#ffffff"),
    "superseded": ("#9e9e9e", "#000000"),
    "archived": ("#64b5f6", "#000000"),
    "compressed": ("#81d4fa", "#000000"),
    "evicted": ("#000000", "#ffffff"),
    "unspecified": ("#ffffff", "#000000"),
}
_FOCUS = "#1a237e"  # border of the explained memory


def status_name(status: pb.Status) -> str:
    """STATUS_PENDING_VERIFICATION -> "pending_verification"."""
    try:
        return pb.Status.Name(status).removeprefix("STATUS_").lower()
    except ValueError:
        return "unspecified"


def _nodes(resp: pb.ExplainResponse) -> dict[str, pb.Memory]:
    """Every memory in the answer by id (the explained one wins over a duplicate)."""
    nodes: dict[str, pb.Memory] = {}
    for m in [*resp.ancestors, *resp.descendants, resp.memory]:
        if m.id:
            nodes[m.id] = m
    return nodes


def _edges(resp: pb.ExplainResponse) -> list[tuple[str, str]]:
    return list(dict.fromkeys((e.from_id, e.to_id) for e in resp.edges))


def _ordered_ids(resp: pb.ExplainResponse) -> list[str]:
    """Ancestors, the memory, descendants, then edge ends the answer did not load."""
    ids = [m.id for m in [*resp.ancestors, resp.memory, *resp.descendants] if m.id]
    for a, b in _edges(resp):
        ids += [a, b]
    return list(dict.fromkeys(ids))


def _label_lines(memory: pb.Memory | None, memory_id: str) -> list[str]:
    if memory is None:
        return [memory_id, "(not loaded)"]
    return [memory.id, memory.creator.id or "?", status_name(memory.status)]


# ---------------------------------------------------------------- DOT


def _dot_quote(text: str) -> str:
    r"""A DOT double-quoted string; newlines become the DOT line break ``\n``."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return f'"{escaped}"'


def to_dot(resp: pb.ExplainResponse) -> str:
    """Graphviz DOT: edges point from a dependency to the memory derived from it."""
    nodes = _nodes(resp)
    lines = [
        "digraph lineage {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica"];',
    ]
    for memory_id in _ordered_ids(resp):
        memory = nodes.get(memory_id)
        label = _dot_quote("\n".join(_label_lines(memory, memory_id)))
        if memory is None:
            attrs = f'label={label}, style="rounded,dashed"'
        else:
            fill, font = STATUS_COLOURS[status_name(memory.status)]
            attrs = f'label={label}, fillcolor="{fill}", fontcolor="{font}"'
            if memory_id == resp.memory.id:
                attrs += f', color="{_FOCUS}", penwidth=3'
        lines.append(f"  {_dot_quote(memory_id)} [{attrs}];")
    lines += [f"  {_dot_quote(a)} -> {_dot_quote(b)};" for a, b in _edges(resp)]
    if resp.truncated:
        lines.append('  label="truncated: deeper lineage not shown";')
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- Mermaid

_MERMAID_ESCAPES = {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "`": "#96;"}


def _mermaid_text(text: str) -> str:
    """Mermaid label text: entity codes for the characters its parser treats specially."""
    out = "".join(_MERMAID_ESCAPES.get(ch, ch) for ch in text)
    return out.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br/>")


def to_mermaid(resp: pb.ExplainResponse) -> str:
    """A Mermaid flowchart; node ids are generated (n0, n1…) so any memory id is safe."""
    nodes = _nodes(resp)
    ids = _ordered_ids(resp)
    key = {memory_id: f"n{i}" for i, memory_id in enumerate(ids)}
    lines = ["flowchart LR"]
    used: dict[str, list[str]] = {}
    for memory_id in ids:
        memory = nodes.get(memory_id)
        label = "<br/>".join(_mermaid_text(x) for x in _label_lines(memory, memory_id))
        lines.append(f'  {key[memory_id]}["{label}"]')
        cls = "not_loaded" if memory is None else status_name(memory.status)
        used.setdefault(cls, []).append(key[memory_id])
    lines += [f"  {key[a]} --> {key[b]}" for a, b in _edges(resp)]
    for cls, members in used.items():
        if cls == "not_loaded":
            lines.append("  classDef not_loaded fill:#ffffff,stroke:#000000,stroke-dasharray:4")
        else:
            fill, font = STATUS_COLOURS[cls]
            lines.append(f"  classDef {cls} fill:{fill},color:{font},stroke:#333333")
        lines.append(f"  class {','.join(members)} {cls}")
    if resp.memory.id:
        lines.append(f"  style {key[resp.memory.id]} stroke:{_FOCUS},stroke-width:4px")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- text


def _when(ts: Timestamp) -> str:
    seconds = ts.seconds + ts.nanos / 1e9
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="seconds")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _summary(memory: pb.Memory | None, memory_id: str) -> str:
    if memory is None:
        return f"{_one_line(memory_id)} (not loaded)"
    return (
        f"{_one_line(memory.id)} [{status_name(memory.status)}] "
        f"by {_one_line(memory.creator.id) or '?'}"
    )


def _tree(
    start: str,
    nexts: dict[str, list[str]],
    nodes: dict[str, pb.Memory],
    depth: int,
    seen: set[str],
) -> Iterator[str]:
    for memory_id in nexts.get(start, []):
        repeat = memory_id in seen
        yield (
            "  " * depth
            + _summary(nodes.get(memory_id), memory_id)
            + (" (shown above)" if repeat else "")
        )
        if not repeat:
            seen.add(memory_id)
            yield from _tree(memory_id, nexts, nodes, depth + 1, seen)


def to_text(resp: pb.ExplainResponse) -> str:
    """An indented, readable rendering for a terminal."""
    m = resp.memory
    nodes = _nodes(resp)
    parents: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    for a, b in _edges(resp):
        parents.setdefault(b, []).append(a)
        children.setdefault(a, []).append(b)
    out = [_summary(m, m.id)]
    details = [
        f"type {m.type or '?'}",
        f"version {m.version}",
        f"confidence {m.creator_confidence:.2f}",
    ]
    if m.HasField("created_at"):
        details.append(f"created {_when(m.created_at)}")
    out.append("  " + ", ".join(details))
    if m.tags:
        out.append("  tags: " + ", ".join(_one_line(t) for t in m.tags))
    if m.HasField("claim"):
        c = m.claim
        out.append(
            f"  claim: {_one_line(c.subject)} {_one_line(c.attribute)} = {_one_line(c.value)!r}"
        )
    if m.successor:
        out.append(f"  successor: {_one_line(m.successor)}")
    for h in m.history:
        line = f"  {_when(h.at)} {status_name(h.from_status)} -> {status_name(h.to_status)}"
        if h.reason:
            line += f": {_one_line(h.reason)}"
        if h.root_id and h.root_id != m.id:
            line += f" (cascade from {_one_line(h.root_id)})"
        out.append(line)
    up = list(_tree(m.id, parents, nodes, 2, {m.id}))
    down = list(_tree(m.id, children, nodes, 2, {m.id}))
    out += ["  built from:", *up] if up else ["  built from: nothing"]
    out += ["  built on it:", *down] if down else ["  built on it: nothing"]
    if resp.decisions:
        out.append("  recent decisions:")
    for d in resp.decisions:
        op = pb.Operation.Name(d.operation).removeprefix("OPERATION_").lower()
        effect = pb.Effect.Name(d.effect).removeprefix("EFFECT_").lower()
        when = f" {_when(d.decided_at)}" if d.HasField("decided_at") else ""
        out.append(f"    {d.decision_id}{when} {op} -> {effect} (score {d.compliance_score:.2f})")
        for r in d.reasons:
            reason = f"      {r.policy}"
            if r.message:
                reason += f": {_one_line(r.message)}"
            out.append(reason)
        out += [
            f"      obligation {o.kind}" + (f": {_one_line(o.text)}" if o.text else "")
            for o in d.obligations
        ]
    if resp.truncated:
        out.append("  (truncated: deeper lineage not shown)")
    return "\n".join(out) + "\n"
