"""The committed generated code must match proto/ as the pinned generator emits it:
regenerate with scripts/gen_proto.py (its own pinned grpcio-tools venv) and compare,
and check the committed code is the old gencode the declared protobuf range needs."""

from __future__ import annotations

import importlib.util
import re
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


def test_committed_code_is_the_pinned_old_gencode() -> None:
    """A newer gencode would refuse protobuf older than itself (and so Mem0's protobuf<7)."""
    gen = _generator()
    pb2 = (COMMITTED / "memlineage_pb2.py").read_text()
    assert f"# Protobuf Python Version: {gen.GENCODE_PROTOBUF}\n" in pb2
    assert "ValidateProtobufRuntimeVersion" not in pb2  # no runtime gate at all
    grpc_stubs = (COMMITTED / "memlineage_pb2_grpc.py").read_text()
    stamp = rf"^GRPC_GENERATED_VERSION = '{re.escape(gen.GENCODE_GRPC)}'$"
    assert re.search(stamp, grpc_stubs, re.M)
    pins = dict(pin.split("==") for pin in gen.TOOLS)
    assert pins["protobuf"] == gen.GENCODE_PROTOBUF
    assert pins["grpcio-tools"] == gen.GENCODE_GRPC
