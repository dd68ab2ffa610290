"""Who is calling, and which namespaces they may use.

A caller is identified by a bearer token in gRPC metadata (`authorization:
Bearer <token>`), configured as token -> allowed namespaces (+ admin). With no
token configured (the local default) every caller gets the single namespace
`default`, and admin RPCs are accepted only from loopback peers.
"""

from __future__ import annotations

import hmac
from collections import Counter
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from memlineage_dsl.facts import Creator

from memlineage.config import TokenGrant as TokenGrant  # re-exported: configured in config
from memlineage.lineage.errors import LineageError

DEFAULT_NAMESPACE = "default"

ACTING_IN: ContextVar[str | None] = ContextVar("acting_in", default=None)
"""The namespace the RPC running in this context acts in, once its caller was allowed
it (`Authenticator.namespace`): what tracing names as the span's namespace (a request
naming none acts in its token's first namespace, not `default`)."""


class Unauthenticated(LineageError):
    code = "UNAUTHENTICATED"
    grpc_status = "UNAUTHENTICATED"


class PermissionDenied(LineageError):
    code = "PERMISSION_DENIED"
    grpc_status = "PERMISSION_DENIED"


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    namespaces: tuple[str, ...]  # the first is the default
    admin: bool = False
    loopback_admin: bool = False  # no auth configured: admin iff the peer is loopback
    speaks_as: tuple[str, ...] = ()  # globs of the identities it may state; none: any
    # (default namespace, every namespace, identities): what a Check's answer depends
    # on of its caller, hashed once (a token may name thousands of namespaces; a tuple
    # of them would be scanned by every `in` and hashed by every memo lookup)
    scope: tuple[str, frozenset[str], tuple[str, ...]] = field(
        init=False, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        default = self.namespaces[0] if self.namespaces else ""
        scope = (default, frozenset(self.namespaces), self.speaks_as)
        object.__setattr__(self, "scope", scope)


LOCAL = Principal("local", (DEFAULT_NAMESPACE,), loopback_admin=True)


def is_loopback(peer: str) -> bool:
    """grpc peer strings: ipv4:127.0.0.1:port, ipv6:[::1]:port (grpcio 1.6x+ writes it
    URL-encoded, ipv6:%5B::1%5D:port: before, IPv6 loopback callers and `localhost`
    targets were refused admin with no tokens), unix:…"""
    return peer.startswith(("ipv4:127.", "ipv6:[::1]", "ipv6:%5B::1%5D", "unix:", "unix-abstract:"))


class Authenticator:
    def __init__(self, grants: Iterable[TokenGrant] = ()) -> None:
        self._grants = list(grants)
        for g in self._grants:
            if not g.token or (not g.namespaces and not g.admin):
                raise ValueError("a token needs a value and at least one namespace or admin")
        # one principal per token, built once: a call only compares tokens. Its name is
        # the caller's identity in the logs and in the per-caller bounds (Watch streams,
        # held calls): one per token, never made of the token's value (before: an unnamed
        # token was `token:` and its first 4 characters, a piece of the secret in every
        # log line, and two unnamed tokens sharing them were one caller, whose Watch
        # streams and held calls counted against each other; an outside audit)
        names = [g.name or f"token#{i}" for i, g in enumerate(self._grants)]
        twice = sorted(n for n, k in Counter(names).items() if k > 1)
        if twice:
            raise ValueError(f"two tokens named {twice[0]!r}: each token needs a name of its own")
        self._principals = [
            (g.token.encode(), Principal(name, g.namespaces, g.admin, speaks_as=g.speaks_as))
            for name, g in zip(names, self._grants, strict=True)
        ]

    @property
    def enabled(self) -> bool:
        return bool(self._grants)

    def principal(self, metadata: Mapping[str, str]) -> Principal:
        if not self._grants:
            return LOCAL
        header = metadata.get("authorization", "")
        token = header[7:] if header.lower().startswith("bearer ") else ""
        if not token:
            raise Unauthenticated("missing `authorization: Bearer <token>` metadata")
        given = token.encode()
        for known, principal in self._principals:
            if hmac.compare_digest(known, given):
                return principal
        raise Unauthenticated("unknown token")

    @staticmethod
    def namespace(principal: Principal, requested: str) -> str:
        """The namespace a request acts in: its own request, or the caller's default."""
        if not requested:
            if not principal.namespaces:
                raise PermissionDenied("this caller has no namespace", field="namespace")
            requested = principal.namespaces[0]
        elif requested not in principal.scope[1]:
            raise PermissionDenied(
                f"this caller may not use namespace {requested!r}", field="namespace"
            )
        ACTING_IN.set(requested)
        return requested

    @staticmethod
    def speaks(principal: Principal, who: Creator, field: str, *, unset: bool = False) -> Creator:
        """`who`, if the caller may state it (its token's `speaks_as`; none: anyone).
        A runtime's token that may only speak as `agent:*` and `tool:*` cannot record
        a user's words, nor grant or object as the user (an outside audit: the agent's
        token recorded an injected value as `user:alice` and the act was ALLOWed)."""
        if not principal.speaks_as:
            return who
        name = who.id if who.id.startswith(f"{who.kind}:") else f"{who.kind}:{who.id}"
        if any(fnmatchcase(name, pattern) for pattern in principal.speaks_as):
            return who
        said = (
            f"the request states no actor, so it asks as the namespace's user {name!r}; "
            f"this caller's token speaks as {', '.join(principal.speaks_as)}: state an "
            "actor it may be (the client's and the adapters' `actor=`)"
            if unset
            else f"this caller may not speak as {name!r} (its token speaks as "
            f"{', '.join(principal.speaks_as)}): state one of those"
        )
        raise PermissionDenied(said, field=field)

    @staticmethod
    def require_admin(principal: Principal, peer: str) -> None:
        if not (principal.admin or (principal.loopback_admin and is_loopback(peer))):
            raise PermissionDenied(
                "admin RPCs need an admin token (or, with no auth configured, a loopback caller)"
            )
