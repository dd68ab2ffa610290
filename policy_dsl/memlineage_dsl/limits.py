"""The language's limits: how deep an expression may nest, and numeric ranges.

Every stage after the parser (type checking, folding, rule analysis, the
formatter, code generation, CPython's own compiler of the generated code)
walks expressions recursively, so the parser refuses an expression nested
deeper than `MAX_DEPTH` (E007) and the pipeline refuses a const whose
inlined form would be (a const is inlined where it is used). Everything here
is iterative: it must itself survive any input.

Long chains of one associative operator (`and`, `or`, `+`) are not nesting:
the parser builds a chain of more than `CHAIN_FLAT` operands as a balanced
tree (`balance`), so a chain of any length stays a few levels deep.

Numbers reach the wire (int32 `priority`, double scores and costs) and the
evaluator: the checker holds them to the ranges below (E203).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from . import ast as A

MAX_DEPTH = 64  # levels of nesting of one expression, consts inlined
CHAIN_FLAT = 12  # a chain of up to this many operands keeps its written shape
CHAIN_OPS = ("and", "or", "+")

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1  # `priority` (proto int32)
MAX_WEIGHT = 1e6  # `weight`: a share of the compliance score
MAX_COST = 1e12  # `cost`: literal bound, and computed costs are clamped to it
MAX_TEST_CALLS = 100_000  # `given calls "x" = N` in a test
# Items that quantifiers nested in another one, and lineage walks inside a
# quantifier, go through in one evaluation (a rule test, a message, a computed value):
# nesting multiplies a lineage's size (four nested `ancestors` over 960 memories took
# minutes for one decision, and held a sidecar's workers; an outside audit). Past it
# the rule raises `EvaluationBudgetError`: it fails closed for that decision only.
MAX_NESTED_ITEMS = 100_000
# Pairs of rules the rule analysis (W402, W403) compares in one set; past it, W408.
MAX_RULE_PAIRS = 1_000_000
MAX_WINDOW = 7 * 86400.0  # `calls()` / `acts()` windows: the sidecar keeps 7 days of events
# `calls("source", w)`: the sidecar counts one exact source, its counter named
# `calls:<source>`, an id (at most 128 of these characters)
CALLS_SOURCE = re.compile(r"[A-Za-z0-9._:/-]{1,122}")


def children(e: A.Expr) -> tuple[A.Expr, ...]:
    """The direct sub-expressions of `e`, in source order."""
    if isinstance(e, A.Binary):
        return (e.left, e.right)
    if isinstance(e, A.Unary):
        return (e.operand,)
    if isinstance(e, A.Attr):
        return (e.obj,)
    if isinstance(e, A.Call):
        return e.args
    if isinstance(e, A.ListLit):
        return e.items
    if isinstance(e, A.Quant):
        return (e.collection, e.body)
    if isinstance(e, A.Cond):
        return (e.test, e.then, e.otherwise)
    return ()


def walk(e: A.Expr) -> Iterator[tuple[A.Expr, int]]:
    """Every node of `e` with its level (the root is 1), in source (pre-)order."""
    stack: list[tuple[A.Expr, int]] = [(e, 1)]
    while stack:
        node, level = stack.pop()
        yield node, level
        stack.extend((c, level + 1) for c in reversed(children(node)))


def chain_operands(e: A.Expr, op: str) -> list[A.Expr]:
    """The operands of the `op` chain rooted at `e`, left to right, through any
    grouping (`a and (b and c)` has three)."""
    out: list[A.Expr] = []
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, A.Binary) and node.op == op:
            stack.append(node.right)
            stack.append(node.left)
        else:
            out.append(node)
    return out


def _count_operands(e: A.Expr, op: str, stop: int) -> int:
    """How many operands the `op` chain at `e` has, counting up to `stop`."""
    n, stack = 0, [e]
    while stack and n < stop:
        node = stack.pop()
        if isinstance(node, A.Binary) and node.op == op:
            stack += (node.right, node.left)
        else:
            n += 1
    return n


def is_long_chain(e: A.Expr) -> bool:
    """Whether `e` is a chain the parser holds balanced (more than CHAIN_FLAT operands)."""
    return (
        isinstance(e, A.Binary)
        and e.op in CHAIN_OPS
        and _count_operands(e, e.op, CHAIN_FLAT + 1) > CHAIN_FLAT
    )


def balance(e: A.Expr) -> A.Expr:
    """The canonical tree of a long chain: its operands in order, up to CHAIN_FLAT of
    them left-nested as written, more split in halves. Anything else is left as is.
    A function of the operands only, so `parse(format(x)) == x` holds for it."""
    if not is_long_chain(e):
        return e
    assert isinstance(e, A.Binary)
    return _build(e.op, chain_operands(e, e.op))


def _build(op: str, items: list[A.Expr]) -> A.Expr:
    if len(items) <= CHAIN_FLAT:
        node = items[0]
        for item in items[1:]:
            node = A.Binary(op, node, item, span=A.Span.join(node.span, item.span))
        return node
    mid = len(items) // 2  # depth log2(n): recursion is shallow
    left, right = _build(op, items[:mid]), _build(op, items[mid:])
    return A.Binary(op, left, right, span=A.Span.join(left.span, right.span))


def too_deep(
    e: A.Expr, limit: int = MAX_DEPTH, const_depth: Callable[[str], int] | None = None
) -> A.Expr | None:
    """The first node (source order) at which `e` nests deeper than `limit`, or None.

    With `const_depth`, a name of a const counts as the const's own (inlined)
    depth, as the generated code sees it."""
    for node, level in walk(e):
        extra = 0
        if const_depth is not None and isinstance(node, A.Name):
            extra = const_depth(node.id)
        if level + extra > limit:
            return node
    return None


def height(e: A.Expr, const_depth: Callable[[str], int] | None = None) -> int:
    """How many levels `e` nests (a leaf: 1), a const name counting its inlined depth."""
    best = 0
    for node, level in walk(e):
        extra = const_depth(node.id) if const_depth and isinstance(node, A.Name) else 0
        best = max(best, level + extra)
    return best


@dataclass(frozen=True)
class ConstDepths:
    """The inlined depth of every const: its height with each const it names
    replaced by that const's inlined value (a cycle counts as nothing more: it is
    reported on its own, E111)."""

    depth: Mapping[str, int]

    def __call__(self, name: str) -> int:
        return self.depth.get(name, 0)

    @staticmethod
    def of(consts: Mapping[str, A.Expr]) -> ConstDepths:
        refs: dict[str, list[tuple[str, int]]] = {}
        own: dict[str, int] = {}
        for name, value in consts.items():
            found: list[tuple[str, int]] = []
            best = 0
            for node, level in walk(value):
                best = max(best, level)
                if isinstance(node, A.Name) and node.id in consts:
                    found.append((node.id, level))
            refs[name], own[name] = found, best
        depth: dict[str, int] = {}
        state: dict[str, int] = {}  # 1: on the stack, 2: done
        for root in consts:
            if root in state:
                continue
            stack: list[tuple[str, int]] = [(root, 0)]
            state[root] = 1
            while stack:
                name, i = stack[-1]
                deps = refs[name]
                if i < len(deps):
                    stack[-1] = (name, i + 1)
                    dep = deps[i][0]
                    if dep not in state:
                        state[dep] = 1
                        stack.append((dep, 0))
                    continue
                stack.pop()
                state[name] = 2
                depth[name] = max([own[name], *(lvl + depth.get(d, 0) for d, lvl in deps)])
        return ConstDepths(depth)


def item_exprs(item: A.Item) -> Iterator[A.Expr]:
    """Every top-level expression of an item, in source order."""
    if isinstance(item, A.Const):
        yield item.value
    elif isinstance(item, A.Resolve):
        yield from (o.value for o in item.options)
    elif isinstance(item, A.Policy):
        for e in (item.priority, item.weight, item.when):
            if e is not None:
                yield e
        if item.effect is not None:
            for ob in item.effect.obligations:
                yield from ob.args
            if isinstance(item.effect.message, A.Message):
                yield from item.effect.message.values
        for e in (item.score, item.cost):
            if e is not None:
                yield e
    elif isinstance(item, A.Test):
        for stmt in item.stmts:
            if isinstance(stmt, A.GivenMemory | A.GivenRequest | A.GivenGrant):
                yield from (f.value for f in stmt.fields)
            elif isinstance(stmt, A.GivenCalls | A.GivenActs):
                yield stmt.count
                if stmt.at is not None:
                    yield stmt.at
            else:
                for ob in (*stmt.with_obligations, *stmt.without_obligations):
                    yield from ob.args
