"""`memlineage test --coverage`: rules evaluated and conditions seen true and false.

Counted on a separately instrumented compile; the set that serves has no probes.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from memlineage_dsl import commands
from memlineage_dsl.coverage import condition_leaves, instrumented
from memlineage_dsl.evaluator import decide
from memlineage_dsl.facts import Creator, DictSnapshot, MemoryFacts, Request
from memlineage_dsl.parser import parse_expr
from memlineage_dsl.pipeline import build_texts

REPO = Path(__file__).resolve().parents[2]

SET = """policy low_conf priority 50 {
  on read
  when memory.creator.kind == reasoning and not (memory.confidence >= 0.7 or "sure" in memory.tags)
  deny "doubtful reasoning"
}

policy tool_write {
  on write
  when memory.creator.kind == tool
  deny
}

policy always {
  on read
  allow
}

test "doubtful reasoning is refused" {
  given memory g { creator: "reasoning:planner", confidence: 0.4 }
  given memory u { creator: "user:alice" }
  expect read g -> deny
  expect read u -> allow
}
"""


def coverage_json(tmp_path: Path, text: str, *flags: str) -> tuple[int, dict[str, Any]]:
    (tmp_path / "set.mlp").write_text(text, encoding="utf-8")
    out = io.StringIO()
    code = commands.test_command(
        [str(tmp_path / "set.mlp")],
        out,
        coverage=True,
        fmt="json",
        coverage_min=float(flags[0]) if flags else None,
    )
    return code, json.loads(out.getvalue())


def test_conditions_are_the_operands_of_and_or_not() -> None:
    e = parse_expr("a and not (b or any(x in c : x.d and x.e)) and (if f then g else h)")
    leaves = condition_leaves(e)
    assert [type(x).__name__ for x in leaves] == ["Name", "Name", "Quant", "Cond"]


def test_rules_and_conditions_are_counted(tmp_path: Path) -> None:
    code, doc = coverage_json(tmp_path, SET)
    assert code == 0 and doc["passed"] == 1 and doc["failed"] == 0
    (path,) = doc["coverage"]["files"]
    rules = {r["name"]: r for r in doc["coverage"]["files"][path]["rules"]}
    low = rules["low_conf"]
    assert (low["evaluated"], low["fired"]) == (2, 1)
    kind, conf, sure = low["conditions"]
    assert (kind["true"], kind["false"]) == (1, 1)
    assert (conf["true"], conf["false"]) == (0, 1)  # `u` stops at the first condition
    assert (sure["true"], sure["false"]) == (0, 1)
    assert (kind["line"], kind["column"], kind["text"]) == (
        3,
        8,
        "memory.creator.kind == reasoning",
    )
    assert rules["tool_write"]["evaluated"] == 0  # no test writes
    assert rules["always"]["conditions"] == [] and rules["always"]["fired"] == 2
    # items: 3 rules (2 evaluated) + 4 conditions x 2 outcomes (4 seen)
    assert (doc["coverage"]["covered"], doc["coverage"]["total"]) == (6, 11)
    assert doc["coverage"]["rules"] == {"evaluated": 2, "total": 3}
    assert doc["coverage"]["conditions"] == {"both": 1, "outcomes_seen": 4, "total": 4}


def test_the_minimum_sets_the_exit_code_only_when_given(tmp_path: Path) -> None:
    code, doc = coverage_json(tmp_path, SET, "50")
    assert code == 0 and doc["coverage"]["minimum"] == 50.0
    code, _ = coverage_json(tmp_path, SET, "60")
    assert code == 1
    broken = SET.replace("expect read g -> deny", "expect read g -> allow")
    code, doc = coverage_json(tmp_path, broken)
    assert code == 1 and doc["failed"] == 1 and doc["failures"][0]["code"] == "E503"


def test_text_report_lists_files_rules_and_conditions(tmp_path: Path) -> None:
    (tmp_path / "set.mlp").write_text(SET, encoding="utf-8")
    out = io.StringIO()
    code = commands.test_command([str(tmp_path / "set.mlp")], out, coverage_min=60.0)
    text = out.getvalue()
    assert code == 1
    assert f"{tmp_path / 'set.mlp'}: 54.5% covered (6/11)" in text
    assert "  policy low_conf (line 1): evaluated 2, fired 1" in text
    assert "  policy tool_write (line 7): NEVER EVALUATED" in text
    assert "      3:8 true 1, false 1: memory.creator.kind == reasoning" in text
    assert "    ! 3:50 true 0, false 1: memory.confidence >= 0.7" in text
    assert "coverage: 54.5% (6/11): 2 of 3 rules evaluated, 1 of 4 conditions" in text
    assert "coverage 54.5% is below the minimum 60%" in text
    assert text.endswith("1 passed, 0 failed\n")


def test_the_serving_compile_has_no_probes_and_decides_the_same() -> None:
    build = build_texts({"set.mlp": SET})
    assert build.compiled is not None and build.env is not None
    counted, probes = instrumented(build.env)
    for plan in build.compiled.plans.values():
        for p in plan.policies:
            assert "_cov" not in p.when_source
    assert any("_cov(" in p.when_source for p in counted.policies)
    m = MemoryFacts(id="g", creator=Creator("reasoning", "reasoning:p"), confidence=0.4)
    req = Request(op="read", memory=m, actor=Creator("user", "user:a"), time=0.0)
    snap = DictSnapshot([m], [], [])
    assert decide(counted, req, snap) == decide(build.compiled, req, snap)
    assert probes.rules[0].evaluated == 1 and probes.rules[0].fired == 1


def test_each_merges_the_counts_of_a_file_in_several_sets(tmp_path: Path) -> None:
    (tmp_path / "rules.mlp").write_text(SET.split("test ")[0], encoding="utf-8")
    for name, creator in (("a", "reasoning:p"), ("b", "user:alice")):
        (tmp_path / f"{name}.mlp").write_text(
            f'include "rules.mlp"\ntest "{name}" {{\n'
            f'  given memory m {{ creator: "{creator}", confidence: 0.4 }}\n'
            "  expect read m -> " + ("deny" if name == "a" else "allow") + "\n}\n",
            encoding="utf-8",
        )
    out = io.StringIO()
    code = commands.test_command(
        [str(tmp_path / "a.mlp"), str(tmp_path / "b.mlp")],
        out,
        each=True,
        coverage=True,
        fmt="json",
    )
    doc = json.loads(out.getvalue())
    assert code == 0 and doc["passed"] == 2
    rules = doc["coverage"]["files"][str(tmp_path / "rules.mlp")]["rules"]
    assert rules[0]["evaluated"] == 2 and rules[0]["conditions"][0] == {
        "line": 3,
        "column": 8,
        "text": "memory.creator.kind == reasoning",
        "true": 1,
        "false": 1,
    }


def test_the_cli_reports_the_bundled_policies(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "memlineage", "test", "--coverage", "--format", "json", "policies"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads(run.stdout)
    assert doc["failed"] == 0 and doc["coverage"]["rules"]["total"] >= 20
    assert set(doc["coverage"]["files"]) >= {"policies/act_gate.mlp", "policies/freshness.mlp"}


def test_the_cli_exit_code_moves_only_with_a_minimum(tmp_path: Path) -> None:
    (tmp_path / "set.mlp").write_text(SET, encoding="utf-8")

    def cli(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memlineage", "test", *flags, "set.mlp"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )

    plain = cli("--coverage")
    assert plain.returncode == 0 and "set.mlp: 54.5% covered (6/11)" in plain.stdout
    short = cli("--coverage-min", "90")
    assert short.returncode == 1 and "below the minimum 90%" in short.stdout
    for bad in ("nan", "101", "-5", "half"):  # nan passed every run, 101 failed every one
        refused = cli("--coverage-min", bad)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert "argument --coverage-min:" in refused.stderr, refused.stderr
