"""`LineageCallbackHandler` and `AsyncLineageCallbackHandler`: LangChain callbacks
over the core, calling the sidecar synchronously or awaiting it."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from memlineage.client import MemLineageClient
from memlineage.client.sync import require_sync_client
from memlineage.integrations.langchain_callbacks.binding import ActRecord, _norm, _Record
from memlineage.integrations.langchain_callbacks.core import _Core
from memlineage.integrations.langchain_callbacks.errors import _T, DERIVED_TYPE, LineageRefused
from memlineage.v1 import memlineage_pb2 as pb

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
            parent_run_id,
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
    (longer than 4096 characters: a sha256 digest). ``structure_keys``: the field names
    of your tools' object arguments (``{"street", "city"}``): keys that are a value's
    structure, never traced; any other dict key is data (``{payee: amount}``), and
    one found in no recorded text makes its argument the agent's choice."""

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
        structure_keys: Iterable[str] = (),
    ) -> None:
        require_sync_client(
            client,
            "LineageCallbackHandler",
            "its callbacks are synchronous and cannot await an AsyncMemLineageClient's "
            "calls; in an async run use it or AsyncLineageCallbackHandler, with a "
            "MemLineageClient either way",
        )
        self.client = client
        self.actor = actor
        self.on_confirm = on_confirm
        self._core = _Core(
            user, session, user_input_keys, capture_user_input, send_values, structure_keys
        )

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
        value: str = "",
        digest: str = "",
    ) -> pb.Grant:
        """Record the user's delegation (as the user): ``memory_id`` (e.g. a
        `tool_memory`) or ``source`` (``"tool:read_file"``) may fill ``arguments``;
        ``value`` (or ``digest``) pins the one value it covers, so the act gate asks
        no confirmation for it (before: not passed on, and a pin could not be made)."""
        return self.client.grant(
            actions,
            memory_id=memory_id,
            source=source,
            arguments=arguments,
            uses=uses,
            expires_at=expires_at,
            value=value,
            digest=digest,
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
        self._core.model_input(run_id, messages)

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
        self._core.model_input(run_id, prompts)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        record = self._core.run_derived(run_id, self._core.end(run_id), outputs)
        if record is not None:
            self._record_now([record])

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        self._core.note_calls(response, run_id)
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
        structure_keys: Iterable[str] = (),
    ) -> None:
        require_sync_client(
            client,
            "AsyncLineageCallbackHandler",
            "its tool gate must be synchronous, see the class's docstring; its other "
            "calls run in a worker thread",
        )
        self.client = client
        self.actor = actor
        self.on_confirm = on_confirm
        self._core = _Core(
            user, session, user_input_keys, capture_user_input, send_values, structure_keys
        )
        try:  # where a coroutine on_confirm runs until a coroutine callback says
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

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
        value: str = "",
        digest: str = "",
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
            value=value,
            digest=digest,
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
        self._core.model_input(run_id, messages)

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
        self._core.model_input(run_id, prompts)

    async def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        record = self._core.run_derived(run_id, self._core.end(run_id), outputs)
        if record is not None:
            await self._record([record])

    async def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        self._core.note_calls(response, run_id)
        record = self._core.run_derived(run_id, self._core.end(run_id), response)
        if record is not None:
            await self._record([record])

    async def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._core.end(run_id)

    async def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._core.end(run_id)
