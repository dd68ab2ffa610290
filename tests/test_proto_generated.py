"""The committed generated code must match proto/: regenerate and compare."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "server" / "memlineage" / "v1"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_proto", REPO / "scripts" / "gen_proto.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    _generator().generate(tmp_path)
    fresh = sorted((tmp_path / "memlineage" / "v1").glob("*_pb2*"))
    assert [p.name for p in fresh] == sorted(p.name for p in COMMITTED.glob("*_pb2*"))
    stale = [p.name for p in fresh if p.read_bytes() != (COMMITTED / p.name).read_bytes()]
    assert not stale, f"run scripts/gen_proto.py: {stale} differ from proto/"
