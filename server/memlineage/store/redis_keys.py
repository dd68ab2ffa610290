"""Every Redis key name the store uses is built here and nowhere else.

All keys of one namespace carry the hash tag ``{namespace}``, so a namespace
lives in exactly one Redis Cluster slot: multi-key Lua scripts over one
namespace are legal in a cluster, and no key of one namespace can be built
from another's (namespaces exclude ``{`` and ``}`` by validation).

Layout (prefix ``ml``)::

    ml:{ns}:m:<id>              hash    the record (short field names, see redis_store)
    ml:{ns}:d:<id>              list    derivations: ids recorded with <id> as dependency
    ml:{ns}:h:<id>              list    status history entries (capped)
    ml:{ns}:vs:<id>             list    earlier versions of a revised memory, oldest first
                                        (each its record hash as a JSON array)
    ml:{ns}:c:<subject>|<attr>  string  id of the current holder of that claim
    ml:{ns}:w:<name>            zset    sliding-window counter events (score = time)
    ml:{ns}:e                   string  graph epoch: bumped by every add_dependencies and revision
    ml:{ns}:cw                  string  write counter: every writing script (random start, steps)
    ml:{ns}:ca                  string  access counter: every access-statistics flush
    ml:{ns}:ev                  stream  lineage event log (Watch), capped with MAXLEN ~
    ml:{ns}:cg:<subject>|<attr> set     claim group: every id ever recorded with that claim
    ml:{ns}:cp:<subject>|<attr> hash    claim peers: the group's members a new claim still
                                        compares with (id -> "1": live when last seen), and
                                        field "~": the value of :cr when it was made whole
    ml:{ns}:cr                  string  claim revivals: moved by every change that brings a
                                        memory with a claim back from archived or
                                        compressed (its claim's peers may miss it)
    ml:{ns}:src                 hash    source statistics: fields <source>|ok, <source>|bad
    ml:{ns}:rv                  zset    review schedule: member id, score = next review time
    ml:{ns}:dec                 stream  kept decisions (fields i id, m " memory ids ", d
                                        the KeptDecision JSON), the newest
                                        decision_retention (trimmed exactly, with :dix)
    ml:{ns}:dix                 hash    decision id -> its entry id in ml:{ns}:dec
    ml:{ns}:g                   hash    grant id -> the grant's JSON (written once)
    ml:{ns}:gu                  hash    grant id -> uses spent
    ml:{ns}:pp                  hash    memory id -> the sweep's proposal for it (JSON)
    ml:{ns}:pc                  hash    cascades begun and not yet finished: the id a walk
                                        starts from -> "root US root status US reason US
                                        time" (set with the change that starts it, removed
                                        once every descendant is marked; resumed if a
                                        sidecar or Redis stopped it half-way)
    ml:namespaces               set     every namespace holding a memory (outside the slots)
    ml:store                    string  the store's identity (random; redis_identity), on a
                                        cluster ml:store:{tag} per primary instead
"""

from __future__ import annotations

_TYPED_BY_KIND = {
    "m": "hash",
    "d": "list",
    "h": "list",
    "vs": "list",
    "c": "string",
    "w": "zset",
    "cg": "set",
    "cp": "hash",
}
"""The Redis type of each ``<kind>:<name>`` key of a namespace, as the layout says."""
_TYPED_BY_NAME = {
    "e": "string",
    "cw": "string",
    "ca": "string",
    "cr": "string",
    "ev": "stream",
    "src": "hash",
    "rv": "zset",
    "dec": "stream",
    "dix": "hash",
    "g": "hash",
    "gu": "hash",
    "pp": "hash",
    "pc": "hash",
}
"""The Redis type of each single key of a namespace, as the layout says."""


class RedisKeys:
    """Key builder; the prefix lets several deployments share one Redis."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "ml"):
        if not prefix or any(c in prefix for c in "{}"):
            raise ValueError("key prefix must be non-empty and free of braces")
        self.prefix = prefix

    def tag(self, namespace: str) -> str:
        """The part shared by all keys of ``namespace`` (contains the hash tag)."""
        return f"{self.prefix}:{{{namespace}}}"

    def record(self, namespace: str, memory_id: str) -> str:
        return f"{self.prefix}:{{{namespace}}}:m:{memory_id}"

    def derivations(self, namespace: str, memory_id: str) -> str:
        return f"{self.prefix}:{{{namespace}}}:d:{memory_id}"

    def history(self, namespace: str, memory_id: str) -> str:
        return f"{self.prefix}:{{{namespace}}}:h:{memory_id}"

    def versions(self, namespace: str, memory_id: str) -> str:
        return f"{self.prefix}:{{{namespace}}}:vs:{memory_id}"

    def claim(self, namespace: str, subject: str, attribute: str) -> str:
        return f"{self.prefix}:{{{namespace}}}:c:{subject}|{attribute}"

    def proposals(self, namespace: str) -> str:
        return f"{self.prefix}:{{{namespace}}}:pp"

    def pending_cascades(self, namespace: str) -> str:
        """Cascades begun and not finished (see the layout): what resumes them."""
        return f"{self.prefix}:{{{namespace}}}:pc"

    def grants(self, namespace: str) -> str:
        return f"{self.prefix}:{{{namespace}}}:g"

    def grant_uses(self, namespace: str) -> str:
        return f"{self.prefix}:{{{namespace}}}:gu"

    def counter(self, namespace: str, name: str) -> str:
        return f"{self.prefix}:{{{namespace}}}:w:{name}"

    def claim_group(self, namespace: str, subject: str, attribute: str) -> str:
        return f"{self.prefix}:{{{namespace}}}:cg:{subject}|{attribute}"

    def claim_peers(self, namespace: str, subject: str, attribute: str) -> str:
        """The claim group's members a new claim still compares with (see the layout)."""
        return f"{self.prefix}:{{{namespace}}}:cp:{subject}|{attribute}"

    def claim_revivals(self, namespace: str) -> str:
        """Moved when a memory with a claim comes back to the live statuses; every
        writing script takes it (`redis_scripts`), RECORD compares it with a peers
        hash's ``~``."""
        return f"{self.prefix}:{{{namespace}}}:cr"

    def sources(self, namespace: str) -> str:
        """Source statistics of the namespace: one hash, so scripts take it in KEYS."""
        return f"{self.prefix}:{{{namespace}}}:src"

    def review(self, namespace: str) -> str:
        return f"{self.prefix}:{{{namespace}}}:rv"

    def decisions(self, namespace: str) -> str:
        """The namespace's kept decisions (a capped stream)."""
        return f"{self.prefix}:{{{namespace}}}:dec"

    def decision_index(self, namespace: str) -> str:
        """Decision id -> entry id in `decisions`, trimmed with it."""
        return f"{self.prefix}:{{{namespace}}}:dix"

    def namespaces(self) -> str:
        """Registry of namespaces (no hash tag: global, written after a record)."""
        return f"{self.prefix}:namespaces"

    def epoch(self, namespace: str) -> str:
        return f"{self.prefix}:{{{namespace}}}:e"

    def counter_of(self, namespace: str, which: str) -> str:
        """The namespace's write ("w") or access ("a") counter (see redis_scripts)."""
        return f"{self.prefix}:{{{namespace}}}:c{which}"

    def events(self, namespace: str) -> str:
        return f"{self.prefix}:{{{namespace}}}:ev"

    def type_of(self, key: str) -> str | None:
        """The Redis type the store keeps at `key` (the layout above; what TYPE answers),
        None for a key not of the layout: how a key of another type is named."""
        if key == self.namespaces():
            return "set"
        head = f"{self.prefix}:{{"
        end = key.find("}:", len(head)) if key.startswith(head) else -1
        if end < 0:
            return None
        kind, sep, _ = key[end + 2 :].partition(":")
        return _TYPED_BY_KIND.get(kind) if sep else _TYPED_BY_NAME.get(kind)

    def triples(self, namespace: str, ids: list[str]) -> list[str]:
        """record, derivations, history keys of each id, interleaved (script KEYS)."""
        out: list[str] = []
        base = self.tag(namespace)
        for memory_id in ids:
            out += (f"{base}:m:{memory_id}", f"{base}:d:{memory_id}", f"{base}:h:{memory_id}")
        return out
