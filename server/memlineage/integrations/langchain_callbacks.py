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

import asyncio
import hashlib
import inspect
import json
import re
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.outputs import LLMResult

from memlineage.client import ActArg, MemLineageClient, PolicyDenied
from memlineage.v1 import memlineage_pb2 as pb

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

TOOL_RESULT_TYPE = "tool_result"
USER_INPUT_TYPE = "user_input"
DERIVED_TYPE = "conclusion"
ARGS_KEY = "memlineage_args"
"""Run metadata: ``{argument: [memory ids]}``, explicit bindings for a tool call."""
RELIES_ON_KEY = "memlineage_relies_on"
"""Run metadata: memory ids a tool call relies on besides its arguments."""
DERIVED_KEY = "memlineage_derived"
"""Run metadata: ``{"depends_on": [...], "id"?, "creator"?}``: record the run's output."""

_ID_CHARS = re.compile(r"[^A-Za-z0-9._:/-]")
_ID_RE = re.compile(r"[A-Za-z0-9._:/-]{1,128}")
_SESSION_RE = re.compile(r"[A-Za-z0-9._:-]{1,48}")
_MAX_TAGS_RUNS = 16  # ancestors named in tags, nearest first (the sidecar allows 64 tags)
_MAX_VALUE = 4096  # the sidecar's limit on an act argument's value
_MAX_SOURCES = 256  # ... and on its sources
_T = TypeVar("_T")


# ---------------------------------------------------------------- errors


class ActDenied(PolicyDenied):
    """A tool call the act gate refused: the tool does not run.

    ``decision`` is the sidecar's answer, ``action`` the tool, ``arguments`` the
    bindings asked with, ``reasons`` the fired rules' messages."""

    def __init__(self, decision: pb.Decision, action: str, arguments: Mapping[str, ActArg]) -> None:
        super().__init__(decision)
        self.action = action
        self.arguments = dict(arguments)
        self.reasons = [r.message or r.policy for r in decision.reasons if r.effect == self._effect]
        why = "; ".join(self.reasons) or pb.Effect.Name(decision.effect)
        self.args = (f"{self._verb} {action}: {why}",)

    _effect = pb.EFFECT_DENY
    _verb = "act denied"


class ActNotConfirmed(ActDenied):
    """A degraded tool call (a confirmation asked) that ``on_confirm`` refused or nobody
    could confirm: the tool does not run."""

    _effect = pb.EFFECT_DEGRADE
    _verb = "act not confirmed"


class LineageRefused(PolicyDenied):
    """The policies refused to record a memory (``recorded`` false): a tool result the
    agent would otherwise see without lineage, or a user input or conclusion."""


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


@dataclass
class _Pending:
    args: dict[str, list[str]] = field(default_factory=dict)
    relies_on: tuple[str, ...] = ()


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _safe(name: str) -> str:
    """A name as the sidecar's ids allow it (other characters become ``_``)."""
    return _ID_CHARS.sub("_", name)[:100] or "unnamed"


def _pattern(needle: str) -> re.Pattern[str]:
    """``needle`` as a whole token: not inside a longer word or number."""
    before = r"(?<!\w)" + (r"(?<!\d[.,])" if needle[0].isdigit() else "")
    after = r"(?!\w)" + (r"(?![.,]\d)" if needle[-1].isdigit() else "")
    return re.compile(before + re.escape(needle) + after)


def _leaves(value: Any) -> Iterator[tuple[str, ...] | None]:
    """The traceable parts of an argument value, each as its spellings; None for a part
    that carries no text to trace (a boolean). Empty strings and None carry nothing."""
    if value is None:
        return
    if isinstance(value, bool):
        yield None
    elif isinstance(value, int):
        yield (str(value),)
    elif isinstance(value, float):
        if value.is_integer():
            yield (repr(value), str(int(value)), f"{value:.2f}")
        else:
            cents = f"{value:.2f}"
            yield (repr(value), cents) if float(cents) == value else (repr(value),)
    elif isinstance(value, str):
        if value.strip():
            yield (_norm(value),)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from _leaves(v)
    else:
        yield from _leaves(str(value))


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
                try:
                    parsed = json.loads(stripped)
                except ValueError:
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

    def walk_parsed(v: Any) -> None:
        if isinstance(v, Mapping):
            for item in v.values():
                walk_parsed(item)
        elif isinstance(v, list):
            for item in v:
                walk_parsed(item)
        elif isinstance(v, str):
            out.append(v)
        elif v is not None and not isinstance(v, bool):
            out.append(str(v))

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


def _user_texts(value: Any) -> list[str]:
    """The user's words in a root input: strings, and human messages' contents; other
    messages (AI, tool, system) are not the user's."""
    out: list[str] = []

    def walk(v: Any) -> None:
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
                out.extend(_texts(content))
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


class _Core:
    """What both handlers share: the run tree, the recorded sources, the binding rule.

    It never calls the sidecar: it says what to record or ask (`_Record`, `_Act`) and
    remembers what was recorded, so the sync and async handlers differ only in how
    they call the client."""

    def __init__(
        self,
        user: str,
        session: str | None,
        user_input_keys: Sequence[str] | None,
        capture_user_input: bool,
        send_values: bool,
    ) -> None:
        if not user.startswith("user:") or not _ID_RE.fullmatch(user) or user == "user:":
            raise ValueError(f'user: {user!r} is not "user:<id>" (letters, digits, ._:/-)')
        self.user = user
        self.session = session if session is not None else uuid.uuid4().hex
        if not _SESSION_RE.fullmatch(self.session):
            raise ValueError(
                f"session: {self.session!r} must be 1 to 48 letters, digits or ._:- (no /)"
            )
        self.user_input_keys = None if user_input_keys is None else tuple(user_input_keys)
        self.capture_user_input = capture_user_input
        self.send_values = send_values
        self.lock = threading.RLock()
        self.runs: dict[UUID, _Run] = {}
        self.sources: list[_Source] = []
        self.user_seen: set[str] = set()
        self.tool_memories: dict[str, str] = {}
        self.pending: dict[str, _Pending] = {}
        self.acts: list[ActRecord] = []

    # -- the run tree
    def start(
        self,
        run_id: UUID,
        parent: UUID | None,
        metadata: Mapping[str, Any] | None,
        name: str = "",
        tool_call_id: Any = None,
    ) -> None:
        with self.lock:
            self.runs[run_id] = _Run(parent, dict(metadata or {}), name, tool_call_id)

    def end(self, run_id: UUID) -> _Run | None:
        with self.lock:
            return self.runs.pop(run_id, None)

    def ancestors(self, parent: UUID | None) -> list[UUID]:
        """The parent chain, nearest first, up to the root (or the first unknown run)."""
        out: list[UUID] = []
        with self.lock:
            while parent is not None and parent not in out:
                out.append(parent)
                run = self.runs.get(parent)
                parent = run.parent if run is not None else None
        return out

    def _context(self, run_id: UUID, parent: UUID | None) -> dict[str, Any]:
        chain = self.ancestors(parent)
        root = chain[-1] if chain else run_id
        tags = ["langchain", f"session:{self.session}"]
        tags += [f"run:{r}" for r in chain[:_MAX_TAGS_RUNS]]
        return {"context_id": str(root), "tags": tags}

    # -- what to record
    def user_records(
        self, run_id: UUID, parent: UUID | None, value: Any, *, root_only: bool = True
    ) -> list[_Record]:
        """User memories for the texts of a root run's input not recorded before."""
        if root_only and (parent is not None or not self.capture_user_input):
            return []
        if self.user_input_keys is not None and isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if k in self.user_input_keys}
        out: list[_Record] = []
        with self.lock:
            for text in _user_texts(value):
                norm = _norm(text)
                if not norm or norm in self.user_seen:
                    continue
                self.user_seen.add(norm)
                memory_id = f"lc/{self.session}/user/{run_id}/{len(out)}"
                kwargs = {"creator": self.user, "type": USER_INPUT_TYPE}
                kwargs |= self._context(run_id, parent)
                out.append(_Record(memory_id, kwargs, _Source(memory_id, "user", (norm,))))
        return out

    def unseen_user(self, records: list[_Record]) -> None:
        """Forget user texts whose record failed, so a retry records them."""
        with self.lock:
            for r in records:
                if r.source is not None:
                    self.user_seen.difference_update(r.source.texts)

    def tool_record(
        self, run_id: UUID, parent: UUID | None, output: Any, event: Mapping[str, Any]
    ) -> _Record:
        """The tool memory of a finished tool run (``event``: on_tool_end's kwargs)."""
        run = self.end(run_id)
        name = (run.name if run else "") or str(event.get("name") or "tool")
        parent = run.parent if run else parent
        tool_call_id = run.tool_call_id if run else event.get("tool_call_id")
        memory_id = f"lc/{self.session}/tool/{run_id}"
        kwargs: dict[str, Any] = {"creator": f"tool:{_safe(name)}", "type": TOOL_RESULT_TYPE}
        kwargs |= self._context(run_id, parent)
        if isinstance(output, ToolMessage) and tool_call_id is None:
            tool_call_id = output.tool_call_id
        tag = f"tool_call:{tool_call_id}"
        if isinstance(tool_call_id, str) and len(tag) <= 64 and _ID_RE.fullmatch(tag):
            kwargs["tags"].append(tag)
        texts = tuple(_norm(t) for t in _texts(output))
        key = tool_call_id if isinstance(tool_call_id, str) and tool_call_id else str(run_id)
        return _Record(memory_id, kwargs, _Source(memory_id, "tool", texts), key)

    def derived_record(
        self,
        memory_id: str | None,
        depends_on: Sequence[str],
        creator: str,
        value: Any,
        confidence: float,
        type: str,
        tags: Sequence[str],
        context_id: str,
    ) -> _Record:
        memory_id = memory_id or f"lc/{self.session}/derived/{uuid.uuid4()}"
        if not _ID_RE.fullmatch(memory_id):
            raise ValueError(f"memory_id: {memory_id!r} is not 1..128 of letters, digits, ._:/-")
        kwargs: dict[str, Any] = {
            "creator": creator,
            "dependencies": list(dict.fromkeys(depends_on)),
            "confidence": confidence,
            "type": type,
            "tags": ["langchain", f"session:{self.session}", *tags],
            "context_id": context_id,
        }
        texts = tuple(_norm(t) for t in _texts(value)) if value is not None else ()
        return _Record(memory_id, kwargs, _Source(memory_id, "derived", texts) if texts else None)

    def run_derived(self, run_id: UUID, run: _Run | None, output: Any) -> _Record | None:
        """A run whose metadata names ``memlineage_derived``: its output, once, at the end
        of the outermost run carrying that metadata (children inherit it)."""
        spec = run.metadata.get(DERIVED_KEY) if run is not None else None
        if run is None or not isinstance(spec, Mapping):
            return None
        with self.lock:
            parent = self.runs.get(run.parent) if run.parent is not None else None
        if parent is not None and parent.metadata.get(DERIVED_KEY) == spec:
            return None
        chain = self.ancestors(run.parent)
        return self.derived_record(
            spec.get("id"),
            list(spec.get("depends_on", ())),
            str(spec.get("creator", "agent:langchain")),
            _output_text(output),
            float(spec.get("confidence", 1.0)),
            str(spec.get("type", DERIVED_TYPE)),
            [],
            str(chain[-1] if chain else run_id),
        )

    def recorded(self, record: _Record) -> None:
        with self.lock:
            if record.source is not None:
                self.sources.append(record.source)
            if record.key:
                self.tool_memories[record.key] = record.memory_id

    # -- binding
    def sources_of(self, value: Any) -> list[str] | None:
        """The memories an argument value came from (see docs/integrations.md).

        None: the value carries nothing (None, empty), the argument is left out of the
        act. ``[]``: some part of it was found nowhere (or is a flag): no source."""
        with self.lock:
            sources = list(self.sources)
        out: list[str] = []
        any_leaf = False
        for spellings in _leaves(value):
            any_leaf = True
            if spellings is None:
                return []
            patterns = [_pattern(s) for s in spellings]

            def found(src: _Source, patterns: list[re.Pattern[str]] = patterns) -> bool:
                return any(p.search(t) for t in src.texts for p in patterns)

            ids = [s.memory_id for s in sources if s.origin == "user" and found(s)]
            ids = ids or [s.memory_id for s in sources if s.origin != "user" and found(s)]
            if not ids:
                return []
            out.extend(i for i in ids if i not in out)
        return out[:_MAX_SOURCES] if any_leaf else None

    def act(
        self,
        serialized: Mapping[str, Any] | None,
        input_str: str,
        inputs: Mapping[str, Any] | None,
        run_id: UUID,
        metadata: Mapping[str, Any] | None,
        tool_call_id: Any,
        name: Any,
    ) -> _Act:
        action = _safe(str((serialized or {}).get("name") or name or "tool"))
        values: Mapping[str, Any] = inputs if inputs is not None else {"input": input_str}
        metadata = metadata or {}
        call_id = tool_call_id if isinstance(tool_call_id, str) and tool_call_id else None
        with self.lock:
            pending = self.pending.pop(call_id, _Pending()) if call_id else _Pending()
        explicit: dict[str, list[str]] = {}
        raw = metadata.get(ARGS_KEY)
        if isinstance(raw, Mapping):
            explicit |= {str(k): list(v) for k, v in raw.items()}
        explicit |= pending.args
        arguments: dict[str, ActArg] = {}
        for arg, value in values.items():
            if not _ID_RE.fullmatch(arg):
                continue
            sources = explicit[arg] if arg in explicit else self.sources_of(value)
            if sources is None:
                continue
            arguments[arg] = ActArg(tuple(sources), **self._value(value))
        for arg, sources in explicit.items():
            if arg not in arguments and _ID_RE.fullmatch(arg):
                arguments[arg] = ActArg(tuple(sources))
        relies = list(metadata.get(RELIES_ON_KEY, ()) or ()) + list(pending.relies_on)
        if not arguments and not relies:
            # an act must name something: a call with nothing to bind rests on the
            # user's latest request (none seen: it cannot be asked, see `unaskable`)
            with self.lock:
                users = [s.memory_id for s in self.sources if s.origin == "user"]
            relies = users[-1:]
        return _Act(action, arguments, tuple(dict.fromkeys(relies)), run_id, call_id)

    @staticmethod
    def unaskable(act: _Act) -> pb.Decision | None:
        """A call that names no memory at all cannot be asked (the sidecar refuses an
        act naming nothing): refused here, fail-closed, with a decision saying why."""
        if act.arguments or act.relies_on:
            return None
        why = (
            "nothing to ask the act gate with: no argument to bind, no memory relied on"
            " and no user input recorded (record the user's input first)"
        )
        reason = pb.Reason(policy="langchain_callbacks", effect=pb.EFFECT_DENY, message=why)
        return pb.Decision(effect=pb.EFFECT_DENY, operation=pb.OPERATION_ACT, reasons=[reason])

    def _value(self, value: Any) -> dict[str, str]:
        if not self.send_values:
            return {}
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        if len(text) <= _MAX_VALUE:
            return {"value": text}
        return {"digest": "sha256:" + hashlib.sha256(text.encode()).hexdigest()}

    def judged(self, act: _Act, decision: pb.Decision, confirmed: bool | None) -> None:
        """Log the act; raise unless it may run."""
        record = ActRecord(
            act.run_id,
            act.tool_call_id,
            act.action,
            act.arguments,
            act.relies_on,
            decision,
            confirmed,
        )
        with self.lock:
            self.acts.append(record)
        if decision.effect == pb.EFFECT_ALLOW:
            return
        if decision.effect == pb.EFFECT_DEGRADE:
            if confirmed:
                return
            raise ActNotConfirmed(decision, act.action, act.arguments)
        raise ActDenied(decision, act.action, act.arguments)

    def bind(
        self, tool_call_id: str, args: Mapping[str, Sequence[str]], relies_on: Sequence[str]
    ) -> None:
        if not tool_call_id:
            raise ValueError("tool_call_id: must not be empty")
        for name, ids in args.items():
            if isinstance(ids, str):
                raise TypeError(f"args[{name!r}]: a list of memory ids, not a string")
        with self.lock:
            self.pending[tool_call_id] = _Pending(
                {k: list(v) for k, v in args.items()}, tuple(relies_on)
            )


# ---------------------------------------------------------------- the handlers


class _Shared:
    """What both handlers share: read-only views, explicit bindings, and the tool
    callbacks, which are synchronous in both (see `AsyncLineageCallbackHandler`)."""

    client: MemLineageClient
    actor: str | None
    _core: _Core
    raise_error = True  # a denial must propagate, or the tool would run anyway

    @property
    def session(self) -> str:
        """The label in every memory id and ``session:`` tag of this handler."""
        return self._core.session

    @property
    def user(self) -> str:
        return self._core.user

    @property
    def acts(self) -> list[ActRecord]:
        """Every gated tool call, in order, with its decision."""
        with self._core.lock:
            return list(self._core.acts)

    @property
    def user_memories(self) -> list[str]:
        with self._core.lock:
            return [s.memory_id for s in self._core.sources if s.origin == "user"]

    def tool_memory(self, key: str | UUID) -> str | None:
        """The memory id of a tool result, by its tool call id (or its run id)."""
        with self._core.lock:
            return self._core.tool_memories.get(str(key))

    def sources_of(self, value: Any) -> list[str] | None:
        """The memories the binding rule gives an argument with this value."""
        return self._core.sources_of(value)

    def bind(
        self,
        tool_call_id: str,
        args: Mapping[str, Sequence[str]] | None = None,
        *,
        relies_on: Sequence[str] = (),
    ) -> None:
        """Bind the arguments of the coming tool call ``tool_call_id`` explicitly (they
        win over the binding rule; names not given are still found by it)."""
        self._core.bind(tool_call_id, args or {}, relies_on)

    def _record_now(self, records: list[_Record]) -> None:
        """Record in the calling thread; a refused record raises `LineageRefused`."""
        for i, r in enumerate(records):
            try:
                response = self.client.record(r.memory_id, **r.kwargs)
            except BaseException:
                self._core.unseen_user(records[i:])
                raise
            if not response.recorded:
                self._core.unseen_user(records[i + 1 :])
                raise LineageRefused(response.decision)
            self._core.recorded(r)

    def _user_records(self, text: str) -> list[_Record]:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text: the user's input must be a non-empty string")
        return self._core.user_records(uuid.uuid4(), None, text, root_only=False)

    def _existing_user(self, text: str) -> str:
        """The user memory already recorded for this text."""
        norm = _norm(text)
        with self._core.lock:
            users = [s for s in self._core.sources if s.origin == "user"]
        return next(s.memory_id for s in users if norm in s.texts)

    def _confirm(self, decision: pb.Decision) -> bool:
        raise NotImplementedError

    def _gate(
        self,
        serialized: dict[str, Any],
        input_str: str,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: dict[str, Any] | None,
        inputs: dict[str, Any] | None,
        kwargs: Mapping[str, Any],
    ) -> None:
        """Ask ``act`` before the tool runs; raise to keep it from running."""
        act = self._core.act(
            serialized,
            input_str,
            inputs,
            run_id,
            metadata,
            kwargs.get("tool_call_id"),
            kwargs.get("name"),
        )
        self._core.start(run_id, parent_run_id, metadata, act.action, act.tool_call_id)
        try:
            decision = self._core.unaskable(act) or self.client.act(
                act.action, act.arguments, relies_on=act.relies_on, actor=self.actor
            )
            confirmed = None
            if decision.effect == pb.EFFECT_DEGRADE:
                confirmed = self._confirm(decision)
            self._core.judged(act, decision, confirmed)
        except BaseException:
            self._core.end(run_id)
            raise

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """The gate: ask ``act`` before the tool runs; raise to keep it from running."""
        self._gate(serialized, input_str, run_id, parent_run_id, metadata, inputs, kwargs)

    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """Record the result as a tool memory before the agent sees it."""
        self._record_now([self._core.tool_record(run_id, parent_run_id, output, kwargs)])

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._core.end(run_id)


ConfirmHook = Callable[[pb.Decision], bool]
AsyncConfirmHook = Callable[[pb.Decision], bool | Awaitable[bool]]


class LineageCallbackHandler(_Shared, BaseCallbackHandler):
    """Records user inputs and tool results, gates tool calls (sync runs; in async runs
    LangChain runs it in a worker thread and its exceptions still stop the tool).

    ``client``: the sidecar, whose namespace is the user's. ``user``: the user's
    creator id (``"user:alice"``), for user memories and grants. ``actor``: who asks
    ``act`` (None: the sidecar's default, the namespace's user). ``session``: the
    label in memory ids (default: a random one). ``on_confirm``: asked on a DEGRADE;
    None refuses. ``capture_user_input``: record root runs' inputs as the user's
    (off: call `user_input`). ``user_input_keys``: only these keys of a dict root
    input are the user's. ``send_values``: send argument values to the sidecar
    (longer than 4096 characters: a sha256 digest)."""

    def __init__(
        self,
        client: MemLineageClient,
        *,
        user: str,
        actor: str | None = None,
        session: str | None = None,
        on_confirm: ConfirmHook | None = None,
        capture_user_input: bool = True,
        user_input_keys: Sequence[str] | None = None,
        send_values: bool = True,
    ) -> None:
        self.client = client
        self.actor = actor
        self.on_confirm = on_confirm
        self._core = _Core(user, session, user_input_keys, capture_user_input, send_values)

    def _confirm(self, decision: pb.Decision) -> bool:
        return bool(self.on_confirm(decision)) if self.on_confirm is not None else False

    # -- the runtime's API
    def user_input(self, text: str) -> str:
        """Record ``text`` as the user's (e.g. when capture is off); its memory id."""
        records = self._user_records(text)
        self._record_now(records)
        return records[0].memory_id if records else self._existing_user(text)

    def derived(
        self,
        memory_id: str | None = None,
        *,
        depends_on: Sequence[str],
        creator: str = "agent:langchain",
        value: Any = None,
        confidence: float = 1.0,
        type: str = DERIVED_TYPE,
        tags: Sequence[str] = (),
        context_id: str = "",
    ) -> str:
        """Record a conclusion the agent drew from ``depends_on``; with ``value`` (its
        text), arguments holding it are bound to it. Returns its memory id."""
        r = self._core.derived_record(
            memory_id, depends_on, creator, value, confidence, type, tags, context_id
        )
        self._record_now([r])
        return r.memory_id

    def grant(
        self,
        actions: Sequence[str],
        *,
        memory_id: str = "",
        source: str = "",
        arguments: Sequence[str] = (),
        uses: int = 1,
        expires_at: float | None = None,
    ) -> pb.Grant:
        """Record the user's delegation (as the user): ``memory_id`` (e.g. a
        `tool_memory`) or ``source`` (``"tool:read_file"``) may fill ``arguments``."""
        return self.client.grant(
            actions,
            memory_id=memory_id,
            source=source,
            arguments=arguments,
            uses=uses,
            expires_at=expires_at,
            actor=self._core.user,
        )

    # -- LangChain's callbacks (the tool ones are `_Shared`'s)
    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._core.start(run_id, parent_run_id, metadata)
        self._record_now(self._core.user_records(run_id, parent_run_id, inputs))

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._core.start(run_id, parent_run_id, metadata)
        self._record_now(self._core.user_records(run_id, parent_run_id, messages))

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._core.start(run_id, parent_run_id, metadata)
        self._record_now(self._core.user_records(run_id, parent_run_id, prompts))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        record = self._core.run_derived(run_id, self._core.end(run_id), outputs)
        if record is not None:
            self._record_now([record])

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        record = self._core.run_derived(run_id, self._core.end(run_id), response)
        if record is not None:
            self._record_now([record])

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._core.end(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._core.end(run_id)


async def _awaited(answer: Awaitable[bool]) -> bool:
    return await answer


class AsyncLineageCallbackHandler(_Shared, AsyncCallbackHandler):  # type: ignore[misc]
    """`LineageCallbackHandler`'s twin for async runs (``ainvoke``, ``astream``): the
    chain and model callbacks and the runtime's API (`user_input`, `derived`, `grant`)
    are coroutines, the sync client runs in a worker thread (`_acall`).

    Its tool callbacks are synchronous on purpose. A tool without a coroutine (a sync
    ``@tool``) runs ``ainvoke`` as ``invoke`` in an executor, which drives the *sync*
    callback path, where LangChain swallows an async handler's exceptions: an async
    gate would let the tool run. A sync callback raises on both paths (in an async
    run LangChain runs it in a worker thread). ``on_confirm`` may be a coroutine
    function; it is run on the event loop the handler last saw, else in its own."""

    def __init__(
        self,
        client: MemLineageClient,
        *,
        user: str,
        actor: str | None = None,
        session: str | None = None,
        on_confirm: AsyncConfirmHook | None = None,
        capture_user_input: bool = True,
        user_input_keys: Sequence[str] | None = None,
        send_values: bool = True,
    ) -> None:
        self.client = client
        self.actor = actor
        self.on_confirm = on_confirm
        self._core = _Core(user, session, user_input_keys, capture_user_input, send_values)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def _acall(self, call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """One sidecar call off the event loop (the one place an async client will go)."""
        self._loop = asyncio.get_running_loop()
        return await asyncio.to_thread(call, *args, **kwargs)

    async def _record(self, records: list[_Record]) -> None:
        self._loop = asyncio.get_running_loop()  # where a coroutine on_confirm will run
        if records:
            await self._acall(self._record_now, records)

    def _confirm(self, decision: pb.Decision) -> bool:
        """Called from the gate's thread: a coroutine hook runs on the run's loop."""
        if self.on_confirm is None:
            return False
        answer = self.on_confirm(decision)
        if not inspect.isawaitable(answer):
            return bool(answer)
        loop = self._loop
        try:
            on_loop_thread = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop_thread = False
        if loop is not None and loop.is_running() and not on_loop_thread:
            return bool(asyncio.run_coroutine_threadsafe(_awaited(answer), loop).result())
        return bool(asyncio.run(_awaited(answer)))

    async def user_input(self, text: str) -> str:
        """Record ``text`` as the user's; its memory id."""
        records = self._user_records(text)
        await self._record(records)
        return records[0].memory_id if records else self._existing_user(text)

    async def derived(
        self,
        memory_id: str | None = None,
        *,
        depends_on: Sequence[str],
        creator: str = "agent:langchain",
        value: Any = None,
        confidence: float = 1.0,
        type: str = DERIVED_TYPE,
        tags: Sequence[str] = (),
        context_id: str = "",
    ) -> str:
        """Record a conclusion drawn from ``depends_on`` (see the sync handler)."""
        r = self._core.derived_record(
            memory_id, depends_on, creator, value, confidence, type, tags, context_id
        )
        await self._record([r])
        return r.memory_id

    async def grant(
        self,
        actions: Sequence[str],
        *,
        memory_id: str = "",
        source: str = "",
        arguments: Sequence[str] = (),
        uses: int = 1,
        expires_at: float | None = None,
    ) -> pb.Grant:
        """Record the user's delegation (see the sync handler)."""
        return await self._acall(
            self.client.grant,
            actions,
            memory_id=memory_id,
            source=source,
            arguments=arguments,
            uses=uses,
            expires_at=expires_at,
            actor=self._core.user,
        )

    async def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._core.start(run_id, parent_run_id, metadata)
        await self._record(self._core.user_records(run_id, parent_run_id, inputs))

    async def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._core.start(run_id, parent_run_id, metadata)
        await self._record(self._core.user_records(run_id, parent_run_id, messages))

    async def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._core.start(run_id, parent_run_id, metadata)
        await self._record(self._core.user_records(run_id, parent_run_id, prompts))

    async def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        record = self._core.run_derived(run_id, self._core.end(run_id), outputs)
        if record is not None:
            await self._record([record])

    async def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        record = self._core.run_derived(run_id, self._core.end(run_id), response)
        if record is not None:
            await self._record([record])

    async def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._core.end(run_id)

    async def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._core.end(run_id)
