"""`memlineage lint` and the LintPolicy RPC report the same diagnostics.

Both run `memlineage_dsl.pipeline.lint_set`: the CLI on the files it reads, the
RPC on the files of its request. Here a corpus of good and broken policy sets
(the bundled `policies/`, every golden case, the golden folder as one set) goes
through the real CLI command (`lint_command --format json`) and through a real
sidecar's LintPolicy over gRPC (the client, an admin token), and the two lists
must be equal field by field, in order.

Both are given the same files: a case and every file it includes (the RPC cannot
read an include from disk, so a client sends it). The CLI is given them shuffled,
the RPC in reverse path order (and a protobuf map keeps no order anyway): the
answer is about a set of files, so neither order may count.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from memlineage.client import MemLineageClient
from memlineage.config import Config
from memlineage.grpc_api.auth import TokenGrant
from memlineage_dsl.commands import lint_command
from memlineage_dsl.loader import collect_files, read_file
from memlineage_dsl.pipeline import lint_texts
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

GOLDEN = Path(__file__).parent / "golden"
ADMIN = TokenGrant("token-admin", (), admin=True, name="ops")
_INCLUDE = re.compile(r'^\s*include\s+"([^"]+)"', re.MULTILINE)

Row = tuple[str, str, str, str, int, int, int, int, str, str]


def _corpus() -> list[tuple[str, list[str]]]:
    """Paths relative to the repository (the tests run there, `_at_the_root`): the RPC
    takes a set's names relative to it, as `shadow load DIR` sends them."""
    cases = [("policies", [BUNDLED_POLICIES]), ("golden-as-one-set", [str(GOLDEN)])]
    cases += [(p.stem, [str(p)]) for p in sorted(GOLDEN.glob("*.mlp"))]
    cases += [
        (f"golden/{p.parent.name}/{p.name}", [str(p)]) for p in sorted(GOLDEN.glob("*/*.mlp"))
    ]
    return [(name, [os.path.relpath(p, ROOT) for p in paths]) for name, paths in cases]


ROOT = Path(BUNDLED_POLICIES).parent
CORPUS = _corpus()


@pytest.fixture(autouse=True)
def _at_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _policy_set(paths: list[str]) -> dict[str, str]:
    """The files of `paths` and every file they include (resolved by hand here, as a
    client would: relative to the including file), path -> text, in path order."""
    out: dict[str, str] = {}
    todo = [os.path.normpath(p) for p in collect_files(paths)]
    while todo:
        path = todo.pop()
        if path in out or not os.path.isfile(path):
            continue
        out[path] = Path(path).read_text(encoding="utf-8")
        todo += [
            os.path.normpath(os.path.join(os.path.dirname(path), inc))
            for inc in _INCLUDE.findall(out[path])
        ]
    return dict(sorted(out.items()))


def _cli(files: dict[str, str]) -> tuple[int, list[Row]]:
    out = io.StringIO()
    paths = list(files)
    random.Random(len(paths)).shuffle(paths)
    code = lint_command(paths, "json", out)
    rows = [
        (
            d["code"],
            d["severity"],
            d["message"],
            d["file"],
            d["line"],
            d["column"],
            d["end_line"],
            d["end_column"],
            d["snippet"],
            d["help"] or "",
        )
        for d in json.loads(out.getvalue())
    ]
    return code, rows


@pytest.fixture(scope="module")
def admin() -> Iterator[MemLineageClient]:
    config = Config(policy_dir=BUNDLED_POLICIES, tokens=(ADMIN,), decision_log="off")
    with RunningSidecar(config) as sidecar:
        client = MemLineageClient(sidecar.address, token="token-admin", timeout=30)
        try:
            yield client
        finally:
            client.close()


def _rpc(admin: MemLineageClient, files: dict[str, str]) -> tuple[bool, list[Row]]:
    response = admin.lint_policy(dict(reversed(files.items())))
    rows = [
        (
            d.code,
            d.severity,
            d.message,
            d.file,
            d.line,
            d.column,
            d.end_line,
            d.end_column,
            d.snippet,
            d.help,
        )
        for d in response.diagnostics
    ]
    return response.ok, rows


@pytest.mark.parametrize(("name", "paths"), CORPUS, ids=[name for name, _ in CORPUS])
def test_cli_and_rpc_report_the_same_diagnostics(
    admin: MemLineageClient, name: str, paths: list[str]
) -> None:
    files = _policy_set(paths)
    code, by_cli = _cli(files)
    ok, by_rpc = _rpc(admin, files)
    assert by_rpc == by_cli
    assert code == (0 if ok else 1)


def test_the_corpus_has_good_and_broken_sets(admin: MemLineageClient) -> None:
    """The comparison above means something: clean sets, sets with errors, warnings,
    errors of each stage (syntax, includes, names, types, structure, analysis)."""
    codes: set[str] = set()
    clean = broken = 0
    for _, paths in CORPUS:
        ok, rows = _rpc(admin, _policy_set(paths))
        codes |= {row[0] for row in rows}
        clean += not rows
        broken += not ok
    assert clean >= 2 and broken >= 10
    assert {"E001", "E004", "E005", "E101", "E109", "E201", "E301", "W401", "W403"} <= codes


LIB = 'sources trusted = ["tool:*"]\n'
MAIN = 'include "lib.mlp"\npolicy p {\n  on read\n  when memory.creator.id in trusted\n  allow\n}\n'


def test_a_lint_is_about_a_set_of_files_not_their_order() -> None:
    texts = {"z.mlp": "const x = 1\n", "a.mlp": "const x = 2\n", "m.mlp": "const x = 3\n"}
    forward = lint_texts(texts)
    assert forward == lint_texts(dict(reversed(texts.items())))
    # the first in path order is the definition, the others its duplicates
    assert [(d.file, d.code) for d in forward if d.code == "E109"] == [
        ("m.mlp", "E109"),
        ("z.mlp", "E109"),
    ]


def test_paths_are_the_same_however_they_are_spelt() -> None:
    assert lint_texts({"./lib.mlp": LIB, "main.mlp": MAIN}) == []
    assert lint_texts({"rules/../lib.mlp": LIB, "main.mlp": MAIN}) == []


def test_only_the_cli_reads_includes_from_disk(tmp_path: Path) -> None:
    (tmp_path / "lib.mlp").write_text(LIB, encoding="utf-8")
    main = str(tmp_path / "main.mlp")
    assert lint_texts({main: MAIN}, read_file) == []  # what the CLI does
    assert [d.code for d in lint_texts({main: MAIN})] == ["E004", "E104"]  # the RPC
