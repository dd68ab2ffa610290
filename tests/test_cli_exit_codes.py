"""The exit codes docs/operating.md promises, one meaning per code across commands
(0 done, 1 what was checked failed, 2 a wrong command line or input), in process."""

from __future__ import annotations

from pathlib import Path

import pytest
from memlineage import cli

GOOD = 'policy p priority 1 {\n  on read\n  when memory.confidence < 0.1\n  deny "low"\n}\n'


def _code(*argv: str) -> int:
    try:
        return cli.main(list(argv))
    except SystemExit as stop:  # argparse's usage errors
        return int(stop.code or 0)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "p.mlp").write_text(GOOD)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "p.mlp").write_text(GOOD.replace("confidence", "confidnce"))
    (tmp_path / "ugly").mkdir()
    (tmp_path / "ugly" / "p.mlp").write_text(GOOD.replace("  on read", "on    read"))
    (tmp_path / "bad.toml").write_text("no_such_setting = 1\n")
    (tmp_path / "script.jsonl").write_text('{"step": "no_such_step"}\n')
    return tmp_path


def test_each_code_means_one_thing_across_commands(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = [("lint", str(files / "good")), ("fmt", "--check", str(files / "good"))]
    failed = [
        ("lint", str(files / "bad")),
        ("fmt", "--check", str(files / "ugly")),
        ("store", "check", str(files / "good")),  # no store there
    ]
    wrong = [
        ("lint", "--no-such-flag", str(files / "good")),
        ("lint", "--format", "yaml", str(files / "good")),
        ("config", "show", "--config", str(files / "bad.toml")),
        ("simulate", str(files / "script.jsonl")),
        ("store", "check", "redis://127.0.0.1:6379/0"),
        # a path named that does not exist: 2 in lint and test as in fmt (lint was 1)
        ("lint", str(files / "missing.mlp")),
        ("test", str(files / "missing.mlp")),
        ("fmt", "--check", str(files / "missing.mlp")),
        # an empty path, said as such (it read as `.`: "cannot read `.`")
        ("lint", str(files / "good"), ""),
        ("test", ""),
        ("fmt", "--check", ""),
        # an address gRPC cannot resolve: said at once (it waited the whole --timeout)
        ("check", "read", "m1", "--target", "garbage::"),
        # a value the client refuses before any call (the actor's kind:id): was 1
        ("check", "read", "m1", "--actor", "nocolon", "--target", "127.0.0.1:9"),
    ]
    for expected, commands in ((0, done), (1, failed), (2, wrong)):
        for argv in commands:
            assert _code(*argv) == expected, (argv, capsys.readouterr())
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err


def test_an_empty_path_is_said_to_name_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert _code("lint", "") == 2
    err = capsys.readouterr().err
    assert "argument paths: an empty path names no file or directory" in err
    assert "`.`" not in err
