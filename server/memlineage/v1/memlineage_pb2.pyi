from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Effect(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EFFECT_UNSPECIFIED: _ClassVar[Effect]
    EFFECT_ALLOW: _ClassVar[Effect]
    EFFECT_DENY: _ClassVar[Effect]
    EFFECT_DEGRADE: _ClassVar[Effect]

class Operation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPERATION_UNSPECIFIED: _ClassVar[Operation]
    OPERATION_READ: _ClassVar[Operation]
    OPERATION_WRITE: _ClassVar[Operation]
    OPERATION_UPDATE: _ClassVar[Operation]
    OPERATION_DELETE: _ClassVar[Operation]
    OPERATION_DERIVE: _ClassVar[Operation]
    OPERATION_ACT: _ClassVar[Operation]

class CreatorKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CREATOR_KIND_UNSPECIFIED: _ClassVar[CreatorKind]
    CREATOR_KIND_USER: _ClassVar[CreatorKind]
    CREATOR_KIND_TOOL: _ClassVar[CreatorKind]
    CREATOR_KIND_REASONING: _ClassVar[CreatorKind]
    CREATOR_KIND_AGENT: _ClassVar[CreatorKind]
    CREATOR_KIND_SYSTEM: _ClassVar[CreatorKind]

class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STATUS_UNSPECIFIED: _ClassVar[Status]
    STATUS_ACTIVE: _ClassVar[Status]
    STATUS_PENDING_VERIFICATION: _ClassVar[Status]
    STATUS_REVOKED: _ClassVar[Status]
    STATUS_SUPERSEDED: _ClassVar[Status]
    STATUS_ARCHIVED: _ClassVar[Status]
    STATUS_COMPRESSED: _ClassVar[Status]
    STATUS_EVICTED: _ClassVar[Status]

class StatusAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STATUS_ACTION_UNSPECIFIED: _ClassVar[StatusAction]
    STATUS_ACTION_REVOKE: _ClassVar[StatusAction]
    STATUS_ACTION_SUPERSEDE: _ClassVar[StatusAction]
    STATUS_ACTION_CONFIRM: _ClassVar[StatusAction]
    STATUS_ACTION_COMPRESS: _ClassVar[StatusAction]

class ShadowAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SHADOW_ACTION_UNSPECIFIED: _ClassVar[ShadowAction]
    SHADOW_ACTION_LOAD: _ClassVar[ShadowAction]
    SHADOW_ACTION_PROMOTE: _ClassVar[ShadowAction]
    SHADOW_ACTION_DROP: _ClassVar[ShadowAction]
EFFECT_UNSPECIFIED: Effect
EFFECT_ALLOW: Effect
EFFECT_DENY: Effect
EFFECT_DEGRADE: Effect
OPERATION_UNSPECIFIED: Operation
OPERATION_READ: Operation
OPERATION_WRITE: Operation
OPERATION_UPDATE: Operation
OPERATION_DELETE: Operation
OPERATION_DERIVE: Operation
OPERATION_ACT: Operation
CREATOR_KIND_UNSPECIFIED: CreatorKind
CREATOR_KIND_USER: CreatorKind
CREATOR_KIND_TOOL: CreatorKind
CREATOR_KIND_REASONING: CreatorKind
CREATOR_KIND_AGENT: CreatorKind
CREATOR_KIND_SYSTEM: CreatorKind
STATUS_UNSPECIFIED: Status
STATUS_ACTIVE: Status
STATUS_PENDING_VERIFICATION: Status
STATUS_REVOKED: Status
STATUS_SUPERSEDED: Status
STATUS_ARCHIVED: Status
STATUS_COMPRESSED: Status
STATUS_EVICTED: Status
STATUS_ACTION_UNSPECIFIED: StatusAction
STATUS_ACTION_REVOKE: StatusAction
STATUS_ACTION_SUPERSEDE: StatusAction
STATUS_ACTION_CONFIRM: StatusAction
STATUS_ACTION_COMPRESS: StatusAction
SHADOW_ACTION_UNSPECIFIED: ShadowAction
SHADOW_ACTION_LOAD: ShadowAction
SHADOW_ACTION_PROMOTE: ShadowAction
SHADOW_ACTION_DROP: ShadowAction

class Creator(_message.Message):
    __slots__ = ("kind", "id")
    KIND_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    kind: CreatorKind
    id: str
    def __init__(self, kind: _Optional[_Union[CreatorKind, str]] = ..., id: _Optional[str] = ...) -> None: ...

class Claim(_message.Message):
    __slots__ = ("subject", "attribute", "value")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    subject: str
    attribute: str
    value: str
    def __init__(self, subject: _Optional[str] = ..., attribute: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class StatusChange(_message.Message):
    __slots__ = ("at", "from_status", "to_status", "reason", "root_id")
    AT_FIELD_NUMBER: _ClassVar[int]
    FROM_STATUS_FIELD_NUMBER: _ClassVar[int]
    TO_STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ROOT_ID_FIELD_NUMBER: _ClassVar[int]
    at: _timestamp_pb2.Timestamp
    from_status: Status
    to_status: Status
    reason: str
    root_id: str
    def __init__(self, at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., from_status: _Optional[_Union[Status, str]] = ..., to_status: _Optional[_Union[Status, str]] = ..., reason: _Optional[str] = ..., root_id: _Optional[str] = ...) -> None: ...

class Memory(_message.Message):
    __slots__ = ("id", "namespace", "type", "tags", "claim", "volatility", "creator", "creator_confidence", "created_at", "context_id", "dependencies", "derivations", "status", "successor", "version", "access_count", "last_access", "history", "reliability", "value_score", "confirmed_by", "contradicted_by", "uses_ok", "uses_failed")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    VOLATILITY_FIELD_NUMBER: _ClassVar[int]
    CREATOR_FIELD_NUMBER: _ClassVar[int]
    CREATOR_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_ID_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCIES_FIELD_NUMBER: _ClassVar[int]
    DERIVATIONS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SUCCESSOR_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ACCESS_COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_ACCESS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    RELIABILITY_FIELD_NUMBER: _ClassVar[int]
    VALUE_SCORE_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_BY_FIELD_NUMBER: _ClassVar[int]
    CONTRADICTED_BY_FIELD_NUMBER: _ClassVar[int]
    USES_OK_FIELD_NUMBER: _ClassVar[int]
    USES_FAILED_FIELD_NUMBER: _ClassVar[int]
    id: str
    namespace: str
    type: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    claim: Claim
    volatility: str
    creator: Creator
    creator_confidence: float
    created_at: _timestamp_pb2.Timestamp
    context_id: str
    dependencies: _containers.RepeatedScalarFieldContainer[str]
    derivations: _containers.RepeatedScalarFieldContainer[str]
    status: Status
    successor: str
    version: int
    access_count: int
    last_access: _timestamp_pb2.Timestamp
    history: _containers.RepeatedCompositeFieldContainer[StatusChange]
    reliability: float
    value_score: float
    confirmed_by: _containers.RepeatedScalarFieldContainer[str]
    contradicted_by: _containers.RepeatedScalarFieldContainer[str]
    uses_ok: int
    uses_failed: int
    def __init__(self, id: _Optional[str] = ..., namespace: _Optional[str] = ..., type: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., claim: _Optional[_Union[Claim, _Mapping]] = ..., volatility: _Optional[str] = ..., creator: _Optional[_Union[Creator, _Mapping]] = ..., creator_confidence: _Optional[float] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., context_id: _Optional[str] = ..., dependencies: _Optional[_Iterable[str]] = ..., derivations: _Optional[_Iterable[str]] = ..., status: _Optional[_Union[Status, str]] = ..., successor: _Optional[str] = ..., version: _Optional[int] = ..., access_count: _Optional[int] = ..., last_access: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., history: _Optional[_Iterable[_Union[StatusChange, _Mapping]]] = ..., reliability: _Optional[float] = ..., value_score: _Optional[float] = ..., confirmed_by: _Optional[_Iterable[str]] = ..., contradicted_by: _Optional[_Iterable[str]] = ..., uses_ok: _Optional[int] = ..., uses_failed: _Optional[int] = ...) -> None: ...

class Obligation(_message.Message):
    __slots__ = ("kind", "source", "text", "factor", "policy")
    KIND_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FACTOR_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    kind: str
    source: str
    text: str
    factor: float
    policy: str
    def __init__(self, kind: _Optional[str] = ..., source: _Optional[str] = ..., text: _Optional[str] = ..., factor: _Optional[float] = ..., policy: _Optional[str] = ...) -> None: ...

class Reason(_message.Message):
    __slots__ = ("policy", "effect", "message", "priority", "status")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    policy: str
    effect: Effect
    message: str
    priority: int
    status: str
    def __init__(self, policy: _Optional[str] = ..., effect: _Optional[_Union[Effect, str]] = ..., message: _Optional[str] = ..., priority: _Optional[int] = ..., status: _Optional[str] = ...) -> None: ...

class Decision(_message.Message):
    __slots__ = ("decision_id", "effect", "compliance_score", "expected_cost", "obligations", "reasons", "errors", "operation", "memory_ids", "decided_at", "policy_version", "grants_used")
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    COMPLIANCE_SCORE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_COST_FIELD_NUMBER: _ClassVar[int]
    OBLIGATIONS_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    GRANTS_USED_FIELD_NUMBER: _ClassVar[int]
    decision_id: str
    effect: Effect
    compliance_score: float
    expected_cost: float
    obligations: _containers.RepeatedCompositeFieldContainer[Obligation]
    reasons: _containers.RepeatedCompositeFieldContainer[Reason]
    errors: _containers.RepeatedScalarFieldContainer[str]
    operation: Operation
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    decided_at: _timestamp_pb2.Timestamp
    policy_version: str
    grants_used: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, decision_id: _Optional[str] = ..., effect: _Optional[_Union[Effect, str]] = ..., compliance_score: _Optional[float] = ..., expected_cost: _Optional[float] = ..., obligations: _Optional[_Iterable[_Union[Obligation, _Mapping]]] = ..., reasons: _Optional[_Iterable[_Union[Reason, _Mapping]]] = ..., errors: _Optional[_Iterable[str]] = ..., operation: _Optional[_Union[Operation, str]] = ..., memory_ids: _Optional[_Iterable[str]] = ..., decided_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., policy_version: _Optional[str] = ..., grants_used: _Optional[_Iterable[str]] = ...) -> None: ...

class Actor(_message.Message):
    __slots__ = ("kind", "id")
    KIND_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    kind: CreatorKind
    id: str
    def __init__(self, kind: _Optional[_Union[CreatorKind, str]] = ..., id: _Optional[str] = ...) -> None: ...

class RecordRequest(_message.Message):
    __slots__ = ("namespace", "memory", "actor", "budget", "time")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    memory: Memory
    actor: Actor
    budget: float
    time: _timestamp_pb2.Timestamp
    def __init__(self, namespace: _Optional[str] = ..., memory: _Optional[_Union[Memory, _Mapping]] = ..., actor: _Optional[_Union[Actor, _Mapping]] = ..., budget: _Optional[float] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RecordResponse(_message.Message):
    __slots__ = ("recorded", "decision", "memory", "superseded_id", "affected_ids")
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_ID_FIELD_NUMBER: _ClassVar[int]
    AFFECTED_IDS_FIELD_NUMBER: _ClassVar[int]
    recorded: bool
    decision: Decision
    memory: Memory
    superseded_id: str
    affected_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, recorded: bool = ..., decision: _Optional[_Union[Decision, _Mapping]] = ..., memory: _Optional[_Union[Memory, _Mapping]] = ..., superseded_id: _Optional[str] = ..., affected_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ActArgument(_message.Message):
    __slots__ = ("name", "sources", "value", "digest")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    name: str
    sources: _containers.RepeatedScalarFieldContainer[str]
    value: str
    digest: str
    def __init__(self, name: _Optional[str] = ..., sources: _Optional[_Iterable[str]] = ..., value: _Optional[str] = ..., digest: _Optional[str] = ...) -> None: ...

class CheckRequest(_message.Message):
    __slots__ = ("namespace", "operation", "memory_id", "memory_ids", "actor", "budget", "action", "historical", "time", "arguments")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    HISTORICAL_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    operation: Operation
    memory_id: str
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    actor: Actor
    budget: float
    action: str
    historical: bool
    time: _timestamp_pb2.Timestamp
    arguments: _containers.RepeatedCompositeFieldContainer[ActArgument]
    def __init__(self, namespace: _Optional[str] = ..., operation: _Optional[_Union[Operation, str]] = ..., memory_id: _Optional[str] = ..., memory_ids: _Optional[_Iterable[str]] = ..., actor: _Optional[_Union[Actor, _Mapping]] = ..., budget: _Optional[float] = ..., action: _Optional[str] = ..., historical: bool = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., arguments: _Optional[_Iterable[_Union[ActArgument, _Mapping]]] = ...) -> None: ...

class CheckResponse(_message.Message):
    __slots__ = ("decision",)
    DECISION_FIELD_NUMBER: _ClassVar[int]
    decision: Decision
    def __init__(self, decision: _Optional[_Union[Decision, _Mapping]] = ...) -> None: ...

class Candidate(_message.Message):
    __slots__ = ("memory_id", "similarity")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    similarity: float
    def __init__(self, memory_id: _Optional[str] = ..., similarity: _Optional[float] = ...) -> None: ...

class FilterRankRequest(_message.Message):
    __slots__ = ("namespace", "candidates", "actor", "budget", "historical", "limit", "time")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    HISTORICAL_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    candidates: _containers.RepeatedCompositeFieldContainer[Candidate]
    actor: Actor
    budget: float
    historical: bool
    limit: int
    time: _timestamp_pb2.Timestamp
    def __init__(self, namespace: _Optional[str] = ..., candidates: _Optional[_Iterable[_Union[Candidate, _Mapping]]] = ..., actor: _Optional[_Union[Actor, _Mapping]] = ..., budget: _Optional[float] = ..., historical: bool = ..., limit: _Optional[int] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RankedCandidate(_message.Message):
    __slots__ = ("memory_id", "similarity", "rank_score", "kept", "decision", "reliability", "value_score")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    RANK_SCORE_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    RELIABILITY_FIELD_NUMBER: _ClassVar[int]
    VALUE_SCORE_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    similarity: float
    rank_score: float
    kept: bool
    decision: Decision
    reliability: float
    value_score: float
    def __init__(self, memory_id: _Optional[str] = ..., similarity: _Optional[float] = ..., rank_score: _Optional[float] = ..., kept: bool = ..., decision: _Optional[_Union[Decision, _Mapping]] = ..., reliability: _Optional[float] = ..., value_score: _Optional[float] = ...) -> None: ...

class FilterRankResponse(_message.Message):
    __slots__ = ("candidates", "ranked_ids")
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    RANKED_IDS_FIELD_NUMBER: _ClassVar[int]
    candidates: _containers.RepeatedCompositeFieldContainer[RankedCandidate]
    ranked_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, candidates: _Optional[_Iterable[_Union[RankedCandidate, _Mapping]]] = ..., ranked_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class UpdateStatusRequest(_message.Message):
    __slots__ = ("namespace", "memory_id", "action", "successor_id", "reason", "expected_version", "actor", "time")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    SUCCESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    memory_id: str
    action: StatusAction
    successor_id: str
    reason: str
    expected_version: int
    actor: Actor
    time: _timestamp_pb2.Timestamp
    def __init__(self, namespace: _Optional[str] = ..., memory_id: _Optional[str] = ..., action: _Optional[_Union[StatusAction, str]] = ..., successor_id: _Optional[str] = ..., reason: _Optional[str] = ..., expected_version: _Optional[int] = ..., actor: _Optional[_Union[Actor, _Mapping]] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class UpdateStatusResponse(_message.Message):
    __slots__ = ("applied", "decision", "memory", "affected_ids")
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    AFFECTED_IDS_FIELD_NUMBER: _ClassVar[int]
    applied: bool
    decision: Decision
    memory: Memory
    affected_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, applied: bool = ..., decision: _Optional[_Union[Decision, _Mapping]] = ..., memory: _Optional[_Union[Memory, _Mapping]] = ..., affected_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ReviseRequest(_message.Message):
    __slots__ = ("namespace", "memory", "expected_version", "actor", "budget", "time")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    memory: Memory
    expected_version: int
    actor: Actor
    budget: float
    time: _timestamp_pb2.Timestamp
    def __init__(self, namespace: _Optional[str] = ..., memory: _Optional[_Union[Memory, _Mapping]] = ..., expected_version: _Optional[int] = ..., actor: _Optional[_Union[Actor, _Mapping]] = ..., budget: _Optional[float] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ReviseResponse(_message.Message):
    __slots__ = ("applied", "decision", "memory", "previous_version", "affected_ids")
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_VERSION_FIELD_NUMBER: _ClassVar[int]
    AFFECTED_IDS_FIELD_NUMBER: _ClassVar[int]
    applied: bool
    decision: Decision
    memory: Memory
    previous_version: int
    affected_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, applied: bool = ..., decision: _Optional[_Union[Decision, _Mapping]] = ..., memory: _Optional[_Union[Memory, _Mapping]] = ..., previous_version: _Optional[int] = ..., affected_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ("id", "actions", "arguments", "source", "memory_id", "uses", "used", "expires_at", "issuer", "created_at", "effective", "value", "digest")
    ID_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    USES_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    ISSUER_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    id: str
    actions: _containers.RepeatedScalarFieldContainer[str]
    arguments: _containers.RepeatedScalarFieldContainer[str]
    source: str
    memory_id: str
    uses: int
    used: int
    expires_at: _timestamp_pb2.Timestamp
    issuer: Creator
    created_at: _timestamp_pb2.Timestamp
    effective: bool
    value: str
    digest: str
    def __init__(self, id: _Optional[str] = ..., actions: _Optional[_Iterable[str]] = ..., arguments: _Optional[_Iterable[str]] = ..., source: _Optional[str] = ..., memory_id: _Optional[str] = ..., uses: _Optional[int] = ..., used: _Optional[int] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., issuer: _Optional[_Union[Creator, _Mapping]] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., effective: bool = ..., value: _Optional[str] = ..., digest: _Optional[str] = ...) -> None: ...

class GrantRequest(_message.Message):
    __slots__ = ("namespace", "grant", "actor", "time")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    grant: Grant
    actor: Actor
    time: _timestamp_pb2.Timestamp
    def __init__(self, namespace: _Optional[str] = ..., grant: _Optional[_Union[Grant, _Mapping]] = ..., actor: _Optional[_Union[Actor, _Mapping]] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GrantResponse(_message.Message):
    __slots__ = ("grant",)
    GRANT_FIELD_NUMBER: _ClassVar[int]
    grant: Grant
    def __init__(self, grant: _Optional[_Union[Grant, _Mapping]] = ...) -> None: ...

class ObjectRequest(_message.Message):
    __slots__ = ("namespace", "memory_id", "reason", "actor", "time")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    memory_id: str
    reason: str
    actor: Actor
    time: _timestamp_pb2.Timestamp
    def __init__(self, namespace: _Optional[str] = ..., memory_id: _Optional[str] = ..., reason: _Optional[str] = ..., actor: _Optional[_Union[Actor, _Mapping]] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Objection(_message.Message):
    __slots__ = ("at", "by", "reason")
    AT_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    at: _timestamp_pb2.Timestamp
    by: str
    reason: str
    def __init__(self, at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., by: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class Proposal(_message.Message):
    __slots__ = ("from_status", "to_status", "reason", "owners", "proposed_at", "deadline", "state", "objections", "objections_left")
    FROM_STATUS_FIELD_NUMBER: _ClassVar[int]
    TO_STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_AT_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    OBJECTIONS_FIELD_NUMBER: _ClassVar[int]
    OBJECTIONS_LEFT_FIELD_NUMBER: _ClassVar[int]
    from_status: Status
    to_status: Status
    reason: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    proposed_at: _timestamp_pb2.Timestamp
    deadline: _timestamp_pb2.Timestamp
    state: str
    objections: _containers.RepeatedCompositeFieldContainer[Objection]
    objections_left: int
    def __init__(self, from_status: _Optional[_Union[Status, str]] = ..., to_status: _Optional[_Union[Status, str]] = ..., reason: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., proposed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., state: _Optional[str] = ..., objections: _Optional[_Iterable[_Union[Objection, _Mapping]]] = ..., objections_left: _Optional[int] = ...) -> None: ...

class ObjectResponse(_message.Message):
    __slots__ = ("proposal",)
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    proposal: Proposal
    def __init__(self, proposal: _Optional[_Union[Proposal, _Mapping]] = ...) -> None: ...

class FeedbackRequest(_message.Message):
    __slots__ = ("namespace", "decision_id", "memory_ids", "success", "note", "time")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    decision_id: str
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    success: bool
    note: str
    time: _timestamp_pb2.Timestamp
    def __init__(self, namespace: _Optional[str] = ..., decision_id: _Optional[str] = ..., memory_ids: _Optional[_Iterable[str]] = ..., success: bool = ..., note: _Optional[str] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class FeedbackResponse(_message.Message):
    __slots__ = ("updated",)
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    updated: int
    def __init__(self, updated: _Optional[int] = ...) -> None: ...

class ExplainRequest(_message.Message):
    __slots__ = ("namespace", "memory_id", "ancestor_depth", "descendant_depth", "decisions")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    ANCESTOR_DEPTH_FIELD_NUMBER: _ClassVar[int]
    DESCENDANT_DEPTH_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    memory_id: str
    ancestor_depth: int
    descendant_depth: int
    decisions: int
    def __init__(self, namespace: _Optional[str] = ..., memory_id: _Optional[str] = ..., ancestor_depth: _Optional[int] = ..., descendant_depth: _Optional[int] = ..., decisions: _Optional[int] = ...) -> None: ...

class Edge(_message.Message):
    __slots__ = ("from_id", "to_id")
    FROM_ID_FIELD_NUMBER: _ClassVar[int]
    TO_ID_FIELD_NUMBER: _ClassVar[int]
    from_id: str
    to_id: str
    def __init__(self, from_id: _Optional[str] = ..., to_id: _Optional[str] = ...) -> None: ...

class SourceCredibility(_message.Message):
    __slots__ = ("source", "credibility", "ok", "bad")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    CREDIBILITY_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    BAD_FIELD_NUMBER: _ClassVar[int]
    source: str
    credibility: float
    ok: float
    bad: float
    def __init__(self, source: _Optional[str] = ..., credibility: _Optional[float] = ..., ok: _Optional[float] = ..., bad: _Optional[float] = ...) -> None: ...

class ExplainResponse(_message.Message):
    __slots__ = ("memory", "ancestors", "descendants", "edges", "decisions", "truncated", "sources", "grants", "versions", "proposal")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    ANCESTORS_FIELD_NUMBER: _ClassVar[int]
    DESCENDANTS_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    ancestors: _containers.RepeatedCompositeFieldContainer[Memory]
    descendants: _containers.RepeatedCompositeFieldContainer[Memory]
    edges: _containers.RepeatedCompositeFieldContainer[Edge]
    decisions: _containers.RepeatedCompositeFieldContainer[Decision]
    truncated: bool
    sources: _containers.RepeatedCompositeFieldContainer[SourceCredibility]
    grants: _containers.RepeatedCompositeFieldContainer[Grant]
    versions: _containers.RepeatedCompositeFieldContainer[Memory]
    proposal: Proposal
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ..., ancestors: _Optional[_Iterable[_Union[Memory, _Mapping]]] = ..., descendants: _Optional[_Iterable[_Union[Memory, _Mapping]]] = ..., edges: _Optional[_Iterable[_Union[Edge, _Mapping]]] = ..., decisions: _Optional[_Iterable[_Union[Decision, _Mapping]]] = ..., truncated: bool = ..., sources: _Optional[_Iterable[_Union[SourceCredibility, _Mapping]]] = ..., grants: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., versions: _Optional[_Iterable[_Union[Memory, _Mapping]]] = ..., proposal: _Optional[_Union[Proposal, _Mapping]] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("namespace", "cursor", "from_oldest")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    FROM_OLDEST_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    cursor: str
    from_oldest: bool
    def __init__(self, namespace: _Optional[str] = ..., cursor: _Optional[str] = ..., from_oldest: bool = ...) -> None: ...

class LineageEvent(_message.Message):
    __slots__ = ("cursor", "type", "memory_id", "at", "root_id", "status", "previous_status", "reason", "successor", "affected_ids", "version", "deadline")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    ROOT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SUCCESSOR_FIELD_NUMBER: _ClassVar[int]
    AFFECTED_IDS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    type: str
    memory_id: str
    at: _timestamp_pb2.Timestamp
    root_id: str
    status: Status
    previous_status: Status
    reason: str
    successor: str
    affected_ids: _containers.RepeatedScalarFieldContainer[str]
    version: int
    deadline: _timestamp_pb2.Timestamp
    def __init__(self, cursor: _Optional[str] = ..., type: _Optional[str] = ..., memory_id: _Optional[str] = ..., at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., root_id: _Optional[str] = ..., status: _Optional[_Union[Status, str]] = ..., previous_status: _Optional[_Union[Status, str]] = ..., reason: _Optional[str] = ..., successor: _Optional[str] = ..., affected_ids: _Optional[_Iterable[str]] = ..., version: _Optional[int] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListPoliciesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PolicyInfo(_message.Message):
    __slots__ = ("name", "file", "line", "operations", "priority", "effect")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    name: str
    file: str
    line: int
    operations: _containers.RepeatedScalarFieldContainer[Operation]
    priority: int
    effect: Effect
    def __init__(self, name: _Optional[str] = ..., file: _Optional[str] = ..., line: _Optional[int] = ..., operations: _Optional[_Iterable[_Union[Operation, str]]] = ..., priority: _Optional[int] = ..., effect: _Optional[_Union[Effect, str]] = ...) -> None: ...

class ListPoliciesResponse(_message.Message):
    __slots__ = ("version", "strategy", "policies")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    version: str
    strategy: str
    policies: _containers.RepeatedCompositeFieldContainer[PolicyInfo]
    def __init__(self, version: _Optional[str] = ..., strategy: _Optional[str] = ..., policies: _Optional[_Iterable[_Union[PolicyInfo, _Mapping]]] = ...) -> None: ...

class Diagnostic(_message.Message):
    __slots__ = ("code", "severity", "message", "file", "line", "column", "end_line", "end_column", "snippet", "help", "rendered")
    CODE_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    END_COLUMN_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_FIELD_NUMBER: _ClassVar[int]
    HELP_FIELD_NUMBER: _ClassVar[int]
    RENDERED_FIELD_NUMBER: _ClassVar[int]
    code: str
    severity: str
    message: str
    file: str
    line: int
    column: int
    end_line: int
    end_column: int
    snippet: str
    help: str
    rendered: str
    def __init__(self, code: _Optional[str] = ..., severity: _Optional[str] = ..., message: _Optional[str] = ..., file: _Optional[str] = ..., line: _Optional[int] = ..., column: _Optional[int] = ..., end_line: _Optional[int] = ..., end_column: _Optional[int] = ..., snippet: _Optional[str] = ..., help: _Optional[str] = ..., rendered: _Optional[str] = ...) -> None: ...

class ReloadPoliciesRequest(_message.Message):
    __slots__ = ("files",)
    class FilesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FILES_FIELD_NUMBER: _ClassVar[int]
    files: _containers.ScalarMap[str, str]
    def __init__(self, files: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ReloadPoliciesResponse(_message.Message):
    __slots__ = ("applied", "version", "diagnostics")
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    applied: bool
    version: str
    diagnostics: _containers.RepeatedCompositeFieldContainer[Diagnostic]
    def __init__(self, applied: bool = ..., version: _Optional[str] = ..., diagnostics: _Optional[_Iterable[_Union[Diagnostic, _Mapping]]] = ...) -> None: ...

class LintPolicyRequest(_message.Message):
    __slots__ = ("files",)
    class FilesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FILES_FIELD_NUMBER: _ClassVar[int]
    files: _containers.ScalarMap[str, str]
    def __init__(self, files: _Optional[_Mapping[str, str]] = ...) -> None: ...

class LintPolicyResponse(_message.Message):
    __slots__ = ("ok", "diagnostics")
    OK_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    diagnostics: _containers.RepeatedCompositeFieldContainer[Diagnostic]
    def __init__(self, ok: bool = ..., diagnostics: _Optional[_Iterable[_Union[Diagnostic, _Mapping]]] = ...) -> None: ...

class RunSweepRequest(_message.Message):
    __slots__ = ("namespace", "batch", "time")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    batch: int
    time: _timestamp_pb2.Timestamp
    def __init__(self, namespace: _Optional[str] = ..., batch: _Optional[int] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SweepTransition(_message.Message):
    __slots__ = ("memory_id", "from_status", "to_status", "reason")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_STATUS_FIELD_NUMBER: _ClassVar[int]
    TO_STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    from_status: Status
    to_status: Status
    reason: str
    def __init__(self, memory_id: _Optional[str] = ..., from_status: _Optional[_Union[Status, str]] = ..., to_status: _Optional[_Union[Status, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class RunSweepResponse(_message.Message):
    __slots__ = ("examined", "transitions", "refused", "proposed", "unreadable")
    EXAMINED_FIELD_NUMBER: _ClassVar[int]
    TRANSITIONS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_FIELD_NUMBER: _ClassVar[int]
    UNREADABLE_FIELD_NUMBER: _ClassVar[int]
    examined: int
    transitions: _containers.RepeatedCompositeFieldContainer[SweepTransition]
    refused: _containers.RepeatedCompositeFieldContainer[SweepTransition]
    proposed: _containers.RepeatedCompositeFieldContainer[SweepTransition]
    unreadable: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, examined: _Optional[int] = ..., transitions: _Optional[_Iterable[_Union[SweepTransition, _Mapping]]] = ..., refused: _Optional[_Iterable[_Union[SweepTransition, _Mapping]]] = ..., proposed: _Optional[_Iterable[_Union[SweepTransition, _Mapping]]] = ..., unreadable: _Optional[_Iterable[str]] = ...) -> None: ...

class ShadowRequest(_message.Message):
    __slots__ = ("action", "files")
    class FilesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ACTION_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    action: ShadowAction
    files: _containers.ScalarMap[str, str]
    def __init__(self, action: _Optional[_Union[ShadowAction, str]] = ..., files: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ShadowDiff(_message.Message):
    __slots__ = ("policy", "serving", "candidate", "count", "examples", "serving_obligations", "candidate_obligations")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    SERVING_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    SERVING_OBLIGATIONS_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_OBLIGATIONS_FIELD_NUMBER: _ClassVar[int]
    policy: str
    serving: Effect
    candidate: Effect
    count: int
    examples: _containers.RepeatedScalarFieldContainer[str]
    serving_obligations: _containers.RepeatedScalarFieldContainer[str]
    candidate_obligations: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, policy: _Optional[str] = ..., serving: _Optional[_Union[Effect, str]] = ..., candidate: _Optional[_Union[Effect, str]] = ..., count: _Optional[int] = ..., examples: _Optional[_Iterable[str]] = ..., serving_obligations: _Optional[_Iterable[str]] = ..., candidate_obligations: _Optional[_Iterable[str]] = ...) -> None: ...

class ShadowResponse(_message.Message):
    __slots__ = ("active", "version", "compared", "disagreed", "diffs", "serving_version", "diagnostics")
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    COMPARED_FIELD_NUMBER: _ClassVar[int]
    DISAGREED_FIELD_NUMBER: _ClassVar[int]
    DIFFS_FIELD_NUMBER: _ClassVar[int]
    SERVING_VERSION_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    active: bool
    version: str
    compared: int
    disagreed: int
    diffs: _containers.RepeatedCompositeFieldContainer[ShadowDiff]
    serving_version: str
    diagnostics: _containers.RepeatedCompositeFieldContainer[Diagnostic]
    def __init__(self, active: bool = ..., version: _Optional[str] = ..., compared: _Optional[int] = ..., disagreed: _Optional[int] = ..., diffs: _Optional[_Iterable[_Union[ShadowDiff, _Mapping]]] = ..., serving_version: _Optional[str] = ..., diagnostics: _Optional[_Iterable[_Union[Diagnostic, _Mapping]]] = ...) -> None: ...
