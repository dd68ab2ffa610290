"""What the handlers keep of a run (sources, runs, records, acts) and how they read
values out of LangChain's inputs and outputs, to bind arguments to memories."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.outputs import LLMResult

from memlineage.client import ActArg
from memlineage.integrations.langchain_callbacks.errors import _ID_CHARS
from memlineage.v1 import memlineage_pb2 as pb

# ---------------------------------------------------------------- state


@dataclass(frozen=True)
class ActRecord:
    """One gated tool call: what was asked and the sidecar's answer."""

    run_id: UUID
    tool_call_id: str | None
    action: str
    arguments: dict[str, ActArg]
    relies_on: tuple[str, ...]
    decision: pb.Decision
    confirmed: bool | None = None  # DEGRADE: the hook's answer


@dataclass(frozen=True)
class _Source:
    """A recorded memory whose text arguments may have been taken from."""

    memory_id: str
    origin: str  # "user" | "tool" | "derived"
    texts: tuple[str, ...]  # normalised (casefolded, whitespace collapsed)


@dataclass(frozen=True)
class _Run:
    parent: UUID | None
    metadata: Mapping[str, Any]
    name: str = ""  # tools: the tool's name and its call's id, from on_tool_start
    tool_call_id: Any = None


@dataclass
class _Record:
    """A Record to send, and what to remember once it is recorded."""

    memory_id: str
    kwargs: dict[str, Any]
    source: _Source | None
    key: str = ""  # tool results: the tool call id (or run id) to find it by


@dataclass
class _Act:
    action: str
    arguments: dict[str, ActArg]
    relies_on: tuple[str, ...]
    run_id: UUID
    tool_call_id: str | None
    refused: str = ""  # why it is refused before it is asked ("": it is asked)


@dataclass
class _Pending:
    args: dict[str, list[str]] = field(default_factory=dict)
    relies_on: tuple[str, ...] = ()


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _norm(text: str) -> str:
    """Whitespace collapsed, ASCII letters lowered: no other folding, which maps
    different identifiers to one (`casefold` made `straße` `strasse`, and the Kelvin
    sign `k`: a payee the user never named was found in their words; an outside audit)."""
    return " ".join(text.split()).translate(_ASCII_LOWER)


def _safe(name: str) -> str:
    """A name as the sidecar's ids allow it (other characters become ``_``)."""
    return _ID_CHARS.sub("_", name)[:100] or "unnamed"


_CONNECTORS = "._:/@-+=%'"
"""Characters that join the parts of one token (an address, a domain, a path, a
hyphenated name, a sub-address, a query): a needle followed or preceded by one and then
a letter or digit is part of a longer token (``alice@acme.co`` is not found in
``alice@acme.co.uk``, nor ``alerts@acme.example`` in ``bob+alerts@acme.example``)."""


def _pattern(needle: str) -> re.Pattern[str]:
    """``needle`` as a whole token: not inside a longer word, number or address."""
    joined = re.escape(_CONNECTORS)
    before = r"(?<!\w)" + (rf"(?<!\w[{joined}])" if needle[0].isalnum() else "")
    before += r"(?<!\d[.,])" if needle[0].isdigit() else ""
    after = r"(?!\w)" + (rf"(?![{joined}]\w)" if needle[-1].isalnum() else "")
    after += r"(?![.,]\d)" if needle[-1].isdigit() else ""
    return re.compile(before + re.escape(needle) + after)


_QUOTED = 12
"""A tool output shorter than this (normalised) is never taken for a quote of it: too
short to tell from the user's own words (``ok``, ``deleted``)."""

_QUOTED_RUN = 32
"""A human text sharing a run this long with a recorded tool output (or, for an output
shorter than twice this, half of it) quotes the tool: a ReAct loop's observation,
truncated to the runtime's budget or reformatted, is still the tool's words."""


def _quotes(text: str, tool: str) -> bool:
    """Whether the human ``text`` holds a substantial piece of the ``tool`` output
    (both normalised), also with all whitespace removed (a runtime joining or
    re-wrapping lines). Before: only the whole output counted, and an observation cut
    to 400 characters was the user's words, its injected payee theirs (an outside
    audit); a shared word or short phrase still is not a quote. It slices both texts:
    the handlers ask `quotes._QuoteIndex`, which indexes each output once and falls
    back to this only for outputs past its bound."""
    if len(tool) >= _QUOTED and tool in text:
        return True
    for a, b in ((text, tool), (text.replace(" ", ""), tool.replace(" ", ""))):
        if len(b) < _QUOTED:
            continue
        k = min(_QUOTED_RUN, max(_QUOTED, -(-len(b) // 2)))
        small, big = (a, b) if len(a) <= len(b) else (b, a)
        if len(small) < k:
            continue
        pieces = {small[i : i + k] for i in range(len(small) - k + 1)}
        if any(big[i : i + k] in pieces for i in range(len(big) - k + 1)):
            return True
    return False


@dataclass(frozen=True)
class _Leaf:
    """One traceable part of an argument value: its spellings (None: it carries no
    text to trace, a flag)."""

    spellings: tuple[str, ...] | None


def _leaves(value: Any, structure: frozenset[str] = frozenset()) -> Iterator[_Leaf]:
    """The traceable parts of an argument value. Empty strings and None carry nothing.

    A mapping's keys are parts of it as much as its values (``{payee: amount}``): a
    key found in a source is bound to it, one found nowhere makes the argument the
    agent's choice, whatever its spelling (a key spelt like a field name was once
    skipped when found nowhere, and ``{"mallory_fund": 500}``, a payee reworded from a
    tool's output, passed as the user's amount alone; an outside audit). The keys in
    ``structure``, declared by the runtime as its tools' field names, are skipped."""
    if value is None:
        return
    if isinstance(value, bool):
        yield _Leaf(None)
    elif isinstance(value, int):
        yield _Leaf((str(value),))
    elif isinstance(value, float):
        if value.is_integer():
            yield _Leaf((repr(value), str(int(value)), f"{value:.2f}"))
        else:
            cents = f"{value:.2f}"
            yield _Leaf((repr(value), cents) if float(cents) == value else (repr(value),))
    elif isinstance(value, str):
        if value.strip():
            yield _Leaf((_norm(value),))
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if not (isinstance(k, str) and k in structure):
                yield from _leaves(k, structure)
            yield from _leaves(v, structure)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from _leaves(v, structure)
    else:
        yield from _leaves(str(value), structure)


def _texts(value: Any) -> list[str]:
    """Every text a tool output (or a derived value) shows the agent, for matching."""
    out: list[str] = []

    def walk(v: Any) -> None:
        if v is None or isinstance(v, bool):
            return
        if isinstance(v, ToolMessage):
            walk(v.content)
            walk(v.artifact)
        elif isinstance(v, BaseMessage):
            walk(v.content)
        elif isinstance(v, str):
            out.append(v)
            stripped = v.strip()
            if stripped[:1] in ("{", "["):
                try:  # a tool's text is anyone's: nested past the parser, it stays text
                    parsed = json.loads(stripped)
                except (ValueError, RecursionError):
                    return
                walk_parsed(parsed)
        elif isinstance(v, int | float):
            out.append(str(v))
        elif isinstance(v, Mapping):
            if v.get("type") == "text" and isinstance(v.get("text"), str):
                walk(v["text"])
                return
            out.append(json.dumps(v, ensure_ascii=False, default=str))
            walk_parsed(v)
        elif isinstance(v, list | tuple):
            for item in v:
                walk(item)
        else:
            out.append(str(v))

    def walk_parsed(value: Any) -> None:
        """The texts of parsed JSON, depth first in order; iterative: the parser
        nests as deep as the interpreter's recursion limit allows, a recursive walk
        of what it made would not."""
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, Mapping):
                stack.extend(reversed(list(v.values())))
            elif isinstance(v, list):
                stack.extend(reversed(v))
            elif isinstance(v, str):
                out.append(v)
            elif v is not None and not isinstance(v, bool):
                out.append(str(v))

    with contextlib.suppress(RecursionError):  # nested past the interpreter: what was read
        walk(value)
    return [t for t in out if t.strip()]


def _message_role(m: Any) -> str | None:
    """The role of a message in any of LangChain's spellings (None: not a message)."""
    if isinstance(m, BaseMessage):
        return m.type
    if isinstance(m, tuple) and len(m) == 2 and isinstance(m[0], str):
        return m[0]
    if isinstance(m, Mapping) and "content" in m and ("role" in m or "type" in m):
        return str(m.get("role", m.get("type")))
    return None


_NOT_SAID = frozenset({"tool_result", "tool_use", "function_call", "function_call_output"})
"""Content blocks of a human-role message that carry a tool's call or result (the
Anthropic and OpenAI shapes): never the user's words."""


def _is_tool_call(value: Any) -> bool:
    """A tool call in any of LangChain's spellings (``{"name", "args", ...}``)."""
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("name"), str)
        and isinstance(value.get("args"), Mapping)
    )


def _said(content: Any) -> Any:
    """A human message's content without the blocks that carry a tool's call or
    result (before: a tool's output sent back as a `tool_result` block of a human
    message was captured as the user's words; an outside audit)."""
    if isinstance(content, list):
        return [b for b in content if not (isinstance(b, Mapping) and b.get("type") in _NOT_SAID)]
    return content


def _user_texts(value: Any) -> list[str]:
    """The user's words in a root input: strings, and human messages' contents; other
    messages (AI, tool, system), tool calls (a list of a model's calls run at the root)
    and tool-result blocks are not the user's."""
    out: list[str] = []

    def walk(v: Any) -> None:
        if _is_tool_call(v):
            return
        role = _message_role(v)
        if role is not None:
            if role in ("human", "user"):
                content = (
                    v.content
                    if isinstance(v, BaseMessage)
                    else v[1]
                    if isinstance(v, tuple)
                    else v["content"]
                )
                out.extend(_texts(_said(content)))
            return
        if isinstance(v, str):
            if v.strip():
                out.append(v)
        elif isinstance(v, Mapping):
            for item in v.values():
                walk(item)
        elif isinstance(v, list | tuple):
            for item in v:
                walk(item)

    with contextlib.suppress(RecursionError):  # nested past the interpreter: words so far
        walk(value)
    return out


def _output_text(output: Any) -> str:
    """A chain's or model's output as the text a derived memory stands for."""
    if isinstance(output, LLMResult):
        return "\n".join(
            str(g.message.content) if hasattr(g, "message") else g.text
            for gens in output.generations
            for g in gens
        )
    return "\n".join(_texts(output))
