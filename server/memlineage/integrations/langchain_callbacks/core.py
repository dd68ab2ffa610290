"""The handlers' shared core: it records lineage and builds each act, and never
calls the sidecar itself (the sync and async handlers do, each its own way)."""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

from langchain_core.messages import ToolMessage
from langchain_core.runnables.config import var_child_runnable_config

from memlineage.client import ActArg
from memlineage.integrations.langchain_callbacks.binding import (
    ActRecord,
    _Act,
    _is_tool_call,
    _leaves,
    _norm,
    _output_text,
    _pattern,
    _Pending,
    _Record,
    _Run,
    _safe,
    _Source,
    _texts,
    _user_texts,
)
from memlineage.integrations.langchain_callbacks.errors import (
    _ID_RE,
    _MAX_RELIED,
    _MAX_SOURCES,
    _MAX_TAGS_RUNS,
    _MAX_VALUE,
    _SESSION_RE,
    ARGS_KEY,
    DERIVED_KEY,
    DERIVED_TYPE,
    RELIES_ON_KEY,
    TOOL_RESULT_TYPE,
    USER_INPUT_TYPE,
    ActDenied,
    ActNotConfirmed,
)
from memlineage.integrations.langchain_callbacks.quotes import _memories_in, _QuoteIndex
from memlineage.v1 import memlineage_pb2 as pb

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""What the sidecar refuses in an argument's value (tab, newline, CR are text): its
`check_free_text`, which this package may not import; the LangChain fuzz meets a drift."""

_NOTHING = object()
MOST_NAMED = 10_000
"""Calls a model named and that did not run yet, each with what its model read, kept
at most (the oldest forgotten: such a call then rests on everything recorded)."""


def _context_parent() -> UUID | None:
    """The LangChain run the caller runs in (a tool's body, a chain's step), as LangChain
    passes it to what that run calls, threads and tasks included: the parent of the run
    tree its child runnables join. None outside any run (a top-level call)."""
    config = var_child_runnable_config.get()
    callbacks = config.get("callbacks") if config else None
    parent = getattr(callbacks, "parent_run_id", None)
    return parent if isinstance(parent, UUID) else None


def _same_call(given: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
    """Whether a root input is the tool's own call: every argument the tool got is in
    it, as given or as the tool's schema coerced it (`"500"` for 500.0, a date's text
    for the date); LangChain drops injected arguments from what callbacks see, so the
    input may hold more (before: equality only, and a coerced value or an injected
    argument made the model's call the user's words; an outside audit)."""
    if not values or not set(values) <= set(given):
        return False
    return all(
        given[k] == v or _norm(_as_text(given[k])) == _norm(_as_text(v)) for k, v in values.items()
    )


def _as_text(value: Any) -> str:
    """A value as one text, numbers by their value (`500`, `500.0` and `"500"` alike)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return json.dumps(value, sort_keys=True, default=str)
    try:
        number = float(value)
    except ValueError:
        return str(value)
    return repr(number) if math.isfinite(number) else str(value)


def _arg_name(name: str, taken: Mapping[str, Any]) -> str:
    """An argument's name as the sidecar's names allow it: as it is when it can be;
    else its characters outside them as ``_`` and a digest of the original (two
    names never become one, a name is never dropped: ``empfänger``, ``"recipient
    email"`` and a 200-character name are still judged)."""
    if _ID_RE.fullmatch(name) and name not in taken:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{_safe(name)[:100]}_{digest}"


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
        structure_keys: Iterable[str] = (),
    ) -> None:
        if not user.startswith("user:") or not _ID_RE.fullmatch(user) or user == "user:":
            raise ValueError(f'user: {user!r} is not "user:<id>" (letters, digits, ._:/-)')
        self.user = user
        self.session = session if session is not None else uuid.uuid4().hex
        if not _SESSION_RE.fullmatch(self.session):
            raise ValueError(
                f"session: {self.session!r} must be 1 to 48 letters, digits or _:- (no / nor .)"
            )
        self.user_input_keys = None if user_input_keys is None else tuple(user_input_keys)
        self.capture_user_input = capture_user_input
        self.send_values = send_values
        if isinstance(structure_keys, str):  # one key given bare: not its letters
            raise TypeError("structure_keys: a collection of key names, not one string")
        self.structure_keys = frozenset(structure_keys)
        self.lock = threading.RLock()
        self.runs: dict[UUID, _Run] = {}
        self.sources: list[_Source] = []
        self.user_seen: set[str] = set()
        self.quoted: set[str] = set()  # human texts found quoting a tool: never the user's
        self.tool_memories: dict[str, str] = {}
        self.pending: dict[str, _Pending] = {}
        self.acts: list[ActRecord] = []
        self.root_inputs: dict[UUID, Any] = {}
        self.ambiguous_ids: set[str] = set()  # tool call ids a model's output named twice
        self.count = 0  # sources recorded so far
        self.seq: dict[str, int] = {}  # each source's place in the order of recording
        self.quotes = _QuoteIndex()  # the tool outputs and derived values, for quotes
        self.model_reads: dict[UUID, list[str]] = {}  # a model run: what its input held
        self.decided: dict[str, list[str] | None] = {}  # a call id: what its model read

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
            self.root_inputs.pop(run_id, None)
            self.model_reads.pop(run_id, None)
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

    def _inside_tool(self, parent: UUID | None) -> bool:
        """Whether the run ``parent`` (the caller's LangChain run) is a tool run of this
        handler or runs under one. Before: whether any tool of this handler was running,
        and a handler shared by concurrent runs took one run's user input for a
        sub-agent's while another run's tool ran: never recorded, that user's own
        payment was refused as the agent's choice."""
        with self.lock:
            for run_id in self.ancestors(parent):
                run = self.runs.get(run_id)
                if run is not None and run.name:
                    return True
        return False

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
        if root_only and _is_tool_call(value):
            return []  # a tool invoked through a wrapper at the root: the model's call
        if root_only and self._inside_tool(_context_parent()):
            # a root run started from inside a tool of this handler: a sub-agent the tool
            # invoked with the model's text, not the user's (before: captured as the
            # user's, and a task written from injected text paid; an outside audit)
            return []
        if self.user_input_keys is not None and isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if k in self.user_input_keys}
        if root_only and isinstance(value, Mapping):
            with self.lock:  # compared with the tool calls under it (`_wrapper_input`)
                self.root_inputs[run_id] = dict(value)
        out: list[_Record] = []
        with self.lock:
            for text in _user_texts(value):
                norm = _norm(text)
                if not norm or norm in self.user_seen or (root_only and norm in self.quoted):
                    continue
                if root_only and self.quotes.quoted(norm, ("tool",), first=True):
                    self.quoted.add(norm)  # a loop sends its history again: judged once
                    continue  # it quotes a tool's output ("Observation: ..."): not said
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
                self.count += 1
                self.seq[record.source.memory_id] = self.count
                if record.source.origin != "user":  # indexed once, not at each text
                    for text in record.source.texts:
                        self.quotes.add(record.memory_id, record.source.origin, text)
            if record.key:
                self.tool_memories[record.key] = record.memory_id

    # -- binding
    def sources_of(self, value: Any, exclude: str = "") -> list[str] | None:
        """The memories an argument value came from (see docs/integrations.md).

        None: the value carries nothing (None, empty), the argument is left out of the
        act. ``[]``: some part of it was found nowhere (or is a flag): no source.
        ``exclude``: a prefix of memory ids not to bind to (`act`: a wrapper's input).
        Past the sidecar's limit on sources, each part keeps its most recent sources
        first: no part's origin is cut away (an injected part among many of the user's)."""
        with self.lock:
            sources = [s for s in self.sources if not (exclude and s.memory_id.startswith(exclude))]
        try:
            return self._sources(value, sources)
        except RecursionError:  # nested past the interpreter's depth: not traceable
            return []

    def _sources(self, value: Any, sources: list[_Source]) -> list[str] | None:
        parts: list[list[str]] = []
        any_leaf = False
        for leaf in _leaves(value, self.structure_keys):
            any_leaf = True
            if leaf.spellings is None:
                return []
            patterns = [_pattern(s) for s in leaf.spellings]

            def found(src: _Source, patterns: list[re.Pattern[str]] = patterns) -> bool:
                return any(p.search(t) for t in src.texts for p in patterns)

            ids = [s.memory_id for s in sources if s.origin == "user" and found(s)]
            ids = ids or [s.memory_id for s in sources if s.origin != "user" and found(s)]
            if not ids:
                return []
            parts.append(ids)
        if not any_leaf:
            return None
        out = list(dict.fromkeys(i for ids in parts for i in ids))
        if len(out) <= _MAX_SOURCES:
            return out
        if len(parts) > _MAX_SOURCES:
            return []  # more parts than sources an argument may name: not bindable
        kept: dict[str, None] = {}
        for depth in range(max(map(len, parts))):  # round-robin, newest first
            for ids in parts:
                if depth < len(ids) and len(kept) < _MAX_SOURCES:
                    kept.setdefault(ids[-1 - depth])
        return [i for i in out if i in kept]

    def model_input(self, run_id: UUID, value: Any) -> None:
        """Note what a model run's input (messages or prompts) holds of the recorded
        memories (`_memories_in`), for the calls its answer names (`note_calls`)."""
        with self.lock:
            users = [s for s in self.sources if s.origin == "user"]
            ids = _memories_in(value, self.quotes, users, self.tool_memories)
            self.model_reads[run_id] = sorted(ids, key=lambda i: self.seq.get(i, 0))

    def read_for(self, call_id: str | None) -> list[str]:
        """What the model read when it named the call ``call_id``: the memories its
        input held (`model_input`), in the order they were recorded. When that cannot
        be told (no model answer seen naming the call, its model's input not seen, or
        holding nothing recorded): everything this handler recorded, fail-closed.
        Before: only what was recorded since the user's latest input, and after a
        "Thanks!" an inbox read one turn earlier, still in the model's history, drove
        `delete_all_emails()` (an outside review)."""
        with self.lock:
            read = self.decided.pop(call_id, None) if call_id else None
            alive = list(dict.fromkeys(s.memory_id for s in self.sources))
        if not read:
            return alive
        kept = set(alive)  # a wrapper's input, no longer the user's, is no source
        return [i for i in read if i in kept]

    def _inherited(self, parent: UUID | None) -> Mapping[str, Any]:
        """The parent run's metadata: LangChain gives a child run its parents'
        metadata, so bindings set above the tool call (on the whole run) would bind
        every later call's argument of that name whatever its value; only those set
        on the tool call itself count."""
        with self.lock:
            run = self.runs.get(parent) if parent is not None else None
        return run.metadata if run is not None else {}

    def _wrapper_input(self, run_id: UUID, parent: UUID | None, values: Mapping[str, Any]) -> str:
        """The memory id prefix of user memories captured from a root run whose input
        was this very tool call (a tool wrapped in ``with_retry()``, a fallback or a
        sequence, invoked at the root: its input is the model's call, not the user's
        words); "" when there is none. They are no source from then on (before: only
        for this call, and a later call bound the injected value to them; an outside
        audit)."""
        chain = self.ancestors(parent)
        if not chain:
            return ""
        root = chain[-1]
        with self.lock:
            given = self.root_inputs.get(root, _NOTHING)
        if given is _NOTHING:
            return ""
        if isinstance(given, Mapping) and isinstance(given.get("args"), Mapping):
            given = given["args"]
        if not (isinstance(given, Mapping) and _same_call(given, values)):
            return ""
        prefix = f"lc/{self.session}/user/{root}/"
        with self.lock:  # never the user's words, for this call or any later one
            gone = [s for s in self.sources if s.memory_id.startswith(prefix)]
            self.sources = [s for s in self.sources if not s.memory_id.startswith(prefix)]
            for s in gone:  # said by the user later, they are recorded then
                self.user_seen.difference_update(s.texts)
        return prefix

    def act(
        self,
        serialized: Mapping[str, Any] | None,
        input_str: str,
        inputs: Mapping[str, Any] | None,
        run_id: UUID,
        metadata: Mapping[str, Any] | None,
        tool_call_id: Any,
        name: Any,
        parent: UUID | None = None,
    ) -> _Act:
        action = _safe(str((serialized or {}).get("name") or name or "tool"))
        values: Mapping[str, Any] = inputs if inputs is not None else {"input": input_str}
        metadata = metadata or {}
        call_id = tool_call_id if isinstance(tool_call_id, str) and tool_call_id else None
        with self.lock:
            pending = self.pending.pop(call_id, _Pending()) if call_id else _Pending()
            ambiguous = call_id is not None and call_id in self.ambiguous_ids
        if ambiguous:  # its binding (if any) is no one's: dropped with the call
            why = (
                f"tool call id {call_id!r} names more than one call of the model: which of "
                "them a binding or a confirmation was for cannot be told"
            )
            return _Act(_safe(str(name or "tool")), {}, (), run_id, call_id, refused=why)
        inherited = self._inherited(parent)
        explicit: dict[str, list[str]] = {}
        raw = metadata.get(ARGS_KEY)
        if isinstance(raw, Mapping) and raw != inherited.get(ARGS_KEY):
            explicit |= {str(k): list(v) for k, v in raw.items()}
        explicit |= pending.args
        exclude = self._wrapper_input(run_id, parent, values)
        read = self.read_for(call_id)
        arguments: dict[str, ActArg] = {}
        for arg, value in values.items():
            sources = explicit[arg] if arg in explicit else self.sources_of(value, exclude)
            if sources is None:
                # None or empty names nothing, yet it is the agent's choice (`path=""`:
                # every file): it rests on what the model read, as a call binding nothing
                sources = read if len(read) <= _MAX_SOURCES else []
            arguments[_arg_name(arg, arguments)] = ActArg(tuple(sources), **self._value(value))
        for arg, sources in explicit.items():
            if arg not in values:
                arguments[_arg_name(arg, arguments)] = ActArg(tuple(sources))
        own_relies = metadata.get(RELIES_ON_KEY, ()) or ()
        if own_relies == inherited.get(RELIES_ON_KEY):
            own_relies = ()
        relies = list(own_relies) + list(pending.relies_on)
        if not arguments and not relies:
            # a call with nothing to bind rests on what the model read: an injected
            # tool output among it refuses a sensitive one (nothing recorded, or more
            # than an act may name: it cannot be asked, see `unaskable`)
            relies = read if len(read) <= _MAX_RELIED else []
        return _Act(action, arguments, tuple(dict.fromkeys(relies)), run_id, call_id)

    def note_calls(self, output: Any, run_id: UUID | None = None) -> None:
        """The tool call ids a model's output names: an id named twice in it makes each
        call of it refused (before: a second call carrying the id of one the runtime
        had bound took that binding, and ran first; an outside audit); a binding made
        before the output named its id was not made for this call: dropped. What the
        model run ``run_id`` read is what the call was made on (`read_for`)."""
        named = (
            c.get("id")
            for gens in getattr(output, "generations", ())
            for g in gens
            for c in getattr(getattr(g, "message", None), "tool_calls", None) or ()
            if isinstance(c, Mapping)
        )
        ids = Counter(i for i in named if isinstance(i, str) and i)
        with self.lock:
            read = self.model_reads.get(run_id) if run_id is not None else None
            for i, n in ids.items():
                self.pending.pop(i, None)
                self.decided.pop(i, None)  # (re-inserted: the newest last)
                self.decided[i] = read
                if len(self.decided) > MOST_NAMED:  # named, never run: the oldest goes
                    del self.decided[next(iter(self.decided))]
                if n > 1:
                    self.ambiguous_ids.add(i)
                else:
                    self.ambiguous_ids.discard(i)

    @staticmethod
    def unaskable(act: _Act) -> pb.Decision | None:
        """A call that names no memory at all cannot be asked (the sidecar refuses an
        act naming nothing), nor one refused before it was asked: refused here,
        fail-closed, with a decision saying why."""
        if act.refused:
            reason = pb.Reason(
                policy="langchain_callbacks", effect=pb.EFFECT_DENY, message=act.refused
            )
            return pb.Decision(effect=pb.EFFECT_DENY, operation=pb.OPERATION_ACT, reasons=[reason])
        if act.arguments or act.relies_on:
            return None
        why = (
            "nothing to ask the act gate with: no argument to bind, no memory relied on"
            " and nothing recorded (record the user's input first), or more memories"
            f" read than an act may name ({_MAX_RELIED}: bind the call)"
        )
        reason = pb.Reason(policy="langchain_callbacks", effect=pb.EFFECT_DENY, message=why)
        return pb.Decision(effect=pb.EFFECT_DENY, operation=pb.OPERATION_ACT, reasons=[reason])

    def _value(self, value: Any) -> dict[str, str]:
        """The argument's value as the act sends it: as text, or, where the sidecar
        takes no such text (longer than its limit, or holding a control character a
        model may copy from a tool's output), its digest: the act is still decided
        and logged, never refused as a malformed request."""
        if not self.send_values:
            return {}
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        try:
            data, textual = text.encode(), True
        except UnicodeEncodeError:  # a lone surrogate: no UTF-8 text to send
            data, textual = text.encode("utf-8", "surrogatepass"), False
        if textual and len(text) <= _MAX_VALUE and _CONTROL.search(text) is None:
            return {"value": text}
        return {"digest": "sha256:" + hashlib.sha256(data).hexdigest()}

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
