"""The names the handlers use in memories and run metadata, and the errors they raise
(each a `PolicyDenied`, carrying the decision)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar

from memlineage.client import ActArg, PolicyDenied
from memlineage.v1 import memlineage_pb2 as pb

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
_SESSION_RE = re.compile(r"[A-Za-z0-9_:-]{1,48}")  # no "/" nor ".": see `_Core`
_MAX_TAGS_RUNS = 16  # ancestors named in tags, nearest first (the sidecar allows 64 tags)
_MAX_VALUE = 4096  # the sidecar's limit on an act argument's value
_MAX_SOURCES = 256  # ... and on its sources
_MAX_RELIED = 10_000  # ... and on the memories an act names besides them
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
