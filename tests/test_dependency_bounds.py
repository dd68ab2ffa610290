"""constraints-lowest.txt pins exactly the floors pyproject.toml declares, so the
.venv-lowest run of scripts/test.sh tests the versions users are promised."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]


def _floors() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    floors = {}
    for line in project["dependencies"]:
        req = Requirement(line)
        lows = [s.version for s in req.specifier if s.operator == ">="]
        assert len(lows) == 1, f"{line}: a runtime dependency states one floor (>=)"
        floors[canonicalize_name(req.name)] = lows[0]
    return floors


def _pins() -> dict[str, str]:
    pins = {}
    for raw in (REPO / "constraints-lowest.txt").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_lowest_constraints_are_the_declared_floors() -> None:
    assert _pins() == _floors()


def test_protobuf_and_grpcio_floors_are_the_gencode_versions() -> None:
    text = (REPO / "scripts" / "gen_proto.py").read_text()
    floors = _floors()
    assert f'GENCODE_PROTOBUF = "{floors["protobuf"]}"' in text
    assert f'GENCODE_GRPC = "{floors["grpcio"]}"' in text
    protobuf = next(
        Requirement(d)
        for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
        if d.startswith("protobuf")
    )
    # Mem0 needs protobuf < 7; protobuf 7 is the newest runtime released.
    assert all(v in protobuf.specifier for v in ("5.26.1", "6.33.0", "7.36.2"))
