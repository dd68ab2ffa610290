"""The client example in README.md runs against a real sidecar and prints what
the README says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from support.sidecar import RunningSidecar

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_readme_client_example_runs_as_documented() -> None:
    section = README[README.index("## Using it from an agent") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    expected = re.search(r"```text\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    assert len(code.strip().splitlines()) <= 12
    with RunningSidecar() as sidecar:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code.replace("127.0.0.1:50051", sidecar.address), "README", "exec"), {})
    assert out.getvalue() == expected
