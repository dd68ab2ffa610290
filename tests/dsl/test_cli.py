"""The `memlineage lint | fmt | test` commands, run as a user runs them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

GOOD = """policy low_conf priority 50 {
  on read
  when memory.creator.kind == reasoning and memory.confidence < 0.7
  deny "doubtful reasoning"
}

test "doubtful reasoning is refused" {
  given memory g { creator: "reasoning:planner", confidence: 0.4 }
  expect read g -> deny
}
"""


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memlineage", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_bundled_policies_lint_and_pass(tmp_path: Path) -> None:
    lint = run("lint", str(REPO / "policies"), cwd=tmp_path)
    assert lint.returncode == 0, lint.stdout
    test = run("test", str(REPO / "policies"), cwd=tmp_path)
    assert test.returncode == 0, test.stdout
    last = test.stdout.strip().splitlines()[-1]
    passed = int(last.split()[0])
    assert last == f"{passed} passed, 0 failed" and passed >= 20


def test_lint_reports_file_line_col_and_fails(tmp_path: Path) -> None:
    (tmp_path / "bad.mlp").write_text(GOOD.replace("memory.confidence", "memory.confidnce"))
    out = run("lint", "bad.mlp", cwd=tmp_path)
    assert out.returncode == 1
    assert "bad.mlp:3:52: error[E102]" in out.stdout
    assert "did you mean `confidence`?" in out.stdout


def test_lint_json_and_sarif(tmp_path: Path) -> None:
    (tmp_path / "bad.mlp").write_text("policy p { on raed deny }\n")
    as_json = json.loads(run("lint", "--format", "json", "bad.mlp", cwd=tmp_path).stdout)
    assert [(d["code"], d["line"], d["column"]) for d in as_json] == [("E106", 1, 15)]
    sarif = json.loads(run("lint", "--format", "sarif", "bad.mlp", cwd=tmp_path).stdout)
    result = sarif["runs"][0]["results"][0]
    assert result["ruleId"] == "E106"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (1, 15)


def test_text_is_the_format_every_command_names(tmp_path: Path) -> None:
    """`--format text` as check, explain and simulate spell it; `human` still taken."""
    (tmp_path / "bad.mlp").write_text("policy p { on raed deny }\n")
    text = run("lint", "--format", "text", "bad.mlp", cwd=tmp_path)
    assert text.stdout == run("lint", "--format", "human", "bad.mlp", cwd=tmp_path).stdout
    assert "bad.mlp:1:15: error[E106]" in text.stdout
    (tmp_path / "bad.mlp").unlink()
    (tmp_path / "p.mlp").write_text(GOOD)
    tested = run("test", "--format", "text", ".", cwd=tmp_path)
    assert tested.returncode == 0 and tested.stdout.strip().endswith("passed, 0 failed")


def test_test_command_reports_a_failing_expectation(tmp_path: Path) -> None:
    (tmp_path / "p.mlp").write_text(GOOD.replace("-> deny", "-> allow"))
    out = run("test", ".", cwd=tmp_path)
    assert out.returncode == 1
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "0 passed, 1 failed"
    assert lines[0].startswith('p.mlp:9:3: FAIL test "doubtful reasoning is refused" failed:')
    assert "expected allow" in lines[0] and "got deny" in lines[0]


def test_test_command_refuses_a_broken_set(tmp_path: Path) -> None:
    (tmp_path / "p.mlp").write_text(GOOD + "\npolicy broken { on read when memory.x deny }\n")
    out = run("test", ".", cwd=tmp_path)
    assert out.returncode == 1
    assert "p.mlp:12:" in out.stdout and out.stdout.strip().endswith("0 passed, 0 failed")


def test_fmt_check_lists_files_and_rewrite_fixes_them(tmp_path: Path) -> None:
    messy = tmp_path / "messy.mlp"
    messy.write_text("policy   p{on read   deny}\n")
    check = run("fmt", "--check", ".", cwd=tmp_path)
    assert check.returncode == 1 and "messy.mlp" in check.stdout
    assert run("fmt", ".", cwd=tmp_path).returncode == 0
    assert messy.read_text() == "policy p {\n  on read\n  deny\n}\n"
    assert run("fmt", "--check", ".", cwd=tmp_path).returncode == 0


def test_fmt_shows_a_syntax_error_as_lint_does(tmp_path: Path) -> None:
    """The line quoted and the span marked (before: `file:line:col` and the message
    only), the file left as it was, exit 2."""
    broken = tmp_path / "b.mlp"
    text = 'policy p priority 1 {\n  on read\n  when memory.confidence <\n  deny "x"\n}\n'
    broken.write_text(text)
    out = run("fmt", "b.mlp", cwd=tmp_path)
    assert out.returncode == 2 and broken.read_text() == text
    assert out.stdout.startswith('b.mlp:4:8: error[E001]: unexpected `"x"`\n 4 |   deny "x"\n')
    assert "   |        ^^^\n" in out.stdout and out.stdout.endswith("1 error, 0 warnings\n")


def test_no_files_is_a_usage_error(tmp_path: Path) -> None:
    assert run("lint", str(tmp_path), cwd=tmp_path).returncode == 2


def test_lint_says_why_a_file_cannot_be_read(tmp_path: Path) -> None:
    """E006 names the reason, as fmt does (before: `cannot read `gone.mlp`` alone); an
    include that is there but cannot be read says why (a missing one stays "not
    found", as the LintPolicy RPC says it). A path named that does not exist is exit
    2, as in fmt (a wrong command line); a file there but unreadable is a lint error."""
    (tmp_path / "binary.mlp").write_bytes(b"policy p {\n\xff")
    (tmp_path / "inc.mlp").write_text('include "binary.mlp"\n')
    out = run("lint", "gone.mlp", "binary.mlp", cwd=tmp_path)
    assert out.returncode == 2, out
    assert run("lint", "binary.mlp", cwd=tmp_path).returncode == 1
    lines = out.stdout.splitlines()
    assert "gone.mlp:1:1: error[E006]: cannot read `gone.mlp`: No such file or directory" in lines
    assert "binary.mlp:1:1: error[E006]: cannot read `binary.mlp`: not UTF-8 (byte 11)" in lines
    included = run("lint", "inc.mlp", cwd=tmp_path)
    assert included.stdout.startswith(
        "inc.mlp:1:1: error[E004]: included file `binary.mlp` cannot be read: not UTF-8 (byte 11)"
    )


def test_fmt_says_why_a_file_cannot_be_read(tmp_path: Path) -> None:
    """The system's reason or the byte that is not UTF-8, as lint's E006 names the file:
    before, Python's "[Errno 2] No such file or directory: 'gone.mlp'" or the whole
    codec message."""
    (tmp_path / "binary.mlp").write_bytes(b"policy p {\n\xff")
    out = run("fmt", "--check", "gone.mlp", "binary.mlp", cwd=tmp_path)
    assert out.returncode == 2, out
    assert out.stdout.splitlines() == [
        "gone.mlp:1:1: error[E006]: cannot read `gone.mlp`: No such file or directory",
        "binary.mlp:1:1: error[E006]: cannot read `binary.mlp`: not UTF-8 (byte 11)",
    ]


def test_a_fifo_or_device_named_mlp_is_refused_not_read(tmp_path: Path) -> None:
    """A FIFO blocks its reader until a writer comes and `/dev/zero` never ends: lint,
    fmt and test (and a sidecar's reload, which loads the same way) hung on one (an
    outside audit). Each is E006 now, the files beside it read as before."""
    import os

    (tmp_path / "ok.mlp").write_text(
        "policy p {\n  on read\n  when memory.confidence < 0.5\n  deny\n}\n"
    )
    os.mkfifo(tmp_path / "pipe.mlp")
    (tmp_path / "zero.mlp").symlink_to("/dev/zero")
    said = "not a regular file (a FIFO, device or socket)"
    for args, code in ((("lint", "."), 1), (("fmt", "--check", "."), 2), (("test", "."), 1)):
        out = run(*args, cwd=tmp_path)  # bounded by `run`'s timeout
        assert out.returncode == code, out
        for name in ("pipe.mlp", "zero.mlp"):  # lint names `pipe.mlp`, fmt `./pipe.mlp`
            line = rf"^(\./)?{name}:1:1: error\[E006\]: cannot read `(\./)?{name}`: "
            assert re.search(line + re.escape(said) + "$", out.stdout, re.M), out
    (tmp_path / "pipe.mlp").unlink()
    (tmp_path / "zero.mlp").unlink()
    assert run("lint", ".", cwd=tmp_path).returncode == 0


def test_a_tests_call_counts_are_bounded_in_all(tmp_path: Path) -> None:
    """Each `given calls` / `given acts` count was held to 100,000 but not their sum:
    400 such lines (12 KB of text) took 5 s and 942 MB to run, and a reload or Shadow
    LOAD of a set 32 KB long took 2.6 GB (an outside audit). The test's total is
    E504 at the count that crosses it, for lint and test alike."""
    lines = "\n".join(f'  given {k} "{n}" = 40000' for k, n in (("calls", "tool:a"),) * 2)
    lines += '\n  given acts "send_money" = 30000'
    (tmp_path / "t.mlp").write_text(
        'policy p {\n  on read\n  when calls("tool:a", 1h) > 5\n  deny\n}\n\n'
        f'test "t" {{\n  given memory m {{ creator: "tool:a" }}\n{lines}\n'
        "  expect read m -> deny\n}\n"
    )
    for args in (("lint", "t.mlp"), ("test", "t.mlp")):
        out = run(*args, cwd=tmp_path)
        assert out.returncode == 1, out
        assert (
            "t.mlp:11:29: error[E504]: the test's call and action counts add up to 110000, "
            "more than 100000 (each is an event the test keeps)"
        ) in out.stdout, out.stdout
