"""Regenerate the committed protobuf/gRPC code from proto/ (run after editing it).

    .venv/bin/python scripts/gen_proto.py

tests/test_proto_generated.py fails when the committed code is out of date.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

REPO = Path(__file__).resolve().parents[1]
PROTO_DIR = REPO / "proto"
PROTOS = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.rglob("*.proto"))


def generate(out_dir: Path) -> None:
    """Write memlineage/v1/*_pb2*.py(i) under out_dir (the `server/` source root)."""
    include = str(Path(protoc.__file__).parent / "_proto")
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *PROTOS,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "server")
