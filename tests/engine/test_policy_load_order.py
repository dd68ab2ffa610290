"""One load order everywhere: a directory served (`build_paths`), linted, or sent as
files (ReloadPolicies, a shadow candidate: `lint_set`, whatever order the protobuf
map lists them in) plans equal-priority rules alike. Before, a directory loaded a
directory's files before its subdirectories' and files sent over gRPC in map order,
so the same set (same version) kept another rule's obligation under a budget."""

from __future__ import annotations

from pathlib import Path

from memlineage.engine.policies import PolicyHolder
from memlineage_dsl.pipeline import build_paths, lint_set

RULE = 'policy {name} priority 5 {{ on read degrade refresh("tool:{name}") }}\n'


def _order(build: object) -> list[str]:
    compiled = getattr(build, "compiled", None)
    assert compiled is not None
    return [p.name for p in compiled.plans["read"].policies]


def test_a_directory_and_its_files_in_any_order_plan_alike(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    files = {"b.mlp": RULE.format(name="b"), "a/x.mlp": RULE.format(name="x")}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    served = _order(build_paths([str(tmp_path)]))
    assert served == ["x", "b"]  # path order: a/x.mlp, then b.mlp
    assert _order(lint_set(files)) == served
    assert _order(lint_set(dict(reversed(list(files.items()))))) == served


def test_policies_sent_as_files_are_served_in_path_order(tmp_path: Path) -> None:

    (tmp_path / "a").mkdir()
    files = {"b.mlp": RULE.format(name="b"), "a/x.mlp": RULE.format(name="x")}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    holder = PolicyHolder(str(tmp_path))
    served = [p.name for p in holder.current.compiled.plans["read"].policies]
    for order in (files, dict(reversed(list(files.items())))):
        assert holder.reload(order).applied
        assert [p.name for p in holder.current.compiled.plans["read"].policies] == served
