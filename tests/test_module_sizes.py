"""No hand-written product module grows past 600 lines (CONTRIBUTING.md): a module that
does is split by what it holds. The generated protobuf code is not counted."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOTS = (REPO / "server" / "memlineage", REPO / "policy_dsl" / "memlineage_dsl")
GENERATED = REPO / "server" / "memlineage" / "v1"
MOST_LINES = 600


def test_no_product_module_is_over_600_lines() -> None:
    sizes = {
        path.relative_to(REPO).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for root in ROOTS
        for path in root.rglob("*.py")
        if GENERATED not in path.parents
    }
    assert len(sizes) > 100  # the scan found the packages
    over = {name: n for name, n in sizes.items() if n > MOST_LINES}
    assert not over, f"split these by what they hold: {over}"
